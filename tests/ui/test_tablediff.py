"""The row diff of a table in the web UI: linked from the changes of a comparison and of a pull
request, showing the summary, schema changes, partitions and rows (values as text)."""

from __future__ import annotations

import html
import io
import re

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from tests.server.conftest import commit, upload
from tests.ui.conftest import csrf_of, new_repo


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _two_versions(api: httpx.Client) -> str:
    repo = new_repo(api)
    before = pa.table({"id": [1, 2, 3], "note": ["a", "b", "c"]})
    for day in ("01", "02"):
        upload(api, repo, "main", f"tables/t/day={day}/part-0.parquet", _parquet(before))
    commit(api, repo, "main", "t")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    after = pa.table({"id": [1, 3, 4], "note": ["a", "<script>alert(1)</script>", "d"]})
    upload(api, repo, "fix", "tables/t/day=02/part-0.parquet", _parquet(after))
    commit(api, repo, "fix", "fix day 2")
    return repo


def test_a_comparison_links_to_the_row_diff(api: httpx.Client, admin: httpx.Client) -> None:
    repo = _two_versions(api)
    compare = admin.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
    links = re.findall(r'<a class="rowdiff" href="([^"]+)"', compare.text)
    assert len(links) == 1 and "path=tables%2Ft%2F" in links[0]
    shown = admin.get(html.unescape(links[0]) + "&key=id")
    assert shown.status_code == 200
    assert "+1 rows, \u22121, 1 changed (note)" in shown.text
    assert "day=02" in shown.text and "day=01" not in shown.text  # the unchanged day was not read
    assert "<script>alert(1)</script>" not in shown.text and "\\u003cscript\\u003e" in shown.text
    assert "1 read" not in shown.text and "2 read, 1 unchanged" in shown.text
    refused = admin.get(html.unescape(links[0]) + "&key=nope")
    assert refused.status_code == 400


def test_a_pull_request_links_to_the_row_diff(api: httpx.Client, admin: httpx.Client) -> None:
    repo = _two_versions(api)
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}")
    (link,) = re.findall(r'<a class="rowdiff" href="([^"]+)"', page.text)
    shown = admin.get(html.unescape(link))
    assert shown.status_code == 200 and "changed" in shown.text  # keyless: whole rows
    assert "Rows of" in shown.text


def test_uncommitted_changes_link_to_the_row_diff(api: httpx.Client, admin: httpx.Client) -> None:
    repo = _two_versions(api)
    upload(api, repo, "fix", "tables/t/day=01/part-0.parquet", _parquet(pa.table({"id": [1], "note": ["z"]})))
    page = admin.get(f"/ui/repos/{repo}/branches/fix/changes")
    (link,) = re.findall(r'<a class="rowdiff" href="([^"]+)"', page.text)
    shown = admin.get(html.unescape(link) + "&key=id")
    assert shown.status_code == 200
    assert "day=01" in shown.text and "day=02" not in shown.text  # staged against committed
    assert "\u22122, 1 changed (note)" in shown.text


def test_a_pull_request_summarizes_its_tables(api: httpx.Client, admin: httpx.Client) -> None:
    repo = _two_versions(api)
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}")
    summaries = re.findall(r'<ul class="table-summaries">\s*<li><a href="[^"]+">([^<]+)</a>', page.text)
    assert summaries == ["t: +2 rows, \u22122"], page.text[page.text.find("table-summaries") - 50 :][:400]


def test_a_declared_key_reaches_the_pull_request_and_its_row_diff(
    api: httpx.Client, admin: httpx.Client
) -> None:
    """A table whose key the repository declares (_lakectl/tables.yaml) is summarized by it: an
    edited row reads as changed, not as a removal and an addition; its row diff says so."""
    repo = new_repo(api)
    upload(api, repo, "main", "_lakectl/tables.yaml", b"tables:\n  tables/t:\n    key: [id]\n")
    before = pa.table({"id": [1, 2, 3], "note": ["a", "b", "c"]})
    upload(api, repo, "main", "tables/t/day=01/part-0.parquet", _parquet(before))
    commit(api, repo, "main", "t, keyed by id")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    after = pa.table({"id": [1, 2, 3], "note": ["a", "B", "C"]})
    upload(api, repo, "fix", "tables/t/day=01/part-0.parquet", _parquet(after))
    commit(api, repo, "fix", "edit two rows")
    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}")
    summaries = re.findall(
        r'<ul class="table-summaries">\s*<li><a href="([^"]+)">([^<]+)</a>([^\n]*)', page.text
    )
    assert [s[1] for s in summaries] == ["t: +0 rows, \u22120, 2 changed (note)"]
    assert "by key <code>id</code>" in summaries[0][2]
    shown = admin.get(html.unescape(summaries[0][0]))
    assert "2 changed (note)" in shown.text
    assert re.search(
        r"By key <code>id</code>, declared for this table in <code>_lakectl/tables.yaml</code>", shown.text
    )


def test_the_merge_form_merges_declared_tables_by_rows(api: httpx.Client, admin: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "_lakectl/tables.yaml", b"tables:\n  t:\n    key: [id]\n")
    upload(api, repo, "main", "t/p.parquet", _parquet(pa.table({"id": [1, 2], "v": [0, 0]})))
    commit(api, repo, "main", "t")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    upload(api, repo, "fix", "t/p.parquet", _parquet(pa.table({"id": [1, 2], "v": [1, 0]})))
    commit(api, repo, "fix", "row 1")
    upload(api, repo, "main", "t/p.parquet", _parquet(pa.table({"id": [1, 2], "v": [0, 2]})))
    commit(api, repo, "main", "row 2")
    compare = admin.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
    assert '<option value="rows">' in compare.text
    form = {"source": "fix", "destination": "main", "strategy": "rows", "csrf": csrf_of(compare.text)}
    done = admin.post(f"/ui/repos/{repo}/merge", data=form, follow_redirects=False)
    assert done.status_code == 303, done.text
    merged = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "t/p.parquet"})
    assert pq.read_table(io.BytesIO(merged.content)).to_pydict() == {"id": [1, 2], "v": [1, 2]}
