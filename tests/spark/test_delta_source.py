"""Reading a Delta table on Spark without Delta's jars: ``format delta`` reads the table's active
files at the ref (its log read through ``deltalake`` on the driver), ``versionAsOf`` an older
version in the same ref. Embedded and against a server."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.server.conftest import unique
from tests.spark.test_source import Lake, lake, read

__all__ = ["lake"]


def _upload(lake: Lake, repo: str, directory: Path, root: str) -> None:
    for file in sorted(directory.rglob("*")):
        if file.is_file():
            lake.backend.upload(
                repo, "main", root + file.relative_to(directory).as_posix(), file.read_bytes()
            )


def test_a_delta_table_reads_its_active_files_and_older_versions(spark: Any, lake: Lake) -> None:
    repo = unique("sdelta")
    lake.backend.create_repo(repo)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        first = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "day": ["a", "a", "b", "b"]})
        write_deltalake(str(work), first, partition_by=["day"])
        DeltaTable(str(work)).delete("id = 2")
        more = pa.table({"id": pa.array([5], pa.int64()), "day": ["c"], "note": ["new"]})
        write_deltalake(str(work), more, mode="append", schema_mode="merge")
        _upload(lake, repo, work, "tables/t/")
    lake.backend.commit(repo, "main", "a Delta table")
    lake.register(spark)

    df = read(spark, f"lakefs://{repo}/main/tables/t", format="delta")
    assert sorted((r.id, r.day, r.note) for r in df.collect()) == [
        (1, "a", None),
        (3, "b", None),
        (4, "b", None),
        (5, "c", "new"),
    ]
    assert [f.name for f in df.schema.fields] == ["id", "day", "note"]
    old = read(spark, f"lakefs://{repo}/main/tables/t", format="delta", versionAsOf="0")
    assert sorted(r.id for r in old.collect()) == [1, 2, 3, 4]
    with pytest.raises(Exception, match="versionAsOf"):
        read(spark, f"lakefs://{repo}/main/tables/t", format="delta", versionAsOf="last").collect()


def test_a_delta_diff_and_rows_merge_run_on_spark_as_in_process(spark: Any, tmp_path: Path) -> None:
    """``--spark``: the row diff of a Delta table and its merge by rows, as a Spark job on the
    session's local[2], give the in-process answer."""
    from lakectl.client.local import LocalBackend
    from tests.delta.work import checkout_backend, push_backend

    backend = LocalBackend(str(tmp_path / "lake"))
    try:
        backend.create_repo("rep")
        work = tmp_path / "main"
        write_deltalake(str(work), pa.table({"id": pa.array(range(1, 101), pa.int64()), "v": ["x"] * 100}))
        push_backend(backend, "rep", "main", "t/", work, "t")
        backend.create_branch("rep", "dev", "main")
        wd = checkout_backend(backend, "rep", "dev", "t/", tmp_path / "dev")
        DeltaTable(str(wd)).update(updates={"v": "'dev'"}, predicate="id < 5")
        push_backend(backend, "rep", "dev", "t/", wd, "dev: 4 rows")
        wm = checkout_backend(backend, "rep", "main", "t/", tmp_path / "m")
        DeltaTable(str(wm)).update(updates={"v": "'main'"}, predicate="id > 95")
        push_backend(backend, "rep", "main", "t/", wm, "main: 5 rows")

        args = ("rep", "main", "dev", "t/", ["id"], 100, "")
        assert backend.diff_table(*args, "local[2]") == backend.diff_table(*args, None)
        backend.merge("rep", "dev", "main", ["t/**=rows:key=id"], spark_master="local[2]")
        merged = checkout_backend(backend, "rep", "main", "t/", tmp_path / "merged")
        got = {r["id"]: r["v"] for r in DeltaTable(str(merged)).to_pyarrow_table().to_pylist()}
        assert [i for i, v in sorted(got.items()) if v != "x"] == [1, 2, 3, 4, 96, 97, 98, 99, 100]
    finally:
        backend.close()


def test_deletion_vectors_are_refused_where_they_would_not_be_applied(spark: Any, lake: Lake) -> None:
    """The lakefs source and the Spark diff read data files whole: a table with deletion
    vectors is refused there (its in-process diff applies them)."""
    from tests.delta.work import delete_with_vector

    repo = unique("sdv")
    lake.backend.create_repo(repo)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        table = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
        write_deltalake(str(work), table, configuration={"delta.enableDeletionVectors": "true"})
        delete_with_vector(work, [0])
        _upload(lake, repo, work, "tables/t/")
    lake.backend.commit(repo, "main", "a table with a deletion vector")
    lake.register(spark)
    with pytest.raises(Exception, match="deletion vectors"):
        read(spark, f"lakefs://{repo}/main/tables/t", format="delta").collect()
