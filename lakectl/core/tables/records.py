"""The records a table diff returns (schema changes, row changes, per-partition summaries), each
with a ``to_dict`` of JSON-safe values: the shape of ``lakectl diff --table --json`` and the API."""

from __future__ import annotations

import datetime
import decimal
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ColumnChangeType(enum.Enum):
    ADDED = "added"
    REMOVED = "removed"
    RETYPED = "retyped"
    RENAMED = "renamed"


class RowChangeType(enum.Enum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


def json_safe(value: Any) -> Any:
    """A cell as JSON can carry it: dates, times and timestamps as ISO text, bytes as hex,
    decimals as text, durations as seconds, non-finite floats as text ("NaN", "inf"); lists,
    structs and maps element by element."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "isoformat"):  # pandas' Timestamp for nanosecond timestamps
        return str(value.isoformat())
    return str(value)


def _row(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: json_safe(v) for k, v in row.items()}


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One column that differs between the two sides' schemas."""

    type: ColumnChangeType
    name: str
    """The column's name on the right (on the left for REMOVED)."""
    old_type: str | None
    """Its Arrow type on the left, as text (``int64``); None for ADDED."""
    new_type: str | None
    """Its Arrow type on the right; None for REMOVED."""
    old_name: str | None = None
    """RENAMED: the left column's name at the same position."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "name": self.name,
            "old_type": self.old_type,
            "new_type": self.new_type,
            "old_name": self.old_name,
        }

    def text(self) -> str:
        """Short human form: ``+name``, ``\u2212name``, ``name int32→int64``, ``old→new``."""
        if self.type is ColumnChangeType.ADDED:
            return f"+{self.name}"
        if self.type is ColumnChangeType.REMOVED:
            return f"\u2212{self.name}"
        if self.type is ColumnChangeType.RETYPED:
            return f"{self.name} {self.old_type}\u2192{self.new_type}"
        return f"{self.old_name}\u2192{self.name}"


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row added, removed or changed (by key), or, without a key, copies of a whole row
    added or removed (``count``)."""

    type: RowChangeType
    key: dict[str, Any]
    """Key column -> value ({} for a diff without a key)."""
    columns: tuple[str, ...]
    """CHANGED: the columns whose values differ (right names)."""
    old: dict[str, Any] | None
    """The whole left row (None for ADDED)."""
    new: dict[str, Any] | None
    """The whole right row (None for REMOVED)."""
    count: int = 1
    """Without a key: how many copies of this row were added or removed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "key": _row(self.key),
            "columns": list(self.columns),
            "old": _row(self.old),
            "new": _row(self.new),
            "count": self.count,
        }


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """The rows read and the row changes of one partition (by its hive-style directories)."""

    partition: str
    """"" for an unpartitioned table, else e.g. ``date=2026-01-02`` or ``region=eu/date=2026-01-02``."""
    rows_left: int
    rows_right: int
    added: int
    removed: int
    changed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "rows_left": self.rows_left,
            "rows_right": self.rows_right,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True)
class TableDiff:
    """The diff of one table between two refs; ``rows`` is one page, every count covers the
    whole diff."""

    path: str
    """The table: an object path, or a prefix ending in "/"."""
    key: tuple[str, ...]
    schema: tuple[ColumnChange, ...]
    rows_left: int
    """Rows of the objects read on the left (changed and removed objects)."""
    rows_right: int
    """Rows of the objects read on the right (changed and added objects)."""
    added: int
    removed: int
    changed: int
    changed_columns: dict[str, int]
    """Column -> rows changed in it."""
    partitions: tuple[PartitionSummary, ...]
    """Only the partitions with a difference, in partition order."""
    rows: tuple[RowChange, ...]
    """One page, ordered by key (without a key: by row values)."""
    next_offset: str
    """"" when no more; else what ``after`` takes for the next page."""
    files_read: int
    """Objects opened, both sides."""
    files_unchanged: int
    """Objects of the table skipped because both sides have the same locators."""
    key_declared: bool = False
    """The key is the one the repository declares for the table (none was given)."""
    delta: dict[str, Any] | None = None
    """A Delta table's log: the versions each side wrote since the merge base, the data files
    added and removed, its properties changed (:func:`lakectl.core.tablediff.diff_table`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "key": list(self.key),
            "key_declared": self.key_declared,
            "schema": [c.to_dict() for c in self.schema],
            "rows_left": self.rows_left,
            "rows_right": self.rows_right,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "changed_columns": dict(self.changed_columns),
            "partitions": [p.to_dict() for p in self.partitions],
            "rows": [r.to_dict() for r in self.rows],
            "next_offset": self.next_offset,
            "files_read": self.files_read,
            "files_unchanged": self.files_unchanged,
            "summary": self.summary(),
            "delta": self.delta,
        }

    def summary(self) -> str:
        """One line: ``orders: +1,204 rows, \u22123, 87 changed (amount), schema: +discount_pct``."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1] or "/"
        for ext in (".parquet", ".csv", ".tsv"):
            if name.lower().endswith(ext) and len(name) > len(ext):
                name = name[: -len(ext)]
        parts = []
        if self.added or self.removed or self.changed:
            text = f"+{self.added:,} rows, \u2212{self.removed:,}"
            if self.key:
                text += f", {self.changed:,} changed"
                if self.changed_columns:
                    ranked = sorted(self.changed_columns, key=lambda c: (-self.changed_columns[c], c))
                    shown = ", ".join(ranked[:3])
                    more = f", +{len(ranked) - 3} more" if len(ranked) > 3 else ""
                    text += f" ({shown}{more})"
            parts.append(text)
        if self.schema:
            parts.append("schema: " + ", ".join(c.text() for c in self.schema))
        if self.delta is not None:
            parts.append(_delta_summary(self.delta))
        return f"{name}: " + (", ".join(parts) if parts else "no changes")


def _delta_summary(delta: dict[str, Any]) -> str:
    """``Delta: right +3 versions (WRITE, DELETE), left +1 (OPTIMIZE), files +2 \u22121``."""

    def side(found: dict[str, Any]) -> str:
        ops = sorted({v["operation"] for v in found["versions"]})
        return f"+{found['count']:,} version{'s' if found['count'] != 1 else ''}" + (
            f" ({', '.join(ops)})" if ops else ""
        )

    text = f"Delta: right {side(delta['right'])}"
    if delta["left"]["count"]:
        text += f", left {side(delta['left'])}"
    return text + f", files +{delta['files_added']:,} \u2212{delta['files_removed']:,}"
