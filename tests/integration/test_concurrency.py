"""No lost writes on the real SQLite lake: writer, committer, reader and merger processes at once.

The guarantee under test (ARCHITECTURE.md, "Staging and concurrency"): every acknowledged write
ends up in exactly one commit or is still staged, under any interleaving of writers and
committers; and readers never see an acknowledged path disappear from the branch.

Workers are spawned processes that each open the lake themselves. They record what they did in
files (one line per acknowledged path, flushed at once), so the parent can check the lake against
them even if a worker is killed by the hard timeout.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes, listing, merging, opening, porcelain, writes
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.errors import NothingToCommit, PredicateFailed, TooManyRetries

REPO = "conc"
SPAWN_GRACE_S = 2.0
"""Time given to every spawned worker to import and open the lake before the run starts."""
HARD_TIMEOUT_S = 40.0
"""Beyond the run's end: workers still alive then are killed and the test fails."""
OVERTIME_S = 20.0
"""How long past the run's end a worker goes on, on a loaded machine, for its least work."""
LEAST_WRITES = 30
LEAST_COMMITS = 3


# -- worker plumbing ------------------------------------------------------------------------


def _content(path: str) -> bytes:
    return f"content of {path}".encode()


def _acked(out: Path, pattern: str = "ack-*.txt") -> list[str]:
    """Complete lines of every ack file (a line cut by a kill has no newline and is ignored)."""
    paths: list[str] = []
    for f in sorted(out.glob(pattern)):
        text = f.read_text()
        lines = text.split("\n")
        paths.extend(line for line in lines[:-1] if line)
    return paths


def _run_worker(fn: Callable[..., dict[str, Any]], out: str, name: str, *args: Any) -> None:
    """Run ``fn`` in the worker; write its summary, or the traceback of what it raised."""
    try:
        summary = fn(*args)
    except BaseException:
        Path(out, f"error-{name}.txt").write_text(traceback.format_exc())
        raise
    Path(out, f"summary-{name}.json").write_text(json.dumps(summary))


def _going(end_at: float, done: int, least: int) -> bool:
    """Until ``end_at``; past it, up to :data:`OVERTIME_S` more while fewer than ``least`` are
    done: on a loaded machine a run lasts as long as its work, not as its clock says."""
    now = time.time()
    return now < end_at or (done < least and now < end_at + OVERTIME_S)


def _wait(start_at: float) -> None:
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def _writer(home: str, out: str, idx: int, start_at: float, end_at: float) -> dict[str, Any]:
    lake = opening.open_lake(home)
    starved = 0
    n = 0
    _wait(start_at)
    with open(Path(out, f"ack-w{idx}.txt"), "a") as ack:
        while _going(end_at, n - starved, LEAST_WRITES):
            path = f"w{idx}/{n:06d}"
            n += 1
            try:
                writes.upload(lake, REPO, "main", path, _content(path))
            except TooManyRetries:
                starved += 1  # not acknowledged: the writer may not count on it
                continue
            ack.write(path + "\n")
            ack.flush()
    return {"attempts": n, "starved": starved}


def _committer(home: str, out: str, idx: int, start_at: float, end_at: float) -> dict[str, Any]:
    lake = opening.open_lake(home)
    counts: Counter[str] = Counter()
    _wait(start_at)
    while _going(end_at, counts["commits"], LEAST_COMMITS):
        try:
            porcelain.commit(lake, REPO, "main", f"committer {idx}", committer=f"c{idx}")
            counts["commits"] += 1
        except NothingToCommit:
            counts["nothing"] += 1
            time.sleep(0.01)
        except TooManyRetries:
            counts["starved"] += 1
    return dict(counts)


def _reader(home: str, out: str, idx: int, start_at: float, end_at: float) -> dict[str, Any]:
    """Check repeatedly that every path acknowledged so far is on the branch: by listing
    (the branch view) and by stat. Paths are read from the ack files *before* looking."""
    lake = opening.open_lake(home)
    rng = random.Random(idx)
    counts: Counter[str] = Counter()
    missing_listed: list[str] = []
    missing_stat: list[str] = []
    _wait(start_at)
    while time.time() < end_at:
        acked = _acked(Path(out))
        try:
            listed = {o.path for o in listing.list_objects(lake, REPO, "main", prefix="w")}
        except TooManyRetries:
            counts["list_starved"] += 1
            continue
        counts["listings"] += 1
        lost = [p for p in acked if p not in listed]
        counts["list_violations"] += bool(lost)
        missing_listed.extend(lost[:5])
        for path in rng.sample(acked, min(10, len(acked))):
            try:
                porcelain.stat(lake, REPO, "main", path)
                counts["stats"] += 1
            except TooManyRetries:
                counts["stat_starved"] += 1
            except Exception as e:  # ObjectNotFound: an acknowledged path disappeared
                counts["stat_violations"] += 1
                missing_stat.append(f"{path}: {type(e).__name__}")
    return {**counts, "missing_listed": missing_listed[:20], "missing_stat": missing_stat[:20]}


def _run(out: Path, workers: list[tuple[Callable[..., dict[str, Any]], str, tuple[Any, ...]]]) -> None:
    """Start every worker (spawned), wait for them within the hard timeout, and fail on any
    worker that errored, hung, or died."""
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_run_worker, args=(fn, str(out), name, *args), name=name)
        for fn, name, args in workers
    ]
    for p in procs:
        p.start()
    deadline = time.time() + HARD_TIMEOUT_S + SPAWN_GRACE_S + 10
    hung = []
    for p in procs:
        p.join(max(0.1, deadline - time.time()))
        if p.is_alive():
            hung.append(p.name)
            p.kill()
            p.join(5)
    errors = {f.name: f.read_text() for f in out.glob("error-*.txt")}
    assert not errors, errors
    assert not hung, f"workers still running after the hard timeout: {hung}"
    assert all(p.exitcode == 0 for p in procs), {p.name: p.exitcode for p in procs}


def _summary(out: Path, name: str) -> dict[str, Any]:
    return json.loads(Path(out, f"summary-{name}.json").read_text())  # type: ignore[no-any-return]


def _checksum(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


# -- no lost writes -------------------------------------------------------------------------

WRITERS = 3
COMMITTERS = 2
RUN_S = 6.0


@pytest.mark.slow
def test_no_acknowledged_write_is_lost_under_concurrent_commits(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    out = tmp_path / "out"
    out.mkdir()
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, REPO)
    start_at = time.time() + SPAWN_GRACE_S
    end_at = start_at + RUN_S
    args = (str(home), str(out))
    workers = [(_writer, f"w{i}", (*args, i, start_at, end_at)) for i in range(WRITERS)]
    workers += [(_committer, f"c{i}", (*args, i, start_at, end_at)) for i in range(COMMITTERS)]
    workers += [(_reader, "r0", (*args, 0, start_at, end_at))]
    _run(out, workers)

    acked = _acked(out)
    assert len(acked) == len(set(acked))
    writers = [_summary(out, f"w{i}") for i in range(WRITERS)]
    committers = [_summary(out, f"c{i}") for i in range(COMMITTERS)]
    reader = _summary(out, "r0")
    assert len(acked) > 50, writers  # the writers made progress
    assert sum(c.get("commits", 0) for c in committers) >= 5, committers

    # Every acknowledged path is in exactly one commit's change set, or still staged.
    in_commits: Counter[str] = Counter()
    log = list(changes.log(lake, REPO, "main"))
    for c in log:
        if c.parents:
            for change in changes.diff_refs(lake, REPO, c.parents[0], c.id, two_way=True):
                in_commits[change.path] += 1
    assert all(len(c.parents) <= 1 for c in log)
    staged = Counter(c.path for c in changes.diff_uncommitted(lake, REPO, "main"))
    wrong = {p: (in_commits[p], staged[p]) for p in acked if in_commits[p] + staged[p] != 1}
    assert not wrong, f"{len(wrong)} acknowledged paths not in exactly one place: {list(wrong.items())[:10]}"
    assert all(n == 1 for n in in_commits.values())  # no path committed twice

    # The branch view holds every acknowledged path with its content.
    listed = {
        o.path: o.entry.checksum  # type: ignore[union-attr]
        for o in listing.list_objects(lake, REPO, "main", prefix="w")
    }
    assert {p: listed.get(p) for p in acked} == {p: _checksum(_content(p)) for p in acked}
    for path in random.Random(0).sample(acked, 20):
        assert b"".join(porcelain.read(lake, REPO, "main", path)) == _content(path)

    # A last commit moves everything staged into the history.
    if staged:
        porcelain.commit(lake, REPO, "main", "final")
    assert changes.diff_uncommitted(lake, REPO, "main") == []
    committed = {o.path for o in listing.list_objects(lake, REPO, "main@", prefix="w")}
    assert set(acked) <= committed

    # The reader never saw an acknowledged path vanish when looking it up.
    assert reader.get("stats", 0) > 0, reader
    assert reader.get("stat_violations", 0) == 0, reader
    assert reader.get("listings", 0) > 0, reader
    assert reader.get("list_violations", 0) == 0, reader


# -- a deterministic interleaving of a reader and a commit ------------------------------------


class CommitOnFirstStagingRead(MemoryStore):
    """A memory KV store that runs ``hook`` (once) just before the first read of a staging
    partition: a commit lands between a reader's look at the branch and its read of the tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None

    def _fire(self, partition: str) -> None:
        if self.hook is not None and partition.startswith("staging/"):
            hook, self.hook = self.hook, None
            hook()

    def get(self, partition: str, key: str) -> bytes:
        self._fire(partition)
        return super().get(partition, key)

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Any:
        self._fire(partition)
        return super().scan(partition, start, limit)


@pytest.fixture
def hooked(tmp_path: Path) -> tuple[Lake, CommitOnFirstStagingRead]:
    kv = CommitOnFirstStagingRead()
    lake = Lake(kv=kv, blocks=LocalAdapter(tmp_path / "blocks"))
    porcelain.create_repo(lake, REPO)
    writes.upload(lake, REPO, "main", "a", b"a")
    porcelain.commit(lake, REPO, "main", "a")
    writes.upload(lake, REPO, "main", "b", b"b")  # acknowledged, staged
    return lake, kv


def _commit_main(lake: Lake) -> Callable[[], None]:
    def hook() -> None:
        porcelain.commit(lake, REPO, "main", "concurrent")

    return hook


def test_stat_retries_when_a_commit_moves_staged_rows(
    hooked: tuple[Lake, CommitOnFirstStagingRead],
) -> None:
    lake, kv = hooked
    kv.hook = _commit_main(lake)
    assert porcelain.stat(lake, REPO, "main", "b").entry is not None
    assert kv.hook is None  # the commit did land during the read


def test_diff_uncommitted_retries_when_a_commit_moves_staged_rows(
    hooked: tuple[Lake, CommitOnFirstStagingRead],
) -> None:
    lake, kv = hooked
    kv.hook = _commit_main(lake)
    assert changes.diff_uncommitted(lake, REPO, "main") == []
    assert kv.hook is None


@pytest.mark.parametrize("delimiter", ["", "/"])
def test_listing_retries_when_a_commit_moves_staged_rows(
    hooked: tuple[Lake, CommitOnFirstStagingRead], delimiter: str
) -> None:
    lake, kv = hooked
    kv.hook = _commit_main(lake)
    listed = [o.path for o in listing.list_objects(lake, REPO, "main", delimiter=delimiter)]
    assert kv.hook is None
    assert listed == ["a", "b"]


# -- concurrent branch creation and merges ---------------------------------------------------

MERGERS = 3
MERGE_RUN_S = 4.0


def _merger(home: str, out: str, idx: int, start_at: float, end_at: float) -> dict[str, Any]:
    """Loop: branch from main, add two files, commit, merge into main (retrying lost races)."""
    lake = opening.open_lake(home)
    counts: Counter[str] = Counter()
    _wait(start_at)
    k = 0
    with open(Path(out, f"merged-m{idx}.txt"), "a") as done:
        while _going(end_at, counts["merged"], 1):
            branch = f"m{idx}-{k}"
            k += 1
            porcelain.create_branch(lake, REPO, branch, "main")
            paths = [f"{branch}/one", f"{branch}/two"]
            for path in paths:
                writes.upload(lake, REPO, branch, path, _content(path))
            porcelain.commit(lake, REPO, branch, f"work on {branch}", committer=branch)
            for _ in range(100):
                try:
                    result = merging.merge(lake, REPO, branch, "main", committer=branch)
                except (PredicateFailed, TooManyRetries):
                    counts["lost_race"] += 1
                    time.sleep(random.uniform(0, 0.02))
                    continue
                assert result.changed
                done.write(json.dumps({"commit": result.commit.id, "paths": paths}) + "\n")
                done.flush()
                counts["merged"] += 1
                break
            else:
                counts["gave_up"] += 1
            if k % 2:
                porcelain.delete_branch(lake, REPO, branch)
    return dict(counts)


@pytest.mark.slow
def test_concurrent_branches_and_merges_lose_nothing(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    out = tmp_path / "out"
    out.mkdir()
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, REPO)
    writes.upload(lake, REPO, "main", "base", b"base")
    porcelain.commit(lake, REPO, "main", "base")
    start_at = time.time() + SPAWN_GRACE_S
    end_at = start_at + MERGE_RUN_S
    args = (str(home), str(out))
    _run(out, [(_merger, f"m{i}", (*args, i, start_at, end_at)) for i in range(MERGERS)])

    summaries = [_summary(out, f"m{i}") for i in range(MERGERS)]
    merged = [json.loads(line) for line in _acked(out, "merged-*.txt")]
    assert len(merged) >= MERGERS, summaries
    main = porcelain.get_commit(lake, REPO, "main")
    history = {c.id: c for c in changes.log(lake, REPO, "main")}
    # Every acknowledged merge is in main's first-parent history: none was overwritten.
    first_parent = [c.id for c in changes.log(lake, REPO, "main", first_parent=True)]
    assert {m["commit"] for m in merged} <= set(first_parent)
    merges = [c for c in history.values() if len(c.parents) == 2]
    assert len(merges) == len(merged)
    for c in history.values():
        parents = [history[p] for p in c.parents]
        assert c.generation == max((p.generation for p in parents), default=0) + 1
    view = {
        o.path: o.entry.checksum  # type: ignore[union-attr]
        for o in listing.list_objects(lake, REPO, "main")
    }
    expected = {p: _checksum(_content(p)) for m in merged for p in m["paths"]}
    assert {p: view.get(p) for p in expected} == expected
    assert "base" in view and main.generation == max(c.generation for c in history.values())
