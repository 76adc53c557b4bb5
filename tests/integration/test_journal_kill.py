"""The journal under killed processes: writers, a committer, a merger and a sealer run on one
embedded lake while the test SIGKILLs them at random points and starts them again. Afterwards:
every acknowledged mutation is in the sealed journal, and every sealed entry describes a
mutation that happened (docs/decisions/0009-journal.md); logical timestamps are 1..N.

Workers acknowledge a mutation by a line in their own file, written and flushed once the verb
returned; a line cut by the kill has no newline and does not count.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import journal
from lakectl.core import porcelain as p
from lakectl.errors import LakectlError

REPO = "killed"
RUN_S = 8.0
SPAWN_GRACE_S = 1.5


def _ack(out: str, name: str) -> Any:
    return open(Path(out, f"ack-{name}.txt"), "a", buffering=1)


def _writer(home: str, out: str, name: str) -> None:
    lake = p.open_lake(home)
    ack = _ack(out, name)
    for n in range(10**9):
        path = f"{name}/{n:06d}"
        try:
            p.upload(lake, REPO, "dev", path, f"{name} {n}".encode())
        except LakectlError:
            continue
        ack.write(f"write {path}\n")


def _committer(home: str, out: str, name: str) -> None:
    lake = p.open_lake(home)
    ack = _ack(out, name)
    while True:
        try:
            made = p.commit(lake, REPO, "dev", f"by {name}")
        except LakectlError:
            time.sleep(0.01)
            continue
        ack.write(f"commit {made.id}\n")


def _merger(home: str, out: str, name: str) -> None:
    lake = p.open_lake(home)
    ack = _ack(out, name)
    while True:
        try:
            merged = p.merge(lake, REPO, "dev", "main")
        except LakectlError:
            time.sleep(0.01)
            continue
        if merged.changed:
            ack.write(f"merge {merged.commit.id}\n")
        time.sleep(0.02)


def _sealer(home: str, out: str, name: str) -> None:
    lake = p.open_lake(home)
    while True:
        with contextlib.suppress(LakectlError):
            journal.seal(lake.kv, lake.blocks)
        time.sleep(0.05)


ROLES: dict[str, Callable[[str, str, str], None]] = {
    "writer": _writer,
    "committer": _committer,
    "merger": _merger,
    "sealer": _sealer,
}


def _acked(out: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for f in sorted(out.glob("ack-*.txt")):
        lines = f.read_text().split("\n")
        for line in lines[:-1]:
            kind, _, what = line.partition(" ")
            found.append((kind, what))
    return found


def _reachable(lake: p.Lake, ref: str) -> set[str]:
    return {c.id for c in p.log(lake, REPO, ref)}


@pytest.mark.slow
def test_killed_writers_committers_mergers_and_sealers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "killer")
    home, out = str(tmp_path / "lake"), tmp_path / "acks"
    out.mkdir()
    lake = p.open_lake(home)
    journal.enable(lake)
    p.create_repo(lake, REPO)
    p.create_branch(lake, REPO, "dev", "main")
    lake.close()

    ctx = multiprocessing.get_context("spawn")
    rng = random.Random(int(os.environ.get("LAKECTL_KILL_SEED", "12")))
    born = 0

    def start(role: str) -> Any:
        nonlocal born
        born += 1
        proc = ctx.Process(target=ROLES[role], args=(home, str(out), f"{role}{born}"), daemon=True)
        proc.start()
        return proc

    workers = {("writer", 1): start("writer"), ("writer", 2): start("writer")}
    workers |= {(role, 1): start(role) for role in ("committer", "merger", "sealer")}
    time.sleep(SPAWN_GRACE_S)
    kills = 0
    end = time.monotonic() + RUN_S
    try:
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.1, 0.6))
            slot = rng.choice(sorted(workers))
            workers[slot].kill()  # SIGKILL: wherever it is, between intent, CAS and outcome
            workers[slot].join()
            kills += 1
            workers[slot] = start(slot[0])
    finally:
        for proc in workers.values():
            proc.kill()
            proc.join()

    lake = p.open_lake(home)
    while journal.seal(lake.kv, lake.blocks):
        pass
    entries = list(journal.entries(lake.kv, lake.blocks))
    acked = _acked(out)
    assert kills >= 8 and sum(1 for kind, _ in acked if kind == "write") > 50
    assert {kind for kind, _ in acked} >= {"write", "commit", "merge"}

    # Logical timestamps: 1..N, each once, in order.
    assert [e.logical_timestamp for e in entries] == list(range(1, len(entries) + 1))

    rows = [row for e in entries if e.event_type == "write-objects" for row in e.event_payload["rows"]]
    written = {path: row for path, row in rows}
    assert len(written) == len(rows)  # each write once
    commits = {e.event_payload["commit_id"] for e in entries if e.event_type == "commit"}
    merges = {e.event_payload["commit_id"] for e in entries if e.event_type == "merge"}
    # No acknowledged mutation is missing.
    for kind, what in acked:
        assert what in {"write": written, "commit": commits, "merge": merges}[kind], (kind, what)

    # No entry describes a mutation that did not happen.
    on_dev, on_main = _reachable(lake, "dev"), _reachable(lake, "main")
    assert commits <= on_dev and merges <= on_main
    for path, row in written.items():
        assert row is not None
        assert p.stat(lake, REPO, "dev", path).entry.checksum == row[1], path  # type: ignore[union-attr]
    lake.close()
