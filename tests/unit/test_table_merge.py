"""The three-way row merge of a table (lakectl.core.tables.merge), one rule per test: row changes
on one side, on both, cell-level merges, each kind of conflict, winners, schema changes, absent
sides, and the input it refuses."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import pyarrow as pa
import pytest

from lakectl.core.tables.merge import (
    ConflictKind,
    RowConflict,
    RowWinner,
    SchemaConflict,
    TableMerge,
    merge_rows,
)
from lakectl.errors import InvalidArgument

SCHEMA = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string())])
BASE = [(1, 10, "x"), (2, 20, "y"), (3, 30, "z")]


def t(rows: list[tuple[Any, ...]], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)


def rows(merge: TableMerge) -> list[tuple[Any, ...]]:
    assert merge.table is not None, merge.to_dict()
    return [tuple(r.values()) for r in merge.table.to_pylist()]


def conflicts(merge: TableMerge) -> list[tuple[Any, str, tuple[str, ...]]]:
    return [(c.key["k"], c.kind.value, c.columns) for c in merge.conflicts]


# -- rows ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "dest", "expected", "counts"),
    [
        # unchanged on both
        (BASE, BASE, BASE, (0, 0)),
        # one side changes, adds, removes; the other keeps the base
        (
            [(1, 11, "x"), (2, 20, "y"), (4, 40, "w")],
            BASE,
            [(1, 11, "x"), (2, 20, "y"), (4, 40, "w")],
            (3, 0),
        ),
        (
            BASE,
            [(2, 20, "y"), (3, 30, "z2"), (5, 50, None)],
            [(2, 20, "y"), (3, 30, "z2"), (5, 50, None)],
            (0, 3),
        ),
        # each side changes other rows
        (
            [(1, 11, "x"), (2, 20, "y"), (3, 30, "z")],
            [(1, 10, "x"), (3, 30, "z")],
            [(1, 11, "x"), (3, 30, "z")],
            (1, 1),
        ),
        # the same change on both: taken once, counted on neither
        (
            [(1, 11, "x"), (3, 30, "z"), (4, 4, "n")],
            [(1, 11, "x"), (3, 30, "z"), (4, 4, "n")],
            [(1, 11, "x"), (3, 30, "z"), (4, 4, "n")],
            (0, 0),
        ),
        # changed on both in disjoint columns: a cell-level merge
        (
            [(1, 11, "x"), (2, 20, "y"), (3, 30, "z")],
            [(1, 10, "x1"), (2, 20, "y"), (3, 30, "z")],
            [(1, 11, "x1"), (2, 20, "y"), (3, 30, "z")],
            (1, 1),
        ),
        # overlapping columns changed to the same value, others disjoint: still a cell merge
        (
            [(1, 11, "x"), (2, 20, "y"), (3, 30, "z")],
            [(1, 11, "x1"), (2, 20, "y"), (3, 30, "z")],
            [(1, 11, "x1"), (2, 20, "y"), (3, 30, "z")],
            (0, 1),
        ),
        # null-safe: null set on one side to a value, null kept on the other
        (
            [(1, None, "x"), (2, 20, "y"), (3, 30, "z")],
            BASE,
            [(1, None, "x"), (2, 20, "y"), (3, 30, "z")],
            (1, 0),
        ),
    ],
)
def test_rows_merge_without_conflict(
    source: list[tuple[Any, ...]],
    dest: list[tuple[Any, ...]],
    expected: list[tuple[Any, ...]],
    counts: tuple[int, int],
) -> None:
    merge = merge_rows(t(BASE), t(source[::-1]), t(dest), ["k"])
    assert merge.conflicts == () and merge.schema_conflicts == ()
    assert rows(merge) == expected
    assert (merge.taken_from_source, merge.taken_from_dest) == counts


@pytest.mark.parametrize(
    ("source", "dest", "expected"),
    [
        # the same column changed differently
        (
            [(1, 11, "x"), (2, 20, "y"), (3, 30, "z")],
            [(1, 12, "x"), (2, 20, "y"), (3, 30, "z")],
            [(1, "both-changed", ("a",))],
        ),
        # overlapping changes, only the different ones are listed
        (
            [(1, 11, "s"), (2, 20, "y"), (3, 30, "z")],
            [(1, 11, "d"), (2, 20, "y"), (3, 30, "z")],
            [(1, "both-changed", ("b",))],
        ),
        (
            [(1, 11, "s"), (2, 20, "y"), (3, 30, "z")],
            [(1, 12, "d"), (2, 20, "y"), (3, 30, "z")],
            [(1, "both-changed", ("a", "b"))],
        ),
        # deleted on one side, changed on the other: the changing side's columns
        (
            [(2, 20, "y"), (3, 30, "z")],
            [(1, 10, "x2"), (2, 20, "y"), (3, 30, "z")],
            [(1, "deleted-and-changed", ("b",))],
        ),
        (
            [(1, 11, "x1"), (2, 20, "y"), (3, 30, "z")],
            [(2, 20, "y"), (3, 30, "z")],
            [(1, "deleted-and-changed", ("a", "b"))],
        ),
        # added on both with different values; several conflicts sorted by key
        (
            [*BASE, (5, 1, "s"), (4, 1, None)],
            [*BASE, (5, 1, "d"), (4, 2, None)],
            [(4, "both-added", ("a",)), (5, "both-added", ("b",))],
        ),
    ],
)
def test_rows_in_conflict(
    source: list[tuple[Any, ...]],
    dest: list[tuple[Any, ...]],
    expected: list[tuple[Any, str, tuple[str, ...]]],
) -> None:
    merge = merge_rows(t(BASE), t(source), t(dest), ["k"])
    assert merge.table is None
    assert conflicts(merge) == expected


def test_both_added_equal_rows_are_taken_once() -> None:
    merge = merge_rows(t(BASE), t([*BASE, (4, None, "n")]), t([(4, None, "n"), *BASE]), ["k"])
    assert rows(merge) == [*BASE, (4, None, "n")]
    assert (merge.taken_from_source, merge.taken_from_dest) == (0, 0)


def test_a_conflict_carries_every_side_as_data() -> None:
    merge = merge_rows(t(BASE), t([(1, 11, "x")]), t([(1, 12, "x"), (3, 30, "z")]), ["k"])
    assert merge.conflicts == (
        RowConflict(
            {"k": 1},
            ("a",),
            ConflictKind.BOTH_CHANGED,
            {"k": 1, "a": 10, "b": "x"},
            {"k": 1, "a": 11, "b": "x"},
            {"k": 1, "a": 12, "b": "x"},
        ),
    )
    assert merge.taken_from_source == 1  # key 2 removed on the source; key 3 kept on both
    out = merge.to_dict()
    assert json.loads(json.dumps(out)) == out
    assert out["rows"] is None
    assert out["conflicts"][0] == {
        "key": {"k": 1},
        "columns": ["a"],
        "kind": "both-changed",
        "base": {"k": 1, "a": 10, "b": "x"},
        "source": {"k": 1, "a": 11, "b": "x"},
        "dest": {"k": 1, "a": 12, "b": "x"},
    }
    assert merge.conflicts[0].kind == "both-changed"  # a str enum


def test_conflict_values_are_json_safe() -> None:
    schema = pa.schema([("k", pa.string()), ("v", pa.float64()), ("d", pa.date32()), ("raw", pa.binary())])
    base = t([("a", 1.0, datetime.date(2026, 1, 1), b"\x00")], schema)
    source = t([("a", math.inf, datetime.date(2026, 1, 1), b"\x00")], schema)
    dest = t([("a", 2.0, datetime.date(2026, 1, 1), b"\x00")], schema)
    out = merge_rows(base, source, dest, ["k"]).to_dict()
    assert out["conflicts"][0]["source"] == {"k": "a", "v": "inf", "d": "2026-01-01", "raw": "00"}
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(
    ("winner", "expected", "counts"),
    [
        (RowWinner.SOURCE, [(1, 11, "x"), (3, 30, "z"), (4, 1, "s")], (3, 0)),
        (RowWinner.DEST, [(1, 12, "x"), (2, 20, "y2"), (3, 30, "z"), (4, 1, "d")], (0, 3)),
    ],
)
def test_a_winner_resolves_every_row_conflict(
    winner: RowWinner, expected: list[tuple[Any, ...]], counts: tuple[int, int]
) -> None:
    source = [(1, 11, "x"), (3, 30, "z"), (4, 1, "s")]  # key 2 deleted, key 1 changed, key 4 added
    dest = [(1, 12, "x"), (2, 20, "y2"), (3, 30, "z"), (4, 1, "d")]
    assert len(merge_rows(t(BASE), t(source), t(dest), ["k"]).conflicts) == 3
    merge = merge_rows(t(BASE), t(source), t(dest), ["k"], winner)
    assert merge.conflicts == ()
    assert rows(merge) == expected
    assert (merge.taken_from_source, merge.taken_from_dest) == counts


def test_floats_compare_exactly_and_nan_equals_nan() -> None:
    schema = pa.schema([("k", pa.int64()), ("v", pa.float64())])
    base = t([(1, 0.1 + 0.2), (2, math.nan)], schema)
    source = t([(1, 0.3), (2, math.nan)], schema)  # 0.30000000000000004 → 0.3 is a change
    merge = merge_rows(base, source, base, ["k"])
    assert merge.taken_from_source == 1
    assert rows(merge)[0] == (1, 0.3)


def test_a_composite_key() -> None:
    schema = pa.schema([("region", pa.string()), ("id", pa.int32()), ("v", pa.int64())])
    base = t([("eu", 1, 1), ("us", 1, 1)], schema)
    source = t([("eu", 1, 2), ("us", 1, 1), ("eu", 2, 5)], schema)
    dest = t([("us", 1, 3), ("eu", 1, 1)], schema)
    merge = merge_rows(base, source, dest, ["region", "id"])
    assert rows(merge) == [("eu", 1, 2), ("eu", 2, 5), ("us", 1, 3)]


# -- absent sides ----------------------------------------------------------------------------


def test_absent_sides_are_tables_without_rows() -> None:
    # no base: both sides added their rows
    merge = merge_rows(None, t([(1, 1, "a")]), t([(2, 2, "b")]), ["k"])
    assert rows(merge) == [(1, 1, "a"), (2, 2, "b")]
    assert conflicts(merge_rows(None, t([(1, 1, "a")]), t([(1, 2, "a")]), ["k"])) == [
        (1, "both-added", ("a",))
    ]
    # the source deleted the table, dest left it: no rows, dest's columns
    merge = merge_rows(t(BASE), None, t(BASE), ["k"])
    assert merge.table is not None and merge.table.num_rows == 0 and merge.table.schema == SCHEMA
    assert merge.taken_from_source == 3
    # the source deleted the table, dest changed a row
    assert conflicts(merge_rows(t(BASE), None, t([(1, 10, "x"), (2, 21, "y")]), ["k"])) == [
        (2, "deleted-and-changed", ("a",))
    ]
    # only dest has it
    assert rows(merge_rows(None, None, t(BASE), ["k"])) == BASE
    merge = merge_rows(None, None, None, ["k"])
    assert merge.table is not None and merge.table.num_rows == 0 and merge.conflicts == ()


# -- schema ----------------------------------------------------------------------------------


def test_a_column_added_on_one_side_is_null_for_the_other_sides_rows() -> None:
    wide = pa.schema([("k", pa.int64()), ("c", pa.float64()), ("a", pa.int64()), ("b", pa.string())])
    source = t([(1, 1.5, 10, "x"), (2, None, 20, "y"), (3, None, 30, "z"), (4, 4.5, 40, "w")], wide)
    dest = t([(1, 10, "x"), (2, 20, "y2"), (3, 30, "z")])
    merge = merge_rows(t(BASE), source, dest, ["k"])
    assert merge.table is not None
    assert merge.table.schema.names == ["k", "a", "b", "c"]  # dest's order, then the source's new column
    assert rows(merge) == [(1, 10, "x", 1.5), (2, 20, "y2", None), (3, 30, "z", None), (4, 40, "w", 4.5)]
    assert (merge.taken_from_source, merge.taken_from_dest) == (2, 1)


def test_a_column_added_on_both_with_one_type_merges_by_cell() -> None:
    wide = pa.schema([*SCHEMA, ("c", pa.string())])
    source = t([(1, 10, "x", "s"), (2, 20, "y", None), (3, 30, "z", None)], wide)
    dest = t([(1, 10, "x", None), (2, 20, "y", "d"), (3, 30, "z", None)], wide)
    assert rows(merge_rows(t(BASE), source, dest, ["k"]))[:2] == [(1, 10, "x", "s"), (2, 20, "y", "d")]
    dest = t([(1, 10, "x", "d"), (2, 20, "y", None), (3, 30, "z", None)], wide)
    assert conflicts(merge_rows(t(BASE), source, dest, ["k"])) == [(1, "both-changed", ("c",))]


def test_a_column_removed_on_one_side_is_removed() -> None:
    narrow = pa.schema([("k", pa.int64()), ("b", pa.string())])
    source = t([(1, "x"), (2, "y2"), (3, "z")], narrow)
    dest = t([(1, 11, "x"), (2, 20, "y"), (3, 30, "z")])  # dest's change to the removed column is lost
    merge = merge_rows(t(BASE), source, dest, ["k"])
    assert merge.table is not None and merge.table.schema == narrow
    assert rows(merge) == [(1, "x"), (2, "y2"), (3, "z")]


def test_a_column_retyped_on_one_side_casts_the_others_values() -> None:
    retyped = pa.schema([("k", pa.int64()), ("a", pa.string()), ("b", pa.string())])
    source = t([(1, "10", "x"), (2, "20", "y"), (3, "30", "z")], retyped)  # same values, new type
    dest = t([(1, 11, "x"), (2, 20, "y"), (3, 30, "z"), (4, 40, "w")])
    merge = merge_rows(t(BASE), source, dest, ["k"])
    assert merge.table is not None and merge.table.schema == retyped
    assert rows(merge) == [(1, "11", "x"), (2, "20", "y"), (3, "30", "z"), (4, "40", "w")]
    assert (merge.taken_from_source, merge.taken_from_dest) == (0, 2)  # the cast alone changes no row


def test_a_value_that_does_not_cast_is_a_schema_conflict() -> None:
    retyped = pa.schema([("k", pa.int64()), ("a", pa.int8()), ("b", pa.string())])
    source = t([(1, 10, "x"), (2, 20, "y"), (3, 30, "z")], retyped)
    dest = t([(1, 1000, "x"), (2, 20, "y"), (3, 30, "z")])
    merge = merge_rows(t(BASE), source, dest, ["k"])
    assert merge.table is None
    assert [c.column for c in merge.schema_conflicts] == ["a"]
    assert "dest" in merge.schema_conflicts[0].reason and "int8" in merge.schema_conflicts[0].reason


@pytest.mark.parametrize(
    ("source", "dest", "column"),
    [
        (
            pa.schema([("k", pa.int64()), ("a", pa.string()), ("b", pa.string())]),
            pa.schema([("k", pa.int64()), ("a", pa.float64()), ("b", pa.string())]),
            "a",
        ),
        (
            pa.schema([("k", pa.int64()), ("b", pa.string())]),
            pa.schema([("k", pa.int64()), ("a", pa.float64()), ("b", pa.string())]),
            "a",
        ),
        (pa.schema([*SCHEMA, ("c", pa.int64())]), pa.schema([*SCHEMA, ("c", pa.string())]), "c"),
    ],
)
def test_incompatible_schema_changes_conflict(source: pa.Schema, dest: pa.Schema, column: str) -> None:
    merge = merge_rows(t(BASE), source.empty_table(), dest.empty_table(), ["k"], RowWinner.SOURCE)
    assert merge.table is None and merge.conflicts == ()
    assert [c.column for c in merge.schema_conflicts] == [column]
    assert merge.to_dict()["schema_conflicts"] == [c.to_dict() for c in merge.schema_conflicts]
    assert isinstance(merge.schema_conflicts[0], SchemaConflict) and merge.schema_conflicts[0].reason


def test_the_same_schema_change_on_both_is_taken_once() -> None:
    retyped = pa.schema([("k", pa.int64()), ("a", pa.float64())])
    source = t([(1, 10.0), (2, 20.0), (3, 31.0)], retyped)
    dest = t([(1, 10.0), (2, 22.0), (3, 30.0)], retyped)
    assert rows(merge_rows(t(BASE), source, dest, ["k"])) == [(1, 10.0), (2, 22.0), (3, 31.0)]


# -- refused input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "source", "dest", "key", "words"),
    [
        (t(BASE), t(BASE), t(BASE), [], "needs a key"),
        (t(BASE), t(BASE), t(BASE), ["k", "k"], "twice"),
        (t(BASE), t(BASE), t(BASE), [""], "empty"),
        (t(BASE), t(BASE), t(BASE), ["nope"], "'nope'"),
        (t(BASE), pa.schema([("a", pa.int64())]).empty_table(), t(BASE), ["k"], "at source"),
        (
            t(BASE),
            t(BASE),
            t([("1", 1, "x")], pa.schema([("k", pa.string()), ("a", pa.int64()), ("b", pa.string())])),
            ["k"],
            "int64 at base and string at dest",
        ),
        (t(BASE), t([*BASE, (2, 0, "dup")]), t(BASE), ["k"], 'key is not unique at source: {"k": 2}'),
        (None, t(BASE), t([(None, 1, "x")]), ["k"], "null on 1 row(s) at dest"),
        (
            t(BASE),
            t(BASE),
            pa.table([[1], [2], [3]], names=["k", "a", "a"]),
            ["k"],
            "two columns named 'a' at dest",
        ),
    ],
)
def test_bad_input_is_refused(
    base: pa.Table | None, source: pa.Table | None, dest: pa.Table | None, key: list[str], words: str
) -> None:
    with pytest.raises(InvalidArgument) as e:
        merge_rows(base, source, dest, key)
    assert words in e.value.message


def test_a_duplicate_key_names_the_key() -> None:
    with pytest.raises(InvalidArgument) as e:
        merge_rows(t(BASE), t(BASE), t([*BASE, (3, 0, "dup")]), ["k"])
    assert e.value.details["key"] == {"k": 3}
