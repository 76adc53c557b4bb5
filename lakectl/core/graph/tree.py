"""Operations on committed trees (metaranges) whose cost follows the changes, not the tree size.

Identical range ids are never opened: a range with the same id holds the same rows, and since
ranges partition the key space, its key interval holds exactly those rows in both trees.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence

from lakectl.core.graph.ranges import (
    DEFAULT_POLICY,
    PAGE_POLICY,
    BatchedPuts,
    ChunkPolicy,
    PageWriter,
    RangeStore,
    RangeWriter,
    iter_rows,
)
from lakectl.core.model import Change, DiffType, MetaRangeId, RangeInfo, Row, same_row

Update = tuple[str, Row | None]
"""A change to apply: the path and its new row, or None to delete it."""

MAX_KEY = "\U0010ffff"


def prefix_end(prefix: str) -> str:
    """The smallest key greater than every key starting with ``prefix`` ("" means no end)."""
    return prefix + MAX_KEY if prefix else ""


def ranges_in(ranges: Sequence[RangeInfo], prefix: str) -> list[RangeInfo]:
    """The ranges (or pages) that may hold keys starting with ``prefix``."""
    if not prefix:
        return list(ranges)
    end = prefix_end(prefix)
    return [r for r in ranges if r.max_key >= prefix and r.min_key < end]


def _covering(entries: Sequence[RangeInfo], key: str) -> RangeInfo | None:
    """The entry (range or page) whose interval holds ``key``, or None."""
    i = bisect.bisect_left([r.max_key for r in entries], key)
    if i == len(entries) or entries[i].min_key > key:
        return None
    return entries[i]


def lookup(store: RangeStore, mid: MetaRangeId, path: str) -> Row | None:
    """The row of ``path`` in the tree, opening at most one page and one range."""
    page = _covering(store.pages(mid), path)
    info = None if page is None else store.page(page.id).covering(path)
    return None if info is None else store.lookup_row(info.id, path)


def next_key(store: RangeStore, mid: MetaRangeId, start: str, prefix: str = "") -> str | None:
    """The first path ``>= start`` that starts with ``prefix``, or None; reads paths only, of
    at most one range (none when the path is a range's first)."""
    start = max(start, prefix)
    pages = store.pages(mid)
    i = bisect.bisect_left([p.max_key for p in pages], start)
    if i == len(pages):
        return None
    page = store.page(pages[i].id)
    info = page.entry(bisect.bisect_left(page.max_keys, start))  # the page's max key >= start
    if info.min_key >= start:
        key = info.min_key
    else:
        paths = store.read_paths(info.id)
        key = paths[bisect.bisect_left(paths, start)]  # max_key >= start: one is there
    return key if key.startswith(prefix) else None


def leaves(
    store: RangeStore, pages: Iterable[RangeInfo], start: str = "", prefix: str = ""
) -> Iterator[RangeInfo]:
    """The ranges of ``pages`` that may hold keys ``>= start`` starting with ``prefix``, in order."""
    start = max(start, prefix)
    for page in ranges_in([p for p in pages if p.max_key >= start], prefix):
        yield from ranges_in([r for r in store.page_ranges(page.id) if r.max_key >= start], prefix)


def iter_tree(
    store: RangeStore, mid: MetaRangeId, start: str = "", prefix: str = ""
) -> Iterator[tuple[str, Row]]:
    """Yield (path, row) in path order from ``max(start, prefix)``, limited to ``prefix``."""
    return _iter_ranges(store, leaves(store, store.pages(mid), start, prefix), start, prefix)


def _iter_ranges(
    store: RangeStore, ranges: Iterable[RangeInfo], start: str = "", prefix: str = ""
) -> Iterator[tuple[str, Row]]:
    rows = iter_rows(store, ranges, max(start, prefix))
    if not prefix:
        return rows
    return itertools.takewhile(lambda item: item[0].startswith(prefix), rows)


def merge_updates(rows: Iterable[tuple[str, Row]], updates: Sequence[Update]) -> Iterator[tuple[str, Row]]:
    """Rows with sorted updates applied (an update of None deletes the path)."""
    ui, n = 0, len(updates)
    for path, row in rows:
        while ui < n and updates[ui][0] < path:
            upath, urow = updates[ui]
            if urow is not None:
                yield upath, urow
            ui += 1
        if ui < n and updates[ui][0] == path:
            urow = updates[ui][1]
            if urow is not None:
                # The same object again (only mtime differs) keeps its row, so re-uploading
                # equal bytes leaves the range, and the tree id, unchanged.
                yield path, row if same_row(row, urow) else urow
            ui += 1
        else:
            yield path, row
    for upath, urow in updates[ui:]:
        if urow is not None:
            yield upath, urow


def apply_updates(
    store: RangeStore,
    mid: MetaRangeId | None,
    updates: Sequence[Update],
    policy: ChunkPolicy = DEFAULT_POLICY,
    page_policy: ChunkPolicy = PAGE_POLICY,
) -> MetaRangeId:
    """A new tree: the tree ``mid`` (None: the empty tree) with sorted ``updates`` applied.

    Each level is rewritten only around the updates: a page no update reaches is reused whole
    once both writers are back at a content-defined boundary, and so is a range. The result is
    the tree built from scratch from the same rows, whatever the history (pages and ranges are
    cut where the keys say, and a reused one started and ended at such a cut)."""
    with BatchedPuts(store.blocks) as puts:
        pages = _apply(
            store,
            mid,
            updates,
            RangeWriter(store, policy, puts.put),
            PageWriter(store, page_policy, puts.put),
        )
    return store.write_root(pages)


def _apply(
    store: RangeStore,
    mid: MetaRangeId | None,
    updates: Sequence[Update],
    rows: RangeWriter,
    index: PageWriter,
) -> list[RangeInfo]:
    keys = [u[0] for u in updates]
    ui, n = 0, len(updates)
    pages = store.pages(mid) if mid is not None else []
    for pi, page in enumerate(pages):
        # Updates up to this page's max key belong here; the last page takes the tail.
        uj = n if pi == len(pages) - 1 else bisect.bisect_right(keys, page.max_key, ui)
        if uj == ui and rows.empty and index.empty:
            index.reuse(page)
            continue
        ranges = store.page_ranges(page.id)
        for ri, info in enumerate(ranges):
            rj = uj if ri == len(ranges) - 1 else bisect.bisect_right(keys, info.max_key, ui, uj)
            if rj == ui and rows.empty:
                index.add_all((info,))
                continue
            data = store.read_range(info.id)
            rows.add_all(merge_updates(zip(data.paths, data.rows, strict=True), updates[ui:rj]))
            index.add_all(rows.take())
            ui = rj
    if ui < n:
        rows.add_all(merge_updates((), updates[ui:]))
    index.add_all(rows.close())
    return index.close()


def diff_trees(
    store: RangeStore, left: MetaRangeId, right: MetaRangeId, prefix: str = ""
) -> Iterator[Change]:
    """Changes that turn ``left`` into ``right``, in path order, skipping shared pages and
    ranges: a page (or range) with the same id in both trees holds the same rows, and since the
    pages (and ranges) of a tree partition its keys, its interval holds exactly those rows in
    both."""
    a_pages, b_pages = store.pages(left), store.pages(right)
    shared = {p.id for p in a_pages} & {p.id for p in b_pages}
    a_index = [store.page(p.id) for p in ranges_in(a_pages, prefix) if p.id not in shared]
    b_index = [store.page(p.id) for p in ranges_in(b_pages, prefix) if p.id not in shared]
    # Ranges are compared by id first, from the pages' columns: a spread change leaves most of
    # a page's ranges as they were, and only the others are built.
    common = {rid for index in a_index for rid in index.ids} & {rid for index in b_index for rid in index.ids}
    a_ranges = ranges_in([r for index in a_index for r in index.entries_except(common)], prefix)
    b_ranges = ranges_in([r for index in b_index for r in index.entries_except(common)], prefix)
    for left_group, right_group in _overlapping(a_ranges, b_ranges):
        if len(left_group) == len(right_group) == 1:
            changes = _diff_in_place(store, left_group[0], right_group[0], prefix)
            if changes is not None:
                yield from changes
                continue
        yield from diff_rows(
            _iter_ranges(store, left_group, prefix=prefix), _iter_ranges(store, right_group, prefix=prefix)
        )


def _overlapping(
    left: Sequence[RangeInfo], right: Sequence[RangeInfo]
) -> Iterator[tuple[list[RangeInfo], list[RangeInfo]]]:
    """The two sides' ranges in groups whose key intervals overlap (each side's sorted and
    disjoint), in key order: what each group holds, no other range of either side holds."""
    merged = heapq.merge(((r.min_key, 0, r) for r in left), ((r.min_key, 1, r) for r in right))
    groups: tuple[list[RangeInfo], list[RangeInfo]] = ([], [])
    end = ""
    for min_key, side, info in merged:
        if (groups[0] or groups[1]) and min_key > end:
            yield groups
            groups = ([], [])
        if not (groups[0] or groups[1]) or info.max_key > end:
            end = info.max_key
        groups[side].append(info)
    if groups[0] or groups[1]:
        yield groups


def _diff_in_place(store: RangeStore, left: RangeInfo, right: RangeInfo, prefix: str) -> list[Change] | None:
    """The changes between two ranges of the same paths (a rewrite in place, the usual change),
    found a column at a time; None when their paths differ."""
    if (left.min_key, left.max_key, left.rows) != (right.min_key, right.max_key, right.rows):
        return None
    a, b = store.read_columns(left.id), store.read_columns(right.id)
    if a.paths != b.paths:
        return None
    return [
        Change(b.paths[i], DiffType.CHANGED, b.row(i), a.row(i))
        for i in a.changed(b)
        if not prefix or b.paths[i].startswith(prefix)
    ]


def diff_rows(left: Iterator[tuple[str, Row]], right: Iterator[tuple[str, Row]]) -> Iterator[Change]:
    """Merge-join two sorted row streams into changes."""
    la = next(left, None)
    rb = next(right, None)
    while la is not None or rb is not None:
        if rb is None or (la is not None and la[0] < rb[0]):
            assert la is not None
            yield Change(la[0], DiffType.REMOVED, None, la[1])
            la = next(left, None)
        elif la is None or rb[0] < la[0]:
            yield Change(rb[0], DiffType.ADDED, rb[1], None)
            rb = next(right, None)
        else:
            if not same_row(la[1], rb[1]):
                yield Change(rb[0], DiffType.CHANGED, rb[1], la[1])
            la = next(left, None)
            rb = next(right, None)


class Trees:
    """Tree-level access: load a tree by id, apply updates and store the result."""

    def __init__(
        self, store: RangeStore, policy: ChunkPolicy = DEFAULT_POLICY, page_policy: ChunkPolicy = PAGE_POLICY
    ) -> None:
        self.store = store
        self.policy = policy
        self.page_policy = page_policy

    def ranges(self, mid: MetaRangeId) -> list[RangeInfo]:
        """Every range of the tree, in key order."""
        return self.store.read_metarange(mid)

    def empty(self) -> MetaRangeId:
        return self.store.write_root([])

    def apply(self, mid: MetaRangeId, updates: Sequence[Update]) -> MetaRangeId:
        if not updates:
            return mid
        return apply_updates(self.store, mid, updates, self.policy, self.page_policy)

    def lookup(self, mid: MetaRangeId, path: str) -> Row | None:
        return lookup(self.store, mid, path)

    def next_key(self, mid: MetaRangeId, start: str, prefix: str = "") -> str | None:
        return next_key(self.store, mid, start, prefix)

    def iter(self, mid: MetaRangeId, start: str = "", prefix: str = "") -> Iterator[tuple[str, Row]]:
        return iter_tree(self.store, mid, start, prefix)

    def diff(self, left: MetaRangeId, right: MetaRangeId, prefix: str = "") -> Iterator[Change]:
        if left == right:
            return iter(())
        return diff_trees(self.store, left, right, prefix)
