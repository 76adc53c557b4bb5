"""Acceptance: lakefs-spec (the fsspec filesystem for lakeFS that pandas, Polars and DuckDB users
reach for) reads, writes, lists, removes and runs transactions against this server, on SQLite and
on PostgreSQL metadata."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.server.conftest import Live, unique
from tests.server.wrapped import wrapped


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest) -> Live:
    return request.getfixturevalue("live" if request.param == "sqlite" else "live_pg")


def _repo(server: Live) -> str:
    name = unique("spec")
    with server.client((server.key_id, server.secret)) as api:
        r = api.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
        assert r.status_code == 201, r.text
    return name


def _options(server: Live) -> dict[str, str]:
    return {"host": server.url.removesuffix("/api/v1"), "username": server.key_id, "password": server.secret}


def test_pandas_reads_and_writes_parquet_and_the_filesystem_lists_and_removes(server: Live) -> None:
    spec = wrapped("lakefs_spec")
    repo = _repo(server)
    fs = spec.LakeFSFileSystem(**_options(server))
    frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    frame.to_parquet(f"lakefs://{repo}/main/tables/t.parquet", storage_options=_options(server))
    back = pd.read_parquet(f"lakefs://{repo}/main/tables/t.parquet", storage_options=_options(server))
    assert back.equals(frame)
    fs.pipe(f"{repo}/main/notes/a.txt", b"hello")
    assert fs.cat(f"{repo}/main/notes/a.txt") == b"hello"
    # Directories are lakeFS common prefixes, trailing slash and all.
    assert sorted(fs.ls(f"{repo}/main/", detail=False)) == [f"{repo}/main/notes/", f"{repo}/main/tables/"]
    assert fs.info(f"{repo}/main/notes/a.txt")["size"] == 5
    fs.rm(f"{repo}/main/notes/a.txt")
    assert not fs.exists(f"{repo}/main/notes/a.txt")


def test_a_transaction_commits_on_an_ephemeral_branch_merges_it_and_deletes_it(server: Live) -> None:
    spec = wrapped("lakefs_spec")
    repo = _repo(server)
    fs = spec.LakeFSFileSystem(**_options(server))
    with fs.transaction(repo, "main") as tx:
        branch = tx.branch.id
        assert branch != "main"
        fs.pipe(f"{repo}/{branch}/data/x.csv", b"id\n1\n")
        tx.commit(message="add x")
        fs.pipe(f"{repo}/{branch}/data/y.csv", b"id\n2\n")
        tx.commit(message="add y")
        assert not fs.exists(f"{repo}/main/data/x.csv")  # not before the merge
    assert fs.cat(f"{repo}/main/data/x.csv") == b"id\n1\n"
    assert fs.cat(f"{repo}/main/data/y.csv") == b"id\n2\n"
    with server.client((server.key_id, server.secret)) as api:
        branches = [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]]
        assert branches == ["main"]  # the ephemeral branch is gone
        log = api.get(f"/repositories/{repo}/refs/main/commits").json()["results"]
    messages = [c["message"] for c in log]
    assert "add x" in messages and "add y" in messages
