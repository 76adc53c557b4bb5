"""The row merge of a table against a model: a random base table (an int key, an int and a text
column with nulls, or no table), random row edits on two branches (some made alike on both), and a
dict of rows predicting, per key, the merged row or the conflict's kind and columns, and the rows
taken from each side, for every winner."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.tables.merge import RowWinner, merge_rows

SCHEMA = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string())])
COLUMNS = ("a", "b")

Row = tuple[int | None, str | None]
Rows = dict[int, Row]
cells = (st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.sampled_from(["x", "y"])))
values = st.tuples(*cells)
keys = st.integers(0, 30)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), keys, values),
        st.tuples(st.just("delete"), keys, st.none()),
        st.tuples(st.just("cell"), keys, st.one_of(*(st.tuples(st.just(i), c) for i, c in enumerate(cells)))),
    ),
    max_size=12,
)


def edit(rows: Rows | None, changes: list[tuple[str, int, Any]]) -> Rows:
    out = dict(rows or {})
    for op, k, arg in changes:
        if op == "add":
            out[k] = arg
        elif op == "delete":
            out.pop(k, None)
        elif k in out:
            i, v = arg
            a, b = out[k]
            out[k] = (v, b) if i == 0 else (a, v)
    return out


def table(rows: Rows | None) -> pa.Table | None:
    if rows is None:
        return None
    return pa.Table.from_pylist([{"k": k, "a": a, "b": b} for k, (a, b) in rows.items()], SCHEMA)


def full(k: int, row: Row | None) -> dict[str, Any] | None:
    return None if row is None else {"k": k, "a": row[0], "b": row[1]}


def model(
    base: Rows | None, source: Rows | None, dest: Rows | None, winner: RowWinner
) -> tuple[Rows, list[tuple[int, str, tuple[str, ...]]], int, int]:
    """The merged rows, the conflicts (key, kind, columns), the rows taken from each side."""
    b_rows, s_rows, d_rows = base or {}, source or {}, dest or {}
    merged: Rows = {}
    conflicts: list[tuple[int, str, tuple[str, ...]]] = []
    from_source = from_dest = 0

    def cols(x: Row, y: Row) -> tuple[str, ...]:
        return tuple(c for i, c in enumerate(COLUMNS) if x[i] != y[i])

    for k in sorted(set(b_rows) | set(s_rows) | set(d_rows)):
        b, s, d = b_rows.get(k), s_rows.get(k), d_rows.get(k)
        result: Row | None
        conflict: tuple[str, tuple[str, ...]] | None = None
        if s == b:
            result = d
        elif d == b or s == d:
            result = s
        elif b is None:
            assert s is not None and d is not None
            conflict, result = ("both-added", cols(s, d)), None
        elif s is None or d is None:
            conflict, result = ("deleted-and-changed", cols(b, s if s is not None else d)), None  # type: ignore[arg-type]
        else:
            s_cols, d_cols = set(cols(b, s)), set(cols(b, d))
            clash = tuple(c for i, c in enumerate(COLUMNS) if c in s_cols & d_cols and s[i] != d[i])
            if clash:
                conflict, result = ("both-changed", clash), None
            else:
                picked = [s[i] if c in s_cols else d[i] for i, c in enumerate(COLUMNS)]
                result = (picked[0], picked[1])  # type: ignore[assignment]
        if conflict is not None:
            if winner is RowWinner.NONE:
                conflicts.append((k, *conflict))
                continue
            result = s if winner is RowWinner.SOURCE else d
        from_source += result != d
        from_dest += result != s
        if result is not None:
            merged[k] = result
    return merged, conflicts, from_source, from_dest


@settings(max_examples=40, deadline=None)
@given(
    base=st.one_of(st.none(), st.dictionaries(keys, values, max_size=20)),
    absent=st.sampled_from(["", "", "", "", "source", "dest"]),
    shared=ops,
    source_ops=ops,
    dest_ops=ops,
    winner=st.sampled_from(list(RowWinner)),
)
def test_merge_matches_the_model(
    base: Rows | None,
    absent: str,
    shared: list[tuple[str, int, Any]],
    source_ops: list[tuple[str, int, Any]],
    dest_ops: list[tuple[str, int, Any]],
    winner: RowWinner,
) -> None:
    common = edit(base, shared)
    source = None if absent == "source" else edit(common, source_ops)
    dest = None if absent == "dest" else edit(common, dest_ops)
    rows, conflicts, from_source, from_dest = model(base, source, dest, winner)

    got = merge_rows(table(base), table(source), table(dest), ["k"], winner)

    assert [(c.key["k"], c.kind, c.columns) for c in got.conflicts] == conflicts
    assert all(c.columns for c in got.conflicts)
    for c in got.conflicts:
        k = c.key["k"]
        assert c.base == full(k, (base or {}).get(k))
        assert c.source == full(k, (source or {}).get(k))
        assert c.dest == full(k, (dest or {}).get(k))
    assert (got.taken_from_source, got.taken_from_dest) == (from_source, from_dest)
    assert got.schema_conflicts == ()
    if conflicts:
        assert got.table is None
    else:
        assert got.table is not None
        if base is None and source is None and dest is None:
            assert got.table.num_rows == 0
        else:
            assert got.table.schema == SCHEMA
            assert got.table.to_pylist() == [full(k, row) for k, row in sorted(rows.items())]
