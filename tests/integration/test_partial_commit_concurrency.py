"""A job commits its own table (`commit --prefix`) again and again while other processes keep
staging elsewhere on the same branch: nothing they staged is lost or committed by the job, and a
lake rebuilt from its journal afterwards is the same lake."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from lakectl.core import changes, listing, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.errors import LakectlError
from tests.property.test_journal_rebuild import state

REPO = "partial"
RUN_S = 3.0
MAX_WRITES = 5_000


def _writer(home: str, out: str, name: str, stop: str) -> None:
    lake = opening.open_lake(home)
    with open(Path(out, f"ack-{name}.txt"), "a", buffering=1) as ack:
        for n in range(MAX_WRITES):
            if os.path.exists(stop):
                break
            path = f"{name}/{n:05d}.csv"
            try:
                writes.upload(lake, REPO, "main", path, path.encode())
            except LakectlError:
                continue
            ack.write(path + "\n")
    lake.close()


def _acked(out: Path) -> list[str]:
    """The writers' acknowledged paths (a line not yet ended is not one)."""
    return [line for f in sorted(out.glob("ack-*.txt")) for line in f.read_text().split("\n")[:-1]]


@pytest.mark.slow
def test_writers_staging_elsewhere_lose_nothing_to_a_partial_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "job")
    home, out, stop = str(tmp_path / "lake"), tmp_path / "acks", str(tmp_path / "stop")
    out.mkdir()
    lake = opening.open_lake(home)
    journal.enable(lake)
    p.create_repo(lake, REPO)
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(home, str(out), f"w{i}", stop)) for i in range(2)]
    for proc in writers:
        proc.start()
    commits, n = 0, 0
    began = time.monotonic()
    try:
        while time.monotonic() < began + RUN_S or commits < 5 or len(_acked(out)) <= 20:
            for _ in range(3):
                writes.upload(lake, REPO, "main", f"job/{n:05d}.csv", b"job\n")
                n += 1
            p.commit(lake, REPO, "main", f"job {commits}", prefixes=["job/"])
            commits += 1
            assert time.monotonic() < began + 120, "the job or the writers made no progress"
    finally:
        Path(stop).touch()
        for proc in writers:
            proc.join(timeout=60)
            if proc.exitcode is None:
                proc.kill()
    assert all(proc.exitcode == 0 for proc in writers)

    acked = _acked(out)
    assert len(acked) > 20
    head = p.get_branch(lake, REPO, "main").commit_id
    in_head = {o.path for o in listing.list_objects(lake, REPO, head)}
    # The job's commits hold every job file and nothing the writers staged.
    assert in_head == {f"job/{k:05d}.csv" for k in range(n)}
    # Everything the writers staged is still staged, byte for byte.
    still = {c.path for c in changes.diff_uncommitted(lake, REPO, "main")}
    assert set(acked) <= still
    for path in acked:
        assert b"".join(p.read(lake, REPO, "main", path)) == path.encode()

    expected = state(lake)
    lake.close()  # seals what the job finished; each writer sealed as it closed
    os.remove(os.path.join(home, "lake.db"))
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    blocks = LocalAdapter(os.path.join(home, "blocks"))
    rebuild.rebuild(blocks, fresh)
    assert state(Lake(kv=fresh, blocks=blocks)) == expected
    fresh.close()
