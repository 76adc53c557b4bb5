"""The fsspec filesystem of lakectl:// URIs, embedded and against a server: pandas, polars and
pyarrow read and write Parquet through it; a file read by ranges fetches only those; a write
reaches the branch when the file is closed; lakefs:// URIs reach the lake only when asked."""

from __future__ import annotations

import importlib
import os
from typing import Any

import duckdb
import fsspec
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import lakectl
from lakectl.api import fs as lakectl_fs
from tests.api.spy import Recording
from tests.server.conftest import unique
from tests.server.wrapped import wrapped


def options(client: lakectl.Client) -> dict[str, Any]:
    """The storage options of the client's lake, as a user passes them: strings."""
    return client.options  # type: ignore[attr-defined, no-any-return]


def test_pandas_polars_and_pyarrow_read_and_write_parquet(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("fs"), client=client).create()
    base = f"lakectl://{repo.id}/main"
    frame = pd.DataFrame({"id": [1, 2, 3], "city": ["Oslo", "Lima", "Pune"]})
    frame.to_parquet(f"{base}/cities/part-0.parquet", storage_options=options(client))
    assert repo.branch("main").object("cities/part-0.parquet").exists()  # staged on close
    back = pd.read_parquet(f"{base}/cities/part-0.parquet", storage_options=options(client))
    pd.testing.assert_frame_equal(back, frame)

    # polars reads and writes file objects (its own URL readers and writers know only their
    # cloud stores).
    with fsspec.open(f"{base}/cities/part-1.parquet", "wb", **options(client)) as out:
        pl.DataFrame({"id": [4], "city": ["Rome"]}).write_parquet(out)
    with fsspec.open(f"{base}/cities/part-1.parquet", "rb", **options(client)) as f:
        assert pl.read_parquet(f)["city"].to_list() == ["Rome"]

    fs = lakectl_fs.LakectlFileSystem(client=client)
    extra = pa.table({"id": [5], "city": ["Kyiv"]})
    ds.write_dataset(extra, f"{repo.id}/main/more", filesystem=fs, format="parquet")
    assert ds.dataset(f"{repo.id}/main/more", filesystem=fs, format="parquet").to_table().num_rows == 1
    table = ds.dataset(f"{repo.id}/main/cities", filesystem=fs, format="parquet").to_table()
    assert table.num_rows == 4 and sorted(table.column("city").to_pylist()) == [
        "Lima",
        "Oslo",
        "Pune",
        "Rome",
    ]
    repo.branch("main").commit("cities")
    assert sorted(fs.ls(f"{repo.id}/main/cities", detail=False)) == [
        f"{repo.id}/main/cities/part-0.parquet",
        f"{repo.id}/main/cities/part-1.parquet",
    ]
    assert fs.isdir(f"{repo.id}/main/cities") and fs.isfile(f"{repo.id}/main/cities/part-0.parquet")
    assert (
        fs.info(f"{repo.id}/main/cities/part-0.parquet")["size"]
        == repo.branch("main").object("cities/part-0.parquet").stat().size_bytes
    )


def test_a_file_reads_only_the_ranges_asked_for(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("fs"), client=client).create()
    data = os.urandom(3 << 20)
    repo.branch("main").object("big.bin").upload(data)
    recording = Recording(client.backend)
    fs = lakectl_fs.LakectlFileSystem(client=lakectl.Client(backend=recording))  # type: ignore[arg-type]
    path = f"{repo.id}/main/big.bin"
    assert fs.cat_file(path, start=-10) == data[-10:]
    assert fs.cat_file(path, start=100, end=110) == data[100:110]
    with fs.open(path, "rb", block_size=64 << 10, cache_type="none") as f:
        f.seek(2 << 20)
        assert f.read(16) == data[2 << 20 : (2 << 20) + 16]
    assert recording.handed <= (64 << 10) + 20  # the ranges asked for, not 3 MiB
    with pytest.raises(FileNotFoundError):
        fs.info(f"{repo.id}/main/nope.bin")
    with pytest.raises(FileNotFoundError):
        fs.cat_file(f"{repo.id}/main/nope.bin")


def test_a_write_reaches_the_branch_when_closed_and_rm_deletes(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("fs"), client=client).create()
    fs = lakectl_fs.LakectlFileSystem(client=client)
    path = f"{repo.id}/main/out/notes.txt"
    with fs.open(path, "wb") as f:
        f.write(b"first ")
        assert not repo.branch("main").object("out/notes.txt").exists()
        f.write(b"second")
    assert fs.cat_file(path) == b"first second"
    fs.rm(f"{repo.id}/main/out", recursive=True)
    assert not fs.exists(path)


def test_the_lakefs_protocol_reaches_the_lake_only_when_registered(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("fs"), client=client).create()
    repo.branch("main").object("a.txt").upload("via lakefs://")
    registry = importlib.import_module("fsspec.registry")
    known, registered = dict(registry.known_implementations), dict(registry._registry)
    try:
        try:
            before = fsspec.get_filesystem_class("lakefs")
        except (ValueError, ImportError):
            before = None  # lakefs-spec is not installed
        assert before is not lakectl_fs.LakectlFileSystem
        lakectl_fs.register("lakefs")
        with fsspec.open(f"lakefs://{repo.id}/main/a.txt", "rb", **options(client)) as f:
            assert f.read() == b"via lakefs://"
    finally:
        registry.known_implementations.clear()
        registry.known_implementations.update(known)
        registry._registry.clear()
        registry._registry.update(registered)


def test_the_lakectl_protocol_is_registered_by_the_package() -> None:
    assert fsspec.get_filesystem_class("lakectl") is lakectl_fs.LakectlFileSystem


def test_duckdb_reads_and_writes_through_the_filesystem(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("duck"), client=client).create()
    con = duckdb.connect()
    con.register_filesystem(lakectl_fs.LakectlFileSystem(**options(client)))
    base = f"lakectl://{repo.id}/main/events"
    for day in (1, 2):
        con.sql(
            f"COPY (SELECT range AS id, {day} AS day FROM range({day * 10})) "
            f"TO '{base}/day={day}/part.parquet' (FORMAT parquet)"
        )
    assert [o.path for o in repo.branch("main").objects(prefix="events/")] == [
        "events/day=1/part.parquet",
        "events/day=2/part.parquet",
    ]
    rows = con.sql(f"SELECT day, count(*) FROM read_parquet('{base}/*/*.parquet') GROUP BY day ORDER BY day")
    assert rows.fetchall() == [(1, 10), (2, 20)]


def test_a_transaction_commits_on_its_branch_and_merges_on_exit(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("fstx"), client=client).create()
    main = repo.branch("main")
    fs = lakectl_fs.LakectlFileSystem(client=client)
    with fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"{repo.id}/{tx.branch.id}/out/a.txt", b"a")
        pd.DataFrame({"x": [1]}).to_parquet(
            f"lakectl://{repo.id}/{tx.branch.id}/out/t.parquet", **{"storage_options": options(client)}
        )
        tx.commit(message="write out/", metadata={"by": "fsspec"})
        assert not main.object("out/a.txt").exists()
    assert main.object("out/a.txt").exists() and main.object("out/t.parquet").exists()
    assert [c.message for c in main.log(max_amount=3)][1] == "write out/"
    assert [b.id for b in repo.branches()] == ["main"]

    head = main.get_commit().id
    with pytest.raises(RuntimeError), fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"{repo.id}/{tx.branch.id}/out/b.txt", b"b")
        tx.commit(message="half done")
        raise RuntimeError("the job failed")
    assert main.get_commit().id == head and not main.object("out/b.txt").exists()
    assert [b.id for b in repo.branches()] == ["main", tx.branch.id]  # kept for inspection (onsuccess)


def test_lakefs_spec_keeps_the_lakefs_protocol_beside_lakectl() -> None:
    """Both installed: fsspec reads every package's entry points again, and lakefs:// is still
    lakefs-spec's, lakectl:// lakectl's."""
    lakefs_spec = wrapped("lakefs_spec")  # puts lakeFS's wrapper directory on sys.path
    registry = importlib.import_module("fsspec.registry")
    known, registered = dict(registry.known_implementations), dict(registry._registry)
    try:
        registry._registry.clear()
        fsspec.process_entries()
        assert fsspec.get_filesystem_class("lakefs") is lakefs_spec.LakeFSFileSystem
        assert fsspec.get_filesystem_class("lakectl") is lakectl_fs.LakectlFileSystem
    finally:
        registry.known_implementations.clear()
        registry.known_implementations.update(known)
        registry._registry.clear()
        registry._registry.update(registered)
