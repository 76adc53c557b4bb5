"""The files of a committed tree, immutable and stored as content-addressed blocks: ranges of
sorted rows, pages naming a stretch of ranges, and a root naming the pages, whose id is the
tree's (its metarange id). Two index levels keep the cost of a commit, diff or merge with the
changes even where they are spread over the whole tree (docs/decisions/0016)."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple, TypeVar

from lakectl.core.blocks import BlockAdapter
from lakectl.core.model import MetaRangeId, RangeId, RangeInfo, Row
from lakectl.errors import CorruptBlock

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ChunkPolicy:
    """Content-defined range boundaries: close a range after a key whose hash is 0 mod
    ``strict`` once it holds ``min_rows``, or 0 mod ``loose`` once it holds ``normal_rows``;
    always close it at ``max_rows``. Boundaries depend only on the keys, so an unchanged region
    of the tree keeps its range ids from commit to commit.

    Two moduli (FastCDC's normalized chunking) keep sizes near ``normal_rows``: a commit
    rewrites each range it touches, whole, and with one modulus sizes are geometric, so a
    change more often lands in a big range (a touched range held twice the mean). The hash is
    the key's md5: CRC-32 is linear, and on keys that differ in a few digits its low bits can
    miss 0 for 80,000 keys in a row (docs/decisions/0002)."""

    min_rows: int = 64
    normal_rows: int = 224
    strict: int = 1024
    loose: int = 32
    max_rows: int = 768
    hash_offset: int = 0
    """Where in the key's md5 its 4 bytes of hash start. Pages are cut on the last keys of ranges, which
    are range boundaries: their first bytes are 0 mod ``loose`` already, so a page boundary
    taken from the same bytes would come 8 times too often (pages of ~11 ranges, not ~120)."""

    def is_boundary(self, key: str, count: int) -> bool:
        if count >= self.max_rows:
            return True
        if count < self.min_rows:
            return False
        modulus = self.strict if count < self.normal_rows else self.loose
        return (
            int.from_bytes(
                hashlib.md5(key.encode()).digest()[self.hash_offset : self.hash_offset + 4], "little"
            )
            % modulus
            == 0
        )


DEFAULT_POLICY = ChunkPolicy()
"""Ranges of ~240 rows: a change rewrites the range it lands in, so the smaller the range, the
less a change spread over the tree costs; each range also costs a file (docs/decisions/0016)."""
PAGE_POLICY = ChunkPolicy(min_rows=32, normal_rows=112, strict=512, loose=16, max_rows=384, hash_offset=4)
"""Pages of ~128 ranges (~30k rows): a root of 1M rows names ~35 of them. Changes spread over a
big tree touch most pages, and a page costs a file to write whatever its size: fewer, larger
pages cost less there, and a lookup still decodes one page of ~128 entries (docs/decisions/0016)."""


def _locator(data: bytes) -> str:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


@dataclass(frozen=True, slots=True)
class RangeData:
    """A decoded range: parallel lists of paths and rows, sorted by path."""

    paths: list[str]
    rows: list[Row]


class RangeStore:
    """Reads and writes the files of trees in a block adapter: ranges (the rows), pages (the
    ranges of a stretch of keys) and roots (the pages of a tree, whose id is the tree's id),
    with LRUs of decoded files.

    A tree of the first format is one flat metarange naming its ranges. It reads as a root of
    one page, itself (:meth:`pages`), so every walk sees two index levels."""

    def __init__(self, blocks: BlockAdapter, cache_size: int = 256, paths_cache_size: int = 256) -> None:
        self.blocks = blocks
        self._cache: OrderedDict[str, RangeData] = OrderedDict()
        self._index_cache: OrderedDict[str, Index] = OrderedDict()
        self._paths_cache: OrderedDict[str, list[str]] = OrderedDict()
        self._columns_cache: OrderedDict[str, Columns] = OrderedDict()
        self._cache_size = cache_size
        self._paths_cache_size = paths_cache_size

    # -- ranges -----------------------------------------------------------------------------

    def write_range(self, paths: list[str], rows: list[Row], put: Put | None = None) -> RangeInfo:
        """Store one range of sorted, non-empty rows; return its page entry."""
        cols = list(zip(*rows, strict=True))
        rid = RangeId(self._put(_encode(RANGE_COLUMNS, [paths, *cols]), put))
        self._remember(self._cache, rid, RangeData(paths, rows))
        return RangeInfo(
            id=rid, min_key=paths[0], max_key=paths[-1], rows=len(paths), size_bytes=sum(cols[0])
        )

    def read_range(self, rid: RangeId) -> RangeData:
        cached = self._cache.get(rid)
        if cached is not None:
            self._cache.move_to_end(rid)
            return cached
        d = _decode(self.blocks.get(rid), rid, RANGE_COLUMNS)
        rows: list[Row] = list(
            zip(
                d["size"],
                d["checksum"],
                d["locators"],
                d["mtime"],
                d["content_type"],
                d["metadata"],
                strict=True,
            )
        )
        data = RangeData(d["path"], rows)
        self._remember(self._cache, rid, data)
        return data

    def read_columns(self, rid: RangeId) -> Columns:
        """A range as its columns of text: what a lookup bisects and a diff compares a column at
        a time, without building a row for every entry."""
        cached = self._columns_cache.get(rid)
        if cached is not None:
            self._columns_cache.move_to_end(rid)
            return cached
        data = self._cache.get(rid)
        if data is not None:
            sizes, checksums, locators, mtimes, types, metadata = map(list, zip(*data.rows, strict=True))
            columns = Columns(
                data.paths, [*map(str, sizes)], checksums, locators, [*map(str, mtimes)], types, metadata
            )
        else:
            d = _decode(self.blocks.get(rid), rid, RANGE_COLUMNS, as_text=True)
            columns = Columns(
                *(d[name] if isinstance(d[name][0], str) else [*map(str, d[name])] for name in RANGE_COLUMNS)
            )
        self._remember(self._columns_cache, rid, columns)
        return columns

    def lookup_row(self, rid: RangeId, path: str) -> Row | None:
        """The row of ``path`` in a range, or None; builds that row alone."""
        data = self._cache.get(rid)
        if data is not None:
            j = bisect.bisect_left(data.paths, path)
            return data.rows[j] if j < len(data.paths) and data.paths[j] == path else None
        columns = self.read_columns(rid)
        j = bisect.bisect_left(columns.paths, path)
        return columns.row(j) if j < len(columns.paths) and columns.paths[j] == path else None

    def read_paths(self, rid: RangeId) -> list[str]:
        """The paths of a range, read alone (a fifth of decoding its rows) and kept in an LRU of
        their own: what a listing reads to step over directories."""
        cached = self._cache.get(rid)
        if cached is not None:
            return cached.paths
        paths = self._paths_cache.get(rid)
        if paths is not None:
            self._paths_cache.move_to_end(rid)
            return paths
        paths = _decode(self.blocks.get(rid), rid, ("path",))["path"]
        self._paths_cache[rid] = paths
        while len(self._paths_cache) > self._paths_cache_size:
            self._paths_cache.popitem(last=False)
        return paths

    def read_locators(self, rid: RangeId) -> list[str]:
        """The ``locators`` column of a range (space-separated segment tokens per entry), read
        alone and not cached: what garbage collection scans, for every range of the lake."""
        return _decode(self.blocks.get(rid), rid, ("locators",))["locators"]

    # -- the index: pages and roots ---------------------------------------------------------

    def write_page(self, ranges: Sequence[RangeInfo], put: Put | None = None) -> RangeInfo:
        """Store a page naming ``ranges`` (sorted, non-empty); return its root entry."""
        pid = RangeId(self._write_index(ranges, ROOT_LEVEL - 1))
        return RangeInfo(
            id=pid,
            min_key=ranges[0].min_key,
            max_key=ranges[-1].max_key,
            rows=sum(r.rows for r in ranges),
            size_bytes=sum(r.size_bytes for r in ranges),
        )

    def write_root(self, pages: Sequence[RangeInfo]) -> MetaRangeId:
        """Store a root naming ``pages`` (sorted; none for the empty tree): the tree's id."""
        return MetaRangeId(self._write_index(pages, ROOT_LEVEL))

    def read_index(self, iid: str) -> Index:
        """A decoded page or root (or a metarange of the flat format, which reads as a page)."""
        cached = self._index_cache.get(iid)
        if cached is not None:
            self._index_cache.move_to_end(iid)
            return cached
        d = _decode(self.blocks.get(iid), iid, as_text=True)
        names = tuple(d)
        if names not in (PAGE_COLUMNS, ROOT_COLUMNS):
            raise CorruptBlock(
                f"block {iid} is not a page or root of a tree (its columns: {', '.join(names)})"
            )
        level = ROOT_LEVEL if names == ROOT_COLUMNS else ROOT_LEVEL - 1
        index = Index(level, *d.values())
        self._remember(self._index_cache, iid, index)
        return index

    def pages(self, mid: MetaRangeId) -> list[RangeInfo]:
        """The pages of a tree, in key order. A flat metarange is its own single page."""
        index = self.read_index(mid)
        if index.level == ROOT_LEVEL:
            return index.entries
        ranges = index.entries
        if not ranges:
            return []
        return [
            RangeInfo(
                RangeId(mid),
                ranges[0].min_key,
                ranges[-1].max_key,
                sum(r.rows for r in ranges),
                sum(r.size_bytes for r in ranges),
            )
        ]

    def page_ranges(self, pid: RangeId) -> list[RangeInfo]:
        """The ranges a page names, in key order."""
        return self.page(pid).entries

    def page(self, pid: RangeId) -> Index:
        """A page, decoded."""
        index = self.read_index(pid)
        if index.level != ROOT_LEVEL - 1:
            raise CorruptBlock(f"block {pid} is a root where a page was expected")
        return index

    def read_metarange(self, mid: MetaRangeId) -> list[RangeInfo]:
        """Every range of a tree, in key order (each of its pages read)."""
        return [info for page in self.pages(mid) for info in self.page_ranges(page.id)]

    def _write_index(self, entries: Sequence[RangeInfo], level: int, put: Put | None = None) -> str:
        columns = [[getattr(r, field) for r in entries] for field in RangeInfo._fields]
        iid = self._put(_encode(ROOT_COLUMNS if level == ROOT_LEVEL else PAGE_COLUMNS, columns), put)
        self._remember(self._index_cache, iid, Index.of(level, entries))
        return iid

    def _put(self, data: bytes, put: Put | None) -> str:
        locator = _locator(data)
        (put or self.blocks.put)(locator, data)
        return locator

    def _remember(self, cache: OrderedDict[str, _T], key: str, value: _T) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)


ROOT_LEVEL = 1
"""The level of a root; its pages are at level 0 and name the ranges."""
RANGE_COLUMNS = ("path", "size", "checksum", "locators", "mtime", "content_type", "metadata")
PAGE_COLUMNS = ("range_id", "min_key", "max_key", "count", "size_bytes")
ROOT_COLUMNS = ("page_id", "min_key", "max_key", "count", "size_bytes")
_INTEGERS = frozenset({"size", "mtime", "count", "size_bytes"})


class Columns(NamedTuple):
    """A range's columns as stored, integers as their decimal text."""

    paths: list[str]
    sizes: list[str]
    checksums: list[str]
    locators: list[str]
    mtimes: list[str]
    content_types: list[str]
    metadata: list[str]

    def row(self, i: int) -> Row:
        return (
            int(self.sizes[i]),
            self.checksums[i],
            self.locators[i],
            int(self.mtimes[i]),
            self.content_types[i],
            self.metadata[i],
        )

    def changed(self, other: Columns) -> list[int]:
        """The positions whose entries differ from ``other``'s (a range of the same paths) by
        more than their mtime, as :func:`lakectl.core.model.same_row` compares rows: found a
        column at a time, by comparisons in C, not a row at a time."""
        ne, or_ = operator.ne, operator.or_
        flags = map(ne, self.checksums, other.checksums)
        for mine, theirs in (
            (self.sizes, other.sizes),
            (self.locators, other.locators),
            (self.content_types, other.content_types),
            (self.metadata, other.metadata),
        ):
            flags = map(or_, flags, map(ne, mine, theirs))
        return list(itertools.compress(range(len(self.paths)), flags))


class Index:
    """A decoded page (level 0: its entries are ranges) or root (level 1: pages), kept as the
    columns it was read as: a walk that needs a few entries of many pages (a lookup, a diff of
    changes spread over a big tree) builds only those, and bisects the keys as they are."""

    __slots__ = ("_entries", "_rows", "_sizes", "ids", "level", "max_keys", "min_keys")

    def __init__(
        self,
        level: int,
        ids: list[str],
        min_keys: list[str],
        max_keys: list[str],
        rows: list[str] | list[int],
        sizes: list[str] | list[int],
    ) -> None:
        self.level = level
        self.ids = ids
        self.min_keys = min_keys
        self.max_keys = max_keys
        self._rows = rows
        self._sizes = sizes
        self._entries: list[RangeInfo] | None = None

    @staticmethod
    def of(level: int, entries: Sequence[RangeInfo]) -> Index:
        index = (
            Index(level, *(list(c) for c in zip(*entries, strict=True)))
            if entries
            else Index(level, [], [], [], [], [])
        )
        index._entries = list(entries)
        return index

    @property
    def entries(self) -> list[RangeInfo]:
        if self._entries is None:
            self._entries = [self.entry(i) for i in range(len(self.ids))]
        return self._entries

    def entry(self, i: int) -> RangeInfo:
        if self._entries is not None:
            return self._entries[i]
        return RangeInfo(
            RangeId(self.ids[i]), self.min_keys[i], self.max_keys[i], int(self._rows[i]), int(self._sizes[i])
        )

    def covering(self, key: str) -> RangeInfo | None:
        """The entry whose interval holds ``key``, or None."""
        i = bisect.bisect_left(self.max_keys, key)
        if i == len(self.ids) or self.min_keys[i] > key:
            return None
        return self.entry(i)

    def entries_except(self, ids: set[str]) -> list[RangeInfo]:
        """The entries whose id is not in ``ids``, in order."""
        return [self.entry(i) for i, rid in enumerate(self.ids) if rid not in ids]


# -- the file format --------------------------------------------------------------------------
#
# A range, page or root is ``MAGIC`` and a zlib stream of UTF-8 text: the number of rows, the
# column names joined by commas, then every value, column after column, all joined by NUL (no
# value holds one: paths refuse it, metadata is JSON, the other fields are validated). A file of
# 250 rows costs ~0.3 ms to write and ~0.2 ms to read, where Parquet cost twice that (a
# compressor per column chunk) and a zstd-compressed Arrow stream about the same; and reading
# one needs no pyarrow, whose import (60-150 ms) every command that reads an object's row would
# pay (docs/decisions/0016). Files of the first format are Parquet (``PAR1``) and still read.

MAGIC = b"LKT1"
PARQUET_MAGIC = b"PAR1"
"""How a Parquet file begins and ends (range files of the first format; the journal's batches)."""
_SEP = "\x00"


def _encode(names: Sequence[str], columns: Sequence[Sequence[Any]]) -> bytes:
    """The file of ``columns`` (equal lengths), named ``names``. Deterministic: equal rows give
    equal bytes, so equal ranges get equal ids."""
    n = len(columns[0])
    values = [str(n), ",".join(names)]
    for name, values_of in zip(names, columns, strict=True):
        values.extend(map(str, values_of) if name in _INTEGERS else values_of)
    text = _SEP.join(values)
    if text.count(_SEP) != len(values) - 1:
        raise ValueError("a value of a range holds a NUL character")  # refused long before here
    return MAGIC + zlib.compress(text.encode(), 1)


def _decode(
    data: bytes, what: str, wanted: Sequence[str] | None = None, as_text: bool = False
) -> dict[str, list[Any]]:
    """The columns of a file (``wanted`` ones, else all, in the file's order), as lists;
    integer columns as ``int``, or with ``as_text`` as they are stored (for the caller to
    convert what it uses). ``CorruptBlock`` when it does not decode or lacks a wanted column."""
    if data[:4] == PARQUET_MAGIC:
        return _from_parquet(data, what, wanted)
    if data[: len(MAGIC)] != MAGIC:
        raise CorruptBlock(f"block {what} is not a range, page or root file")
    try:
        items = zlib.decompress(memoryview(data)[len(MAGIC) :]).decode().split(_SEP)
        n, names = int(items[0]), items[1].split(",")
    except (zlib.error, UnicodeDecodeError, ValueError, IndexError) as e:
        raise CorruptBlock(f"range file {what} cannot be decoded: {e}") from e
    if len(items) != 2 + n * len(names):
        raise CorruptBlock(f"range file {what} holds {len(items) - 2} values, not {n} rows of {len(names)}")
    out: dict[str, list[Any]] = {}
    for name in names if wanted is None else wanted:
        if name not in names:
            raise CorruptBlock(f"range file {what} lacks the column {name!r}")
        start = 2 + names.index(name) * n
        column = items[start : start + n]
        try:
            out[name] = list(map(int, column)) if name in _INTEGERS and not as_text else column
        except ValueError as e:
            raise CorruptBlock(f"range file {what}: {e}") from e
    return out


def _from_parquet(data: bytes, what: str, wanted: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """The columns of a file of the first format."""
    import pyarrow as pa

    try:
        # The reader ParquetFile wraps, without pyarrow.parquet (see _parquet_reader), and not
        # read_table: it goes through pyarrow.dataset, whose import pulls in pandas. Neither
        # threads nor pre-buffering: a range decodes as fast on one thread, and the pools they
        # start can abort the process as it exits ("terminate called without an active
        # exception", apache/arrow#34314): 4 of 150 `fs stat` runs did, 0 of 300 without.
        reader = _parquet_reader()()
        reader.open(pa.BufferReader(data), pre_buffer=False)
        indices = None if wanted is None else [reader.column_name_idx(c) for c in wanted]
        table = reader.read_all(column_indices=indices, use_threads=False)
    except (pa.ArrowInvalid, OSError, KeyError) as e:
        raise CorruptBlock(f"range file {what} is not valid Parquet: {e}") from e
    return {name: table.column(name).to_pylist() for name in table.column_names}


@cache
def _parquet_reader() -> Any:
    """pyarrow's Parquet file reader: the class ``pyarrow.parquet.ParquetFile`` wraps and
    ``pyarrow.parquet`` exports as ``ParquetReader``, taken from its extension module. Importing
    ``pyarrow.parquet`` itself costs every command that reads a range ~15 ms more, for
    ``pyarrow.fs`` (the S3, GCS, Azure and HDFS filesystems) that a range in memory never uses.
    tests/cli/test_startup_imports.py holds its tables to ParquetFile's."""
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError:  # pragma: no cover - a pyarrow that moved its extension module
        from pyarrow.parquet import ParquetReader
    return ParquetReader


# -- writers ----------------------------------------------------------------------------------

Put = Callable[[str, bytes], None]
"""Where a writer puts a file: ``(locator, bytes)``."""


class BatchedPuts:
    """Puts the files of one tree's writing in batches, each written by a few threads while the
    caller waits. Creating a small file in the block store's directories costs 0.3-1 ms here,
    nearly all of it in the kernel, and a 1M-row commit creates ~4,200 of them: threads writing
    together overlap that wait (4,200 files: 3.9 s on one thread, 1.5-1.9 s on four), which a
    writer thread beside the encoding did not, waiting for the GIL after each system call.

    Use it as a context manager: leaving the block writes what is left, and only then may a
    root name what was put (its files are all in the store, to be synced by the caller)."""

    BATCH = 256
    """Files held before they are written (a few MiB)."""
    THREADS = 4

    def __init__(self, blocks: BlockAdapter) -> None:
        self.blocks = blocks
        self._pending: list[tuple[str, bytes]] = []

    def __enter__(self) -> BatchedPuts:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.flush()

    def put(self, locator: str, data: bytes) -> None:
        self._pending.append((locator, data))
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if len(pending) < 2 * self.THREADS:  # a small commit: not worth starting threads
            for locator, data in pending:
                self.blocks.put(locator, data)
            return
        with ThreadPoolExecutor(self.THREADS, thread_name_prefix="lakectl-tree-puts") as pool:
            for _ in pool.map(lambda item: self.blocks.put(*item), pending):
                pass  # the first error is raised here


class RangeWriter:
    """Accepts rows in key order and cuts them into ranges at content-defined boundaries."""

    def __init__(
        self, store: RangeStore, policy: ChunkPolicy = DEFAULT_POLICY, put: Put | None = None
    ) -> None:
        self.store = store
        self.policy = policy
        self.put = put
        self.ranges: list[RangeInfo] = []
        self._paths: list[str] = []
        self._rows: list[Row] = []

    @property
    def empty(self) -> bool:
        """True when every row added so far is in a closed range (the writer is at a boundary)."""
        return not self._paths

    def add_all(self, items: Iterable[tuple[str, Row]]) -> None:
        # The hot loop of a large commit: is_boundary inlined, locals bound once.
        paths, rows = self._paths, self._rows
        policy = self.policy
        lo, normal, hi = policy.min_rows, policy.normal_rows, policy.max_rows
        strict, loose = policy.strict, policy.loose
        cut = slice(policy.hash_offset, policy.hash_offset + 4)
        md5, from_bytes = hashlib.md5, int.from_bytes
        for path, row in items:
            paths.append(path)
            rows.append(row)
            n = len(paths)
            if n < lo:
                continue
            modulus = strict if n < normal else loose
            if n >= hi or from_bytes(md5(path.encode()).digest()[cut], "little") % modulus == 0:
                self._cut()
                paths, rows = self._paths, self._rows

    def take(self) -> list[RangeInfo]:
        """The ranges closed since the last take."""
        closed, self.ranges = self.ranges, []
        return closed

    def close(self) -> list[RangeInfo]:
        if self._paths:
            self._cut()
        return self.take()

    def _cut(self) -> None:
        self.ranges.append(self.store.write_range(self._paths, self._rows, self.put))
        self._paths = []
        self._rows = []


class PageWriter:
    """Accepts ranges in key order and groups them into pages at content-defined boundaries
    (after a range whose last key's hash says so), as RangeWriter groups rows into ranges: an
    unchanged stretch of ranges keeps its page ids from commit to commit."""

    def __init__(self, store: RangeStore, policy: ChunkPolicy = PAGE_POLICY, put: Put | None = None) -> None:
        self.store = store
        self.policy = policy
        self.put = put
        self.pages: list[RangeInfo] = []
        self._ranges: list[RangeInfo] = []

    @property
    def empty(self) -> bool:
        """True when every range added so far is in a closed page."""
        return not self._ranges

    def add_all(self, ranges: Iterable[RangeInfo]) -> None:
        for info in ranges:
            self._ranges.append(info)
            if self.policy.is_boundary(info.max_key, len(self._ranges)):
                self._cut()

    def reuse(self, page: RangeInfo) -> None:
        """Append an existing page whole; only allowed at a boundary."""
        assert self.empty, "a page can be reused only at a boundary"
        self.pages.append(page)

    def close(self) -> list[RangeInfo]:
        if self._ranges:
            self._cut()
        return self.pages

    def _cut(self) -> None:
        self.pages.append(self.store.write_page(self._ranges, self.put))
        self._ranges = []


def iter_rows(store: RangeStore, ranges: Iterable[RangeInfo], start: str = "") -> Iterator[tuple[str, Row]]:
    """Yield (path, row) of the given ranges in order, from the first path >= start."""
    for info in ranges:
        if info.max_key < start:
            continue
        data = store.read_range(info.id)
        if start > info.min_key:
            i = bisect.bisect_left(data.paths, start)
            yield from zip(data.paths[i:], data.rows[i:], strict=True)
        else:
            yield from zip(data.paths, data.rows, strict=True)
