"""The UI in a real browser (headless Chromium): a user's whole session, by keyboard and mouse, on
SQLite and PostgreSQL metadata; and what a read-only user is shown and refused."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest

from tests.server.conftest import Live, unique
from tests.ui.conftest import base_url, csrf_of, make_user

CSV = b"id,name\n1,ada\n2,grace\n"


def _title(page: Any) -> str:
    return str(page.title())


def _sign_in(page: Any, server: Live, key_id: str, secret: str) -> None:
    page.goto(base_url(server) + "/ui/")
    assert _title(page) == "Sign in · lakectl"
    page.get_by_label("Access key ID").fill(key_id)
    page.get_by_label("Secret access key").fill(secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")


@pytest.mark.parametrize("server_name", ["live", "live_pg"])
def test_a_session_from_sign_in_to_sign_out(
    server_name: str, request: pytest.FixtureRequest, page: Any
) -> None:
    server: Live = request.getfixturevalue(server_name)
    from playwright.sync_api import expect

    # a wrong secret is refused, on the same page
    page.goto(base_url(server) + "/ui/")
    page.get_by_label("Access key ID").fill(server.key_id)
    page.get_by_label("Secret access key").fill("not-the-secret")
    page.get_by_label("Secret access key").press("Enter")  # submitting by keyboard
    expect(page.get_by_role("alert")).to_contain_text("invalid access key id or secret access key")
    assert _title(page) == "Sign in · lakectl"

    _sign_in(page, server, server.key_id, server.secret)
    assert _title(page) == "Repositories · lakectl"
    expect(page.locator(".who")).to_contain_text("Signed in as admin")

    # a repository
    repo = unique("web")
    page.get_by_label("Name", exact=True).fill(repo)
    page.get_by_role("button", name="Create repository", exact=True).click()
    page.wait_for_url(f"**/ui/repos/{repo}")
    assert _title(page) == f"{repo} · lakectl"

    # a branch
    page.get_by_role("navigation", name="Repository").get_by_role(
        "link", name="Branches & tags", exact=True
    ).click()
    page.get_by_label("Branch name").fill("feature")
    page.get_by_role("button", name="Create branch", exact=True).click()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="feature", exact=True))
    expect(row).to_contain_text("Repository created")

    # an upload to the branch: the path field suggests the file's name
    row.get_by_role("link", name="feature", exact=True).click()
    assert _title(page) == f"/ at feature · {repo} · lakectl"
    page.get_by_label("File", exact=True).set_input_files(
        {"name": "people.csv", "mimeType": "text/csv", "buffer": CSV}
    )
    path = page.get_by_role("textbox", name=re.compile("^Path"))
    expect(path).to_have_value("people.csv")
    path.fill("tables/people.csv")
    page.get_by_role("button", name="Upload", exact=True).click()
    page.wait_for_url("**/object?path=tables%2Fpeople.csv")
    preview = page.locator("table.preview-rows")
    expect(preview.locator("thead")).to_have_text("idname")
    expect(preview.locator("tbody tr")).to_have_text(["1ada", "2grace"])

    # an uncommitted change, committed
    page.get_by_role("link", name="Uncommitted changes", exact=True).click()
    assert _title(page) == f"Uncommitted changes on feature · {repo} · lakectl"
    change = page.get_by_role("row").filter(has_text="tables/people.csv")
    expect(change).to_contain_text("added")
    expect(change).to_contain_text(f"{len(CSV)} B")
    page.get_by_label("Message").fill("Add people")
    page.get_by_label("Metadata").fill("source=browser test")
    page.get_by_role("button", name="Commit", exact=True).click()
    page.wait_for_url(f"**/ui/repos/{repo}/commits/*")
    expect(page.locator("pre.message")).to_have_text("Add people")
    expect(page.locator("dl.facts")).to_contain_text("admin")
    expect(page.get_by_role("row").filter(has_text="source")).to_contain_text("browser test")
    commit_url = page.url

    # the commit in the log, and its page
    page.get_by_role("link", name="Commits", exact=True).click()  # the history from that commit
    page.get_by_label("Ref").fill("feature")  # switched to the branch's
    page.get_by_label("Ref").press("Enter")
    page.wait_for_url("**/refs/feature/log")
    assert _title(page) == f"Commits at feature · {repo} · lakectl"
    logged = page.get_by_role("row").filter(has_text="Add people")
    expect(logged).to_contain_text("admin")
    logged.get_by_role("link").click()
    assert page.url == commit_url

    # the object at that commit: browsed, opened, downloaded
    page.get_by_role("link", name="Browse files at this commit", exact=True).click()
    page.get_by_role("link", name="tables/", exact=True).click()
    page.get_by_role("link", name="people.csv", exact=True).click()
    expect(page.locator("dl.facts")).to_contain_text("text/csv")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download", exact=True).click()
    assert download.value.suggested_filename == "people.csv"
    with open(download.value.path(), "rb") as saved:
        assert saved.read() == CSV

    # the diff of the branch against main
    page.get_by_role("link", name="Compare", exact=True).click()
    page.get_by_label("Base").fill("main")
    page.get_by_label("Compared").fill("feature")
    page.get_by_role("button", name="Compare", exact=True).click()
    assert _title(page) == f"Compare main…feature · {repo} · lakectl"
    diffed = page.get_by_role("row").filter(has_text="tables/people.csv")
    expect(diffed).to_contain_text("added")
    expect(page.get_by_role("table").get_by_role("row")).to_have_count(2)  # header and one change

    # the branch deleted again (after its confirmation dialog)
    page.get_by_role("link", name="Branches & tags", exact=True).click()
    page.get_by_role("button", name="Delete branch feature", exact=True).click()
    expect(page.get_by_role("link", name="feature", exact=True)).to_have_count(0)

    # signing out ends it
    page.get_by_role("button", name="Sign out", exact=True).click()
    page.wait_for_url("**/ui/login")
    page.goto(base_url(server) + f"/ui/repos/{repo}")
    assert _title(page) == "Sign in · lakectl"


def test_signing_in_and_moving_by_keyboard_alone(live: Live, page: Any) -> None:
    """The sign-in form is filled and sent with the keyboard only; on a page, the first Tab
    reaches the skip link; every input of a page with forms has a label."""
    page.goto(base_url(live) + "/ui/login")
    active = "document.activeElement.id || document.activeElement.textContent.trim()"
    assert page.evaluate(active) == "access_key_id"  # focused on arrival
    page.keyboard.type(live.key_id)
    page.keyboard.press("Tab")
    page.keyboard.type(live.secret)
    page.keyboard.press("Tab")
    assert page.evaluate(active) == "Sign in"
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/")
    page.keyboard.press("Tab")
    assert page.evaluate(active) == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate(active) == "main"
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"""
    )
    assert page.locator("input:not([type=hidden])").count() == 3 and unlabelled == []


def test_a_viewer_sees_no_write_controls(live: Live, page: Any) -> None:
    """Signed in with a read-only (Viewers, Analyst role) user: pages show no form that writes,
    and a POST made anyway with the session's cookie and CSRF token is refused (403)."""
    from playwright.sync_api import expect

    with live.client((live.key_id, live.secret)) as api:
        repo = unique("view")
        assert api.post(
            "/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}
        ).is_success
        r = api.post(f"/repositories/{repo}/branches/main/objects", params={"path": "a.txt"}, content=b"a")
        assert r.status_code == 201
    viewer = make_user(live, "Viewers")
    _sign_in(page, live, viewer.key_id, viewer.secret)
    expect(page.get_by_role("link", name=repo, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Create repository", exact=True)).to_have_count(0)
    page.get_by_role("link", name=repo, exact=True).click()
    for area in ("Actions", "Settings", "Objects", "Branches & tags", "Commits", "Uncommitted changes"):
        page.get_by_role("link", name=area, exact=True).click()
        assert page.locator("form[method=post]").count() == 1, area  # sign-out only
        expect(page.get_by_role("button", name="Delete repository", exact=True)).to_have_count(0)
        expect(page.locator("input[type=file], textarea")).to_have_count(0)
    expect(page.get_by_role("row").filter(has_text="a.txt")).to_contain_text("added")

    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    with httpx.Client(base_url=base_url(live), cookies=cookies, timeout=30.0) as same_session:
        token = csrf_of(same_session.get(f"/ui/repos/{repo}/branches").text)
        refused = same_session.post(
            f"/ui/repos/{repo}/branches/main/commit", data={"message": "sneaky", "csrf": token}
        )
        assert refused.status_code == 403
        assert f"user '{viewer.id}' is not allowed" in html.unescape(refused.text)
    with live.client((live.key_id, live.secret)) as api:
        assert len(api.get(f"/repositories/{repo}/refs/main/commits").json()["results"]) == 1
