"""Operations on committed trees (metaranges) whose cost follows the changes, not the tree size.

Identical range ids are never opened: a range with the same id holds the same rows, and since
ranges partition the key space, its key interval holds exactly those rows in both trees.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

from lakectl.core.graph.ranges import (
    DEFAULT_POLICY,
    ChunkPolicy,
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
    """The ranges that may hold keys starting with ``prefix``."""
    if not prefix:
        return list(ranges)
    end = prefix_end(prefix)
    return [r for r in ranges if r.max_key >= prefix and r.min_key < end]


def lookup(store: RangeStore, ranges: Sequence[RangeInfo], path: str) -> Row | None:
    """The row of ``path`` in the tree, opening at most one range."""
    i = bisect.bisect_left([r.max_key for r in ranges], path)
    if i == len(ranges) or ranges[i].min_key > path:
        return None
    data = store.read_range(ranges[i].id)
    j = bisect.bisect_left(data.paths, path)
    if j < len(data.paths) and data.paths[j] == path:
        return data.rows[j]
    return None


def next_key(store: RangeStore, ranges: Sequence[RangeInfo], start: str, prefix: str = "") -> str | None:
    """The first path ``>= start`` that starts with ``prefix``, or None; reads paths only, of
    at most one range (none when the path is a range's first)."""
    start = max(start, prefix)
    i = bisect.bisect_left([r.max_key for r in ranges], start)
    if i == len(ranges):
        return None
    info = ranges[i]
    if info.min_key >= start:
        key = info.min_key
    else:
        paths = store.read_paths(info.id)
        key = paths[bisect.bisect_left(paths, start)]  # max_key >= start: one is there
    return key if key.startswith(prefix) else None


def iter_tree(
    store: RangeStore, ranges: Sequence[RangeInfo], start: str = "", prefix: str = ""
) -> Iterator[tuple[str, Row]]:
    """Yield (path, row) in path order from ``max(start, prefix)``, limited to ``prefix``."""
    start = max(start, prefix)
    for path, row in iter_rows(store, ranges_in(ranges, prefix), start):
        if prefix and not path.startswith(prefix):
            return
        yield path, row


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
    ranges: Sequence[RangeInfo],
    updates: Sequence[Update],
    policy: ChunkPolicy = DEFAULT_POLICY,
) -> list[RangeInfo]:
    """A new tree: ``ranges`` with sorted ``updates`` applied. Ranges that no update touches are
    reused whole once the writer is back at a content-defined boundary."""
    writer = RangeWriter(store, policy)
    keys = [u[0] for u in updates]
    ui, n = 0, len(updates)
    last = len(ranges) - 1
    for idx, info in enumerate(ranges):
        # Updates up to this range's max key belong here; the last range takes the tail.
        uj = n if idx == last else bisect.bisect_right(keys, info.max_key, ui)
        if uj == ui and writer.empty:
            writer.reuse(info)
            continue
        data = store.read_range(info.id)
        writer.add_all(merge_updates(zip(data.paths, data.rows, strict=True), updates[ui:uj]))
        ui = uj
    if ui < n:
        writer.add_all(merge_updates((), updates[ui:]))
    return writer.close()


def diff_trees(
    store: RangeStore,
    left: Sequence[RangeInfo],
    right: Sequence[RangeInfo],
    prefix: str = "",
) -> Iterator[Change]:
    """Changes that turn ``left`` into ``right``, in path order, skipping shared ranges."""
    common = {r.id for r in left} & {r.id for r in right}
    a = iter_tree(store, [r for r in left if r.id not in common], prefix=prefix)
    b = iter_tree(store, [r for r in right if r.id not in common], prefix=prefix)
    yield from diff_rows(a, b)


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
    """Metarange-level access: load a tree by id, apply updates and store the result."""

    def __init__(self, store: RangeStore, policy: ChunkPolicy = DEFAULT_POLICY) -> None:
        self.store = store
        self.policy = policy

    def ranges(self, mid: MetaRangeId) -> list[RangeInfo]:
        return self.store.read_metarange(mid)

    def empty(self) -> MetaRangeId:
        return self.store.write_metarange([])

    def apply(self, mid: MetaRangeId, updates: Sequence[Update]) -> MetaRangeId:
        if not updates:
            return mid
        return self.store.write_metarange(apply_updates(self.store, self.ranges(mid), updates, self.policy))

    def lookup(self, mid: MetaRangeId, path: str) -> Row | None:
        return lookup(self.store, self.ranges(mid), path)

    def next_key(self, mid: MetaRangeId, start: str, prefix: str = "") -> str | None:
        return next_key(self.store, self.ranges(mid), start, prefix)

    def iter(self, mid: MetaRangeId, start: str = "", prefix: str = "") -> Iterator[tuple[str, Row]]:
        return iter_tree(self.store, self.ranges(mid), start, prefix)

    def diff(self, left: MetaRangeId, right: MetaRangeId, prefix: str = "") -> Iterator[Change]:
        if left == right:
            return iter(())
        return diff_trees(self.store, self.ranges(left), self.ranges(right), prefix)
