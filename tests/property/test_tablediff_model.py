"""The table diff against a model: random small tables (an int key, columns with nulls) split
into hive partitions by key, random row edits on a branch, and a dict of rows predicting the
added, removed and changed keys, the changed columns, the partition summaries, the objects
read, the multiset diff without a key, and pages that cover every change exactly once."""

from __future__ import annotations

import io
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core import porcelain, writes
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.tablediff import RowChangeType, diff_table
from lakectl.errors import NotFound

REPO = "repo"
SCHEMA = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])
COLUMNS = ("a", "b", "c")
PARTS = 3

Row = tuple[int | None, str | None, float | None]
values = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.sampled_from(["x", "y"])),
    st.one_of(st.none(), st.sampled_from([0.5, 1.5])),
)
tables = st.dictionaries(st.integers(0, 40), values, max_size=25)
edits = st.lists(
    st.one_of(
        st.tuples(st.just("delete"), st.integers(0, 40), values),
        st.tuples(st.just("set"), st.integers(0, 50), values),
    ),
    max_size=15,
)


def write(lake: Lake, branch: str, rows: dict[int, Row], before: dict[int, Row] | None) -> None:
    """One Parquet object per partition ``p=<k % 3>``, written when its rows differ."""
    for p in range(PARTS):
        mine = {k: v for k, v in rows.items() if k % PARTS == p}
        theirs = {k: v for k, v in (before or {}).items() if k % PARTS == p}
        path = f"t/p={p}/part-0.parquet"
        if before is not None and mine == theirs:
            continue
        if not mine:
            if theirs:
                writes.delete_objects(lake, REPO, branch, [path])
            continue
        table = pa.Table.from_pylist(
            [{"k": k, "a": a, "b": b, "c": c} for k, (a, b, c) in sorted(mine.items())], SCHEMA
        )
        sink = io.BytesIO()
        pq.write_table(table, sink)
        writes.upload(lake, REPO, branch, path, sink.getvalue())


def full(k: int, row: Row) -> dict[str, Any]:
    return {"k": k, "a": row[0], "b": row[1], "c": row[2], "p": str(k % PARTS)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=tables, ops=edits, amount=st.integers(1, 6))
def test_diff_matches_the_model(left: dict[int, Row], ops: list[tuple[str, int, Row]], amount: int) -> None:
    right = dict(left)
    for op, k, row in ops:
        if op == "delete":
            right.pop(k, None)
        else:
            right[k] = row
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(kv=MemoryStore(), blocks=LocalAdapter(tmp))
        porcelain.create_repo(lake, REPO, "main", "local://repo")
        writes.upload(lake, REPO, "main", "t/_SUCCESS", b"")  # the table exists on both sides
        write(lake, "main", left, None)
        porcelain.commit(lake, REPO, "main", "left", committer="t")
        porcelain.create_branch(lake, REPO, "dev", "main")
        write(lake, "dev", right, left)
        porcelain.commit(lake, REPO, "dev", "right", committer="t", allow_empty=True)

        added = set(right) - set(left)
        removed = set(left) - set(right)
        changed = {
            k: tuple(c for i, c in enumerate(COLUMNS) if left[k][i] != right[k][i])
            for k in set(left) & set(right)
        }
        changed = {k: cols for k, cols in changed.items() if cols}

        if not left and not right:
            with pytest.raises(NotFound):
                diff_table(lake, REPO, "main", "dev", "t", key=["k"])
            return
        diff = diff_table(lake, REPO, "main", "dev", "t", key=["k"], amount=1000)
        got = {r.key["k"]: r for r in diff.rows}
        assert {k for k, r in got.items() if r.type is RowChangeType.ADDED} == added
        assert {k for k, r in got.items() if r.type is RowChangeType.REMOVED} == removed
        assert {k: r.columns for k, r in got.items() if r.type is RowChangeType.CHANGED} == changed
        assert (diff.added, diff.removed, diff.changed) == (len(added), len(removed), len(changed))
        assert diff.changed_columns == dict(Counter(c for cols in changed.values() for c in cols))
        for k, r in got.items():
            assert r.old == (full(k, left[k]) if k in left else None)
            assert r.new == (full(k, right[k]) if k in right else None)
        assert [r.key["k"] for r in diff.rows] == sorted(got)

        # partitions: one summary per partition with a change; objects read where they differ
        expected_parts = {}
        reads = unchanged = 0
        for p in range(PARTS):
            lp = {k: v for k, v in left.items() if k % PARTS == p}
            rp = {k: v for k, v in right.items() if k % PARTS == p}
            if lp == rp:
                unchanged += bool(rp)
                continue
            reads += bool(lp) + bool(rp)
            kinds = [(k in added, k in removed, k in changed) for k in set(lp) | set(rp)]
            counts = tuple(sum(x[i] for x in kinds) for i in range(3))
            if any(counts):
                expected_parts[f"p={p}"] = (len(lp), len(rp), *counts)
        assert {
            s.partition: (s.rows_left, s.rows_right, s.added, s.removed, s.changed) for s in diff.partitions
        } == expected_parts
        assert (diff.files_read, diff.files_unchanged) == (reads, unchanged)

        # pages cover every change once, in order
        seen, after = [], ""
        while True:
            page = diff_table(lake, REPO, "main", "dev", "t/", key=["k"], amount=amount, after=after)
            assert len(page.rows) <= amount
            seen.extend(page.rows)
            if not page.next_offset:
                break
            after = page.next_offset
        assert seen == list(diff.rows)

        # without a key: the multiset of whole rows of the partitions read
        lrows = Counter(tuple(full(k, v).values()) for k, v in left.items() if left != right)
        rrows = Counter(tuple(full(k, v).values()) for k, v in right.items() if left != right)
        keyless = diff_table(lake, REPO, "main", "dev", "t", amount=1000)
        assert keyless.added == sum((rrows - lrows).values())
        assert keyless.removed == sum((lrows - rrows).values())
        names = ("k", "a", "b", "c", "p")
        got_rows = Counter()
        for r in keyless.rows:
            row = r.new if r.type is RowChangeType.ADDED else r.old
            assert row is not None
            got_rows[(r.type, tuple(row[n] for n in names))] += r.count
        want = Counter({(RowChangeType.ADDED, t): n for t, n in (rrows - lrows).items()})
        want.update({(RowChangeType.REMOVED, t): n for t, n in (lrows - rrows).items()})
        assert got_rows == want
