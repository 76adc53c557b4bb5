"""Upkeep of the embedded lake (SQLite) after concurrent writers and committers: their lost
compare-and-swap retries leave commit records no branch names, which retention lets go. After
each ``lakectl gc run`` (a process of its own), ``lakectl fsck`` passes: exit 0, the expired
commits counted, nothing missing, no orphan; and every acknowledged write reads back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import listing, opening, porcelain, writes
from tests.integration.test_concurrency import (
    REPO,
    SPAWN_GRACE_S,
    _acked,
    _checksum,
    _committer,
    _content,
    _run,
    _writer,
)
from tests.integration.test_two_servers import _lakectl_json

RUN_S = 3.0


def _cli(home: Path, *args: str) -> Any:
    """``lakectl <args> --json`` on the embedded lake at ``home``."""
    return _lakectl_json(*args, LAKECTL_HOME=str(home), LAKECTL_CONFIG=str(home.parent / "no-config.yaml"))


def _busy(home: Path, out: Path, rounds: int) -> list[str]:
    """Two writers and two committers on ``main`` for :data:`RUN_S`, then a last commit that
    deletes a few of the paths they wrote (their data is then only in expired commits): those."""
    start_at = time.time() + SPAWN_GRACE_S
    end_at = start_at + RUN_S
    args = (str(home), str(out))
    workers = [(_writer, f"w{i}-{rounds}", (*args, i + 10 * rounds, start_at, end_at)) for i in range(2)]
    workers += [(_committer, f"c{i}-{rounds}", (*args, i, start_at, end_at)) for i in range(2)]
    _run(out, workers)
    lake = opening.open_lake(str(home))
    try:
        doomed = sorted(_acked(out))[rounds::50]
        writes.delete_objects(lake, REPO, "main", doomed)
        porcelain.commit(lake, REPO, "main", "last")
    finally:
        lake.close()
    return doomed


def gc_then_fsck(cli: Callable[..., Any], expired: int) -> None:
    """``gc run --grace-hours 0`` through ``cli``: at least ``expired`` commits expired and a
    block deleted; then ``fsck`` passes with the same count of expired commits and no orphan."""
    time.sleep(1.1)  # commit dates have whole seconds: a commit of this second is not older than now
    collected = cli("gc", "run", f"lakefs://{REPO}", "--grace-hours", "0")
    assert collected["expired_commits"] >= expired and collected["deleted"] >= 1, collected
    checked = cli("fsck")
    assert checked["ok"] is True and checked["missing"] == [] and checked["corrupt"] == []
    assert checked["expired_commits"] == collected["expired_commits"]
    assert checked["orphaned"]["count"] == 0, checked["orphaned"]


@pytest.mark.slow
def test_fsck_passes_after_every_gc_of_a_lake_with_concurrent_committers(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    out = tmp_path / "out"
    out.mkdir()
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, REPO)
    lake.close()
    rules = tmp_path / "rules.json"
    rules.write_text('{"default_retention_days": 0, "branches": []}')
    _cli(home, "gc", "set-config", f"lakefs://{REPO}", "-f", str(rules))
    deleted: set[str] = set()
    for rounds in range(2):
        deleted.update(_busy(home, out, rounds))
        gc_then_fsck(lambda *args: _cli(home, *args), expired=1)

    acked = [p for p in _acked(out) if p not in deleted]
    assert len(acked) > 20 and deleted
    lake = opening.open_lake(str(home))
    try:
        listed = {o.path: o.entry.checksum for o in listing.list_objects(lake, REPO, "main") if o.entry}
        assert {p: listed.get(p) for p in acked} == {p: _checksum(_content(p)) for p in acked}
        for path in acked[:20]:
            assert b"".join(porcelain.read(lake, REPO, "main", path)) == _content(path)
    finally:
        lake.close()
