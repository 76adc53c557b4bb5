"""Pull requests in the web UI. In a real browser, on SQLite and PostgreSQL: an author opens one
from the form; a reviewer opens its link, sees the data diff and the checks, comments, approves
and merges, and finds the merge in the history. Over HTTP: what a reader may not do, markdown
and names shown as text, a merge conflict listed path by path and resolved by a strategy."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.hookd import Hookd, hookd
from tests.server.conftest import Live, commit, upload
from tests.ui.conftest import Person, base_url, csrf_of, make_user, new_repo, sign_in

__all__ = ["hookd"]

ORDERS = b"order_id,amount\n1,10.5\n2,7.25\n"


def _sign_in(page: Any, server: Live, key_id: str, secret: str) -> None:
    page.goto(base_url(server) + "/ui/login")
    page.get_by_label("Access key ID").fill(key_id)
    page.get_by_label("Secret access key").fill(secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")


def _gated_repo(api: httpx.Client, hook_url: str) -> str:
    """A repository whose main needs one approval and passing checks (its own pre-merge webhook
    action, committed on main); branch ``fix`` holds a commit with tables/orders.csv, checked by
    a webhook action on its commits."""
    repo = new_repo(api)
    gate = {
        "name": "main-gate",
        "on": {"pre-merge": {"branches": ["main"]}},
        "hooks": [{"id": "gate", "type": "webhook", "properties": {"url": hook_url}}],
    }
    upload(api, repo, "main", "_lakefs_actions/gate.yaml", json.dumps(gate).encode())
    commit(api, repo, "main", "main's gate")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    action = {
        "name": "orders-check",
        "on": {"pre-commit": {"branches": ["fix"]}},
        "hooks": [{"id": "schema", "type": "webhook", "properties": {"url": hook_url}}],
    }
    upload(api, repo, "fix", "_lakefs_actions/orders.yaml", json.dumps(action).encode())
    upload(api, repo, "fix", "tables/orders.csv", ORDERS)
    commit(api, repo, "fix", "orders: first load")
    rules = [{"pattern": "main", "required_approvals": 1, "required_checks": True}]
    assert api.put(f"/repositories/{repo}/settings/branch_protection", json=rules).status_code == 204
    return repo


@pytest.mark.parametrize("server_name", ["live", "live_pg"])
def test_a_reviewer_merges_a_pull_request_in_the_browser(
    server_name: str, request: pytest.FixtureRequest, page: Any, hookd: Hookd
) -> None:
    from playwright.sync_api import expect

    server: Live = request.getfixturevalue(server_name)
    with server.client((server.key_id, server.secret)) as api:
        repo = _gated_repo(api, hookd.url)
    reviewer = make_user(server, "Developers")

    # The author opens the pull request from the form.
    _sign_in(page, server, server.key_id, server.secret)
    page.goto(base_url(server) + f"/ui/repos/{repo}")
    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Pull requests").click()
    expect(page.get_by_text("No open pull requests.")).to_be_visible()
    page.get_by_role("link", name="New pull request").click()
    page.get_by_label("Merge the branch").select_option("fix")
    page.get_by_label("into").select_option("main")
    page.get_by_label("Title").fill("Load the orders table")
    page.get_by_label("Description").fill("First load of **orders**.\n\n<script>alert(1)</script>")
    page.get_by_role("button", name="Open pull request").click()
    page.wait_for_url(f"**/ui/repos/{repo}/pulls/1")
    link = page.url
    assert page.title() == f"#1 Load the orders table · {repo} · lakectl"
    expect(page.locator(".description strong")).to_have_text("orders")
    expect(page.locator(".description")).to_contain_text("<script>alert(1)</script>")  # as text
    # Its author may not approve it: no such button, and the gate says why it waits.
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator("ul.reasons")).to_contain_text("0 of 1 required approval")
    expect(page.get_by_role("button", name="Merge pull request")).to_have_count(0)
    page.get_by_role("button", name="Sign out").click()

    # The reviewer follows the link: the data diff and the checks are there.
    page.goto(link)
    page.get_by_label("Access key ID").fill(reviewer.key_id)
    page.get_by_label("Secret access key").fill(reviewer.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url(link)
    changes = page.locator("table.changes")
    expect(changes).to_contain_text("tables/orders.csv")
    expect(changes.locator("tr.added")).to_have_count(2)  # the table and the action file
    expect(page.locator(".check-status.completed")).to_have_count(1)
    expect(page.locator("ul.gate-list")).to_contain_text("main-gate")

    page.get_by_label("Add a comment").fill("Totals match the *source* system.")
    page.get_by_role("button", name="Comment", exact=True).click()
    comment = page.locator("article.comment")
    expect(comment).to_contain_text(reviewer.id)
    expect(comment.locator("em")).to_have_text("source")

    page.get_by_role("button", name="Approve").click()
    expect(page.locator("ul.reviews")).to_contain_text(f"{reviewer.id} approved")
    expect(page.locator(".ok")).to_have_text("Ready to merge.")
    page.get_by_role("button", name="Merge pull request").click()
    expect(page.locator(".pull-meta .state")).to_have_text("merged")

    # The merge is in main's history, and the data is on main.
    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Commits").click()
    expect(page.get_by_role("row").nth(1)).to_contain_text("Merge pull request #1 from fix")
    page.get_by_role("link", name="Activity", exact=True).first.click()
    feed = page.get_by_role("row").filter(has_text=repo)
    expect(feed.filter(has_text="Merge pull request #1 from fix")).to_have_count(1)
    with server.client((server.key_id, server.secret)) as api:
        got = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "tables/orders.csv"})
        assert got.content == ORDERS
        pr = api.get(f"/repositories/{repo}/pulls/1").json()
        head = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
        assert pr["status"] == "merged" and pr["merged_commit_id"] == head
    assert [r["event"]["action_name"] for r in hookd.received if r["event"]["event_type"] == "pre-merge"] == [
        "main-gate"
    ]


def _form_post(client: httpx.Client, page_path: str, action: str, **data: str) -> httpx.Response:
    csrf = csrf_of(client.get(page_path).text)
    return client.post(action, data={**data, "csrf": csrf})


def test_a_reader_sees_no_controls_and_is_refused(live: Live, api: httpx.Client) -> None:
    repo = new_repo(api)
    api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"})
    created = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "<b>bold</b> title", "source_branch": "fix", "destination_branch": "main"},
    )
    pid = created.json()["id"]
    viewer: Person = make_user(live, "Viewers")
    with sign_in(live, viewer.key_id, viewer.secret) as ui:
        shown = ui.get(f"/ui/repos/{repo}/pulls/{pid}")
        assert shown.status_code == 200
        assert "&lt;b&gt;bold&lt;/b&gt; title" in shown.text and "<b>bold</b>" not in shown.text
        for control in ("Merge pull request", "Approve", "Add a comment", "Close pull request"):
            assert control not in shown.text, control
        assert "New pull request" not in ui.get(f"/ui/repos/{repo}/pulls").text
        token = csrf_of(ui.get("/ui/").text)  # the sign-out form's token: a valid one
        for action in ("comment", "review", "merge", "close"):
            refused = ui.post(
                f"/ui/repos/{repo}/pulls/{pid}/{action}",
                data={"csrf": token, "body": "x", "verdict": "approved"},
            )
            assert refused.status_code == 403, (action, refused.text[:200])
        assert ui.get(f"/ui/repos/{repo}/pulls/new").status_code == 403
    assert api.get(f"/repositories/{repo}/pulls/{pid}/comments").json()["results"] == []
    assert api.get(f"/repositories/{repo}/pulls/{pid}").json()["status"] == "open"


def test_a_post_without_its_csrf_token_changes_nothing(
    live: Live, api: httpx.Client, admin: httpx.Client
) -> None:
    repo = new_repo(api)
    api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"})
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    for data in ({"body": "sneaky"}, {"body": "sneaky", "csrf": "0" * 64}):
        assert admin.post(f"/ui/repos/{repo}/pulls/{pid}/comment", data=data).status_code == 403
    assert admin.post(f"/ui/repos/{repo}/pulls/{pid}/close", data={}).status_code == 403
    assert api.get(f"/repositories/{repo}/pulls/{pid}/comments").json()["results"] == []
    assert api.get(f"/repositories/{repo}/pulls/{pid}").json()["status"] == "open"


def test_conflicts_are_listed_path_by_path_and_a_strategy_merges(
    api: httpx.Client, admin: httpx.Client
) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "t/a.csv", b"base\n")
    upload(api, repo, "main", "t/b.csv", b"base\n")
    commit(api, repo, "main", "base")
    api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"})
    for branch in ("main", "fix"):
        upload(api, repo, branch, "t/a.csv", f"{branch}\n".encode())
        upload(api, repo, branch, "t/b.csv", f"{branch}\n".encode())
        commit(api, repo, branch, f"edit on {branch}")
    pulls_page = f"/ui/repos/{repo}/pulls/new"
    opened = _form_post(
        admin, pulls_page, f"/ui/repos/{repo}/pulls", source="fix", destination="main", title="both edited"
    )
    assert opened.status_code == 303 and opened.headers["location"] == f"/ui/repos/{repo}/pulls/1"
    page = f"/ui/repos/{repo}/pulls/1"
    conflict = _form_post(admin, page, f"{page}/merge")
    assert conflict.status_code == 409
    assert "2 conflicting paths" in conflict.text
    assert "<code>t/a.csv</code>" in conflict.text and "<code>t/b.csv</code>" in conflict.text
    assert api.get(f"/repositories/{repo}/pulls/1").json()["status"] == "open"
    merged = _form_post(admin, page, f"{page}/merge", strategy="source-wins", message="take the fix")
    assert merged.status_code == 303
    assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "t/a.csv"}).content == b"fix\n"
    assert api.get(f"/repositories/{repo}/commits/main").json()["message"] == "take the fix"
    assert _form_post(admin, page, f"{page}/merge", strategy="ours").status_code == 400


def test_close_reopen_and_the_status_filters(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"})
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = f"/ui/repos/{repo}/pulls/{pid}"
    assert _form_post(admin, page, f"{page}/close").status_code == 303
    assert "No open pull requests." in admin.get(f"/ui/repos/{repo}/pulls").text
    assert f'{page}"' in admin.get(f"/ui/repos/{repo}/pulls", params={"status": "closed"}).text
    assert admin.get(f"/ui/repos/{repo}/pulls", params={"status": "weird"}).status_code == 400
    assert "Reopen pull request" in admin.get(page).text
    assert _form_post(admin, page, f"{page}/reopen").status_code == 303
    assert api.get(f"/repositories/{repo}/pulls/{pid}").json()["status"] == "open"
    assert admin.get(f"/ui/repos/{repo}/pulls/99").status_code == 404


def test_approvals_without_a_rule_read_as_approvals_not_as_a_quota(
    live: Live, api: httpx.Client, admin: httpx.Client
) -> None:
    repo = new_repo(api)
    api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"})
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}").text
    assert "Approvals: none (none required)" in page and "of 0 required" not in page
    bob = make_user(live, "Developers")
    with live.client((bob.key_id, bob.secret)) as as_bob:
        made = as_bob.post(
            f"/repositories/{repo}/pulls/{pid}/reviews", json={"verdict": "approved", "body": ""}
        )
        assert made.status_code == 201, made.text
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}").text
    assert f"Approvals: approved by {bob.id} (none required)" in page and "of 0 required" not in page
