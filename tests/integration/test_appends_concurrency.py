"""Concurrent appends to one object from several processes (issue 30): on the SQLite lake, and on
a lake whose metadata is in PostgreSQL (as two servers sharing one database would be), with a
committer process committing meanwhile. Every chunk lands exactly once, whole; nothing is lost."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.postgres import PostgresStore
from lakectl.core.lake import Lake
from lakectl.errors import NothingToCommit
from tests.unit.test_appends import check_chunks, chunk

REPO = "appendp"
APPENDERS = 2
EACH = 30
HARD_TIMEOUT_S = 120.0
"""A worker still running then is killed, and the test fails."""


def _open(home: str, pg_url: str) -> Lake:
    if pg_url:
        return Lake(kv=PostgresStore(pg_url), blocks=LocalAdapter(home))
    return opening.open_lake(home)


def _appender(home: str, pg_url: str, writer: int) -> None:
    lake = _open(home, pg_url)
    try:
        for n in range(EACH):
            writes.append(lake, REPO, "main", "shared", chunk(writer, n))
    finally:
        lake.close()


def _committer(home: str, pg_url: str, stop: Any, stop_at: float) -> None:
    lake = _open(home, pg_url)
    try:
        n = 0
        while not stop.is_set() and time.time() < stop_at and n < 10_000:
            try:
                p.commit(lake, REPO, "main", f"c{n}")
                n += 1
            except NothingToCommit:
                time.sleep(0.005)
    finally:
        lake.close()


def _run(home: str, pg_url: str) -> bytes:
    lake = _open(home, pg_url)
    p.create_repo(lake, REPO)
    ctx = multiprocessing.get_context("spawn")
    appenders = [ctx.Process(target=_appender, args=(home, pg_url, w)) for w in range(APPENDERS)]
    stop = ctx.Event()
    committer = ctx.Process(target=_committer, args=(home, pg_url, stop, time.time() + HARD_TIMEOUT_S))
    for proc in [*appenders, committer]:
        proc.start()
    deadline = time.monotonic() + HARD_TIMEOUT_S
    for proc in appenders:
        proc.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    committer.join(max(0.0, deadline - time.monotonic()))
    alive = [proc for proc in [*appenders, committer] if proc.is_alive()]
    for proc in alive:
        proc.kill()
    assert not alive, "a worker did not end in time"
    assert all(proc.exitcode == 0 for proc in appenders), [proc.exitcode for proc in appenders]
    try:
        return b"".join(p.read(lake, REPO, "main", "shared"))
    finally:
        lake.close()


def _expected() -> Counter[bytes]:
    return Counter(chunk(w, n) for w in range(APPENDERS) for n in range(EACH))


@pytest.mark.slow
def test_appender_processes_on_sqlite_lose_nothing(tmp_path: Path) -> None:
    check_chunks(_run(str(tmp_path / "lake"), ""), _expected())


@pytest.mark.slow
def test_appender_processes_on_postgres_lose_nothing(pg_url: str, tmp_path: Path) -> None:
    check_chunks(_run(str(tmp_path / "blocks"), pg_url), _expected())
