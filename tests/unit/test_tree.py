"""Tree operations and their cost: content-defined ranges and pages, apply and diff open only
what changed, and trees of the first (flat, Parquet) format still read and update."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph.ranges import (
    PAGE_POLICY,
    ChunkPolicy,
    Columns,
    Index,
    PageWriter,
    RangeData,
    RangeStore,
)
from lakectl.core.graph.tree import Update, apply_updates, diff_trees, iter_tree, lookup, next_key
from lakectl.core.model import DiffType, MetaRangeId, RangeId, RangeInfo, Row
from lakectl.errors import CorruptBlock
from tests.unit.firstformat import flat_tree


def row(value: str, mtime: int = 0) -> Row:
    data = value.encode()
    md5 = hashlib.md5(data).hexdigest()
    return (len(data), md5, f"{md5}+{len(data)}", mtime, "application/octet-stream", "")


class CountingStore(RangeStore):
    """A range store that records every range and every page (or root) it is asked to open."""

    def __init__(self, blocks: LocalAdapter) -> None:
        super().__init__(blocks)
        self.reads: list[RangeId] = []
        self.index_reads: list[str] = []

    def read_range(self, rid: RangeId) -> RangeData:
        self.reads.append(rid)
        return super().read_range(rid)

    def read_columns(self, rid: RangeId) -> Columns:
        if rid not in self._cache and rid not in self._columns_cache:  # else read (and counted) before
            self.reads.append(rid)
        return super().read_columns(rid)

    def read_index(self, iid: str) -> Index:
        self.index_reads.append(iid)
        return super().read_index(iid)


# -- trees: cost follows the changes --------------------------------------------------------

POLICY = ChunkPolicy(min_rows=16, normal_rows=56, strict=256, loose=8, max_rows=192)
PAGES = ChunkPolicy(min_rows=2, normal_rows=6, strict=32, loose=2, max_rows=24, hash_offset=4)
N = 10_000
KEYS = [f"k{i:05d}" for i in range(N)]

Tree = tuple[Path, MetaRangeId]


def build(
    store: RangeStore, rows: list[tuple[str, Row | None]], base: MetaRangeId | None = None
) -> MetaRangeId:
    return apply_updates(store, base, rows, POLICY, PAGES)


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    root = tmp_path_factory.mktemp("tree-blocks")
    return root, build(RangeStore(LocalAdapter(root)), [(k, row(k)) for k in KEYS])


def test_big_tree_is_cut_into_many_bounded_ranges_and_pages(big_tree: Tree) -> None:
    root, mid = big_tree
    store = RangeStore(LocalAdapter(root))
    pages = store.pages(mid)
    ranges = store.read_metarange(mid)
    assert len(ranges) > 50 and len(pages) > 8
    assert sum(r.rows for r in ranges) == sum(p.rows for p in pages) == N
    assert all(r.rows <= POLICY.max_rows for r in ranges)
    assert all(a.max_key < b.min_key for a, b in itertools.pairwise(ranges))
    assert all(len(store.page_ranges(p.id)) <= PAGES.max_rows for p in pages)
    assert [r for p in pages for r in store.page_ranges(p.id)] == ranges
    assert [(p.min_key, p.max_key) for p in pages] == [
        (store.page_ranges(p.id)[0].min_key, store.page_ranges(p.id)[-1].max_key) for p in pages
    ]


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
    ranges = store.read_metarange(apply_updates(store, None, [(name, one) for name in sorted(names)]))
    sizes = [r.rows for r in ranges[:-1]]  # the last range ends with the keys, not at a boundary
    default = ChunkPolicy()
    assert all(default.min_rows <= s < default.max_rows for s in sizes)
    touched = sum(s * s for s in sizes) / sum(sizes)  # the mean size of the range a change falls in
    assert 0.75 * default.normal_rows <= touched <= 1.5 * default.normal_rows


def test_pages_are_cut_near_their_normal_size() -> None:
    """A page is cut on the last key of a range, which is itself a range boundary (its hash 0
    mod ``loose``): hashed with the same bytes, pages would come 8 times too short."""
    default = ChunkPolicy()
    boundary_keys = [
        k
        for k in (f"data/f{n:08d}.bin" for n in range(1_000_000))
        if default.is_boundary(k, default.normal_rows)
    ]
    ranges = [RangeInfo(RangeId(f"r{i}"), k, k, 1, 1) for i, k in enumerate(boundary_keys)]
    writer = PageWriter(RangeStore(Blocks()))  # type: ignore[arg-type]
    writer.add_all(ranges)
    sizes = [p.rows for p in writer.close()[:-1]]
    assert len(sizes) > 100
    assert PAGE_POLICY.normal_rows <= sum(sizes) / len(sizes) <= 1.5 * PAGE_POLICY.normal_rows


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


def canonical(store: RangeStore, updates: list[Update]) -> MetaRangeId:
    """The tree built from scratch from the big tree's rows with ``updates`` applied."""
    rows = {k: row(k) for k in KEYS}
    for k, v in updates:
        if v is None:
            rows.pop(k)
        else:
            rows[k] = v
    return build(store, sorted(rows.items()))


@pytest.mark.parametrize(
    ("updates", "max_new", "max_reads"),
    [pytest.param(u, n, r, id=case) for case, u, n, r in LOCAL_UPDATES],
)
def test_apply_updates_rewrites_only_the_ranges_and_pages_around_a_change(
    big_tree: Tree, updates: list[Update], max_new: int, max_reads: int
) -> None:
    root, mid = big_tree
    store = CountingStore(LocalAdapter(root))
    before, before_pages = store.read_metarange(mid), store.pages(mid)
    store.index_reads.clear()
    store._index_cache.clear()
    after_mid = apply_updates(store, mid, updates, POLICY, PAGES)
    # The root and, per change, the page or two around it: not the tree's other pages.
    assert len(store.index_reads) <= 1 + 2 * len(updates)
    assert len(store.reads) <= max_reads
    after, after_pages = store.read_metarange(after_mid), store.pages(after_mid)
    old_ids = {r.id for r in before}
    new = [i for i, r in enumerate(after) if r.id not in old_ids]
    assert 1 <= len(new) <= max_new
    # One contiguous run of new ranges per separate change...
    runs = 1 + sum(1 for a, b in itertools.pairwise(new) if b != a + 1)
    assert runs <= len(updates)
    # ... and every other range reused as is, in the same order; the same for pages.
    reused = [r for r in after if r.id in old_ids]
    positions = [before.index(r) for r in reused]
    assert positions == sorted(positions)
    assert len(reused) >= len(before) - max_new
    new_pages = [p for p in after_pages if p.id not in {q.id for q in before_pages}]
    assert 1 <= len(new_pages) <= 2 * len(updates)
    # And the result is the canonical tree of the new rows.
    assert after_mid == canonical(store, updates)


def test_spread_changes_cost_what_they_touch(big_tree: Tree) -> None:
    """100 changes spread over the whole tree read and write about one range each, and the
    pages above them, not the tree: the cost of a commit follows the changes."""
    root, mid = big_tree
    store = CountingStore(LocalAdapter(root))
    keys = KEYS[17::100]
    updates: list[Update] = [(k, row(k + "!")) for k in keys]
    after = apply_updates(store, mid, updates, POLICY, PAGES)
    ranges = store.read_metarange(mid)
    touched = {r.id for r in ranges for k in keys if r.min_key <= k <= r.max_key}
    assert len(set(store.reads)) <= len(touched) + 2
    assert len(touched) < len(ranges)
    assert after == canonical(store, updates)
    cold = CountingStore(LocalAdapter(root))
    assert [c.path for c in diff_trees(cold, mid, after)] == keys
    assert len(cold.reads) <= 2 * (len(touched) + 2)


def test_apply_an_mtime_only_change_keeps_the_tree(big_tree: Tree) -> None:
    """Re-uploading equal bytes is no change: the old row (and every id) stays."""
    root, mid = big_tree
    store = CountingStore(LocalAdapter(root))
    assert apply_updates(store, mid, [("k05000", row("k05000", mtime=9))], POLICY, PAGES) == mid
    assert len(store.reads) == 1


def test_apply_no_updates_reuses_every_page(big_tree: Tree) -> None:
    root, mid = big_tree
    store = CountingStore(LocalAdapter(root))
    assert apply_updates(store, mid, [], POLICY, PAGES) == mid
    assert store.reads == [] and store.index_reads == [mid]


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
    big_tree: Tree, updates: list[Update], expected_reads: int, expected: list[tuple[str, DiffType]]
) -> None:
    root, before = big_tree
    after = build(RangeStore(LocalAdapter(root)), updates, before)
    store = CountingStore(LocalAdapter(root))  # a cold cache: every open is counted
    got = [(c.path, c.type) for c in diff_trees(store, before, after)]
    assert got == expected
    assert len(store.reads) == expected_reads
    # Two roots, and the pages that differ: one per side for each change.
    assert len(set(store.index_reads)) <= 2 + 2 * len(updates)
    reverse = [(c.path, c.type) for c in diff_trees(store, after, before)]
    flip = {DiffType.ADDED: DiffType.REMOVED, DiffType.REMOVED: DiffType.ADDED}
    assert reverse == [(p, flip.get(t, t)) for p, t in expected]


def test_diff_trees_with_prefix_opens_only_ranges_under_it(big_tree: Tree) -> None:
    root, before = big_tree
    after = build(RangeStore(LocalAdapter(root)), [("k00001", None), ("k08000", row("x"))], before)
    store = CountingStore(LocalAdapter(root))
    got = [(c.path, c.type) for c in diff_trees(store, before, after, prefix="k08")]
    assert got == [("k08000", DiffType.CHANGED)]
    assert len(store.reads) == 2


@pytest.mark.parametrize("key", ["k00000", "k05000", KEYS[-1], "a", "k05000a", "z"])
def test_lookup_opens_at_most_one_page_and_one_range(big_tree: Tree, key: str) -> None:
    root, mid = big_tree
    store = CountingStore(LocalAdapter(root))
    found = lookup(store, mid, key)
    assert found == (row(key) if key in set(KEYS) else None)
    assert len(store.reads) <= 1 and len(store.index_reads) <= 2


@pytest.mark.parametrize(
    ("start", "prefix", "expected"),
    [
        ("", "", "k00000"),
        ("k05000a", "", "k05001"),
        ("", "k0999", "k09990"),
        ("k1", "", None),
        ("", "x", None),
    ],
)
def test_next_key_and_iteration_cross_pages(
    big_tree: Tree, start: str, prefix: str, expected: str | None
) -> None:
    root, mid = big_tree
    store = RangeStore(LocalAdapter(root))
    assert next_key(store, mid, start, prefix) == expected
    got = [p for p, _ in iter_tree(store, mid, start, prefix)]
    assert got == [k for k in KEYS if k >= max(start, prefix) and k.startswith(prefix)]


def test_deleting_every_row_gives_the_empty_tree(tmp_path: Path) -> None:
    store = RangeStore(LocalAdapter(tmp_path))
    mid = build(store, [(k, row(k)) for k in KEYS[:100]])
    assert build(store, [(k, None) for k in KEYS[:100]], mid) == store.write_root([])
    assert store.write_root([]) == store.write_root([])
    assert store.pages(store.write_root([])) == [] and lookup(store, store.write_root([]), "k") is None


# -- files --------------------------------------------------------------------------------------


def test_equal_rows_give_equal_files(tmp_path: Path) -> None:
    """Ids are content addresses: the same rows written twice are the same bytes."""
    a, b = RangeStore(LocalAdapter(tmp_path / "a")), RangeStore(LocalAdapter(tmp_path / "b"))
    rows = [(k, row(k)) for k in KEYS[:500]]
    assert build(a, rows) == build(b, rows)


class Blocks(dict[str, bytes]):
    """Blocks in memory, read back unchecked: what a file's own decoding must catch."""

    def put(self, locator: str, data: bytes) -> None:
        self[locator] = bytes(data)


def test_a_file_that_does_not_decode_is_a_corrupt_block() -> None:
    blocks = Blocks()
    store = RangeStore(blocks)  # type: ignore[arg-type]
    mid = build(store, [(k, row(k)) for k in KEYS[:300]])
    info = store.read_metarange(mid)[0]
    data = blocks[info.id]
    for damage in (data[: len(data) // 2], b"XXXX" + data[4:], data[:12] + b"\0" * 40, data[:5]):
        blocks[info.id] = damage
        with pytest.raises(CorruptBlock):
            RangeStore(blocks).read_range(info.id)  # type: ignore[arg-type]
    page = store.pages(mid)[0]
    with pytest.raises(CorruptBlock, match="root where a page"):
        RangeStore(blocks).page_ranges(RangeId(mid))  # type: ignore[arg-type]
    with pytest.raises(CorruptBlock, match="not a page or root"):
        RangeStore(blocks).read_index(store.page_ranges(page.id)[1].id)  # type: ignore[arg-type]


# -- the first format: one flat metarange of Parquet ranges -----------------------------------


def test_a_tree_of_the_first_format_reads_diffs_and_updates(tmp_path: Path) -> None:
    blocks = LocalAdapter(tmp_path)
    rows = [(k, row(k)) for k in KEYS[:3000]]
    old = flat_tree(blocks, rows, per_range=700)
    store = CountingStore(blocks)
    assert [p.id for p in store.pages(old)] == [old]  # its own single page
    assert len(store.read_metarange(old)) == 5
    assert lookup(store, old, "k02500") == row("k02500")
    assert [p for p, _ in iter_tree(store, old, "k02998")] == ["k02998", "k02999"]
    new = build(store, rows)
    assert list(diff_trees(store, old, new)) == []
    # Updated, it becomes a tree of the current format with the same rows as the tree built
    # from scratch, the old ranges before the change reused as they are (ranges after it are
    # rewritten until a cut of the current policy meets an old range's end).
    store.reads.clear()
    updated = build(store, [("k02990", row("x"))], old)
    assert store.read_index(updated).level == 1
    assert len(set(store.reads)) == 1
    assert list(diff_trees(store, updated, build(store, [("k02990", row("x"))], new))) == []
    assert [(c.path, c.type) for c in diff_trees(store, old, updated)] == [("k02990", DiffType.CHANGED)]
    assert [r.id for r in store.read_metarange(updated)][:4] == [r.id for r in store.read_metarange(old)][:4]


def test_a_rewrite_in_place_is_diffed_by_columns_as_rows_compare(tmp_path: Path) -> None:
    """Two ranges of the same paths are compared a column at a time: what differs by more
    than its mtime is a change, and both rows are those a row-by-row diff would give."""
    store = RangeStore(LocalAdapter(tmp_path))
    paths = [f"k{i:03d}" for i in range(50)]
    before = [row(p) for p in paths]
    after = list(before)
    after[3] = row("k003", mtime=7)  # mtime only: no change
    after[10] = row("new content")
    after[20] = (*before[20][:4], "text/csv", "")
    after[30] = (*before[30][:5], '{"a":"b"}')
    trees = [
        store.write_root([store.write_page([store.write_range(paths, rows)])]) for rows in (before, after)
    ]
    cold = CountingStore(LocalAdapter(tmp_path))
    got = list(diff_trees(cold, *trees))
    assert [(c.path, c.type) for c in got] == [(p, DiffType.CHANGED) for p in ("k010", "k020", "k030")]
    assert [(c.new, c.old) for c in got] == [(after[i], before[i]) for i in (10, 20, 30)]
    assert [c.path for c in diff_trees(cold, *trees, prefix="k02")] == ["k020"]
    assert len(cold.reads) == 2
