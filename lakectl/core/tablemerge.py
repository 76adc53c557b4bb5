"""The ``rows`` merge strategy: Parquet objects that both sides of a merge changed, under a glob
the strategy names, are merged row by row by key instead of conflicting as whole objects.

``--strategy 'tables/orders/**=rows:key=order_id'`` (``key=a,b`` for a composite key, and
``;winner=source`` or ``;winner=dest`` to resolve the row conflicts too). Only the objects the
tree merge found in conflict are read (base, source and destination versions, through the block
layer); every other object of the table keeps its locators, as the tree merge left it. Each
merged object is written as a new Parquet object with the destination version's compression and
row-group size (:func:`lakectl.core.tables.merge.merge_rows` does the rows). Row and schema
conflicts are returned as data, per object, for :class:`~lakectl.errors.MergeConflict`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakectl.core.graph.merge import glob_matches
from lakectl.core.model import Entry, MetaRangeId, Row
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    import pyarrow as pa

    from lakectl.core.porcelain import Lake
    from lakectl.core.tables.merge import RowWinner

MARK = "=rows:"
NOTE = "lakectl_merged_by_rows"
"""The merge commit's metadata key listing the objects merged by rows."""
MAX_REPORTED = 100
"""Row conflicts reported per object (the count is always whole)."""


@dataclass(frozen=True, slots=True)
class RowRule:
    """One ``GLOB=rows:key=...`` strategy."""

    pattern: str
    key: tuple[str, ...]
    winner: str = "none"
    """``none``, ``source`` or ``dest`` (:class:`~lakectl.core.tables.merge.RowWinner`)."""


def split_strategies(values: Sequence[str]) -> tuple[list[RowRule], list[str]]:
    """The ``rows`` rules among merge strategies, and the other strategies as they were."""
    rules: list[RowRule] = []
    rest: list[str] = []
    for value in values:
        pattern, mark, spec = value.partition(MARK)
        if not mark:
            rest.append(value)
            continue
        if not pattern:
            raise InvalidArgument(f"empty path glob in strategy {value!r}")
        options: dict[str, str] = {}
        for item in spec.split(";"):
            name, eq, text = item.partition("=")
            if not eq or name.strip() not in ("key", "winner") or name.strip() in options:
                raise InvalidArgument(
                    f"strategy {value!r}: expected GLOB=rows:key=col[,col][;winner=source|dest]"
                )
            options[name.strip()] = text.strip()
        key = tuple(c.strip() for c in options.get("key", "").split(",") if c.strip())
        if not key:
            raise InvalidArgument(f"strategy {value!r} names no key column (rows:key=col[,col])")
        winner = options.get("winner", "none")
        if winner not in ("none", "source", "dest"):
            raise InvalidArgument(f"strategy {value!r}: winner is source or dest, not {winner!r}")
        rules.append(RowRule(pattern, key, winner))
    return rules, rest


@dataclass
class Resolution:
    """What the rows strategy made of the tree merge's conflicts."""

    updates: list[tuple[str, Row | None]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Paths still in conflict (no rule, no Parquet, or conflicting rows)."""
    row_conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per path: ``{"rows": [...], "schema": [...], "count": N}``."""
    merged: list[str] = field(default_factory=list)
    """Paths merged by rows."""


def resolve(
    lake: Lake,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    conflicts: Sequence[str],
    rules: Sequence[RowRule],
) -> Resolution:
    """Merge by rows each conflicting path a rule's glob matches (first rule wins)."""
    from lakectl.core.tables.merge import RowWinner

    out = Resolution()
    for path in conflicts:
        rule = next((r for r in rules if glob_matches(r.pattern, path)), None)
        if rule is None or not path.endswith(".parquet"):
            out.conflicts.append(path)
            continue
        rows = [lake.trees.lookup(mid, path) for mid in (base, source, dest)]
        merged = _merge(lake, path, rows, rule.key, RowWinner(rule.winner))
        if isinstance(merged, dict):
            out.conflicts.append(path)
            out.row_conflicts[path] = merged
        else:
            out.updates.append((path, merged))
            out.merged.append(path)
    return out


def _read(lake: Lake, path: str, row: Row | None) -> tuple[pa.Table, Any] | None:
    """The object's rows and Parquet metadata (None when the side has no such object)."""
    import pyarrow.parquet as pq

    from lakectl.core.porcelain import read_entry

    if row is None:
        return None
    data = b"".join(read_entry(lake, Entry.from_row(row)))
    try:
        f = pq.ParquetFile(io.BytesIO(data))
        return f.read(), f.metadata
    except Exception as e:  # pyarrow raises several kinds for a file that is no Parquet
        raise InvalidArgument(f"cannot merge {path} by rows: it is not readable as Parquet: {e}") from e


def _merge(
    lake: Lake, path: str, rows: list[Row | None], key: tuple[str, ...], winner: RowWinner
) -> Row | dict[str, Any]:
    """The merged object's row, or its conflicts as data."""
    from lakectl.core.tables.merge import merge_rows

    base, source, dest = (_read(lake, path, r) for r in rows)
    tables = [v[0] if v is not None else None for v in (base, source, dest)]
    result = merge_rows(tables[0], tables[1], tables[2], key, winner)
    if result.table is None:
        return {
            "rows": [c.to_dict() for c in result.conflicts[:MAX_REPORTED]],
            "schema": [c.to_dict() for c in result.schema_conflicts],
            "count": len(result.conflicts) + len(result.schema_conflicts),
        }
    like, meta = (rows[2], dest[1]) if dest is not None else (rows[1], source[1] if source else None)
    return _write(lake, result.table, like, meta)


def _write(lake: Lake, table: pa.Table, like: Row | None, meta: Any) -> Row:
    """``table`` as a new Parquet object written like ``like`` (the destination's version, else
    the source's): its content type, compression and row-group size."""
    import pyarrow.parquet as pq

    from lakectl.core.blocks.data import write_object
    from lakectl.core.porcelain import entry_for

    compression, group_rows = "snappy", None
    if meta is not None and meta.num_row_groups and meta.num_columns:
        compression = str(meta.row_group(0).column(0).compression).lower()
        group_rows = meta.row_group(0).num_rows or None
    content_type = Entry.from_row(like).content_type if like is not None else None
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression, row_group_size=group_rows)
    out.seek(0)
    written = write_object(lake.blocks, out)
    return entry_for(written.size, written.checksum, written.locators, content_type or None, None).to_row()


def record(paths: Sequence[str], limit: int = 3000) -> str:
    """The merge commit's note of the objects merged by rows (:data:`NOTE`), kept within the
    metadata value limit."""
    text = ",".join(paths)
    if len(text) <= limit:
        return text
    shown: list[str] = []
    for p in paths:
        if len(",".join([*shown, p])) > limit - 40:
            break
        shown.append(p)
    return ",".join(shown) + f",…(+{len(paths) - len(shown)} more)"
