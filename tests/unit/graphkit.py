"""Shared helpers and fixtures of the graph tests: a memory lake with a ticking clock, a small history."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import porcelain
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.model import Commit, CommitId, ResetKind
from lakectl.core.porcelain import Lake

REPO = "repo"
T0 = 1_700_000_000


# -- helpers ----------------------------------------------------------------------------------


def make_lake(tmp_path: Path) -> Lake:
    return Lake(kv=MemoryStore(), blocks=LocalAdapter(tmp_path / "blocks"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A clock that ticks one second per reading, so dates order commits deterministically."""
    ticks = itertools.count(T0)
    monkeypatch.setattr(porcelain, "now", lambda: next(ticks))
    return ticks


@pytest.fixture
def lake(tmp_path: Path, clock: Iterator[int]) -> Lake:
    lk = make_lake(tmp_path)
    porcelain.create_repo(lk, REPO)
    return lk


def put(lake: Lake, branch: str, **files: str) -> None:
    for path, content in files.items():
        porcelain.upload(lake, REPO, branch, path.replace("__", "/"), content.encode())


def commit(lake: Lake, branch: str, message: str, **files: str) -> Commit:
    put(lake, branch, **files)
    return porcelain.commit(lake, REPO, branch, message, committer="tester")


def view(lake: Lake, ref: str) -> dict[str, bytes]:
    return {
        o.path: b"".join(porcelain.read(lake, REPO, ref, o.path))
        for o in porcelain.list_objects(lake, REPO, ref)
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
    c["M"] = porcelain.merge(lake, REPO, "dev", "main", committer="tester").commit
    c["C3"] = commit(lake, "main", "c3", b__y="1")
    return c


def log_messages(lake: Lake, ref: str = "main", **kw: Any) -> list[str]:
    return [c.message for c in porcelain.log(lake, REPO, ref, **kw)]


def noop_reset_object(lake: Lake) -> None:
    put(lake, "main", x="draft")
    porcelain.reset(lake, REPO, "main", ResetKind.OBJECT, "x")


def noop_reset_prefix(lake: Lake) -> None:
    put(lake, "main", x="draft")
    porcelain.reset(lake, REPO, "main", ResetKind.PREFIX, "")


def noop_upload_delete(lake: Lake) -> None:
    put(lake, "main", x="draft")
    porcelain.delete_objects(lake, REPO, "main", ["x"])


def noop_reupload_same(lake: Lake) -> None:
    put(lake, "main", same="0")
