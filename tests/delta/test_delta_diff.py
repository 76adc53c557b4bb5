"""The table diff of a Delta table: the versions each side wrote since the merge base, the data
files added and removed, schema and property changes, and rows by key from each side's active
files. Embedded and against a server."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import lakectl
from tests.delta.work import checkout, delete_with_vector, push
from tests.server.conftest import unique

ROOT = "tables/orders/"


def test_a_delta_diff_names_versions_files_schema_and_rows(client: lakectl.Client, tmp_path: Path) -> None:
    repo = lakectl.Repository(unique("ddiff"), client=client).create()
    main = repo.branch("main")
    first = pa.table({"id": pa.array(range(1, 11), pa.int64()), "amount": [float(i) for i in range(1, 11)]})
    write_deltalake(str(tmp_path / "main"), first, partition_by=None)
    push(main, ROOT, tmp_path / "main", "orders")
    dev = repo.branch("dev").create(main)
    work = checkout(dev, ROOT, tmp_path / "dev")
    DeltaTable(str(work)).update(updates={"amount": "amount * 10"}, predicate="id = 4")
    DeltaTable(str(work)).delete("id = 7")
    more = pa.table({"id": pa.array([11], pa.int64()), "amount": [11.0], "note": ["late"]})
    write_deltalake(str(work), more, mode="append", schema_mode="merge")
    DeltaTable(str(work)).alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})
    push(dev, ROOT, work, "dev: update, delete, append with a column, a property")
    wm = checkout(main, ROOT, tmp_path / "main2")
    write_deltalake(str(wm), pa.table({"id": pa.array([50], pa.int64()), "amount": [50.0]}), mode="append")
    push(main, ROOT, wm, "main: append")

    found = client.backend.diff_table(repo.id, "main", "dev", ROOT, ["id"], 100, "", None, False, True)
    delta = found["delta"]
    assert delta["base_version"] == 0
    assert [v["operation"] for v in delta["right"]["versions"]] == [
        "UPDATE",
        "DELETE",
        "WRITE",
        "SET TBLPROPERTIES",
    ]
    assert [v["operation"] for v in delta["left"]["versions"]] == ["WRITE"]
    assert delta["files_removed"] == 1 and delta["files_added"] >= 2
    assert delta["properties"] == [
        {"key": "delta.logRetentionDuration", "old": None, "new": "interval 60 days"}
    ]
    assert [(c["type"], c["name"]) for c in found["schema"]] == [("added", "note")]
    assert (found["added"], found["removed"], found["changed"]) == (1, 1, 1)
    assert found["changed_columns"] == {"amount": 1}
    by_type = {r["type"]: r["key"]["id"] for r in found["rows"]}
    assert by_type == {"added": 11, "removed": 7, "changed": 4}
    assert "Delta: right +4 versions" in found["summary"]


def test_a_deletion_vector_is_honoured(client: lakectl.Client, tmp_path: Path) -> None:
    """Rows a deletion vector marks are gone from the diff's side (its file keeps its path)."""
    repo = lakectl.Repository(unique("ddv"), client=client).create()
    main = repo.branch("main")
    first = pa.table({"id": pa.array(range(1, 7), pa.int64()), "amount": [float(i) for i in range(1, 7)]})
    write_deltalake(str(tmp_path / "main"), first, configuration={"delta.enableDeletionVectors": "true"})
    push(main, ROOT, tmp_path / "main", "orders")
    dev = repo.branch("dev").create(main)
    work = checkout(dev, ROOT, tmp_path / "dev")
    delete_with_vector(work, [1, 4])  # ids 2 and 5
    push(dev, ROOT, work, "dev: delete 2 and 5, with a deletion vector")

    found = client.backend.diff_table(repo.id, "main", "dev", ROOT, ["id"], 100, "", None, False, True)
    assert (found["added"], found["removed"], found["changed"]) == (0, 2, 0)
    assert sorted(r["key"]["id"] for r in found["rows"]) == [2, 5]
    assert (found["rows_left"], found["rows_right"]) == (6, 4)
    assert [v["operation"] for v in found["delta"]["right"]["versions"]] == ["DELETE"]

    delete_with_vector(work, [0, 1, 4])  # id 1 too: the file's vector changes
    push(dev, ROOT, work, "dev: delete 1 as well")
    again = client.backend.diff_table(repo.id, "main", "dev", ROOT, ["id"], 100, "", None, False, True)
    assert sorted(r["key"]["id"] for r in again["rows"]) == [1, 2, 5]
