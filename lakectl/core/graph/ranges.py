"""Ranges and metaranges: immutable sorted Parquet files of rows, stored as content-addressed blocks."""

from __future__ import annotations

import bisect
import hashlib
import io
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any, TypeVar

from lakectl.core.blocks import BlockAdapter
from lakectl.core.model import MetaRangeId, RangeId, RangeInfo, Row
from lakectl.errors import CorruptBlock

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow is imported where a range is first read or written, not at import: `lakectl log` and
# `lakectl --help` never open a range and should not pay for it.

_T = TypeVar("_T")


@cache
def _schemas() -> tuple[Any, Any]:
    """The Parquet schemas of range and metarange files."""
    import pyarrow as pa

    range_schema = pa.schema(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("checksum", pa.string()),
            ("locators", pa.string()),
            ("mtime", pa.int64()),
            ("content_type", pa.string()),
            ("metadata", pa.string()),
        ]
    )
    metarange_schema = pa.schema(
        [
            ("range_id", pa.string()),
            ("min_key", pa.string()),
            ("max_key", pa.string()),
            ("count", pa.int64()),
            ("size_bytes", pa.int64()),
        ]
    )
    return range_schema, metarange_schema


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

    min_rows: int = 512
    normal_rows: int = 1792
    strict: int = 8192
    loose: int = 256
    max_rows: int = 6144

    def is_boundary(self, key: str, count: int) -> bool:
        if count >= self.max_rows:
            return True
        if count < self.min_rows:
            return False
        return _key_hash(key) % (self.strict if count < self.normal_rows else self.loose) == 0


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")


DEFAULT_POLICY = ChunkPolicy()


def column(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """A string or int64 Arrow array of ``values`` (no nulls), built from its buffers: the same
    array (and Parquet bytes) as ``pa.array(values, type_)``, which imports pandas on its first
    call in a process (0.3-0.7 s of every commit) to ask whether ``values`` is a pandas object."""
    import pyarrow as pa

    if type_ == pa.int64():
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(array("q", values))])
    encoded = [v.encode() for v in values]
    if sum(map(len, encoded)) >= 2**31:  # pragma: no cover - past 32-bit offsets: pyarrow's way
        return pa.array(values, type_)
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, encoded)))
    return pa.Array.from_buffers(
        type_, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def _locator(data: bytes) -> str:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


@dataclass(frozen=True, slots=True)
class RangeData:
    """A decoded range: parallel lists of paths and rows, sorted by path."""

    paths: list[str]
    rows: list[Row]


class RangeStore:
    """Reads and writes range and metarange files in a block adapter, with an LRU of decoded ranges."""

    def __init__(self, blocks: BlockAdapter, cache_size: int = 64, paths_cache_size: int = 256) -> None:
        self.blocks = blocks
        self._cache: OrderedDict[str, RangeData] = OrderedDict()
        self._meta_cache: OrderedDict[str, list[RangeInfo]] = OrderedDict()
        self._paths_cache: OrderedDict[str, list[str]] = OrderedDict()
        self._cache_size = cache_size
        self._paths_cache_size = paths_cache_size

    # -- ranges -----------------------------------------------------------------------------

    def write_range(self, paths: list[str], rows: list[Row]) -> RangeInfo:
        """Store one range of sorted, non-empty rows; return its metarange row."""
        import pyarrow as pa

        range_schema = _schemas()[0]
        cols = list(zip(*rows, strict=True))
        table = pa.Table.from_arrays(
            [
                column(paths, pa.string()),
                *(column(c, t.type) for c, t in zip(cols, list(range_schema)[1:], strict=True)),
            ],
            schema=range_schema,
        )
        data = _to_parquet(table)
        rid = RangeId(_locator(data))
        self.blocks.put(rid, data)
        self._remember(self._cache, rid, RangeData(paths, rows))
        return RangeInfo(
            id=rid,
            min_key=paths[0],
            max_key=paths[-1],
            count=len(paths),
            size_bytes=sum(r[0] for r in rows),
        )

    def read_range(self, rid: RangeId) -> RangeData:
        cached = self._cache.get(rid)
        if cached is not None:
            self._cache.move_to_end(rid)
            return cached
        table = _from_parquet(self.blocks.get(rid), rid)
        d = table.to_pydict()
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

    def read_paths(self, rid: RangeId) -> list[str]:
        """The paths of a range, read alone (a fifth of decoding its rows) and kept in an LRU of
        their own, larger than the rows': what a listing reads to step over directories."""
        cached = self._cache.get(rid)
        if cached is not None:
            return cached.paths
        paths = self._paths_cache.get(rid)
        if paths is not None:
            self._paths_cache.move_to_end(rid)
            return paths
        column = _from_parquet(self.blocks.get(rid), rid, columns=["path"]).column("path")
        paths = [str(v) for v in column.to_pylist()]
        self._paths_cache[rid] = paths
        while len(self._paths_cache) > self._paths_cache_size:
            self._paths_cache.popitem(last=False)
        return paths

    def read_locators(self, rid: RangeId) -> list[str]:
        """The ``locators`` column of a range (space-separated segment tokens per entry), read
        alone and not cached: what garbage collection scans, for every range of the lake."""
        column = _from_parquet(self.blocks.get(rid), rid, columns=["locators"]).column("locators")
        return [str(v) for v in column.to_pylist()]

    # -- metaranges -------------------------------------------------------------------------

    def write_metarange(self, ranges: list[RangeInfo]) -> MetaRangeId:
        import pyarrow as pa

        table = pa.Table.from_arrays(
            [
                column([r.id for r in ranges], pa.string()),
                column([r.min_key for r in ranges], pa.string()),
                column([r.max_key for r in ranges], pa.string()),
                column([r.count for r in ranges], pa.int64()),
                column([r.size_bytes for r in ranges], pa.int64()),
            ],
            schema=_schemas()[1],
        )
        data = _to_parquet(table)
        mid = MetaRangeId(_locator(data))
        self.blocks.put(mid, data)
        self._remember(self._meta_cache, mid, list(ranges))
        return mid

    def read_metarange(self, mid: MetaRangeId) -> list[RangeInfo]:
        cached = self._meta_cache.get(mid)
        if cached is not None:
            self._meta_cache.move_to_end(mid)
            return cached
        d = _from_parquet(self.blocks.get(mid), mid).to_pydict()
        ranges = [
            RangeInfo(RangeId(i), lo, hi, n, sz)
            for i, lo, hi, n, sz in zip(
                d["range_id"],
                d["min_key"],
                d["max_key"],
                d["count"],
                d["size_bytes"],
                strict=True,
            )
        ]
        self._remember(self._meta_cache, mid, ranges)
        return ranges

    def _remember(self, cache: OrderedDict[str, _T], key: str, value: _T) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)


def _to_parquet(table: pa.Table) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    # Deterministic bytes for equal rows: same writer options, no timestamps in the footer.
    pq.write_table(table, buf, compression="zstd", write_statistics=False, store_schema=False)
    return buf.getvalue()


def _from_parquet(data: bytes, what: str, columns: list[str] | None = None) -> pa.Table:
    import pyarrow as pa

    try:
        # The reader ParquetFile wraps, without pyarrow.parquet (see _parquet_reader), and not
        # read_table: it goes through pyarrow.dataset, whose import pulls in pandas (~0.25 s of
        # every command that reads a range). Neither threads nor pre-buffering: a range decodes
        # as fast on one thread (~0.9 ms for 1,800 rows, to_pydict included), and the pools
        # they start can abort the process as it exits ("terminate called without an active
        # exception", apache/arrow#34314): 4 of 150 `fs stat` runs did, 0 of 300 without.
        reader = _parquet_reader()()
        reader.open(pa.BufferReader(data), pre_buffer=False)
        indices = None if columns is None else [reader.column_name_idx(c) for c in columns]
        table: pa.Table = reader.read_all(column_indices=indices, use_threads=False)
        return table
    except (pa.ArrowInvalid, OSError, KeyError) as e:
        raise CorruptBlock(f"range file {what} is not valid Parquet: {e}") from e


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


class RangeWriter:
    """Accepts rows in key order and cuts them into ranges at content-defined boundaries."""

    def __init__(self, store: RangeStore, policy: ChunkPolicy = DEFAULT_POLICY) -> None:
        self.store = store
        self.policy = policy
        self.ranges: list[RangeInfo] = []
        self._paths: list[str] = []
        self._rows: list[Row] = []

    @property
    def empty(self) -> bool:
        """True when every row added so far is in a closed range (the writer is at a boundary)."""
        return not self._paths

    def add(self, path: str, row: Row) -> None:
        self._paths.append(path)
        self._rows.append(row)
        if self.policy.is_boundary(path, len(self._paths)):
            self._cut()

    def add_all(self, items: Iterable[tuple[str, Row]]) -> None:
        # The hot loop of a large commit: is_boundary inlined, locals bound once.
        paths, rows = self._paths, self._rows
        policy = self.policy
        lo, normal, hi = policy.min_rows, policy.normal_rows, policy.max_rows
        strict, loose = policy.strict, policy.loose
        md5, from_bytes = hashlib.md5, int.from_bytes
        for path, row in items:
            paths.append(path)
            rows.append(row)
            n = len(paths)
            if n < lo:
                continue
            modulus = strict if n < normal else loose
            if n >= hi or from_bytes(md5(path.encode()).digest()[:4], "little") % modulus == 0:
                self._cut()
                paths, rows = self._paths, self._rows

    def reuse(self, info: RangeInfo) -> None:
        """Append an existing range whole; only allowed at a boundary."""
        assert self.empty, "a range can be reused only at a boundary"
        self.ranges.append(info)

    def close(self) -> list[RangeInfo]:
        if self._paths:
            self._cut()
        return self.ranges

    def _cut(self) -> None:
        self.ranges.append(self.store.write_range(self._paths, self._rows))
        self._paths = []
        self._rows = []


def iter_rows(store: RangeStore, ranges: Iterable[RangeInfo], start: str = "") -> Iterator[tuple[str, Row]]:
    """Yield (path, row) of the given ranges in order, from the first path >= start."""
    for info in ranges:
        if info.max_key < start:
            continue
        data = store.read_range(info.id)
        i = bisect.bisect_left(data.paths, start) if start > info.min_key else 0
        yield from zip(data.paths[i:], data.rows[i:], strict=True)
