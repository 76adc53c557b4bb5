"""Garbage collection never loses what must stay: random histories, then every retained commit,
every staged object and every other repository read back byte for byte.

Histories mix writes, deletes, commits, branches, merges, resets, branch deletions, tags, days
passing, and content shared with a second repository (deduplicated blocks). Before collecting,
every block is aged past the grace period, so only the mark protects anything. The lake as it
was before the collection is the oracle. Which commits must stay is computed here from the
rules, independently of the collector: heads, tags, and ancestors within their branch's days.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core import lake as lake_floor
from lakectl.core import listing, merging, porcelain, writes
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc, retention
from lakectl.errors import LakectlError

REPO, OTHER = "repo", "other"
DAY = retention.DAY
T0 = 1_800_000_000
BRANCHES = ["main", "b1", "b2"]
ON = st.sampled_from(["main", "main", "main", "b1", "b2"])  # mostly main: long histories to expire
PATHS = ["a", "b", "dir/c"]
CONTENTS = [f"content {i}\n" * (i + 1) for i in range(6)]

# Mostly unique contents, so that a commit owns blocks no other commit has (a wrongly expired
# commit then loses data); some from a pool, shared with other commits and the other repository.
contents = st.one_of(st.sampled_from(CONTENTS), st.integers(0, 10**9).map(lambda i: f"unique {i}\n"))
ops = st.one_of(
    st.tuples(st.just("write"), ON, st.sampled_from(PATHS), contents),
    st.tuples(st.just("write"), ON, st.sampled_from(PATHS), contents),
    st.tuples(st.just("delete"), ON, st.sampled_from(PATHS)),
    st.tuples(st.just("commit"), ON),
    st.tuples(st.just("commit"), ON),
    st.tuples(st.just("branch"), st.sampled_from(BRANCHES[1:]), st.sampled_from(BRANCHES)),
    st.tuples(st.just("merge"), st.sampled_from(BRANCHES), st.sampled_from(BRANCHES)),
    st.tuples(st.just("reset"), st.sampled_from(BRANCHES)),
    st.tuples(st.just("drop"), st.sampled_from(BRANCHES[1:])),
    st.tuples(st.just("tag"), st.sampled_from(BRANCHES)),
    st.tuples(st.just("days"), st.integers(1, 4)),  # small steps, often landing on a retention boundary
    st.tuples(st.just("other"), st.sampled_from(CONTENTS)),
)


@contextmanager
def fresh_lake() -> Iterator[tuple[Lake, str]]:
    root = tempfile.mkdtemp(prefix="lakectl-gc-prop-")
    try:
        yield Lake(kv=MemoryStore(), blocks=LocalAdapter(os.path.join(root, "blocks"))), root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def apply(lake: Lake, op: tuple[object, ...], tags: list[str]) -> None:
    kind = op[0]
    try:
        if kind == "write":
            writes.upload(lake, REPO, str(op[1]), str(op[2]), str(op[3]).encode())
        elif kind == "delete":
            writes.delete_existing(lake, REPO, str(op[1]), [str(op[2])])
        elif kind == "commit":
            porcelain.commit(lake, REPO, str(op[1]), "c", committer="t")
        elif kind == "branch":
            porcelain.create_branch(lake, REPO, str(op[1]), str(op[2]))
        elif kind == "merge":
            merging.merge(lake, REPO, str(op[1]), str(op[2]), ["source-wins"], None, committer="t")
        elif kind == "reset":
            merging.reset(lake, REPO, str(op[1]))
        elif kind == "drop":
            porcelain.delete_branch(lake, REPO, str(op[1]))
        elif kind == "tag":
            name = f"t{len(tags)}"
            porcelain.create_tag(lake, REPO, name, str(op[1]))
            tags.append(name)
        elif kind == "other":
            writes.upload(lake, OTHER, "main", f"o{len(tags)}", str(op[1]).encode())
            porcelain.commit(lake, OTHER, "main", "o", committer="t")
    except LakectlError:
        pass  # refused (no such branch, nothing to commit, conflict, dirty): the history goes on


def snapshot(lake: Lake, repo: str, ref: str) -> dict[str, bytes]:
    return {
        o.path: b"".join(porcelain.read(lake, repo, ref, o.path))
        for o in listing.list_objects(lake, repo, ref)
    }


def must_stay(lake: Lake, rules: retention.GCRules, now: int) -> set[str]:
    """Commits the rules keep, from the commit graph alone."""
    keep = {t.commit_id for t in porcelain.list_tags(lake, REPO)}
    for branch in porcelain.list_branches(lake, REPO):
        cutoff = now - rules.retention_days(branch.name) * DAY
        keep.add(branch.commit_id)
        todo, seen = [branch.commit_id], set()
        while todo:
            cid = todo.pop()
            if cid in seen:
                continue
            seen.add(cid)
            commit = porcelain.get_commit(lake, REPO, cid)
            if commit.creation_date >= cutoff:
                keep.add(cid)
            todo.extend(commit.parents)
    return keep


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(ops, min_size=5, max_size=40),
    default_days=st.integers(0, 6),
    main_days=st.one_of(st.none(), st.integers(0, 6)),
)
def test_gc_keeps_every_retained_commit_and_staged_object(
    history: list[tuple[object, ...]], default_days: int, main_days: int | None
) -> None:
    clock = [T0]
    original_clock = lake_floor.clock
    lake_floor.clock = lambda: clock[0]
    try:
        with fresh_lake() as (lake, root):
            porcelain.create_repo(lake, REPO)
            porcelain.create_repo(lake, OTHER)
            tags: list[str] = []
            for op in history:
                if op[0] == "days":
                    clock[0] += int(str(op[1])) * DAY
                else:
                    apply(lake, op, tags)
                    clock[0] += 1
            branches = [{"branch_id": "main", "retention_days": main_days}] if main_days is not None else []
            rules = retention.GCRules.from_dict(
                {"default_retention_days": default_days, "branches": branches}
            )
            retention.set_rules(lake, REPO, rules)
            now = clock[0]
            keep = must_stay(lake, rules, now)
            expected = {cid: snapshot(lake, REPO, cid) for cid in keep}
            staged = {b.name: snapshot(lake, REPO, b.name) for b in porcelain.list_branches(lake, REPO)}
            other = snapshot(lake, OTHER, "main")
            past = time.time() - 30 * DAY
            for directory, _, files in os.walk(os.path.join(root, "blocks")):
                for name in files:
                    os.utime(os.path.join(directory, name), (past, past))

            report = gc.run(lake, REPO, now=now)

            assert report.young == 0
            for cid, objects in expected.items():
                assert snapshot(lake, REPO, cid) == objects, f"retained commit {cid} changed"
            for name, objects in staged.items():
                assert snapshot(lake, REPO, name) == objects, f"branch {name} (with staged objects) changed"
            assert snapshot(lake, OTHER, "main") == other, "another repository lost data"
            assert gc.run(lake, REPO, now=now).deleted == 0, "a second collection finds nothing more"
    finally:
        lake_floor.clock = original_clock
