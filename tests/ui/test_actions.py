"""A repository's Actions page in the web UI. In a real browser: a pre-commit webhook that passes
and one that fails (the commit refused); the runs newest first with their status, a run's hooks
and each hook's output, a run's commit, the runs of one branch. Over HTTP: who may not read the
repository is refused the pages and the output; a hook's output is text, never markup; paging."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from server.ui import actions as ui_actions
from tests.hookd import Hookd, hookd
from tests.server.conftest import Live, commit, upload
from tests.server.test_policy_surfaces import confined, user_with
from tests.ui.conftest import base_url, make_user, new_repo, sign_in

__all__ = ["hookd"]


def _action(name: str, hook_id: str, url: str, branches: list[str] | None = None) -> bytes:
    on: dict[str, Any] = {"pre-commit": {"branches": branches} if branches else None}
    hooks = [{"id": hook_id, "type": "webhook", "properties": {"url": url}}]
    return json.dumps({"name": name, "on": on, "hooks": hooks}).encode()


def _runs(api: httpx.Client, hook: Hookd) -> tuple[str, str, str]:
    """A repository whose commits run a passing webhook (``checks``, every branch) and, on main
    once it is staged there, a failing one (``gate``, answering 500). Its runs, oldest first:
    main's commit of the checks (completed), a commit on ``dev`` (completed), a commit on main
    refused by the gate (failed). Returns the repository, dev's commit and the failed run's id."""
    hook.statuses["/fail"] = 500
    hook.body = b"verdict: see the status"
    passing, failing = hook.url.replace("/hook", "/pass"), hook.url.replace("/hook", "/fail")
    repo = new_repo(api)
    upload(api, repo, "main", "_lakefs_actions/checks.yaml", _action("checks", "schema", passing))
    commit(api, repo, "main", "checks")
    assert api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).is_success
    upload(api, repo, "dev", "data/orders.csv", b"id\n1\n")
    dev_commit = commit(api, repo, "dev", "orders")["id"]
    upload(api, repo, "main", "_lakefs_actions/gate.yaml", _action("gate", "block", failing, ["main"]))
    upload(api, repo, "main", "data/orders.csv", b"id\n2\n")
    refused = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "gated"})
    assert refused.status_code == 412, refused.text
    return repo, dev_commit, refused.json()["details"]["run_id"]


def _sign_in(page: Any, server: Live) -> None:
    page.goto(base_url(server) + "/ui/login")
    page.get_by_label("Access key ID").fill(server.key_id)
    page.get_by_label("Secret access key").fill(server.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")


def test_the_actions_page_shows_runs_hooks_and_outputs(
    live: Live, api: httpx.Client, page: Any, hookd: Hookd
) -> None:
    from playwright.sync_api import expect

    repo, dev_commit, failed_run = _runs(api, hookd)
    _sign_in(page, live)
    page.goto(base_url(live) + f"/ui/repos/{repo}")
    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Actions", exact=True).click()
    assert page.title() == f"Actions · {repo} · lakectl"
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(3)
    # newest first: the refused commit, dev's commit, main's first
    expect(rows.nth(0)).to_contain_text("pre-commit")
    expect(rows.nth(0).locator("td").nth(2)).to_have_text("main")
    expect(rows.nth(0).locator(".check-status")).to_have_text("failed")
    expect(rows.nth(0).locator("td").nth(3)).to_have_text("")  # the commit it refused was never made
    expect(rows.nth(1).locator("td").nth(2)).to_have_text("dev")
    expect(rows.nth(1).locator(".check-status")).to_have_text("completed")
    expect(rows.nth(1).locator("td").nth(3)).to_have_text(dev_commit[:12])
    expect(rows.nth(2).locator(".check-status")).to_have_text("completed")

    # the failed run: both hooks, the failing one open with its output
    rows.nth(0).get_by_role("link", name=failed_run).click()
    page.wait_for_url(f"**/ui/repos/{repo}/actions/{failed_run}")
    expect(page.locator("h1")).to_contain_text(f"pre-commit run {failed_run}")
    expect(page.locator("h1 .check-status")).to_have_text("failed")
    hooks = page.locator("ol.hooks > li")
    expect(hooks).to_have_count(2)
    gate = hooks.filter(has_text="gate")
    expect(gate.locator("summary .check-status")).to_have_text("failed")
    expect(gate.locator("summary")).to_contain_text("block")
    expect(gate.locator("pre.hook-output")).to_be_visible()  # a failed hook's output, open
    expect(gate.locator("pre.hook-output")).to_contain_text("500 Internal Server Error")
    expect(gate.locator("pre.hook-output")).to_contain_text("verdict: see the status")
    checks = hooks.filter(has_text="checks")
    expect(checks.locator("summary .check-status")).to_have_text("completed")
    expect(checks.locator("pre.hook-output")).to_be_hidden()  # a passing hook's is folded
    checks.locator("summary").click()
    expect(checks.locator("pre.hook-output")).to_contain_text("200 OK")

    # back to the list; dev's run leads to its commit
    page.get_by_role("link", name="Actions", exact=True).first.click()
    page.locator("table.runs tbody tr").nth(1).get_by_role("link", name=dev_commit[:12]).click()
    page.wait_for_url(f"**/ui/repos/{repo}/commits/{dev_commit}")
    expect(page.locator("pre.message")).to_have_text("orders")

    # the runs of one branch
    page.goto(base_url(live) + f"/ui/repos/{repo}/actions")
    page.get_by_label("Branch").fill("dev")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    expect(page.locator("table.runs tbody tr")).to_contain_text("dev")


def test_who_may_not_read_the_repository_is_refused_its_runs(
    live: Live, api: httpx.Client, hookd: Hookd
) -> None:
    repo, _, run_id = _runs(api, hookd)
    other = new_repo(api)
    outsider = user_with(api, confined(other, "fs:ReadObject"))
    paths = [
        f"/ui/repos/{repo}/actions",
        f"/ui/repos/{repo}/actions/{run_id}",
        f"/ui/repos/{repo}/actions/{run_id}/hooks/0000_0000/output",
    ]
    with sign_in(live, *outsider) as ui:
        for path in paths:
            refused = ui.get(path)
            assert refused.status_code == 403, path
            assert "<title>Error 403 · lakectl</title>" in refused.text and "not allowed" in refused.text
            assert "verdict" not in refused.text
        assert ui.get(f"/ui/repos/{other}/actions").status_code == 200  # its own repository's
    viewer = make_user(live, "Viewers")  # reads every repository: sees the runs, changes nothing
    with sign_in(live, viewer.key_id, viewer.secret) as ui:
        for path in paths:
            assert ui.get(path).status_code == 200, path


def test_a_hooks_output_is_text(
    admin: httpx.Client, api: httpx.Client, hookd: Hookd, monkeypatch: pytest.MonkeyPatch
) -> None:
    hookd.status, hookd.body = 400, b"<script>alert(1)</script> \xff"
    repo = new_repo(api)
    upload(api, repo, "main", "_lakefs_actions/a.yaml", _action("a", "h", hookd.url))
    refused = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "m"})
    run_id = refused.json()["details"]["run_id"]
    shown = admin.get(f"/ui/repos/{repo}/actions/{run_id}")
    assert shown.status_code == 200
    assert "<script>alert(1)" not in shown.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \ufffd" in shown.text
    whole = admin.get(f"/ui/repos/{repo}/actions/{run_id}/hooks/0000_0000/output")
    assert whole.status_code == 200 and whole.content.endswith(b"<script>alert(1)</script> \xff")
    assert whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.headers["x-content-type-options"] == "nosniff"
    assert whole.headers["content-security-policy"] == "sandbox"
    assert "output-cut" not in shown.text
    monkeypatch.setattr(ui_actions, "SHOWN_OUTPUT", len(whole.content) - 5)  # a long output: its start
    cut = admin.get(f"/ui/repos/{repo}/actions/{run_id}")
    assert "Only its start is shown" in cut.text
    assert "&lt;script&gt;alert(1)&lt;/scr" in cut.text and "&lt;/script&gt;" not in cut.text
    assert admin.get(f"/ui/repos/{repo}/actions/{run_id}/hooks/0000_0009/output").status_code == 404
    assert admin.get(f"/ui/repos/{repo}/actions/ffff").status_code == 404


def test_runs_page_by_page(
    admin: httpx.Client, api: httpx.Client, hookd: Hookd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ui_actions, "PAGE", 2)
    repo = new_repo(api)
    upload(api, repo, "main", "_lakefs_actions/a.yaml", _action("a", "h", hookd.url))
    for i in range(3):
        upload(api, repo, "main", "f.txt", str(i).encode())
        commit(api, repo, "main", f"c{i}")
    expected = [r["run_id"] for r in api.get(f"/repositories/{repo}/actions/runs").json()["results"]]
    assert len(expected) == 3
    first = admin.get(f"/ui/repos/{repo}/actions")
    assert [i for i in expected if f">{i}</code>" in first.text] == expected[:2]
    assert 'rel="next"' in first.text
    second = admin.get(f"/ui/repos/{repo}/actions", params={"after": expected[1]})
    assert [i for i in expected if f">{i}</code>" in second.text] == expected[2:]
    assert 'rel="next"' not in second.text
