"""Trees as the first format wrote them, before docs/decisions/0016: Parquet ranges named by
one flat Parquet metarange. Lakes hold such trees, and lakectl still reads and updates them."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from typing import Any

from lakectl.core.blocks import BlockAdapter
from lakectl.core.model import MetaRangeId, RangeId, RangeInfo, Row

RANGE_TYPES = (
    ("path", "string"),
    ("size", "int64"),
    ("checksum", "string"),
    ("locators", "string"),
    ("mtime", "int64"),
    ("content_type", "string"),
    ("metadata", "string"),
)
METARANGE_TYPES = (
    ("range_id", "string"),
    ("min_key", "string"),
    ("max_key", "string"),
    ("count", "int64"),
    ("size_bytes", "int64"),
)


def parquet(types: Sequence[tuple[str, str]], columns: Sequence[Sequence[Any]]) -> bytes:
    """A file as the first format wrote it: zstd, no statistics, no stored Arrow schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in types])
    arrays = [pa.array(list(c), f.type) for c, f in zip(columns, schema, strict=True)]
    buf = io.BytesIO()
    pq.write_table(
        pa.Table.from_arrays(arrays, schema=schema),
        buf,
        compression="zstd",
        write_statistics=False,
        store_schema=False,
    )
    return buf.getvalue()


def range_file(rows: Sequence[tuple[str, Row]]) -> bytes:
    return parquet(RANGE_TYPES, [[p for p, _ in rows], *zip(*(r for _, r in rows), strict=True)])


def _put(blocks: BlockAdapter, data: bytes) -> str:
    locator = f"{hashlib.md5(data).hexdigest()}+{len(data)}"
    blocks.put(locator, data)
    return locator


def flat_tree(blocks: BlockAdapter, rows: Sequence[tuple[str, Row]], per_range: int) -> MetaRangeId:
    """A tree of sorted ``rows``: ranges of ``per_range`` rows, one metarange naming them."""
    infos = []
    for i in range(0, len(rows), per_range):
        chunk = rows[i : i + per_range]
        rid = RangeId(_put(blocks, range_file(chunk)))
        infos.append(RangeInfo(rid, chunk[0][0], chunk[-1][0], len(chunk), sum(r[0] for _, r in chunk)))
    columns = [[getattr(r, f) for r in infos] for f in RangeInfo._fields]
    return MetaRangeId(_put(blocks, parquet(METARANGE_TYPES, columns)))
