"""The working copy's monitor: a real inotify daemon, and scans that stat only what it reports
finding exactly what a walk of the whole directory finds."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.client import workcopy
from lakectl.client.workcopy import monitor
from lakectl.client.workcopy.index import META_DIR, REF_FILE, Index, Scan, scan
from lakectl.core.blocks.data import file_checksum

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the monitor needs Linux (inotify)"
)


def build(root: Path) -> Index:
    """The index a clone leaves: every file of the walk with its stat and checksum."""
    empty = Index()
    found = scan(str(root), empty)
    entries = []
    for rel in found.added:
        st_ = os.lstat(root / rel)
        entries.append((rel, st_.st_size, st_.st_mtime_ns, st_.st_ino, file_checksum(str(root / rel))))
    index = Index.build(entries)
    index.save(str(root))
    return index


def as_sets(found: Scan) -> tuple[set[str], set[str], set[str]]:
    return set(found.added), set(found.changed), set(found.removed)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "wc"
    (root / META_DIR).mkdir(parents=True)
    (root / REF_FILE).write_text("src: lakefs://r/main/\nat_head: ''\n")
    for d in ("a", "a/deep", "b"):
        (root / d).mkdir()
        for n in range(3):
            (root / d / f"f{n}.csv").write_bytes(f"{d}/{n}\n".encode())
    yield root
    monitor.stop(str(root))


# One step of a user (or a job) on the directory; each keeps the tree inside a few names so that
# steps meet each other (a file written into a directory moved away, a directory made twice...).
DIRS = ["a", "a/deep", "b", "c", "c/d"]
NAMES = ["f0.csv", "f1.csv", "new.csv"]
step = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(DIRS), st.sampled_from(NAMES), st.binary(max_size=6)),
    st.tuples(st.just("touch"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("unlink"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(st.just("rmtree"), st.sampled_from(DIRS)),
    st.tuples(st.just("rename"), st.sampled_from(DIRS), st.sampled_from(DIRS)),
    st.tuples(st.just("move_out"), st.sampled_from(DIRS)),
    st.tuples(st.just("move_in"), st.sampled_from(DIRS)),
    st.tuples(st.just("nest"), st.sampled_from(DIRS)),
    st.tuples(st.just("unnest"), st.sampled_from(DIRS)),
    st.tuples(st.just("symlink"), st.sampled_from(DIRS), st.sampled_from(NAMES)),
    st.tuples(
        st.just("meta"),
    ),
    st.tuples(
        st.just("commit"),
    ),
)


def apply(root: Path, outside: Path, op: tuple[object, ...]) -> None:
    kind = op[0]
    try:
        if kind == "write":
            d, name, data = op[1:]
            (root / str(d)).mkdir(parents=True, exist_ok=True)
            (root / str(d) / str(name)).write_bytes(bytes(data))  # type: ignore[arg-type]
        elif kind == "touch":
            os.utime(root / str(op[1]) / str(op[2]), ns=(time.time_ns(), time.time_ns() - 10**9))
        elif kind == "unlink":
            (root / str(op[1]) / str(op[2])).unlink()
        elif kind == "rmtree":
            shutil.rmtree(root / str(op[1]))
        elif kind == "rename":
            os.rename(root / str(op[1]), root / str(op[2]))
        elif kind == "move_out":
            os.rename(root / str(op[1]), outside / f"away{time.time_ns()}")
        elif kind == "move_in":
            made = outside / f"in{time.time_ns()}"
            (made / "sub").mkdir(parents=True)
            (made / "x.csv").write_bytes(b"x")
            (made / "sub" / "y.csv").write_bytes(b"y")
            os.rename(made, root / str(op[1]))
        elif kind == "nest":
            (root / str(op[1]) / REF_FILE).write_text("src: lakefs://r/main/n/\nat_head: ''\n")
        elif kind == "unnest":
            (root / str(op[1]) / REF_FILE).unlink()
        elif kind == "symlink":
            os.symlink(root / "a", root / str(op[1]) / str(op[2]))
        elif kind == "meta":
            (root / META_DIR / "scratch").write_bytes(b"not data")
    except OSError:
        pass  # the step does not apply to the tree as it is (a directory missing, a name taken)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(step, max_size=4), min_size=1, max_size=6))
def test_a_monitored_scan_finds_what_a_whole_walk_finds(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[list[tuple[object, ...]]]
) -> None:
    base = tmp_path_factory.mktemp("mon")
    root, outside = base / "wc", base / "outside"
    outside.mkdir()
    for d in ("a", "a/deep", "b"):
        (root / d).mkdir(parents=True)
        for n in range(2):
            (root / d / f"f{n}.csv").write_bytes(f"{d}/{n}\n".encode())
    (root / REF_FILE).write_text("src: lakefs://r/main/\nat_head: ''\n")
    index = build(root)
    monitor.start(str(root))
    try:
        index = workcopy._scan(str(root), index)[1]  # the first scan walks and takes a token
        for ops in rounds:
            commits = False
            for op in ops:
                if op[0] == "commit":
                    commits = True
                else:
                    apply(root, outside, op)
            whole = scan(str(root), index)  # the whole walk, asking no monitor
            answer = monitor.query(str(root), index.token)
            assert answer is not None and not answer.full  # the scan below stats what it lists
            found, index = workcopy._scan(str(root), index)
            assert index.token, "the monitor answered"
            assert as_sets(found) == as_sets(whole), ops
            if commits:  # what a local commit does to the index: the changes found are recorded
                updates = {
                    rel: (*found.stats[rel], file_checksum(str(root / rel)))
                    for rel in found.added + found.changed
                }
                index = index.updated(updates, found.removed)
                index.save(str(root))
            loaded = Index.load(str(root))
            assert loaded is not None
            # and from the index as the next process loads it
            whole = scan(str(root), loaded)
            assert as_sets(workcopy._scan(str(root), loaded)[0]) == as_sets(whole)
    finally:
        monitor.stop(str(root))


def test_only_the_changed_paths_are_stated(watched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = build(watched)
    assert monitor.start(str(watched))["started"] is True
    index = workcopy._scan(str(watched), index)[1]
    (watched / "b" / "f1.csv").write_bytes(b"edited\n")
    (watched / "n").mkdir()
    (watched / "n" / "new.csv").write_bytes(b"new\n")
    walked: list[str] = []
    real_scandir = os.scandir

    def spy(path: object) -> object:
        walked.append(str(path))
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", spy)
    found, index = workcopy._scan(str(watched), index)
    assert (found.added, found.changed, found.removed) == (["n/new.csv"], ["b/f1.csv"], [])
    assert len(walked) == 1  # the new directory alone, not the tree
    # a status records no change: the next scan stats them again (pending), and finds the same
    assert index.pending == ["b/f1.csv", "n/new.csv"]
    again, _ = workcopy._scan(str(watched), index)
    assert (again.added, again.changed) == (["n/new.csv"], ["b/f1.csv"])


def test_a_dead_daemon_is_walked_around_and_started_again(
    watched: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = build(watched)
    first = monitor.start(str(watched))
    index = workcopy._scan(str(watched), index)[1]
    assert index.token
    os.kill(first["pid"], signal.SIGKILL)  # dies leaving its socket behind (a crash, a reboot)
    _until(lambda: monitor.info(str(watched)) is None)
    (watched / "a" / "f0.csv").write_bytes(b"unseen by any daemon\n")
    found, index = workcopy._scan(str(watched), index)  # no answer: the whole walk
    assert found.changed == ["a/f0.csv"] and index.token == ""
    # ... and a daemon started again for the next command, since the monitor is still wanted
    _until(lambda: monitor.info(str(watched)) is not None)
    assert monitor.info(str(watched))["pid"] != first["pid"]  # type: ignore[index]
    # a new daemon does not vouch for what happened before it: its first scan walks everything
    (watched / "b" / "f2.csv").unlink()
    found, index = workcopy._scan(str(watched), index)
    assert (found.changed, found.removed) == (["a/f0.csv"], ["b/f2.csv"])
    assert index.token and not monitor.query(str(watched), index.token).full  # type: ignore[union-attr]
    # stopped, it is no longer wanted: a scan starts none
    assert monitor.stop(str(watched)) is True and not monitor.wanted(str(watched))
    spawned: list[str] = []
    monkeypatch.setattr(monitor, "spawn", spawned.append)
    assert workcopy._scan(str(watched), index)[0].changed == ["a/f0.csv"]
    assert spawned == []


def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.02)


def test_the_daemon_ends_with_its_directory(watched: Path) -> None:
    pid = monitor.start(str(watched))["pid"]
    assert monitor.start(str(watched)) == {**monitor.info(str(watched)), "started": False}  # type: ignore[dict-item]
    shutil.rmtree(watched)
    deadline = time.monotonic() + 10
    while not _gone(pid):
        assert time.monotonic() < deadline, "the monitor outlived its directory"
        time.sleep(0.02)


def _gone(pid: int) -> bool:
    """Whether ``pid`` exited (reaped here when it is this process's child)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def test_stop_without_a_daemon_is_false(watched: Path) -> None:
    assert monitor.stop(str(watched)) is False
    assert monitor.info(str(watched)) is None
    assert monitor.query(str(watched), "") is None
