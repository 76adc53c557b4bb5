"""Three-way merge of a table's rows by key: two diffs from the base, each row labelled, conflicts as data.

Pure: in-memory pyarrow tables in, a :class:`TableMerge` out (reading and writing objects is the
caller's job). The design: docs/decisions/0014-table-diff.md, section "Row merge".

*Schema.* Columns are matched by name. A column added, removed or retyped on one side only, the
other side keeping it as the base had it, takes that side's change; the same change on both sides
is taken once. Anything else (two different new types, removed on one side and retyped on the
other, added on both with different types, a value that does not convert to the new type with a
safe cast) is a :class:`SchemaConflict`, and no row is merged. Rows are then compared on the merged
columns only: a column one side removed takes no part (a change to it on the other side is lost
with the column), a retyped one is compared in its new type, and an added one is null wherever a
side does not have it.

*Rows*, matched by key (unique and not null on every side): unchanged on one side → the other
side's row (added, changed, removed or not); the same change on both → taken once; changed on
both in disjoint columns, or in overlapping columns to the same values → a cell-level merge (each
column from the side that changed it, as Dolt does); changed on both in a column to different
values → ``both-changed`` (those columns); added on both with different values → ``both-added``
(the columns that differ); deleted on one side and changed on the other → ``deleted-and-changed``
(the columns the changing side changed). A :class:`RowWinner` other than NONE resolves every row
conflict to that side's version, deletion included.

*Equality* is null-safe (null equals null) and exact: floats compare without tolerance, NaN equals
NaN and 0.0 equals -0.0 (Arrow's ``equal``), as in the table diff. A missing side (None) is an
absent table: no rows, and the base's schema (so it changes no column).
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakectl.core.tables.records import json_safe
from lakectl.core.tables.rows import differ
from lakectl.errors import InvalidArgument

__all__ = ["ConflictKind", "RowConflict", "RowWinner", "SchemaConflict", "TableMerge", "merge_rows"]

_ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError)
_SIDES = ("base", "source", "dest")
_INDEX = {side: f"__lakectl_{side}" for side in _SIDES}


class RowWinner(enum.Enum):
    """Which side a row conflict resolves to (NONE: it stays a conflict)."""

    NONE = "none"
    SOURCE = "source"
    DEST = "dest"


class ConflictKind(enum.StrEnum):
    BOTH_CHANGED = "both-changed"
    DELETED_AND_CHANGED = "deleted-and-changed"
    BOTH_ADDED = "both-added"


def _safe_row(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: json_safe(v) for k, v in row.items()}


@dataclass(frozen=True, slots=True)
class RowConflict:
    """One key whose row the two sides changed in ways that do not merge."""

    key: dict[str, Any]
    """Key column -> value."""
    columns: tuple[str, ...]
    """The columns in conflict (merged column order): changed differently on both sides, differing
    between two added rows, or changed by the side that did not delete the row."""
    kind: ConflictKind
    base: dict[str, Any] | None
    """The whole row on each side as that side has it (None: no row there)."""
    source: dict[str, Any] | None
    dest: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": _safe_row(self.key),
            "columns": list(self.columns),
            "kind": self.kind.value,
            "base": _safe_row(self.base),
            "source": _safe_row(self.source),
            "dest": _safe_row(self.dest),
        }


@dataclass(frozen=True, slots=True)
class SchemaConflict:
    """One column whose schema changes do not merge."""

    column: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class TableMerge:
    """The merged rows of a table, or the conflicts that stop them."""

    table: pa.Table | None
    """The merged rows sorted by key, in dest's column order then the columns only the source
    added; None when there are schema conflicts, or row conflicts no winner resolved."""
    conflicts: tuple[RowConflict, ...]
    """Sorted by key; empty when a winner resolved them."""
    schema_conflicts: tuple[SchemaConflict, ...]
    taken_from_source: int
    """Rows the merge adds, changes or removes relative to dest: the source's changes it takes (a
    change made alike on both sides counts on neither, a cell-level merge where it takes a
    source value dest does not have); rows in an unresolved conflict are not counted."""
    taken_from_dest: int
    """The same relative to the source."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": None if self.table is None else self.table.num_rows,
            "conflicts": [c.to_dict() for c in self.conflicts],
            "schema_conflicts": [c.to_dict() for c in self.schema_conflicts],
            "taken_from_source": self.taken_from_source,
            "taken_from_dest": self.taken_from_dest,
        }


# -- checking the input ----------------------------------------------------------------------


def _check_input(tables: dict[str, pa.Table | None], key: tuple[str, ...]) -> dict[str, pa.DataType] | None:
    """The key columns' types (None when no side is present), after checking names and keys."""
    if not key:
        raise InvalidArgument("a row merge needs a key")
    if any(not k for k in key):
        raise InvalidArgument("an empty key column name")
    if len(set(key)) != len(key):
        raise InvalidArgument(f"a key column is named twice: {', '.join(key)}")
    types: dict[str, pa.DataType] | None = None
    first = ""
    for side, table in tables.items():
        if table is None:
            continue
        names = table.schema.names
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise InvalidArgument(f"the table has two columns named {dup!r} at {side}", column=dup)
        for k in key:
            if k not in names:
                raise InvalidArgument(f"key column {k!r} is not in the table at {side}", column=k)
        mine = {k: table.schema.field(k).type for k in key}
        if types is None:
            types, first = mine, side
        for k in key:
            if mine[k] != types[k]:
                raise InvalidArgument(
                    f"key column {k!r} is {types[k]} at {first} and {mine[k]} at {side}", column=k
                )
        _check_keys(table, key, side)
    return types


def _check_keys(table: pa.Table, key: tuple[str, ...], side: str) -> None:
    for k in key:
        nulls = table.column(k).null_count
        if nulls:
            raise InvalidArgument(f"key column {k!r} is null on {nulls} row(s) at {side}", column=k)
    if table.num_rows == 0:
        return
    try:
        counts = table.select(list(key)).group_by(list(key), use_threads=False).aggregate([([], "count_all")])
    except _ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot group rows by key {', '.join(key)} at {side}: {e}") from e
    if counts.num_rows == table.num_rows:
        return
    dups = counts.filter(pc.greater(counts["count_all"], 1))
    row = dups.slice(0, 1).to_pylist()[0]
    value = {k: json_safe(row[k]) for k in key}
    raise InvalidArgument(
        f"key is not unique at {side}: {json.dumps(value)} is on {row['count_all']} rows", key=value
    )


# -- schema ----------------------------------------------------------------------------------


def _merge_schema(
    base: pa.Schema, source: pa.Schema, dest: pa.Schema
) -> tuple[list[tuple[str, pa.DataType]], list[SchemaConflict]]:
    """The merged columns (dest's order, then the ones only the source added) and the conflicts."""
    bt = {f.name: f.type for f in base}
    st = {f.name: f.type for f in source}
    dt = {f.name: f.type for f in dest}
    names = [
        *dest.names,
        *(n for n in source.names if n not in dt),
        *(n for n in base.names if n not in st and n not in dt),
    ]
    merged: list[tuple[str, pa.DataType]] = []
    conflicts: list[SchemaConflict] = []

    def text(t: pa.DataType | None) -> str:
        return "removed" if t is None else f"retyped to {t}"

    for name in names:
        b, s, d = bt.get(name), st.get(name), dt.get(name)
        out: pa.DataType | None
        if b is None:
            if s is not None and d is not None and s != d:
                conflicts.append(
                    SchemaConflict(
                        name, f"added on both sides with different types: {s} at source, {d} at dest"
                    )
                )
                continue
            out = d if d is not None else s
        elif s == b:
            out = d
        elif d == b or s == d:
            out = s
        else:
            conflicts.append(SchemaConflict(name, f"{text(s)} at source and {text(d)} at dest (base: {b})"))
            continue
        if out is not None:
            merged.append((name, out))
    return merged, conflicts


def _conform(
    table: pa.Table | None,
    side: str,
    columns: Sequence[tuple[str, pa.DataType]],
    conflicts: list[SchemaConflict],
) -> dict[str, Any]:
    """The side's columns that are merged, in the merged types (safe casts)."""
    out: dict[str, Any] = {}
    if table is None:
        return out
    for name, kind in columns:
        if name not in table.column_names:
            continue
        column = table.column(name)
        if column.type != kind:
            try:
                column = pc.cast(column, kind, safe=True)
            except _ARROW_ERRORS as e:
                reason = f"the {side} values do not convert from {column.type} to {kind}: {e}"
                conflicts.append(SchemaConflict(name, reason))
                continue
        out[name] = column
    return out


# -- rows ------------------------------------------------------------------------------------


def _keys(
    table: pa.Table | None, key: tuple[str, ...], types: dict[str, pa.DataType], index: str
) -> pa.Table:
    if table is None:
        return pa.table(
            [pa.array([], types[k]) for k in key] + [pa.array([], pa.int64())], names=[*key, index]
        )
    n = table.num_rows
    positions = (
        pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)
        if n
        else pa.array([], pa.int64())
    )
    return pa.table([*(table.column(k) for k in key), positions], names=[*key, index])


def _any(masks: Sequence[Any], n: int) -> Any:
    if not masks:
        return pa.repeat(pa.scalar(False), n)
    return functools.reduce(pc.or_, masks)


def _and(*masks: Any) -> Any:
    return functools.reduce(pc.and_, masks)


def _not(mask: Any) -> Any:
    return pc.invert(mask)


def _count(mask: Any) -> int:
    return int(pc.sum(mask).as_py() or 0)


def _join_sides(tables: Mapping[str, pa.Table | None], key: tuple[str, ...], types: Any) -> pa.Table:
    """The keys of the three sides, full-outer joined: each row one key, with the row index it
    has on each side (null where the side lacks it)."""
    try:
        joined = _keys(tables["base"], key, types, _INDEX["base"])
        for side in ("source", "dest"):
            joined = joined.join(
                _keys(tables[side], key, types, _INDEX[side]),
                keys=list(key),
                join_type="full outer",
                coalesce_keys=True,
            )
    except _ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot join the sides on key {', '.join(key)}: {e}") from e
    return joined


def _cell_diffs(
    conformed: Mapping[str, Mapping[str, Any]],
    data: Sequence[tuple[str, Any]],
    idx: Mapping[str, Any],
    n: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Each data column's values on each side, aligned on the joined keys, and where the source
    differs from the base, dest from the base, and the source from dest."""
    values: dict[str, dict[str, Any]] = {}
    sdiff: dict[str, Any] = {}
    ddiff: dict[str, Any] = {}
    xdiff: dict[str, Any] = {}
    for name, kind in data:
        vs = {}
        for side in _SIDES:
            column = conformed[side].get(name)
            vs[side] = pa.nulls(n, kind) if column is None else column.take(idx[side])
        values[name] = vs
        sdiff[name] = differ(vs["base"], vs["source"])
        ddiff[name] = differ(vs["base"], vs["dest"])
        xdiff[name] = differ(vs["source"], vs["dest"])
    return values, sdiff, ddiff, xdiff


def merge_rows(
    base: pa.Table | None,
    source: pa.Table | None,
    dest: pa.Table | None,
    key: Sequence[str],
    winner: RowWinner = RowWinner.NONE,
) -> TableMerge:
    """Merge ``source`` into ``dest`` from their common ``base`` by ``key`` (see the module doc).
    Raise ``InvalidArgument`` for an empty or repeated key column name, a key column missing on a
    present side or typed differently between sides, a null or repeated key value on a side, or
    a column name repeated on a side."""
    key = tuple(key)
    tables = {"base": base, "source": source, "dest": dest}
    types = _check_input(tables, key)
    if types is None:
        return TableMerge(pa.table({}), (), (), 0, 0)
    empty = pa.schema([])
    bschema = base.schema if base is not None else empty
    schemas = {side: t.schema if t is not None else bschema for side, t in tables.items()}
    columns, schema_conflicts = _merge_schema(schemas["base"], schemas["source"], schemas["dest"])
    conformed = {side: _conform(t, side, columns, schema_conflicts) for side, t in tables.items()}
    if schema_conflicts:
        return TableMerge(None, (), tuple(schema_conflicts), 0, 0)

    joined = _join_sides(tables, key, types)
    n = joined.num_rows
    idx = {side: joined[_INDEX[side]] for side in _SIDES}
    bp, sp, dp = (pc.is_valid(idx[side]) for side in _SIDES)
    data = [(name, kind) for name, kind in columns if name not in key]
    values, sdiff, ddiff, xdiff = _cell_diffs(conformed, data, idx, n)

    s_any, d_any, x_any = (_any(list(m.values()), n) for m in (sdiff, ddiff, xdiff))
    s_changed, d_changed = _and(bp, sp, s_any), _and(bp, dp, d_any)
    s_added, d_added = _and(_not(bp), sp), _and(_not(bp), dp)
    s_deleted, d_deleted = _and(bp, _not(sp)), _and(bp, _not(dp))
    s_touched = pc.or_(pc.or_(s_changed, s_added), s_deleted)
    d_touched = pc.or_(pc.or_(d_changed, d_added), d_deleted)
    both = pc.and_(s_touched, d_touched)
    same = _and(both, pc.equal(sp, dp), _not(_and(sp, dp, x_any)))
    overlap = {name: _and(sdiff[name], ddiff[name], xdiff[name]) for name, _ in data}
    any_overlap = _any(list(overlap.values()), n)
    both_changed = pc.and_(s_changed, d_changed)
    cell = _and(both_changed, _not(same), _not(any_overlap))
    conflict_bc = pc.and_(both_changed, any_overlap)
    conflict_ba = _and(s_added, d_added, x_any)
    conflict_dc = pc.or_(pc.and_(s_deleted, d_changed), pc.and_(d_deleted, s_changed))
    conflict = pc.or_(pc.or_(conflict_bc, conflict_ba), conflict_dc)

    only_s = pc.and_(s_touched, _not(d_touched))
    only_d = pc.and_(d_touched, _not(s_touched))
    take_s = pc.or_(only_s, conflict) if winner is RowWinner.SOURCE else only_s
    # a cell-level merge differs from dest where the source changed a cell to another value
    # than dest's, and from the source where dest changed a cell the source left alone
    cell_s = pc.and_(cell, _any([pc.and_(sdiff[c], xdiff[c]) for c, _ in data], n))
    cell_d = pc.and_(cell, _any([pc.and_(_not(sdiff[c]), xdiff[c]) for c, _ in data], n))
    resolved = _count(conflict) if winner is not RowWinner.NONE else 0
    from_source = _count(only_s) + _count(cell_s) + (resolved if winner is RowWinner.SOURCE else 0)
    from_dest = _count(only_d) + _count(cell_d) + (resolved if winner is RowWinner.DEST else 0)

    if winner is RowWinner.NONE and _count(conflict):
        kinds = [
            (ConflictKind.BOTH_CHANGED, conflict_bc, overlap),
            (ConflictKind.BOTH_ADDED, conflict_ba, xdiff),
            (ConflictKind.DELETED_AND_CHANGED, pc.and_(conflict_dc, sp), sdiff),
            (ConflictKind.DELETED_AND_CHANGED, pc.and_(conflict_dc, dp), ddiff),
        ]
        found = _conflicts(joined, tables, key, [name for name, _ in data], kinds)
        return TableMerge(None, found, (), from_source, from_dest)

    present = pc.if_else(take_s, sp, pc.or_(dp, cell))
    arrays: dict[str, Any] = {}
    for name, _ in columns:
        if name in key:
            arrays[name] = joined[name]
        else:
            use_s = pc.or_(take_s, pc.and_(cell, sdiff[name]))
            arrays[name] = pc.if_else(use_s, values[name]["source"], values[name]["dest"])
    merged = pa.table(arrays, schema=pa.schema(columns)).filter(present)
    order = pc.sort_indices(merged, sort_keys=[(k, "ascending") for k in key])
    return TableMerge(merged.take(order), (), (), from_source, from_dest)


def _conflicts(
    joined: pa.Table,
    tables: dict[str, pa.Table | None],
    key: tuple[str, ...],
    names: Sequence[str],
    kinds: Sequence[tuple[ConflictKind, Any, dict[str, Any]]],
) -> tuple[RowConflict, ...]:
    """The conflict records of the rows each mask of ``kinds`` selects, sorted by key."""
    found: list[tuple[tuple[Any, ...], RowConflict]] = []
    for kind, mask, diffs in kinds:
        at = pc.indices_nonzero(mask)
        if len(at) == 0:
            continue
        rows = joined.take(at)
        keys = rows.select(list(key)).to_pylist()
        cols = {name: diffs[name].take(at).to_pylist() for name in names}
        sides: dict[str, list[dict[str, Any] | None]] = {}
        for side in _SIDES:
            positions = rows[_INDEX[side]].to_pylist()
            table = tables[side]
            if table is None:
                sides[side] = [None] * len(positions)
                continue
            present = [p for p in positions if p is not None]
            got = iter(table.take(pa.array(present, pa.int64())).to_pylist())
            sides[side] = [None if p is None else next(got) for p in positions]
        for i, k in enumerate(keys):
            changed = tuple(name for name in names if cols[name][i])
            record = RowConflict(k, changed, kind, sides["base"][i], sides["source"][i], sides["dest"][i])
            found.append((tuple(k[c] for c in key), record))
    found.sort(key=lambda item: item[0])
    return tuple(record for _, record in found)
