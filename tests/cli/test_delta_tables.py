"""Delta tables from the CLI: ``diff --table`` shows the versions each side wrote and the rows,
``merge`` replays one side's versions after the other's, or fails with the conflicts as data."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tests.cli.conftest import Run

URI = "lakefs://shop"
ROOT = "tables/orders/"


def _upload(run: Run, branch: str, directory: Path, message: str) -> None:
    run("fs", "upload", f"{URI}/{branch}/{ROOT}", "--source", str(directory), "--recursive")
    run("commit", f"{URI}/{branch}", "-m", message)


def _table(run: Run, tmp_path: Path) -> Path:
    run("repo", "create", URI)
    work = tmp_path / "orders"
    write_deltalake(str(work), pa.table({"id": pa.array(range(1, 6), pa.int64()), "qty": [1, 2, 3, 4, 5]}))
    _upload(run, "main", work, "orders")
    run("branch", "create", f"{URI}/dev", "--source", f"{URI}/main")
    return work


def test_diff_shows_each_sides_versions_and_merge_replays_them(run: Run, tmp_path: Path) -> None:
    work = _table(run, tmp_path)
    DeltaTable(str(work)).delete("id = 2")
    _upload(run, "dev", work, "dev: delete 2")
    # main appends to the table as it was before dev's delete, uploading the whole directory again
    run("fs", "download", f"{URI}/main/{ROOT}", str(tmp_path / "m"), "--recursive")
    write_deltalake(
        str(tmp_path / "m"), pa.table({"id": pa.array([9], pa.int64()), "qty": [9]}), mode="append"
    )
    _upload(run, "main", tmp_path / "m", "main: append 9")

    shown = run("diff", "--table", f"{URI}/main", f"{URI}/dev", ROOT, "--key", "id").stdout
    assert "right v1: DELETE" in shown and "left v1: WRITE" in shown
    assert '- {"id": 2}' in shown

    run("merge", f"{URI}/dev", f"{URI}/main")
    run("fs", "download", f"{URI}/main/{ROOT}", str(tmp_path / "merged"), "--recursive")
    merged = DeltaTable(str(tmp_path / "merged"))
    assert sorted(merged.to_pyarrow_table().column("id").to_pylist()) == [1, 3, 4, 5, 9]
    assert [h["operation"] for h in merged.history()] == ["DELETE", "WRITE", "WRITE"]


def test_a_conflicting_merge_exits_5_with_the_tables_conflicts(run: Run, tmp_path: Path) -> None:
    work = _table(run, tmp_path)
    DeltaTable(str(work)).delete("id = 2")
    _upload(run, "dev", work, "dev: delete 2")
    run("fs", "download", f"{URI}/main/{ROOT}", str(tmp_path / "m"), "--recursive")
    DeltaTable(str(tmp_path / "m")).delete("id = 3")
    _upload(run, "main", tmp_path / "m", "main: delete 3")

    failed = run("merge", f"{URI}/dev", f"{URI}/main", "--json", code=5)
    error = json.loads(failed.stdout or failed.stderr)
    assert [c["type"] for c in error["details"]["delta"][ROOT]] == ["removed-on-both"]
