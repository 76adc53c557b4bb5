"""Shared helpers and fixtures of the graph tests: a memory lake with a ticking clock, a small history."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes, listing, merging, porcelain, writes
from lakectl.core import lake as lake_floor
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, CommitId, ResetKind

REPO = "repo"
T0 = 1_700_000_000


# -- helpers ----------------------------------------------------------------------------------


def make_lake(tmp_path: Path) -> Lake:
    return Lake(kv=MemoryStore(), blocks=LocalAdapter(tmp_path / "blocks"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A clock that ticks one second per reading, so dates order commits deterministically."""
    ticks = itertools.count(T0)
    monkeypatch.setattr(lake_floor, "clock", lambda: next(ticks))
    return ticks


@pytest.fixture
def lake(tmp_path: Path, clock: Iterator[int]) -> Lake:
    lk = make_lake(tmp_path)
    porcelain.create_repo(lk, REPO)
    return lk


def put(lake: Lake, branch: str, **files: str) -> None:
    for path, content in files.items():
        writes.upload(lake, REPO, branch, path.replace("__", "/"), content.encode())


def commit(lake: Lake, branch: str, message: str, **files: str) -> Commit:
    put(lake, branch, **files)
    return porcelain.commit(lake, REPO, branch, message, committer="tester")


def view(lake: Lake, ref: str) -> dict[str, bytes]:
    return {
        o.path: b"".join(porcelain.read(lake, REPO, ref, o.path))
        for o in listing.list_objects(lake, REPO, ref)
    }


def cid(lake: Lake, ref: str) -> CommitId:
    return porcelain.get_commit(lake, REPO, ref).id


@pytest.fixture
def history(lake: Lake) -> dict[str, Commit]:
    """C0 (repository created) - C1 - C2 - M - C3 on main, D1 on dev (from C1), M = merge dev
    into main; tag v1 on C2.

        C0 -- C1 -- C2 -- M -- C3     main
                \\        /
                 D1 -----             dev
    """
    c: dict[str, Commit] = {"C0": porcelain.get_commit(lake, REPO, "main")}
    c["C1"] = commit(lake, "main", "c1", a="1", b__x="1")
    porcelain.create_branch(lake, REPO, "dev", "main")
    c["C2"] = commit(lake, "main", "c2", a="2")
    c["D1"] = commit(lake, "dev", "d1", d="1")
    porcelain.create_tag(lake, REPO, "v1", "main")
    c["M"] = merging.merge(lake, REPO, "dev", "main", committer="tester").commit
    c["C3"] = commit(lake, "main", "c3", b__y="1")
    return c


def log_messages(lake: Lake, ref: str = "main", **kw: Any) -> list[str]:
    return [c.message for c in changes.log(lake, REPO, ref, **kw)]


def noop_reset_object(lake: Lake) -> None:
    put(lake, "main", x="draft")
    merging.reset(lake, REPO, "main", ResetKind.OBJECT, "x")


def noop_reset_prefix(lake: Lake) -> None:
    put(lake, "main", x="draft")
    merging.reset(lake, REPO, "main", ResetKind.PREFIX, "")


def noop_upload_delete(lake: Lake) -> None:
    put(lake, "main", x="draft")
    writes.delete_objects(lake, REPO, "main", ["x"])


def noop_reupload_same(lake: Lake) -> None:
    put(lake, "main", same="0")


# -- dated histories (garbage collection) ----------------------------------------------------

DAY = 86_400


class Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = T0
        monkeypatch.setattr(lake_floor, "clock", lambda: self.now)


def blocks(lake: Lake, ref: str, path: str, repo: str = REPO) -> set[str]:
    entry = porcelain.stat(lake, repo, ref, path).entry
    assert entry is not None
    return {token.split(":", 1)[0] for token in entry.locators}


def write(lake: Lake, branch: str, path: str, content: str, repo: str = REPO) -> None:
    writes.upload(lake, repo, branch, path, content.encode())


@pytest.fixture
def dated(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """main: v1 of `a` 30 days ago, v2 10 days ago, v3 a day ago; `keep` unchanged since day 30."""
    clock = Clock(monkeypatch)
    ids = {}
    for label, days, content in (("v1", 30, "version 1"), ("v2", 10, "version 2"), ("v3", 1, "version 3")):
        clock.now = T0 - days * DAY
        write(lake, "main", "a", content)
        if label == "v1":
            write(lake, "main", "keep", "unchanged since the start")
        ids[label] = porcelain.commit(lake, REPO, "main", label, committer="t").id
    clock.now = T0
    return ids


def tree_blocks(lake: Lake, ref: str) -> set[str]:
    """The metarange, page and range blocks of a commit's tree."""
    mid = porcelain.get_commit(lake, REPO, ref).meta_range_id
    return {mid} | {r.id for r in lake.ranges.pages(mid)} | {r.id for r in lake.trees.ranges(mid)}
