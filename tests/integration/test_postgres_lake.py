"""No lost writes on a lake whose metadata is in PostgreSQL: writer and committer processes at once.

A short run of the scenario of test_concurrency.py, with its workers: each spawned worker first
makes ``opening.open_lake(home)`` open ``Lake(kv=PostgresStore(url), blocks=LocalAdapter(home))``.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes, listing, opening, porcelain
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.postgres import PostgresStore
from lakectl.core.lake import Lake
from tests.integration.test_concurrency import (
    REPO,
    SPAWN_GRACE_S,
    _acked,
    _checksum,
    _committer,
    _content,
    _run,
    _summary,
    _writer,
)

WRITERS = 2
RUN_S = 4.0


def _postgres_lake(url: str, blocks: str) -> Lake:
    return Lake(kv=PostgresStore(url), blocks=LocalAdapter(blocks))


def _on_postgres(url: str) -> None:
    """In a worker: make the shared workers' ``open_lake(home)`` open the PostgreSQL lake."""
    opening.open_lake = lambda home=None: _postgres_lake(url, str(home))  # type: ignore[assignment]


def _pg_writer(url: str, *args: Any) -> dict[str, Any]:
    _on_postgres(url)
    return _writer(*args)


def _pg_committer(url: str, *args: Any) -> dict[str, Any]:
    _on_postgres(url)
    return _committer(*args)


@pytest.mark.slow
def test_no_acknowledged_write_is_lost_on_postgres(pg_url: str, tmp_path: Path) -> None:
    blocks = tmp_path / "blocks"
    out = tmp_path / "out"
    out.mkdir()
    lake = _postgres_lake(pg_url, str(blocks))
    try:
        porcelain.create_repo(lake, REPO)
        start_at = time.time() + SPAWN_GRACE_S
        end_at = start_at + RUN_S
        args = (str(blocks), str(out))
        workers = [(_pg_writer, f"w{i}", (pg_url, *args, i, start_at, end_at)) for i in range(WRITERS)]
        workers += [(_pg_committer, "c0", (pg_url, *args, 0, start_at, end_at))]
        _run(out, workers)

        acked = _acked(out)
        writers = [_summary(out, f"w{i}") for i in range(WRITERS)]
        committer = _summary(out, "c0")
        assert len(acked) == len(set(acked))
        assert len(acked) > 50, writers
        assert committer.get("commits", 0) >= 3, committer

        # Every acknowledged path is in exactly one commit's change set, or still staged.
        in_commits: Counter[str] = Counter()
        for c in changes.log(lake, REPO, "main"):
            if c.parents:
                for change in changes.diff_refs(lake, REPO, c.parents[0], c.id, two_way=True):
                    in_commits[change.path] += 1
        staged = Counter(c.path for c in changes.diff_uncommitted(lake, REPO, "main"))
        wrong = {p: (in_commits[p], staged[p]) for p in acked if in_commits[p] + staged[p] != 1}
        assert not wrong, (
            f"{len(wrong)} acknowledged paths not in exactly one place: {list(wrong.items())[:10]}"
        )
        assert all(n == 1 for n in in_commits.values())

        # The branch view holds every acknowledged path with its content.
        listed = {
            o.path: o.entry.checksum  # type: ignore[union-attr]
            for o in listing.list_objects(lake, REPO, "main", prefix="w")
        }
        assert {p: listed.get(p) for p in acked} == {p: _checksum(_content(p)) for p in acked}
        assert b"".join(porcelain.read(lake, REPO, "main", acked[-1])) == _content(acked[-1])
    finally:
        lake.close()
