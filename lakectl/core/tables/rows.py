"""Row changes between the rows read on two sides: by key (a full outer join of the keys, then
the compared columns of the matched rows), or without a key as a multiset of whole rows (counts
per distinct row on each side). Every count is computed over all rows with Arrow compute; Python
objects are made only for the page of row changes asked for."""

from __future__ import annotations

import datetime
import decimal
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakectl.core.tables.parts import PART_COLUMN
from lakectl.core.tables.records import RowChange, RowChangeType, json_safe
from lakectl.errors import InvalidArgument

LEFT_INDEX = "__lakectl_left"
RIGHT_INDEX = "__lakectl_right"
KIND = "__lakectl_kind"
L_COUNT, R_COUNT = "__lakectl_l", "__lakectl_r"
DELTA, COUNT = "__lakectl_delta", "__lakectl_count"
_KINDS = (RowChangeType.ADDED, RowChangeType.REMOVED, RowChangeType.CHANGED)
ARROW_ERRORS = (pa.ArrowException, ValueError, TypeError)


@dataclass
class Compared:
    """The row changes of a diff: totals over all of them, one page of them."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    changed_columns: dict[str, int] = field(default_factory=dict)
    partitions: dict[str, Counter[RowChangeType]] = field(default_factory=dict)
    rows: tuple[RowChange, ...] = ()
    next_offset: str = ""


# -- comparing values ----------------------------------------------------------------------


def differ(a: Any, b: Any) -> Any:
    """Where two arrays of one type differ (a boolean array without nulls): null equals null,
    NaN equals NaN; types Arrow cannot compare are compared as Python values."""
    try:
        eq = pc.equal(a, b)
    except pa.ArrowNotImplementedError:
        return pa.array([x != y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], pa.bool_())
    diff = pc.or_(pc.not_equal(pc.is_null(a), pc.is_null(b)), pc.invert(pc.fill_null(eq, True)))
    if pa.types.is_floating(a.type):
        nan = pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))
        diff = pc.and_(diff, pc.invert(nan))
    return diff


def align(column: Any, kind: pa.DataType) -> Any:
    """``column`` in type ``kind`` (a retyped column, compared in its new type), or as it is
    when the values do not convert (they then differ wherever one is not null)."""
    if column.type == kind:
        return column
    try:
        return pc.cast(column, kind)
    except ARROW_ERRORS:
        return column


def _to_common(left: Any, right: Any, name: str) -> tuple[Any, Any]:
    """Two columns in one type, for grouping: the left cast to the right's type, else both as text."""
    left = align(left, right.type)
    if left.type == right.type:
        return left, right
    try:
        return pc.cast(left, pa.string()), pc.cast(right, pa.string())
    except ARROW_ERRORS as e:
        raise InvalidArgument(
            f"cannot compare column {name!r}: {left.type} on the left, {right.type} on the right"
        ) from e


def _positions(n: int) -> Any:
    if n == 0:
        return pa.array([], pa.int64())
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)


# -- ordering and pages --------------------------------------------------------------------


def _order(values: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
    """A sort key of a key tuple in Arrow's order (ascending, NaN then nulls last)."""
    out: list[tuple[Any, ...]] = []
    for v in values:
        if v is None:
            out.append((2,))
        elif isinstance(v, float) and math.isnan(v):
            out.append((1,))
        else:
            out.append((0, v))
    return tuple(out)


def _from_json(value: Any, kind: pa.DataType) -> Any:
    """A value of ``next_offset`` back in the Python type of its column (inverse of json_safe)."""
    if value is None:
        return None
    try:
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
            return bytes.fromhex(value)
        if pa.types.is_timestamp(kind):  # Arrow's parser keeps nanoseconds, which datetime drops
            return pa.array([value], pa.string()).cast(kind)[0].as_py()
        if pa.types.is_date(kind):
            return datetime.date.fromisoformat(value)
        if pa.types.is_time(kind):
            return datetime.time.fromisoformat(value)
        if pa.types.is_decimal(kind):
            return decimal.Decimal(value)
        if pa.types.is_duration(kind):
            return datetime.timedelta(seconds=value)
        if pa.types.is_floating(kind):
            return float(value)
    except (TypeError, ValueError, decimal.InvalidOperation, pa.ArrowException) as e:
        raise InvalidArgument(f"bad offset: {value!r} is not a {kind} value") from e
    return value


def parse_after(after: str, names: Sequence[str], types: Sequence[pa.DataType]) -> tuple[Any, ...] | None:
    if not after:
        return None
    try:
        values = json.loads(after)
    except ValueError as e:
        raise InvalidArgument(f"bad offset {after!r}: not JSON") from e
    if not isinstance(values, list) or len(values) != len(names):
        shown = ", ".join("partition" if n == PART_COLUMN else n for n in names)
        raise InvalidArgument(f"bad offset {after!r}: not a list of {len(names)} value(s) ({shown})")
    return tuple(_from_json(v, t) for v, t in zip(values, types, strict=True))


def _page(table: pa.Table, names: Sequence[str], amount: int, after: str) -> tuple[list[int], str]:
    """Indices of ``table``'s rows in key order after ``after``, at most ``amount``, and the
    offset of the next page ("" when none)."""
    if table.num_rows == 0:
        return [], ""
    order = pc.sort_indices(table, sort_keys=[(n, "ascending") for n in names])  # nulls last
    start = 0
    bound = parse_after(after, names, [table.schema.field(n).type for n in names])
    if bound is not None:
        keys = table.select(list(names))
        target = _order(bound)
        lo, hi = 0, len(order)
        while lo < hi:  # the first row whose key sorts after ``bound``; rows read one at a time
            mid = (lo + hi) // 2
            row = keys.slice(order[mid].as_py(), 1).to_pylist()[0]
            try:
                later = _order([row[n] for n in names]) > target
            except TypeError as e:
                raise InvalidArgument(
                    f"bad offset {after!r}: its values do not compare with the key's"
                ) from e
            if later:
                hi = mid
            else:
                lo = mid + 1
        start = lo
    page = order[start : start + amount].to_pylist()
    if not page or start + len(page) >= len(order):
        return page, ""
    last = table.select(list(names)).slice(page[-1], 1).to_pylist()[0]
    return page, json.dumps([json_safe(last[n]) for n in names])


def rows_at(table: pa.Table, indices: Sequence[int | None]) -> list[dict[str, Any] | None]:
    """The rows at ``indices`` (None: no row), without the partition column."""
    present = [i for i in indices if i is not None]
    values = iter(table.drop_columns([PART_COLUMN]).take(pa.array(present, pa.int64())).to_pylist())
    return [None if i is None else next(values) for i in indices]


# -- by key --------------------------------------------------------------------------------


def _keys(
    table: pa.Table, names: Sequence[str], key: Sequence[str], types: Sequence[pa.DataType], index: str
) -> pa.Table:
    columns = []
    for name, out, kind in zip(names, key, types, strict=True):
        column = align(table.column(name), kind)
        if column.type != kind:
            raise InvalidArgument(
                f"key column {out!r} is {table.column(name).type} on one side and {kind} on the other"
            )
        columns.append(column)
    return pa.table([*columns, _positions(table.num_rows)], names=[*key, index])


def _check_unique(keys: pa.Table, key: Sequence[str], index: str, ref: str) -> None:
    counts = keys.group_by(list(key), use_threads=False).aggregate([(index, "count")])
    dups = counts.filter(pc.greater(counts[f"{index}_count"], 1))
    if dups.num_rows:
        row = dups.slice(0, 1).to_pylist()[0]
        value = {k: json_safe(row[k]) for k in key}
        raise InvalidArgument(
            f"key is not unique at {ref}: {json.dumps(value)} is on {row[f'{index}_count']} rows",
            key=value,
        )


@dataclass
class Matched:
    """Two sides' rows matched by key: the keys (with each side's row index) only on the right,
    only on the left, and on both with a compared column that differs; and how many matched
    rows each compared column differs in."""

    added: pa.Table
    removed: pa.Table
    changed: pa.Table
    changed_columns: dict[str, int]


def match_keyed(
    left: pa.Table,
    right: pa.Table,
    key: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    refs: tuple[str, str],
) -> Matched:
    """Rows matched by ``key`` (right names; ``pairs`` maps left names to right names, and the
    non-key ones are compared). ``InvalidArgument`` if the key is not unique on a side (``refs``
    name the sides) or its columns do not join."""
    lmap = dict((rn, ln) for ln, rn in pairs)
    types = [right.schema.field(k).type for k in key]
    lkeys = _keys(left, [lmap[k] for k in key], key, types, LEFT_INDEX)
    rkeys = _keys(right, key, key, types, RIGHT_INDEX)
    _check_unique(lkeys, key, LEFT_INDEX, refs[0])
    _check_unique(rkeys, key, RIGHT_INDEX, refs[1])
    try:
        joined = lkeys.join(rkeys, keys=list(key), join_type="full outer", coalesce_keys=True)
    except ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot join on key {', '.join(key)}: {e}") from e
    lidx, ridx = joined[LEFT_INDEX], joined[RIGHT_INDEX]
    both = joined.filter(pc.and_(pc.is_valid(lidx), pc.is_valid(ridx)))
    lb, rb = left.take(both[LEFT_INDEX]), right.take(both[RIGHT_INDEX])
    columns: dict[str, int] = {}
    any_diff = pa.repeat(pa.scalar(False), both.num_rows)
    for ln, rn in pairs:
        if rn in key:
            continue
        mask = differ(align(lb.column(ln), rb.column(rn).type), rb.column(rn))
        n = pc.sum(mask).as_py() or 0
        if n:
            columns[rn] = n
            any_diff = pc.or_(any_diff, mask)
    return Matched(
        joined.filter(pc.is_null(lidx)), joined.filter(pc.is_null(ridx)), both.filter(any_diff), columns
    )


def compare_keyed(
    left: pa.Table,
    right: pa.Table,
    key: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    refs: tuple[str, str],
    amount: int,
    after: str,
) -> Compared:
    """Rows matched by ``key`` (right names; ``pairs`` maps left names to right names)."""
    matched = match_keyed(left, right, key, pairs, refs)
    added, removed, changed = matched.added, matched.removed, matched.changed
    compared = [(ln, rn) for ln, rn in pairs if rn not in key]
    out = Compared(changed_columns=matched.changed_columns)
    out.added, out.removed, out.changed = added.num_rows, removed.num_rows, changed.num_rows
    diff = pa.concat_tables(
        [
            t.append_column(KIND, pa.repeat(pa.scalar(i, pa.int8()), t.num_rows))
            for i, t in enumerate((added, removed, changed))
        ]
    )
    _count_partitions(out, diff, left, right, None)
    page, out.next_offset = _page(diff, key, amount, after)
    if not page:
        return out
    rows = diff.take(pa.array(page, pa.int64()))
    kinds = [_KINDS[k] for k in rows[KIND].to_pylist()]
    lpage, rpage = rows[LEFT_INDEX].to_pylist(), rows[RIGHT_INDEX].to_pylist()
    olds, news = rows_at(left, lpage), rows_at(right, rpage)
    columns = changed_columns(left, right, compared, lpage, rpage, kinds)
    keys = rows.select(list(key)).to_pylist()
    out.rows = tuple(RowChange(kind, keys[i], columns[i], olds[i], news[i]) for i, kind in enumerate(kinds))
    return out


def changed_columns(
    left: pa.Table,
    right: pa.Table,
    compared: Sequence[tuple[str, str]],
    lpage: Sequence[int | None],
    rpage: Sequence[int | None],
    kinds: Sequence[RowChangeType],
) -> list[tuple[str, ...]]:
    """The changed columns of each row of a page, compared as the totals were."""
    at = [i for i, k in enumerate(kinds) if k is RowChangeType.CHANGED]
    out: list[tuple[str, ...]] = [() for _ in kinds]
    if not at:
        return out
    lb = left.take(pa.array([lpage[i] for i in at], pa.int64()))
    rb = right.take(pa.array([rpage[i] for i in at], pa.int64()))
    masks = [
        (rn, differ(align(lb.column(ln), rb.column(rn).type), rb.column(rn)).to_pylist())
        for ln, rn in compared
    ]
    for j, i in enumerate(at):
        out[i] = tuple(rn for rn, mask in masks if mask[j])
    return out


def _count_partitions(
    out: Compared, diff: pa.Table, left: pa.Table, right: pa.Table, counts: str | None
) -> None:
    """Changes per partition: a row's partition is its right one (its left one when removed)."""
    if diff.num_rows == 0:
        return
    if RIGHT_INDEX in diff.column_names:
        parts = pc.coalesce(
            right[PART_COLUMN].take(diff[RIGHT_INDEX]), left[PART_COLUMN].take(diff[LEFT_INDEX])
        )
    else:
        parts = diff[PART_COLUMN]
    table = pa.table(
        {"part": parts, "kind": diff[KIND], "n": diff[counts] if counts else pa.repeat(1, diff.num_rows)}
    )
    grouped = table.group_by(["part", "kind"], use_threads=False).aggregate([("n", "sum")])
    for part, kind, n in zip(
        grouped["part"].to_pylist(), grouped["kind"].to_pylist(), grouped["n_sum"].to_pylist(), strict=True
    ):
        out.partitions.setdefault(part, Counter())[_KINDS[kind]] += n


# -- without a key -------------------------------------------------------------------------


def compare_multiset(
    left: pa.Table, right: pa.Table, pairs: Sequence[tuple[str, str]], amount: int, after: str
) -> Compared:
    """Whole rows (on the columns of ``pairs``) counted on each side; a distinct row with more
    copies on the right was added that many times, with fewer removed."""
    names = [rn for _, rn in pairs]
    if not names:
        raise InvalidArgument("the two sides of the table have no column in common to compare rows on")
    lcols, rcols = [], []
    for ln, rn in pairs:
        lc, rc = _to_common(left.column(ln), right.column(rn), rn)
        lcols.append(lc)
        rcols.append(rc)
    n, m = left.num_rows, right.num_rows
    one, zero = pa.scalar(1, pa.int64()), pa.scalar(0, pa.int64())
    lt = pa.table(
        [*lcols, left[PART_COLUMN], pa.repeat(one, n), pa.repeat(zero, n)],
        names=[*names, PART_COLUMN, L_COUNT, R_COUNT],
    )
    rt = pa.table(
        [*rcols, right[PART_COLUMN], pa.repeat(zero, m), pa.repeat(one, m)],
        names=[*names, PART_COLUMN, L_COUNT, R_COUNT],
    )
    try:
        both = pa.concat_tables([lt, rt])
        grouped = both.group_by([*names, PART_COLUMN], use_threads=False).aggregate(
            [(L_COUNT, "sum"), (R_COUNT, "sum")]
        )
    except ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot compare whole rows without a key (give a key): {e}") from e
    delta = pc.subtract(grouped[f"{R_COUNT}_sum"], grouped[f"{L_COUNT}_sum"])
    grouped = grouped.append_column(DELTA, delta)
    diff = grouped.filter(pc.not_equal(delta, 0))
    kinds = pc.if_else(pc.greater(diff[DELTA], 0), pa.scalar(0, pa.int8()), pa.scalar(1, pa.int8()))
    diff = diff.append_column(KIND, kinds).append_column(COUNT, pc.abs(diff[DELTA]))
    out = Compared()
    positive = pc.sum(pc.max_element_wise(diff[DELTA], 0)).as_py() or 0
    negative = pc.sum(pc.max_element_wise(pc.negate(diff[DELTA]), 0)).as_py() or 0
    out.added, out.removed = positive, negative
    _count_partitions(out, diff, left, right, COUNT)
    # Equal rows in two partitions are two changes: the page's order, and its offset, end with
    # the partition.
    page, out.next_offset = _page(diff, [*names, PART_COLUMN], amount, after)
    if not page:
        return out
    rows = diff.take(pa.array(page, pa.int64())).to_pylist()
    out.rows = tuple(
        RowChange(
            RowChangeType.ADDED if row[DELTA] > 0 else RowChangeType.REMOVED,
            {},
            (),
            None if row[DELTA] > 0 else {n: row[n] for n in names},
            {n: row[n] for n in names} if row[DELTA] > 0 else None,
            abs(row[DELTA]),
        )
        for row in rows
    )
    return out
