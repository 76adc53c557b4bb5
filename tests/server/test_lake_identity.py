"""A server never starts a new lake over the blocks of a lost metadata database unless set up
to (lakectl.core.identity), and its collector holds back as the embedded one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakectl.client.remote import RemoteBackend
from lakectl.core import opening, porcelain, writes
from lakectl.errors import PreconditionFailed, StorageError
from server.app import open_lake
from server.config import load_settings
from tests.pg import PostgresServer
from tests.server.conftest import serve

LAKECTL = Path(sys.executable).with_name("lakectl")


def _lost_lake(data_dir: Path) -> list[str]:
    """A server data directory whose blocks outlived its ``lake.db``; the blocks."""
    lake = opening.open_lake(str(data_dir))
    porcelain.create_repo(lake, "old")
    writes.upload(lake, "old", "main", "a.csv", b"id\n1\n")
    lake.close()  # which seals the lake's journal: its batch is one of the blocks left
    _forget(data_dir)
    return sorted(_all_blocks(data_dir))


def _forget(data_dir: Path) -> None:
    for f in data_dir.glob("lake.db*"):
        f.unlink()


def _lakectl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAKECTL), *args], capture_output=True, text=True, env=_env(data_dir), timeout=60
    )


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    return {**env, "LAKECTL_SERVER_DATA_DIR": str(data_dir), "LAKECTL_SERVER_LISTEN_ADDRESS": "127.0.0.1:1"}


def test_the_server_refuses_a_lost_database_over_its_blocks(tmp_path: Path) -> None:
    """The rule holds for every metadata database a server opens: SQLite here, and the memory
    store, which is always empty."""
    stored = _lost_lake(tmp_path)
    settings = load_settings(None, str(tmp_path), environ={})
    with pytest.raises(StorageError, match=r"lake\.db is missing") as refused:
        open_lake(settings)
    assert refused.value.http_status == 503 and not (tmp_path / "lake.db").exists()
    memory = load_settings(None, str(tmp_path), environ={"LAKECTL_SERVER_DATABASE_TYPE": "memory"})
    with pytest.raises(StorageError, match="memory:// holds no lake"):
        open_lake(memory)
    assert sorted(_all_blocks(tmp_path)) == stored  # nothing touched the blocks
    out = _lakectl(tmp_path, "server", "run")
    assert out.returncode == 9, out.stderr
    assert out.stderr.count("\n") == 1 and str(tmp_path / "lake.db") in out.stderr
    assert not (tmp_path / "lake.db").exists()


def test_a_new_postgresql_database_over_stored_blocks_is_refused(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    stored = _lost_lake(tmp_path)
    url = postgres_server.create_database()
    env = {"LAKECTL_SERVER_DATABASE_TYPE": "postgres", "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": url}
    settings = load_settings(None, str(tmp_path), environ=env)
    try:
        with pytest.raises(StorageError, match="holds no lake") as refused:
            open_lake(settings)
        assert refused.value.details["database"] == url
        created = open_lake(settings, create=True)
        assert created.identity is not None and created.identity.created_over_blocks == len(stored)
        created.close()
    finally:
        postgres_server.drop_database(url)


def test_setup_creates_the_lake_over_blocks_and_gc_waits_to_be_told(tmp_path: Path) -> None:
    stored = _lost_lake(tmp_path)
    out = _lakectl(tmp_path, "server", "setup")
    assert out.returncode == 0, out.stderr
    assert f"created a new metadata database over {len(stored)} blocks" in out.stderr
    assert "--allow-preexisting-blocks" in out.stderr
    _forget(tmp_path)
    out = _lakectl(tmp_path, "server", "setup", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["created_over_blocks"] == len(stored), out.stderr
    _forget(tmp_path)  # once more, to be set up through the API below
    created = open_lake(load_settings(None, str(tmp_path), environ={}), create=True)
    created.close()
    with serve(load_settings(None, str(tmp_path), environ={})) as live:
        backend = RemoteBackend(live.url.removesuffix("/api/v1"), live.key_id, live.secret)
        try:
            backend.create_repo("fresh")
            with pytest.raises(PreconditionFailed, match="allow_preexisting_blocks"):
                backend.gc_run("fresh", False, 0)
            assert backend.gc_run("fresh", True, 0)["deleted"] > 0
            assert set(stored) <= set(_all_blocks(tmp_path))
            assert backend.gc_run("fresh", False, 0, allow_preexisting_blocks=True)["deleted"] > 0
            backend.gc_run("fresh", False, 0)  # lifted for good
        finally:
            backend.close()


def _all_blocks(data_dir: Path) -> list[str]:
    from lakectl.core.blocks.local import LocalAdapter

    return list(LocalAdapter(data_dir / "blocks").list())
