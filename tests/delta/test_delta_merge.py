"""Merging branches that both wrote a Delta table: the source's versions replayed after the
destination's, checked with ``deltalake`` (rows, schema, history); conflicts as data, nothing
changed. Embedded and against a server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakectl
from lakectl.exceptions import ConflictException
from tests.delta.work import checkout, delete_with_vector, operations, push, rows
from tests.server.conftest import unique

ROOT = "tables/orders/"


def _table(n: int, start: int = 1) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})


def _two_branches(client: lakectl.Client, tmp_path: Path) -> tuple[lakectl.Branch, lakectl.Branch]:
    repo = lakectl.Repository(unique("delta"), client=client).create()
    main = repo.branch("main")
    write_deltalake(str(tmp_path / "main"), _table(10))
    push(main, ROOT, tmp_path / "main", "orders: first load")
    return repo.branch("a").create(main), repo.branch("b").create(main)


def _change(branch: lakectl.Branch, into: Path, message: str, *steps: Callable[[str], object]) -> str:
    """``branch``'s table checked out into ``into``, changed by each step (given the table's
    directory), and pushed: the new commit's id."""
    work = checkout(branch, ROOT, into)
    for step in steps:
        step(str(work))
    return str(push(branch, ROOT, work, message).get_commit().id)


def _append(n: int, start: int) -> Callable[[str], object]:
    return lambda table: write_deltalake(table, _table(n, start), mode="append")


def _delete(predicate: str) -> Callable[[str], object]:
    return lambda table: DeltaTable(table).delete(predicate)


def _update(value: str, predicate: str) -> Callable[[str], object]:
    return lambda table: DeltaTable(table).update(updates={"v": f"'{value}'"}, predicate=predicate)


def _compact(table: str) -> None:
    DeltaTable(table).optimize.compact()


def _retype_id(table: str) -> None:
    """An overwrite with a new schema: ``id`` an int32."""
    retyped = pa.table({"id": pa.array([1], pa.int32()), "v": ["one"]})
    write_deltalake(table, retyped, mode="overwrite", schema_mode="overwrite")


def _property(key: str, value: str) -> Callable[[str], object]:
    return lambda table: DeltaTable(table).alter.set_table_properties({key: value})


def test_both_sides_versions_merge_into_one_valid_table(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    wa = checkout(a, ROOT, tmp_path / "a")
    write_deltalake(str(wa), _table(2, 11), mode="append")
    DeltaTable(str(wa)).delete("id = 3")
    DeltaTable(str(wa)).optimize.compact()
    DeltaTable(str(wa)).create_checkpoint()
    push(a, ROOT, wa, "a: append, delete, optimize, checkpoint")

    wb = checkout(b, ROOT, tmp_path / "b")
    write_deltalake(str(wb), _table(2, 20), mode="append")
    more = pa.table({"id": pa.array([30], pa.int64()), "v": ["v30"], "note": ["new column"]})
    write_deltalake(str(wb), more, mode="append", schema_mode="merge")
    push(b, ROOT, wb, "b: append, schema change")

    b.merge_into(a)
    merged = checkout(a, ROOT, tmp_path / "merged")
    got = rows(merged)
    expected = [i for i in range(1, 13) if i != 3] + [20, 21, 30]
    assert [r["id"] for r in got] == expected
    assert {r["id"]: r["note"] for r in got}[30] == "new column"
    assert "note" in DeltaTable(str(merged)).schema().to_arrow().names
    assert operations(merged) == ["WRITE", "WRITE", "DELETE", "OPTIMIZE", "WRITE", "WRITE"]
    head = next(a.log(max_amount=1))
    assert head.metadata["lakectl_delta_replayed"] == "tables/orders/:1-2>4-5"
    assert DeltaTable(str(merged)).version() == 5


def test_both_rewriting_one_file_conflicts_and_changes_nothing(
    client: lakectl.Client, tmp_path: Path
) -> None:
    a, b = _two_branches(client, tmp_path)
    head = _change(a, tmp_path / "a", "a: delete 3", _delete("id = 3"))
    _change(b, tmp_path / "b", "b: delete 5", _delete("id = 5"))

    with pytest.raises(ConflictException) as raised:
        b.merge_into(a)
    assert a.get_commit().id == head
    details = raised.value.__cause__.details  # type: ignore[union-attr]
    assert "tables/orders/_delta_log/" in details["conflicts"]
    assert [c["type"] for c in details["delta"][ROOT]] == ["removed-on-both"]
    after = rows(checkout(a, ROOT, tmp_path / "after"))
    assert [r["id"] for r in after] == [i for i in range(1, 11) if i != 3]


def test_a_compaction_against_a_delete_is_a_conflict(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    head = _change(a, tmp_path / "a", "a: append, optimize", _append(1, 11), _compact)
    _change(b, tmp_path / "b", "b: delete 5", _delete("id = 5"))

    with pytest.raises(ConflictException) as raised:
        b.merge_into(a)
    details = raised.value.__cause__.details  # type: ignore[union-attr]
    (found,) = details["delta"][ROOT]
    assert found["type"] == "removed-on-both" and found["source_version"] == 1 and found["dest_version"] == 2
    assert a.get_commit().id == head


def test_metadata_changed_on_both_and_a_retype_are_conflicts(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    head = _change(a, tmp_path / "a", "a: a property", _property("delta.appendOnly", "false"))
    _change(
        b, tmp_path / "b", "b: another property", _property("delta.logRetentionDuration", "interval 7 days")
    )
    with pytest.raises(ConflictException) as raised:
        b.merge_into(a)
    assert [c["type"] for c in raised.value.__cause__.details["delta"][ROOT]] == ["metaData-changed-on-both"]  # type: ignore[union-attr]
    assert a.get_commit().id == head

    # b retypes a column (an overwrite with a new schema) while a appends under the old one
    _change(b, tmp_path / "b2", "b: id as int", _retype_id)
    head = _change(a, tmp_path / "a2", "a: append", _append(1, 40))
    with pytest.raises(ConflictException) as raised:
        b.merge_into(a)
    found = raised.value.__cause__.details["delta"][ROOT]  # type: ignore[union-attr]
    assert {
        "type": "schema-incompatible",
        "field": "id",
        "reason": "retyped",
        "changed_on": "source",
    } in found
    assert a.get_commit().id == head


def test_checkpoints_and_vacuums_on_one_side(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    wb = checkout(b, ROOT, tmp_path / "b")
    for i in range(3):
        write_deltalake(str(wb), _table(1, 100 + i), mode="append")
    DeltaTable(str(wb)).optimize.compact()
    DeltaTable(str(wb)).create_checkpoint()
    DeltaTable(str(wb)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    push(b, ROOT, wb, "b: appends, optimize, checkpoint, vacuum")
    _change(a, tmp_path / "a", "a: append", _append(1, 200))

    b.merge_into(a)
    merged = checkout(a, ROOT, tmp_path / "merged")
    assert [r["id"] for r in rows(merged)] == [*range(1, 11), 100, 101, 102, 200]
    replayed = ["WRITE", "WRITE", "WRITE", "OPTIMIZE", "VACUUM START", "VACUUM END"]
    assert operations(merged) == ["WRITE", "WRITE", *replayed]
    names = {p.name for p in (merged / "_delta_log").iterdir()}
    assert "00000000000000000004.checkpoint.parquet" not in names  # b's, under b's numbering
    assert DeltaTable(str(merged)).version() == 7


def test_the_rows_strategy_merges_files_both_sides_rewrote(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    _change(a, tmp_path / "a", "a: edit 3, append 11", _update("a-edit", "id = 3"), _append(1, 11))
    steps = (_update("b-edit", "id = 5"), _delete("id = 9"), _append(1, 20))
    _change(b, tmp_path / "b", "b: edit 5, delete 9, append 20", *steps)
    with pytest.raises(ConflictException):
        b.merge_into(a)  # without the strategy: both rewrote the first file

    b.merge_into(a, strategies=["tables/orders/**=rows:key=id"])
    merged = checkout(a, ROOT, tmp_path / "merged")
    got = {r["id"]: r["v"] for r in rows(merged)}
    assert sorted(got) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 20]
    assert (got[3], got[5], got[1]) == ("a-edit", "b-edit", "v1")
    assert operations(merged)[-1] == "MERGE"
    info = DeltaTable(str(merged)).history(1)[0]
    assert info["lakectlReplay"]["operations"] == ["UPDATE", "DELETE", "WRITE"]

    # the same cell changed differently on both sides: a row conflict, nothing changed
    head = _change(a, tmp_path / "a2", "a: edit 1", _update("a-again", "id = 1"))
    _change(b, tmp_path / "b2", "b: edit 1", _update("b-again", "id = 1"))
    with pytest.raises(ConflictException) as raised:
        b.merge_into(a, strategies=["tables/orders/**=rows:key=id"])
    (found,) = raised.value.__cause__.details["delta"][ROOT]  # type: ignore[union-attr]
    assert found["type"] == "rows" and found["count"] == 1
    assert a.get_commit().id == head


def test_merging_again_and_back_keeps_one_valid_table(client: lakectl.Client, tmp_path: Path) -> None:
    """A long-lived branch merged again after its versions were replayed, and the destination
    merged back into it: each side's versions arrive once, under the other's numbering (the
    replays of its own versions are recognized as such)."""
    a, b = _two_branches(client, tmp_path)
    wa = checkout(a, ROOT, tmp_path / "a")
    write_deltalake(str(wa), _table(1, 11), mode="append")
    push(a, ROOT, wa, "a: append 11")
    wb = checkout(b, ROOT, tmp_path / "b")
    write_deltalake(str(wb), _table(1, 20), mode="append")
    push(b, ROOT, wb, "b: append 20")
    b.merge_into(a)

    DeltaTable(str(wb)).delete("id = 20")
    write_deltalake(str(wb), _table(1, 21), mode="append")
    push(b, ROOT, wb, "b: delete 20, append 21")
    b.merge_into(a)
    merged = checkout(a, ROOT, tmp_path / "merged")
    assert [r["id"] for r in rows(merged)] == [*range(1, 12), 21]
    assert operations(merged) == ["WRITE", "WRITE", "WRITE", "DELETE", "WRITE"]

    write_deltalake(str(wb), _table(1, 30), mode="append")
    push(b, ROOT, wb, "b: append 30")
    a.merge_into(b)  # b's own versions stay as they were; a's one version follows them
    back = checkout(b, ROOT, tmp_path / "back")
    assert [r["id"] for r in rows(back)] == [*range(1, 12), 21, 30]
    assert operations(back) == ["WRITE", "WRITE", "DELETE", "WRITE", "WRITE", "WRITE"]
    assert DeltaTable(str(back)).history(1)[0]["lakectlReplay"]["version"] == 1


def test_a_pull_request_merges_a_delta_table_both_sides_wrote(client: lakectl.Client, tmp_path: Path) -> None:
    a, b = _two_branches(client, tmp_path)
    _change(a, tmp_path / "a", "a: append 11", _append(1, 11))
    _change(b, tmp_path / "b", "b: delete 1", _delete("id = 1"))
    backend = client.backend
    pull = backend.create_pull(a.repo_id, "delete row 1", "b", "a")
    backend.merge_pull(a.repo_id, pull.id)
    merged = checkout(a, ROOT, tmp_path / "merged")
    assert [r["id"] for r in rows(merged)] == list(range(2, 12))
    assert operations(merged) == ["WRITE", "WRITE", "DELETE"]


def test_a_merge_leaving_a_long_log_tail_writes_a_checkpoint(client: lakectl.Client, tmp_path: Path) -> None:
    """The replayed versions would leave more than twice the checkpoint interval since the last
    checkpoint: the merge writes one at the merged table's last version (the source's own
    checkpoints, numbered for its log, stay behind)."""
    repo = lakectl.Repository(unique("dcp"), client=client).create()
    main = repo.branch("main")
    write_deltalake(str(tmp_path / "main"), _table(3), configuration={"delta.checkpointInterval": "3"})
    push(main, ROOT, tmp_path / "main", "orders, a checkpoint every 3 versions")
    a, b = repo.branch("a").create(main), repo.branch("b").create(main)
    wa = checkout(a, ROOT, tmp_path / "a")
    write_deltalake(str(wa), _table(1, 10), mode="append")
    push(a, ROOT, wa, "a: append")
    wb = checkout(b, ROOT, tmp_path / "b")
    for i in range(20, 26):
        write_deltalake(str(wb), _table(1, i), mode="append")
    push(b, ROOT, wb, "b: six appends")
    assert (wb / "_delta_log" / "00000000000000000005.checkpoint.parquet").exists()

    b.merge_into(a)
    merged = checkout(a, ROOT, tmp_path / "merged")
    names = sorted(p.name for p in (merged / "_delta_log").iterdir())
    assert [n for n in names if "checkpoint." in n] == ["00000000000000000007.checkpoint.parquet"]
    assert json.loads((merged / "_delta_log" / "_last_checkpoint").read_text())["version"] == 7
    for name in names:  # the checkpoint alone holds the table's state
        if name.endswith(".json"):
            (merged / "_delta_log" / name).unlink()
    assert [r["id"] for r in rows(merged)] == [1, 2, 3, 10, *range(20, 26)]


def _kept_ids(directory: Path) -> list[int]:
    """The table's ids as ``deltalake``'s query engine reads them (deletion vectors applied)."""
    from deltalake import QueryBuilder

    found = QueryBuilder().register("t", DeltaTable(str(directory))).execute("select id from t").read_all()
    return sorted(pa.table(found).column("id").to_pylist())


def test_deletion_vectors_replay_and_conflict_as_delta_would(client: lakectl.Client, tmp_path: Path) -> None:
    repo = lakectl.Repository(unique("dmdv"), client=client).create()
    main = repo.branch("main")
    write_deltalake(str(tmp_path / "main"), _table(6), configuration={"delta.enableDeletionVectors": "true"})
    push(main, ROOT, tmp_path / "main", "orders")
    a, b = repo.branch("a").create(main), repo.branch("b").create(main)
    wb = checkout(b, ROOT, tmp_path / "b")
    delete_with_vector(wb, [1])  # id 2
    push(b, ROOT, wb, "b: delete 2 with a deletion vector")
    wa = checkout(a, ROOT, tmp_path / "a")
    write_deltalake(str(wa), _table(1, 10), mode="append")
    push(a, ROOT, wa, "a: append 10")
    b.merge_into(a)
    assert _kept_ids(checkout(a, ROOT, tmp_path / "merged")) == [1, 3, 4, 5, 6, 10]

    # both delete rows of the same file with deletion vectors: Delta's delete-delete conflict
    c = repo.branch("c").create(main)
    wc = checkout(c, ROOT, tmp_path / "c")
    delete_with_vector(wc, [4])  # id 5
    head = push(c, ROOT, wc, "c: delete 5 with a deletion vector").get_commit().id
    with pytest.raises(ConflictException) as raised:
        b.merge_into(c)
    assert [f["type"] for f in raised.value.__cause__.details["delta"][ROOT]] == ["removed-on-both"]  # type: ignore[union-attr]
    assert c.get_commit().id == head
