"""A repository's settings in the web UI. In a real browser: an admin adds a protection rule that
requires an approval, and a pull request into the branch then waits for it. Over HTTP: rules
added and deleted, GC rules set, changed and deleted, as the API reads them back; bad input
refused; a writer who is no admin sees the settings without controls and is refused (403,
nothing changed); a POST without its CSRF token is refused; a hostile pattern shows as text."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.conftest import Live
from tests.ui.conftest import base_url, csrf_of, make_user, new_repo, sign_in


def _post(client: httpx.Client, repo: str, action: str, data: dict[str, Any] | None = None) -> httpx.Response:
    token = csrf_of(client.get(f"/ui/repos/{repo}/settings").text)
    return client.post(f"/ui/repos/{repo}/settings/{action}", data={**(data or {}), "csrf": token})


def test_a_protection_rule_with_required_approvals_gates_a_pull_request(
    live: Live, api: httpx.Client, page: Any
) -> None:
    from playwright.sync_api import expect

    repo = new_repo(api)
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    page.goto(base_url(live) + "/ui/login")
    page.get_by_label("Access key ID").fill(live.key_id)
    page.get_by_label("Secret access key").fill(live.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")
    page.goto(base_url(live) + f"/ui/repos/{repo}")
    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Settings").click()
    assert page.title() == f"Settings · {repo} · lakectl"
    expect(page.get_by_text("No branch is protected.")).to_be_visible()
    expect(page.locator("#default-branch + p")).to_have_text("main")
    unlabelled = """[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"""
    assert page.evaluate(unlabelled) == []

    page.get_by_label("Branch pattern").fill("main")
    page.get_by_label("Required approvals").fill("1")
    page.get_by_role("button", name="Add rule").click()
    row = page.locator("table.rules tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("main")
    expect(row.locator("td.num")).to_have_text("1")
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == [
        {"pattern": "main", "required_approvals": 1}
    ]

    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "gated", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page.goto(base_url(live) + f"/ui/repos/{repo}/pulls/{pid}")
    expect(page.locator("ul.gate-list")).to_contain_text("Approvals: 0 of 1 required")
    expect(page.locator("ul.reasons")).to_contain_text("0 of 1 required approval")

    # Deleting the rule lifts the gate.
    page.goto(base_url(live) + f"/ui/repos/{repo}/settings")
    page.get_by_role("button", name="Delete the rule main").click()
    expect(page.get_by_text("No branch is protected.")).to_be_visible()
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == []


def test_protection_rules_by_form(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    added = _post(
        admin, repo, "protection", {"pattern": "release-*", "required_approvals": "2", "required_checks": "1"}
    )
    assert added.status_code == 303 and added.headers["location"] == f"/ui/repos/{repo}/settings#protection"
    assert _post(admin, repo, "protection", {"pattern": "main"}).status_code == 303
    rules = api.get(f"/repositories/{repo}/settings/branch_protection").json()
    assert rules == [
        {"pattern": "release-*", "required_approvals": 2, "required_checks": True},
        {"pattern": "main"},
    ]
    assert _post(admin, repo, "protection", {"pattern": "main"}).status_code == 409
    assert _post(admin, repo, "protection", {"pattern": "x", "required_approvals": "two"}).status_code == 400
    assert _post(admin, repo, "protection", {"pattern": "x", "required_approvals": "101"}).status_code == 400
    shown = admin.get(f"/ui/repos/{repo}/settings").text
    assert '<code class="pattern">release-*</code>' in shown
    assert _post(admin, repo, "protection/delete", {"pattern": "release-*"}).status_code == 303
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == [{"pattern": "main"}]
    assert _post(admin, repo, "protection/delete", {"pattern": "release-*"}).status_code == 404


def test_gc_rules_by_form(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    assert "No garbage-collection rules" in admin.get(f"/ui/repos/{repo}/settings").text
    rules = f"/repositories/{repo}/settings/gc_rules"
    set_ = _post(
        admin, repo, "gc", {"default_retention_days": "14", "branch": ["main", ""], "days": ["30", ""]}
    )
    assert set_.status_code == 303 and set_.headers["location"] == f"/ui/repos/{repo}/settings#gc"
    assert api.get(rules).json() == {
        "default_retention_days": 14,
        "branches": [{"branch_id": "main", "retention_days": 30}],
    }
    shown = admin.get(f"/ui/repos/{repo}/settings").text
    assert "<strong>14 days</strong>" in shown and 'name="branch" value="main"' in shown
    # a row cleared drops its rule; a new one adds one
    changed = _post(
        admin, repo, "gc", {"default_retention_days": "7", "branch": ["", "dev"], "days": ["30", "3"]}
    )
    assert changed.status_code == 303
    assert api.get(rules).json() == {
        "default_retention_days": 7,
        "branches": [{"branch_id": "dev", "retention_days": 3}],
    }
    for bad in (
        {"default_retention_days": "-1"},
        {"default_retention_days": "soon"},
        {"default_retention_days": "7", "branch": ["dev", "dev"], "days": ["1", "2"]},
        {"default_retention_days": "7", "branch": ["dev"], "days": [""]},
        {"default_retention_days": "7", "branch": ["bad name"], "days": ["1"]},
    ):
        assert _post(admin, repo, "gc", bad).status_code == 400, bad
    assert api.get(rules).json()["default_retention_days"] == 7
    assert _post(admin, repo, "gc/delete").status_code == 303
    assert api.get(rules).status_code == 404


def test_a_writer_who_is_no_admin_reads_the_settings_and_is_refused(live: Live, api: httpx.Client) -> None:
    repo = new_repo(api)
    assert (
        api.put(f"/repositories/{repo}/settings/branch_protection", json=[{"pattern": "main"}]).status_code
        == 204
    )
    gc_rules = {"default_retention_days": 5, "branches": []}
    assert api.put(f"/repositories/{repo}/settings/gc_rules", json=gc_rules).status_code == 204
    developer = make_user(live, "Developers")
    with sign_in(live, developer.key_id, developer.secret) as ui:
        shown = ui.get(f"/ui/repos/{repo}/settings")
        assert shown.status_code == 200
        assert '<code class="pattern">main</code>' in shown.text and "<strong>5 days</strong>" in shown.text
        for control in ("Add rule", "Delete the rule", "Save garbage-collection rules", "settings/gc/delete"):
            assert control not in shown.text, control
        token = csrf_of(shown.text)
        for action, data in (
            ("protection", {"pattern": "dev"}),
            ("protection/delete", {"pattern": "main"}),
            ("gc", {"default_retention_days": "1"}),
            ("gc/delete", {}),
        ):
            refused = ui.post(f"/ui/repos/{repo}/settings/{action}", data={**data, "csrf": token})
            assert refused.status_code == 403, action
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == [{"pattern": "main"}]
    assert api.get(f"/repositories/{repo}/settings/gc_rules").json() == gc_rules


def test_a_post_without_its_csrf_token_changes_nothing(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    for data in ({"pattern": "main"}, {"pattern": "main", "csrf": "0" * 64}):
        assert admin.post(f"/ui/repos/{repo}/settings/protection", data=data).status_code == 403
    assert (
        admin.post(f"/ui/repos/{repo}/settings/gc", data={"default_retention_days": "1"}).status_code == 403
    )
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == []
    assert api.get(f"/repositories/{repo}/settings/gc_rules").status_code == 404


def test_a_hostile_pattern_shows_as_text(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    hostile = '"><img src=x onerror=alert(1)>'
    assert _post(admin, repo, "protection", {"pattern": hostile}).status_code == 303
    shown = admin.get(f"/ui/repos/{repo}/settings").text
    assert "<img src=x" not in shown
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in shown
    assert _post(admin, repo, "protection/delete", {"pattern": hostile}).status_code == 303
    assert api.get(f"/repositories/{repo}/settings/branch_protection").json() == []
    assert admin.get("/ui/repos/no-such-repo/settings").status_code == 404


def test_the_delete_box_is_on_settings_not_on_the_overview(live: Live, api: httpx.Client, page: Any) -> None:
    """An admin finds "Delete this repository" on the Settings tab (as on GitHub), not on the
    overview; a wrong name is refused and deletes nothing; the repository's name deletes it."""
    from playwright.sync_api import expect

    repo = new_repo(api)
    page.goto(base_url(live) + "/ui/login")
    page.get_by_label("Access key ID").fill(live.key_id)
    page.get_by_label("Secret access key").fill(live.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")
    page.goto(base_url(live) + f"/ui/repos/{repo}")
    expect(page.get_by_role("heading", name="Latest commits on main")).to_be_visible()
    expect(page.get_by_role("heading", name="Delete this repository")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete repository")).to_have_count(0)

    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Settings").click()
    box = page.locator("section.danger")
    expect(box.get_by_role("heading", name="Delete this repository")).to_be_visible()
    box.get_by_label("Repository name").fill("not-" + repo)
    box.get_by_role("button", name="Delete repository").click()
    expect(page.locator("h1")).to_have_text("Error 400")
    refusal = f"type the repository's name ({repo}) to confirm its deletion"
    expect(page.locator("main")).to_contain_text(refusal)
    assert api.get(f"/repositories/{repo}").status_code == 200

    page.go_back()
    box.get_by_label("Repository name").fill(repo)
    box.get_by_role("button", name="Delete repository").click()
    page.wait_for_url("**/ui/")
    expect(page.get_by_role("link", name=repo, exact=True)).to_have_count(0)
    assert api.get(f"/repositories/{repo}").status_code == 404


def test_only_who_may_delete_the_repository_sees_its_delete_box(live: Live, api: httpx.Client) -> None:
    repo = new_repo(api)
    developer = make_user(live, "Developers")
    with sign_in(live, developer.key_id, developer.secret) as ui:
        shown = ui.get(f"/ui/repos/{repo}/settings")
        assert shown.status_code == 200
        assert "Delete this repository" not in shown.text and f"/ui/repos/{repo}/delete" not in shown.text
    with sign_in(live, live.key_id, live.secret) as ui:
        shown = ui.get(f"/ui/repos/{repo}/settings")
        assert "Delete this repository" in shown.text
        assert f'<form method="post" action="/ui/repos/{repo}/delete" class="inline">' in shown.text
        overview = ui.get(f"/ui/repos/{repo}")
        assert "Delete this repository" not in overview.text
        assert f"/ui/repos/{repo}/delete" not in overview.text
