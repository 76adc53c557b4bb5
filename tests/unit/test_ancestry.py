"""The ancestry index answers what walking every parent answers: merge bases, the ancestor test
and ranges of commits, on random histories with merges, orphaned commits, several children per
commit, clocks that go backwards, histories stored before the index, and concurrent indexers;
on the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core import changes, keys, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph.commits import CommitRequest, is_ancestor, make_commit, merge_base, walk_range
from lakectl.core.graph.refs import RefStore
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.kv.postgres import PostgresStore
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, CommitId, MetaRangeId, RepositoryId
from lakectl.core.upkeep import refsdump

REPO = RepositoryId("repo")

Shape = list[tuple[list[int], int, bool]]
"""A history: per commit, the indexes of its parents (earlier commits; none for a root), its
date, and whether its record is stored without the index (as before the index existed)."""


def shapes(max_commits: int = 40) -> st.SearchStrategy[Shape]:
    @st.composite
    def shape(draw: st.DrawFn) -> Shape:
        n = draw(st.integers(1, max_commits))
        out: Shape = [([], draw(st.integers(0, 50)), draw(st.booleans()))]
        for i in range(1, n):
            first = draw(st.integers(max(0, i - 4), i - 1))  # mostly near the tip: long lines
            parents = [first]
            if i > 2 and draw(st.integers(0, 3)) == 0:  # a merge
                other = draw(st.integers(0, i - 1))
                if other != first:
                    parents.append(other)
            if draw(st.integers(0, 15)) == 0:
                parents = []  # another root (an imported history)
            out.append((parents, draw(st.integers(0, 50)), draw(st.booleans())))
        return out

    return shape()


def build(refs: RefStore, shape: Shape) -> list[Commit]:
    commits: list[Commit] = []
    for i, (parents, date, unindexed) in enumerate(shape):
        ps = [commits[p] for p in parents]
        req = CommitRequest(f"c{i}", "tester", {}, date)
        commit = make_commit(tuple(p.id for p in ps), ps, MetaRangeId("m"), req)
        if unindexed:
            refs.kv.set(keys.repo_partition(REPO), keys.commit_key(commit.id), commit.encode())
        else:
            refs.put_commit(REPO, commit)
        commits.append(commit)
    return commits


def ancestors(commit: Commit, by_id: dict[CommitId, Commit], first_parent: bool = False) -> set[CommitId]:
    """``commit`` and every commit it reaches by its parents (by first parents only)."""
    seen, todo = {commit.id}, [commit]
    while todo:
        for pid in todo.pop().parents[: 1 if first_parent else None]:
            if pid not in seen:
                seen.add(pid)
                todo.append(by_id[pid])
    return seen


def expected_base(a: Commit, b: Commit, by_id: dict[CommitId, Commit]) -> CommitId | None:
    common = ancestors(a, by_id) & ancestors(b, by_id)
    return min(common, key=lambda c: (-by_id[c].generation, c)) if common else None


def expected_range(
    start: Commit, hidden: Commit, by_id: dict[CommitId, Commit], first_parent: bool
) -> list[CommitId]:
    shown = ancestors(start, by_id, first_parent) - ancestors(hidden, by_id)
    return sorted(shown, key=lambda c: (-by_id[c].generation, -by_id[c].creation_date, c))


def check_history(refs: RefStore, commits: list[Commit], pairs: list[tuple[int, int]]) -> None:
    by_id = {c.id: c for c in commits}
    for i, j in pairs:
        a, b = commits[i], commits[j]
        base = merge_base(refs, REPO, a, b)
        assert (base.id if base else None) == expected_base(a, b, by_id), (i, j)
        assert is_ancestor(refs, REPO, a, b) == (a.id in ancestors(b, by_id)), (i, j)
        for first_parent in (False, True):
            got = [c.id for c in walk_range(refs, REPO, b, a, first_parent)]
            assert got == expected_range(b, a, by_id, first_parent), (i, j, first_parent)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes(), seed=st.integers(0, 2**32 - 1))
def test_walks_along_lineages_answer_what_every_parent_answers(shape: Shape, seed: int) -> None:
    refs = RefStore(MemoryStore())
    commits = build(refs, shape)
    rng = random.Random(seed)
    n = len(commits)
    pairs = [(rng.randrange(n), rng.randrange(n)) for _ in range(12)] + [(0, n - 1), (n - 1, 0)]
    check_history(refs, commits, pairs)


def lineage_invariant(refs: RefStore, commits: list[Commit]) -> None:
    """Every placed commit past its lineage's first holds its slot, just above its first parent."""
    partition = keys.repo_partition(REPO)
    places = {c.id: refs.ancestry.place(REPO, c) for c in commits}
    for c in commits:
        lineage, position = places[c.id]
        if position == 1:
            assert lineage == c.id
            continue
        assert refs.kv.get(partition, keys.ancestry_slot_key(lineage, position)) == c.id.encode()
        assert places[c.parents[0]] == (lineage, position - 1)


def test_a_second_child_of_a_commit_starts_a_lineage_of_its_own() -> None:
    refs = RefStore(MemoryStore())
    root, _, b1, a2 = build(refs, [([], 0, False), ([0], 1, False), ([0], 2, False), ([1], 3, False)])
    assert refs.ancestry.place(REPO, a2) == (root.id, 3)
    assert refs.ancestry.place(REPO, b1) == (b1.id, 1)
    assert merge_base(refs, REPO, a2, b1) == root


def test_a_history_stored_before_the_index_is_indexed_on_first_use() -> None:
    refs = RefStore(MemoryStore())
    commits = build(refs, [([], 0, True)] + [([i], i + 1, True) for i in range(200)])
    partition = keys.repo_partition(REPO)
    assert not list(scan_prefix(refs.kv, partition, "ancestry/"))
    assert is_ancestor(refs, REPO, commits[3], commits[-1])
    assert refs.ancestry.place(REPO, commits[-1]) == (commits[0].id, 201)
    lineage_invariant(refs, commits)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KVStore]:
    s: KVStore = (
        SQLiteStore(str(tmp_path / "kv.db"))
        if request.param == "sqlite"
        else PostgresStore(request.getfixturevalue("pg_url"))
    )
    yield s
    s.close()


def test_concurrent_indexers_agree_on_every_place(store: KVStore) -> None:
    """Four threads index one history stored before the index, while a fifth stores new
    commits (several children per commit) on it: the slots decide, so every thread sees the
    same places, and the walks give what every parent gives."""
    refs = RefStore(store)
    rng = random.Random(7)
    base: Shape = [([], 0, True)] + [([i], i + 1, True) for i in range(150)]
    old = build(refs, base)
    new: list[Commit] = []
    errors: list[BaseException] = []

    def index(offset: int) -> None:
        try:
            for c in old[offset::4][::-1]:
                refs.ancestry.place(REPO, c)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def commit_more() -> None:
        try:
            for i in range(60):
                ps = [rng.choice(old + new)]
                req = CommitRequest(f"n{i}", "tester", {}, 1000 + i)
                c = make_commit((ps[0].id,), ps, MetaRangeId("m"), req)
                refs.put_commit(REPO, c)
                new.append(c)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=index, args=(k,)) for k in range(4)]
    threads.append(threading.Thread(target=commit_more))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    everything = old + new
    lineage_invariant(refs, everything)
    pairs = [(rng.randrange(len(everything)), rng.randrange(len(everything))) for _ in range(30)]
    check_history(refs, everything, pairs)


def unplaced(lake: Lake) -> list[CommitId]:
    """Commits stored without their place (the index left to fill on first use)."""
    out = []
    for r in lake.refs.list_repos():
        part = keys.repo_partition(r.name)
        for _, raw in scan_prefix(lake.kv, part, keys.COMMIT_PREFIX):
            cid = Commit.decode(raw).id
            if next(scan_prefix(lake.kv, part, keys.ancestry_place_key(cid)), None) is None:
                out.append(cid)
    return out


def test_every_verb_that_makes_a_commit_a_restore_and_a_rebuild_index_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    lake = opening.open_lake(str(tmp_path / "lake"))
    try:
        journal.enable(lake)
        p.create_repo(lake, "src")
        writes.upload(lake, "src", "main", "a.csv", b"1\n")
        one = p.commit(lake, "src", "main", "one")
        p.create_branch(lake, "src", "dev", "main")
        writes.upload(lake, "src", "dev", "b.csv", b"2\n")
        p.commit(lake, "src", "dev", "two")
        writes.upload(lake, "src", "main", "c.csv", b"3\n")
        p.commit(lake, "src", "main", "three")
        merging.merge(lake, "src", "dev", "main")
        merging.revert(lake, "src", "main", one.id)
        merging.cherry_pick(lake, "src", "dev", "main")
        p.create_repo(lake, "copy", "main", bare=True)
        refsdump.restore(lake, "copy", refsdump.dump(lake, "src"))
        assert unplaced(lake) == []
        logs = {r: [c.id for c in changes.log(lake, r, "main")] for r in ("src", "copy")}
        base = changes.find_merge_base(lake, "src", "dev", "main")
        fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
        try:
            rebuild.rebuild(LocalAdapter(str(tmp_path / "lake" / "blocks")), fresh)
            rebuilt = Lake(kv=fresh, blocks=lake.blocks)
            assert unplaced(rebuilt) == []
            assert {r: [c.id for c in changes.log(rebuilt, r, "main")] for r in logs} == logs
            assert changes.find_merge_base(rebuilt, "src", "dev", "main") == base
        finally:
            fresh.close()
    finally:
        lake.close()
