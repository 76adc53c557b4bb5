"""What a commit and a merged pull request changed, on their pages, in a real browser: a commit's
page lists its changes (a merge commit's: what the merge brought); a merged pull request still
lists what it changed; commit ids in headings are short, the whole id in their title; a table's
row diff link has a column of its own, apart from the path."""

from __future__ import annotations

import io
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from tests.server.conftest import Live, commit, upload
from tests.ui.conftest import base_url, new_repo


def _sign_in(page: Any, server: Live) -> None:
    page.goto(base_url(server) + "/ui/login")
    page.get_by_label("Access key ID").fill(server.key_id)
    page.get_by_label("Secret access key").fill(server.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")


def _parquet(ids: list[int]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": ids}), out)
    return out.getvalue()


def _changes(page: Any) -> list[tuple[str, str]]:
    """(change, path) of each row of the page's change table, the path cell's text whole."""
    rows = page.locator("table.changes tbody tr")
    return [
        (rows.nth(i).locator("td").nth(0).inner_text(), rows.nth(i).locator("td").nth(1).inner_text())
        for i in range(rows.count())
    ]


def test_a_commit_page_lists_its_changes(live: Live, api: httpx.Client, page: Any) -> None:
    from playwright.sync_api import expect

    repo = new_repo(api)
    upload(api, repo, "main", "keep.txt", b"1")
    upload(api, repo, "main", "old.txt", b"1")
    upload(api, repo, "main", "tables/t/part-0.parquet", _parquet([1, 2]))
    first = commit(api, repo, "main", "first")["id"]
    upload(api, repo, "main", "keep.txt", b"22")
    assert api.delete(f"/repositories/{repo}/branches/main/objects", params={"path": "old.txt"}).is_success
    upload(api, repo, "main", "new.txt", b"333")
    upload(api, repo, "main", "tables/t/part-0.parquet", _parquet([1, 3]))
    second = commit(api, repo, "main", "second")["id"]

    _sign_in(page, live)
    page.goto(base_url(live) + f"/ui/repos/{repo}/commits/{second}")
    heading = page.locator("h1 code")
    expect(heading).to_have_text(second[:12])
    expect(heading).to_have_attribute("title", second)
    expect(page.get_by_role("heading", name="Changes", exact=True)).to_be_visible()
    assert _changes(page) == [
        ("changed", "keep.txt"),
        ("added", "new.txt"),
        ("removed", "old.txt"),
        ("changed", "tables/t/part-0.parquet"),
    ]
    # the row diff link: a column of its own, not glued to the path
    table_row = page.locator("table.changes tbody tr").nth(3)
    expect(page.locator("table.changes thead th")).to_have_text(["Change", "Path", "Size", "Table"])
    rows_link = (
        table_row.locator("td")
        .nth(3)
        .get_by_role("link", name="Rows changed in tables/t/part-0.parquet", exact=True)
    )
    expect(rows_link).to_have_text("rows")
    rows_link.click()
    expect(page.locator("p.summary")).to_contain_text("+1 rows, \u22121")
    # its heading names the commits by their short ids, the whole ids in titles
    ids = page.locator("p.path [title]")
    expect(ids).to_have_text([first[:12], second[:12]])
    expect(ids.nth(0)).to_have_attribute("title", first)
    expect(ids.nth(1)).to_have_attribute("title", second)
    assert page.title() == f"Rows of tables/t/part-0.parquet: {first[:12]}…{second[:12]} · {repo} · lakectl"

    # the files at this commit: the heading's id is short too
    page.go_back()
    page.get_by_role("link", name="Browse files at this commit", exact=True).click()
    expect(page.locator("h1")).to_have_text(f"Objects at {second[:12]}")
    expect(page.locator("h1 [title]")).to_have_attribute("title", second)
    assert page.title() == f"/ at {second[:12]} · {repo} · lakectl"


def test_a_merge_commit_and_its_merged_pull_request_list_what_the_merge_brought(
    live: Live, api: httpx.Client, page: Any
) -> None:
    from playwright.sync_api import expect

    repo = new_repo(api)
    assert api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).is_success
    upload(api, repo, "main", "on-main.txt", b"m")  # main moves on: not what the merge brings
    commit(api, repo, "main", "main moves")
    upload(api, repo, "fix", "fixed.csv", b"a\n1\n")
    commit(api, repo, "fix", "fix")
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "Bring the fix", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    assert api.put(f"/repositories/{repo}/pulls/{pid}/merge", json={}).is_success
    merged = api.get(f"/repositories/{repo}/pulls/{pid}").json()["merged_commit_id"]

    _sign_in(page, live)
    page.goto(base_url(live) + f"/ui/repos/{repo}/pulls/{pid}")
    expect(page.locator(".pull-meta .state")).to_have_text("merged")
    expect(page.get_by_role("heading", name="Changes", exact=True)).to_be_visible()
    assert _changes(page) == [("added", "fixed.csv")]
    expect(page.locator(".pull-meta a[title]")).to_have_attribute("title", merged)

    page.locator(".pull-meta").get_by_role("link", name=merged[:12]).click()  # the merge commit
    page.wait_for_url(f"**/ui/repos/{repo}/commits/{merged}")
    expect(page.locator("main")).to_contain_text("what the merge brought")
    assert _changes(page) == [("added", "fixed.csv")]
