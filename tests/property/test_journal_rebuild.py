"""Rebuild from the journal: random histories (repositories, branches, staged writes and deletes,
commits, merges, reverts, resets of all/a prefix/an object, tags, deletions, settings, garbage
collection, seals and compactions of the journal) on a journalled lake; then its metadata
database is dropped, a fresh one is built from the blocks alone, and every repository, branch
head, tag, commit, staged entry, setting and object's bytes is identical
(docs/decisions/0009-journal.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core import changes, keys, listing, merging, opening, protection
from lakectl.core import porcelain as p
from lakectl.core import writes as lake_writes
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import compact, journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, ResetKind
from lakectl.core.upkeep import gc, retention
from lakectl.errors import AlreadyExists, IntegrityError, LakectlError

REPOS = ["rep-a", "rep-b"]
BRANCHES = ["main", "dev", "feat"]
PATHS = ["a", "b", "dir/c", "dir/d"]

# Mostly the first repository and main, so that operations meet what came before them.
repo = st.sampled_from([REPOS[0], REPOS[0], REPOS[0], REPOS[1]])
branch = st.sampled_from(["main", "main", "main", "dev", "feat"])
ops = st.one_of(
    st.tuples(st.just("repo"), repo),
    st.tuples(st.just("write"), repo, branch, st.sampled_from(PATHS), st.binary(max_size=40)),
    st.tuples(st.just("delete"), repo, branch, st.sampled_from(PATHS)),
    st.tuples(st.just("commit"), repo, branch),
    st.tuples(st.just("branch"), repo, st.sampled_from(BRANCHES[1:]), branch),
    st.tuples(st.just("merge"), repo, branch, branch),
    st.tuples(st.just("revert"), repo, branch),
    st.tuples(st.just("reset"), repo, branch, st.sampled_from(list(ResetKind))),
    st.tuples(st.just("tag"), repo, st.sampled_from(["v1", "v2"]), branch),
    st.tuples(st.just("untag"), repo, st.sampled_from(["v1", "v2"])),
    st.tuples(st.just("drop"), repo, st.sampled_from(BRANCHES[1:])),
    st.tuples(st.just("rules"), repo, st.integers(0, 30)),
    st.tuples(st.just("unrules"), repo),
    st.tuples(st.just("protect"), repo),
    st.tuples(st.just("gc"), repo),
    st.tuples(
        st.just("seal"),
    ),
    st.tuples(st.just("remove"), st.just(REPOS[1])),  # rep-a stays: the rest of a history needs it
)
writes = st.tuples(st.just("write"), repo, branch, st.sampled_from(PATHS), st.binary(max_size=40))
history_ops = st.one_of(ops, writes, writes, st.tuples(st.just("commit"), repo, branch))


def apply(lake: Lake, op: tuple[Any, ...]) -> None:
    kind, *args = op
    if kind == "repo":
        p.create_repo(lake, args[0])
    elif kind == "write":
        lake_writes.upload(lake, args[0], args[1], args[2], args[3])
    elif kind == "delete":
        lake_writes.delete_objects(lake, args[0], args[1], [args[2]])
    elif kind == "commit":
        p.commit(lake, args[0], args[1], "c", committer="prop")
    elif kind == "branch":
        p.create_branch(lake, args[0], args[1], args[2])
    elif kind == "merge":
        merging.merge(lake, args[0], args[1], args[2], committer="prop")
    elif kind == "revert":
        merging.revert(lake, args[0], args[1], args[1], parent_number=1, committer="prop")
    elif kind == "reset":
        merging.reset(lake, args[0], args[1], args[2], "dir/" if args[2] is ResetKind.PREFIX else "a")
    elif kind == "tag":
        p.create_tag(lake, args[0], args[1], args[2], force=True)
    elif kind == "untag":
        p.delete_tag(lake, args[0], args[1])
    elif kind == "drop":
        p.delete_branch(lake, args[0], args[1])
    elif kind == "rules":
        retention.set_rules(lake, args[0], retention.GCRules.from_dict({"default_retention_days": args[1]}))
    elif kind == "unrules":
        retention.delete_rules(lake, args[0])
    elif kind == "protect":
        protection.add_rule(lake, args[0], "stable*")
    elif kind == "gc":
        gc.run(lake, args[0], allow_preexisting_blocks=True)
    elif kind == "seal":
        journal.seal(lake.kv, lake.blocks)
    elif kind == "compact":
        compact.compact(lake.kv, lake.blocks)
    elif kind == "remove":
        p.delete_repo(lake, args[0])


def state(lake: Lake, dangling: bool = True) -> dict[str, Any]:
    """Everything a user can see of the lake's metadata and data, and the staged rows as stored;
    the names of staging tokens aside. ``dangling=False``: only the commits a branch or a tag
    reaches (under concurrency, a merge refused at its CAS has stored a commit no ref reaches
    and no journal entry names)."""
    out: dict[str, Any] = {}
    for r in lake.refs.list_repos():
        part = keys.repo_partition(r.name)
        repo_state: dict[str, Any] = {"record": r.encode()}
        stored = sorted(v for k, v in lake.kv.scan(part) if k.startswith(keys.COMMIT_PREFIX))
        if not dangling:
            refs = [b.name for b in lake.refs.list_branches(r.name)] + [
                t.name for t in lake.refs.list_tags(r.name)
            ]
            reached = {c.id for ref in refs for c in changes.log(lake, r.name, ref)}
            stored = [v for v in stored if Commit.decode(v).id in reached]
        repo_state["commits"] = stored
        repo_state["tags"] = sorted((t.name, t.commit_id) for t in lake.refs.list_tags(r.name))
        for key in (keys.GC_RULES, keys.BRANCH_PROTECTION):
            repo_state[key] = dict(lake.kv.scan(part, key)).get(key)
        for b in lake.refs.list_branches(r.name):
            staged = sorted((c.path, c.type.value, c.new) for c in lake.staging.changes(r.name, b))
            # Staged rows as stored, those that change nothing included, newest token first.
            staged_raw = list(lake.staging.iter_staged(r.name, b.tokens))
            objects = {
                o.path: b"".join(p.read(lake, r.name, b.name, o.path))
                for o in listing.list_objects(lake, r.name, b.name)
            }
            repo_state[f"branch {b.name}"] = (b.commit_id, staged, staged_raw, objects)
        out[r.name] = repo_state
    return out


@contextmanager
def journalled_lake() -> Iterator[tuple[Lake, str]]:
    root = tempfile.mkdtemp(prefix="lakectl-journal-prop-")
    try:
        lake = opening.open_lake(os.path.join(root, "lake"))
        journal.enable(lake)
        yield lake, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(history_ops, min_size=10, max_size=60))
def test_a_lake_rebuilt_from_blocks_and_journal_is_the_lake(history: list[tuple[Any, ...]]) -> None:
    with journalled_lake() as (lake, root):
        p.create_repo(lake, REPOS[0])
        for op in history:
            with suppress(LakectlError):  # refused: nothing happened, nothing is journalled
                apply(lake, op)
        expected = state(lake)
        lake.close()  # closing seals what the lake's writer finished: nothing else is asked
        os.remove(os.path.join(root, "lake", "lake.db"))  # the metadata database is gone
        blocks = LocalAdapter(os.path.join(root, "lake", "blocks"))
        fresh = SQLiteStore(os.path.join(root, "rebuilt.db"))
        done = rebuild.rebuild(blocks, fresh)
        rebuilt = Lake(kv=fresh, blocks=blocks)
        assert state(rebuilt) == expected
        assert done.repositories == len(expected)
        # The rebuilt lake keeps journalling from where the journal ended.
        journal.install(rebuilt)
        p.create_repo(rebuilt, "after-rebuild")
        newest = journal.tail(rebuilt.kv, rebuilt.blocks, amount=1)
        assert [e.logical_timestamp for e in newest] == [done.last_logical_timestamp + 1]
        fresh.close()


def test_rebuild_refuses_a_database_that_holds_a_lake() -> None:
    with journalled_lake() as (lake, _):
        p.create_repo(lake, "full")
        with pytest.raises(AlreadyExists):
            rebuild.rebuild(lake.blocks, lake.kv)
        lake.close()


def test_a_missing_batch_is_an_integrity_error() -> None:
    with journalled_lake() as (lake, _):
        p.create_repo(lake, "gap-a")
        journal.seal(lake.kv, lake.blocks)
        p.create_repo(lake, "gap-b")
        journal.seal(lake.kv, lake.blocks)
        first = journal.batches(lake.kv)[0]
        lake.blocks.delete(first["locator"])
        from lakectl.core.kv.memory import MemoryStore

        with pytest.raises(IntegrityError):
            rebuild.rebuild(lake.blocks, MemoryStore())
        lake.close()
