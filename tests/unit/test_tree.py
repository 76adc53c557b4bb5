"""Tree operations and their cost: content-defined ranges, apply and diff open only what changed."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph.ranges import ChunkPolicy, RangeData, RangeStore
from lakectl.core.graph.tree import Update, apply_updates, diff_trees, lookup
from lakectl.core.model import DiffType, RangeId, RangeInfo, Row


def row(value: str, mtime: int = 0) -> Row:
    data = value.encode()
    md5 = hashlib.md5(data).hexdigest()
    return (len(data), md5, f"{md5}+{len(data)}", mtime, "application/octet-stream", "")


class CountingStore(RangeStore):
    """A range store that records every range it is asked to open."""

    def __init__(self, blocks: LocalAdapter) -> None:
        super().__init__(blocks)
        self.reads: list[RangeId] = []

    def read_range(self, rid: RangeId) -> RangeData:
        self.reads.append(rid)
        return super().read_range(rid)


# -- trees: cost follows the changes --------------------------------------------------------

POLICY = ChunkPolicy(min_rows=16, normal_rows=56, strict=256, loose=8, max_rows=192)
N = 10_000
KEYS = [f"k{i:05d}" for i in range(N)]


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RangeInfo]]:
    root = tmp_path_factory.mktemp("tree-blocks")
    store = RangeStore(LocalAdapter(root))
    ranges = apply_updates(store, [], [(k, row(k)) for k in KEYS], POLICY)
    return root, ranges


def test_big_tree_is_cut_into_many_bounded_ranges(big_tree: tuple[Path, list[RangeInfo]]) -> None:
    _, ranges = big_tree
    assert len(ranges) > 50
    assert sum(r.count for r in ranges) == N
    assert all(r.count <= POLICY.max_rows for r in ranges)
    assert all(a.max_key < b.min_key for a, b in itertools.pairwise(ranges))


GENERATED_NAMES = {
    # CRC-32 cut the first 80,000 of these into ranges of 16,384 rows: no boundary at all
    "directories of files": [f"data/dir{n // 1000:03d}/file{n % 1000:05d}.bin" for n in range(60_000)],
    "partitioned tables": [
        f"tables/t{t:03d}/date=2026-01-{d:02d}/part-{p:06d}.parquet"
        for t in range(6)
        for d in range(1, 21)
        for p in range(500)
    ],
    "sequence numbers": [f"obj{n:08d}" for n in range(60_000)],
}


@pytest.mark.parametrize("names", list(GENERATED_NAMES.values()), ids=list(GENERATED_NAMES))
def test_generated_names_are_cut_into_ranges_near_the_normal_size(tmp_path: Path, names: list[str]) -> None:
    # A commit rewrites each range it touches: what it rewrites for one change is the size of
    # the range the change falls into, which must stay near the normal size, never the maximum.
    store = RangeStore(LocalAdapter(tmp_path))
    one = row("x")
    ranges = apply_updates(store, [], [(name, one) for name in sorted(names)])
    sizes = [r.count for r in ranges[:-1]]  # the last range ends with the keys, not at a boundary
    default = ChunkPolicy()
    assert all(default.min_rows <= s < default.max_rows for s in sizes)
    touched = sum(s * s for s in sizes) / sum(sizes)  # the mean size of the range a change falls in
    assert 0.75 * default.normal_rows <= touched <= 1.5 * default.normal_rows


# (case, updates, max ranges with a new id, max ranges opened)
LOCAL_UPDATES: list[tuple[str, list[Update], int, int]] = [
    ("change one value", [("k05000", row("new"))], 1, 1),
    ("delete one key", [("k05000", None)], 3, 3),
    ("insert one key", [("k05000a", row("new"))], 3, 3),
    ("insert before the first key", [("a", row("new"))], 3, 3),
    ("append after the last key", [("z", row("new"))], 1, 1),
    ("delete the first key", [("k00000", None)], 3, 3),
    ("delete the last key", [(KEYS[-1], None)], 1, 1),
    ("two changes far apart", [("k00100", row("x")), ("k09000", row("y"))], 2, 2),
]


@pytest.mark.parametrize(
    ("updates", "max_new", "max_reads"),
    [pytest.param(u, n, r, id=case) for case, u, n, r in LOCAL_UPDATES],
)
def test_apply_updates_rewrites_only_the_ranges_around_a_change(
    big_tree: tuple[Path, list[RangeInfo]], updates: list[Update], max_new: int, max_reads: int
) -> None:
    root, before = big_tree
    store = CountingStore(LocalAdapter(root))
    after = apply_updates(store, before, updates, POLICY)
    old_ids = {r.id for r in before}
    new = [i for i, r in enumerate(after) if r.id not in old_ids]
    assert 1 <= len(new) <= max_new
    assert len(store.reads) <= max_reads
    # One contiguous run of new ranges per separate change...
    runs = 1 + sum(1 for a, b in itertools.pairwise(new) if b != a + 1)
    assert runs <= len(updates)
    # ... and every other range reused as is, in the same order.
    reused = [r for r in after if r.id in old_ids]
    positions = [before.index(r) for r in reused]
    assert positions == sorted(positions)
    assert len(reused) >= len(before) - max_new
    # And the result is the canonical tree of the new rows.
    rows = dict((k, row(k)) for k in KEYS)
    for k, v in updates:
        if v is None:
            rows.pop(k)
        else:
            rows[k] = v
    assert after == apply_updates(store, [], sorted(rows.items()), POLICY)


def test_apply_an_mtime_only_change_keeps_the_tree(big_tree: tuple[Path, list[RangeInfo]]) -> None:
    """Re-uploading equal bytes is no change: the old row (and every range id) stays."""
    root, before = big_tree
    store = CountingStore(LocalAdapter(root))
    assert apply_updates(store, before, [("k05000", row("k05000", mtime=9))], POLICY) == before
    assert len(store.reads) == 1


def test_apply_no_updates_reuses_every_range(big_tree: tuple[Path, list[RangeInfo]]) -> None:
    root, before = big_tree
    store = CountingStore(LocalAdapter(root))
    assert apply_updates(store, before, [], POLICY) == before
    assert store.reads == []


@pytest.mark.parametrize(
    ("updates", "expected_reads", "expected"),
    [
        pytest.param([], 0, [], id="same tree"),
        pytest.param([("k05000", row("new"))], 2, [("k05000", DiffType.CHANGED)], id="one change"),
        pytest.param([("k05000", row("k05000", mtime=9))], 0, [], id="mtime only is no change"),
        pytest.param(
            [("k00010", None), ("k09990", row("x"))],
            4,
            [("k00010", DiffType.REMOVED), ("k09990", DiffType.CHANGED)],
            id="two distant changes",
        ),
        # The last range takes the tail, so appending rewrites it: one range per side.
        pytest.param([("z", row("z"))], 2, [("z", DiffType.ADDED)], id="append"),
    ],
)
def test_diff_trees_opens_only_ranges_that_differ(
    big_tree: tuple[Path, list[RangeInfo]],
    updates: list[Update],
    expected_reads: int,
    expected: list[tuple[str, DiffType]],
) -> None:
    root, before = big_tree
    after = apply_updates(RangeStore(LocalAdapter(root)), before, updates, POLICY)
    store = CountingStore(LocalAdapter(root))  # a cold cache: every open is counted
    got = [(c.path, c.type) for c in diff_trees(store, before, after)]
    assert got == expected
    assert len(store.reads) == expected_reads
    reverse = [(c.path, c.type) for c in diff_trees(store, after, before)]
    flip = {DiffType.ADDED: DiffType.REMOVED, DiffType.REMOVED: DiffType.ADDED}
    assert reverse == [(p, flip.get(t, t)) for p, t in expected]


def test_diff_trees_with_prefix_opens_only_ranges_under_it(
    big_tree: tuple[Path, list[RangeInfo]],
) -> None:
    root, before = big_tree
    after = apply_updates(
        RangeStore(LocalAdapter(root)), before, [("k00001", None), ("k08000", row("x"))], POLICY
    )
    store = CountingStore(LocalAdapter(root))
    got = [(c.path, c.type) for c in diff_trees(store, before, after, prefix="k08")]
    assert got == [("k08000", DiffType.CHANGED)]
    assert len(store.reads) == 2


@pytest.mark.parametrize("key", ["k00000", "k05000", KEYS[-1], "a", "k05000a", "z"])
def test_lookup_opens_at_most_one_range(big_tree: tuple[Path, list[RangeInfo]], key: str) -> None:
    root, ranges = big_tree
    store = CountingStore(LocalAdapter(root))
    found = lookup(store, ranges, key)
    assert found == (row(key) if key in set(KEYS) else None)
    assert len(store.reads) <= 1


def test_deleting_every_row_gives_the_empty_tree(tmp_path: Path) -> None:
    store = RangeStore(LocalAdapter(tmp_path))
    ranges = apply_updates(store, [], [(k, row(k)) for k in KEYS[:100]], POLICY)
    assert apply_updates(store, ranges, [(k, None) for k in KEYS[:100]], POLICY) == []
    assert store.write_metarange([]) == store.write_metarange([])
