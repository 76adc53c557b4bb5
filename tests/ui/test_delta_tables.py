"""A Delta table in the web UI: a comparison links the table (its log and data files) to one row
diff, which lists each side's Delta versions; a pull request summarizes it by them."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.server.conftest import commit, upload
from tests.ui.conftest import new_repo


def _push(api: httpx.Client, repo: str, branch: str, directory: Path, sent: set[str]) -> None:
    for file in sorted(directory.rglob("*")):
        name = "tables/orders/" + file.relative_to(directory).as_posix()
        if file.is_file() and name not in sent:
            upload(api, repo, branch, name, file.read_bytes())
            sent.add(name)


def test_a_delta_table_is_one_row_diff_with_its_versions(
    api: httpx.Client, admin: httpx.Client, tmp_path: Path
) -> None:
    repo = new_repo(api)
    work, sent = tmp_path / "orders", set[str]()
    write_deltalake(str(work), pa.table({"id": pa.array([1, 2, 3], pa.int64()), "qty": [1, 2, 3]}))
    _push(api, repo, "main", work, sent)
    commit(api, repo, "main", "orders")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    DeltaTable(str(work)).delete("id = 2")
    _push(api, repo, "fix", work, sent)
    commit(api, repo, "fix", "delete 2")

    compare = admin.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
    links = set(re.findall(r'<a class="rowdiff" href="([^"]+)"', compare.text))
    assert len(links) == 1 and "path=tables%2Forders%2F" in next(iter(links))
    shown = admin.get(html.unescape(next(iter(links))) + "&key=id")
    assert shown.status_code == 200
    assert "Delta versions" in shown.text and "<code>DELETE</code>" in shown.text
    assert "Delta: right +1 version (DELETE)" in shown.text

    pid = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "fix", "destination_branch": "main"},
    ).json()["id"]
    page = admin.get(f"/ui/repos/{repo}/pulls/{pid}")
    summaries = re.findall(r'<ul class="table-summaries">\s*<li><a href="[^"]+">([^<]+)</a>', page.text)
    assert summaries == ["orders: +0 rows, \u22121, Delta: right +1 version (DELETE), files +1 \u22121"]
