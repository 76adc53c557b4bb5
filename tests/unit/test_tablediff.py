"""The table diff (lakectl.core.tablediff) on an embedded lake: keyed and keyless row changes,
schema changes, partitions read only where their objects changed, paging, and bad input."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakectl.core import listing, opening, porcelain, tablediff, writes
from lakectl.core.lake import Lake
from lakectl.core.tablediff import (
    ColumnChange,
    ColumnChangeType,
    PartitionSummary,
    RowChange,
    RowChangeType,
    TableDiff,
    diff_table,
)
from lakectl.errors import InvalidArgument, LakectlError, NotFound

REPO = "repo"


def parquet(rows: list[dict[str, Any]] | pa.Table, schema: pa.Schema | None = None) -> bytes:
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def put(lake: Lake, branch: str, path: str, data: bytes) -> None:
    writes.upload(lake, REPO, branch, path, io.BytesIO(data))


def commit(lake: Lake, branch: str, message: str = "change") -> None:
    porcelain.commit(lake, REPO, branch, message, committer="tester")


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    lk = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lk, REPO, "main", "local://repo")
    yield lk
    lk.close()


def branch_off(lake: Lake, name: str = "dev") -> None:
    porcelain.create_branch(lake, REPO, name, "main")


ORDERS = [
    {"id": 1, "item": "apple", "amount": 10.0, "qty": 1},
    {"id": 2, "item": "pear", "amount": 20.0, "qty": 2},
    {"id": 3, "item": "plum", "amount": None, "qty": 3},
    {"id": 4, "item": "fig", "amount": 40.0, "qty": 4},
]


def edited_orders() -> list[dict[str, Any]]:
    rows = [dict(r) for r in ORDERS if r["id"] != 2]  # 2 removed
    rows[0]["amount"] = 11.0  # 1: amount changed
    rows[1]["qty"] = 30  # 3: qty changed (amount stays null)
    rows.append({"id": 5, "item": "kiwi", "amount": 50.0, "qty": 5})  # 5 added
    return rows


def orders_lake(lake: Lake, path: str = "tables/orders.parquet") -> None:
    put(lake, "main", path, parquet(ORDERS))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", path, parquet(edited_orders()))
    commit(lake, "dev")


# -- keyed -----------------------------------------------------------------------------------


def test_keyed_diff_of_one_parquet_object(lake: Lake) -> None:
    orders_lake(lake)
    diff = diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", key=["id"])
    assert (diff.added, diff.removed, diff.changed) == (1, 1, 2)
    assert diff.changed_columns == {"amount": 1, "qty": 1}
    assert (diff.rows_left, diff.rows_right) == (4, 4)
    assert (diff.files_read, diff.files_unchanged) == (2, 0)
    assert diff.schema == ()
    assert diff.path == "tables/orders.parquet" and diff.key == ("id",)
    assert [(r.type, r.key, r.columns) for r in diff.rows] == [
        (RowChangeType.CHANGED, {"id": 1}, ("amount",)),
        (RowChangeType.REMOVED, {"id": 2}, ()),
        (RowChangeType.CHANGED, {"id": 3}, ("qty",)),
        (RowChangeType.ADDED, {"id": 5}, ()),
    ]
    assert diff.rows[1].old == {"id": 2, "item": "pear", "amount": 20.0, "qty": 2}
    assert diff.rows[1].new is None
    assert diff.rows[3].old is None and diff.rows[3].new == {
        "id": 5,
        "item": "kiwi",
        "amount": 50.0,
        "qty": 5,
    }
    assert diff.partitions == (PartitionSummary("", 4, 4, 1, 1, 2),)
    assert diff.next_offset == ""
    assert diff.summary() == "orders: +1 rows, \u22121, 2 changed (amount, qty)"
    out = json.loads(json.dumps(diff.to_dict()))
    assert out["rows"][0] == {
        "type": "changed",
        "key": {"id": 1},
        "columns": ["amount"],
        "old": {"id": 1, "item": "apple", "amount": 10.0, "qty": 1},
        "new": {"id": 1, "item": "apple", "amount": 11.0, "qty": 1},
        "count": 1,
    }
    assert set(out) == {*TableDiff.__slots__, "summary"}  # type: ignore[attr-defined]
    assert out["summary"] == diff.summary()


def test_same_ref_reads_nothing(lake: Lake) -> None:
    orders_lake(lake)
    diff = diff_table(lake, REPO, "dev", "dev", "tables/orders.parquet", key=["id"])
    assert (diff.added, diff.removed, diff.changed, diff.files_read, diff.files_unchanged) == (0, 0, 0, 0, 1)
    assert diff.rows == () and diff.partitions == ()
    assert diff.summary() == "orders: no changes"


def test_staged_changes_are_seen_with_dollar(lake: Lake) -> None:
    put(lake, "main", "t.parquet", parquet(ORDERS))
    commit(lake, "main")
    put(lake, "main", "t.parquet", parquet(ORDERS[:3]))  # staged, not committed
    assert diff_table(lake, REPO, "main", "main", "t.parquet", key=["id"]).removed == 0
    assert diff_table(lake, REPO, "main", "main$", "t.parquet", key=["id"]).removed == 1


def test_csv_and_tsv(lake: Lake) -> None:
    put(lake, "main", "t.csv", b"id,name,score\n1,a,1.5\n2,b,2.5\n3,c,\n")
    put(lake, "main", "t.tsv", b"id\tname\n1\ta\n")
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.csv", b"id,name,score\n1,a,1.5\n2,B,2.5\n4,d,4.0\n")
    put(lake, "dev", "t.tsv", b"id\tname\n1\tz\n")
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "t.csv", key=["id"])
    assert (diff.added, diff.removed, diff.changed) == (1, 1, 1)
    assert diff.changed_columns == {"name": 1}
    assert diff_table(lake, REPO, "main", "dev", "t.tsv", key=["id"]).changed_columns == {"name": 1}


def test_object_without_extension_and_json_safe_values(lake: Lake) -> None:
    import datetime
    import decimal

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("day", pa.date32()),
            ("at", pa.timestamp("us")),
            ("blob", pa.binary()),
            ("price", pa.decimal128(10, 2)),
            ("f", pa.float64()),
        ]
    )
    row = {
        "id": 1,
        "day": datetime.date(2026, 1, 2),
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "blob": b"\x00\xff",
        "price": decimal.Decimal("1.50"),
        "f": float("nan"),
    }
    put(lake, "main", "data/events", parquet([row], schema))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "data/events", parquet([{**row, "price": decimal.Decimal("2.00")}], schema))
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "data/events", key=["id"])
    assert diff.changed_columns == {"price": 1}  # NaN equals NaN
    change = diff.rows[0].to_dict()
    assert change["new"] == {
        "id": 1,
        "day": "2026-01-02",
        "at": "2026-01-02T03:04:05",
        "blob": "00ff",
        "price": "2.00",
        "f": "nan",
    }
    json.dumps(diff.to_dict(), allow_nan=False)


def test_composite_key_and_null_values(lake: Lake) -> None:
    rows = [{"a": 1, "b": "x", "v": None}, {"a": 1, "b": "y", "v": 2}]
    put(lake, "main", "t.parquet", parquet(rows))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet([{"a": 1, "b": "x", "v": None}, {"a": 1, "b": "y", "v": None}]))
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "t.parquet", key=["a", "b"])
    assert [(r.key, r.columns) for r in diff.rows] == [({"a": 1, "b": "y"}, ("v",))]


# -- keyless ---------------------------------------------------------------------------------


def test_keyless_multiset_with_duplicates(lake: Lake) -> None:
    left = [{"x": 1, "y": "a"}] * 3 + [{"x": 2, "y": "b"}, {"x": None, "y": "n"}]
    right = [{"x": 1, "y": "a"}] * 1 + [{"x": 2, "y": "b"}] * 2 + [{"x": None, "y": "n"}, {"x": 3, "y": "c"}]
    put(lake, "main", "t.parquet", parquet(left))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet(right))
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "t.parquet")
    assert (diff.added, diff.removed, diff.changed) == (2, 2, 0)
    assert [(r.type, r.old, r.new, r.count, r.key) for r in diff.rows] == [
        (RowChangeType.REMOVED, {"x": 1, "y": "a"}, None, 2, {}),
        (RowChangeType.ADDED, None, {"x": 2, "y": "b"}, 1, {}),
        (RowChangeType.ADDED, None, {"x": 3, "y": "c"}, 1, {}),
    ]
    assert diff.summary() == "t: +2 rows, \u22122"
    pages = _all_pages(lake, "t.parquet", (), 1)
    assert [r.count for r in pages] == [2, 1, 1]


# -- schema ----------------------------------------------------------------------------------


def test_schema_changes(lake: Lake) -> None:
    left = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "qty": pa.array([1, 2], pa.int32()),
            "old_name": pa.array(["a", "b"]),
            "gone": pa.array([True, False]),
        }
    )
    right = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "qty": pa.array([1, 3], pa.int64()),
            "new_name": pa.array(["a", "c"]),
            "discount": pa.array([0.1, 0.2]),
        }
    )
    put(lake, "main", "t.parquet", parquet(left))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet(right))
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])
    assert diff.schema == (
        ColumnChange(ColumnChangeType.RETYPED, "qty", "int32", "int64"),
        ColumnChange(ColumnChangeType.RENAMED, "new_name", "string", "string", "old_name"),
        ColumnChange(ColumnChangeType.ADDED, "discount", None, "double"),
        ColumnChange(ColumnChangeType.REMOVED, "gone", "bool", None),
    )
    # rows compared on the common columns, the renamed one mapped, the retyped one cast
    assert diff.changed == 1 and diff.changed_columns == {"qty": 1, "new_name": 1}
    assert diff.rows[0].columns == ("qty", "new_name")
    assert diff.rows[0].old == {"id": 2, "qty": 2, "old_name": "b", "gone": False}
    assert "schema: qty int32\u2192int64, old_name\u2192new_name, +discount, \u2212gone" in diff.summary()
    assert diff.to_dict()["schema"][1] == {
        "type": "renamed",
        "name": "new_name",
        "old_type": "string",
        "new_type": "string",
        "old_name": "old_name",
    }
    keyless = diff_table(lake, REPO, "main", "dev", "t.parquet")
    assert (keyless.added, keyless.removed) == (1, 1)
    assert keyless.rows[0].old == {"id": 2, "qty": 2, "new_name": "b"}


def test_new_table_reports_every_column_added(lake: Lake) -> None:
    put(lake, "main", "keep.txt", b"x")
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet(ORDERS))
    commit(lake, "dev")
    diff = diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])
    assert [c.type for c in diff.schema] == [ColumnChangeType.ADDED] * 4
    assert (diff.added, diff.rows_left, diff.rows_right) == (4, 0, 4)
    gone = diff_table(lake, REPO, "dev", "main", "t.parquet", two_way=True)  # main did not change it
    assert [c.type for c in gone.schema] == [ColumnChangeType.REMOVED] * 4 and gone.removed == 4


# -- partitions ------------------------------------------------------------------------------

DAYS = [f"2026-01-0{d}" for d in range(1, 6)]


def partitioned_lake(lake: Lake) -> None:
    for day in DAYS:
        rows = [{"id": i, "v": i * 10} for i in range(10 * DAYS.index(day), 10 * DAYS.index(day) + 10)]
        put(lake, "main", f"tables/ev/region=eu/date={day}/part-0.parquet", parquet(rows))
    put(lake, "main", "tables/ev/_SUCCESS", b"")
    commit(lake, "main")
    branch_off(lake)
    rows = [{"id": i, "v": i * 10 + (1 if i == 21 else 0)} for i in range(20, 30) if i != 22]
    rows.append({"id": 100, "v": 0})
    put(lake, "dev", "tables/ev/region=eu/date=2026-01-03/part-0.parquet", parquet(rows))
    commit(lake, "dev")


def test_partitioned_table_reads_only_the_changed_partition(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    partitioned_lake(lake)
    changed = porcelain.stat(lake, REPO, "dev", "tables/ev/region=eu/date=2026-01-03/part-0.parquet").entry
    before = porcelain.stat(lake, REPO, "main", "tables/ev/region=eu/date=2026-01-03/part-0.parquet").entry
    assert changed is not None and before is not None
    wanted = {loc.split("+")[0] for loc in (*changed.locators, *before.locators)}
    got: list[str] = []
    real_get = lake.blocks.get

    def counting_get(locator: str, offset: int = 0, length: int | None = None) -> bytes:
        got.append(locator)
        return real_get(locator, offset, length)

    monkeypatch.setattr(lake.blocks, "get", counting_get)
    diff = diff_table(lake, REPO, "main", "dev", "tables/ev", key=["id"])
    monkeypatch.undo()
    data_reads = {g.split("+")[0] for g in got} - _range_blocks(lake)
    assert data_reads == wanted
    assert (diff.files_read, diff.files_unchanged) == (2, 4)
    assert diff.path == "tables/ev/"
    assert diff.partitions == (PartitionSummary("region=eu/date=2026-01-03", 10, 10, 1, 1, 1),)
    assert diff.changed_columns == {"v": 1}
    change = next(r for r in diff.rows if r.type is RowChangeType.CHANGED)
    assert change.new == {"id": 21, "v": 211, "region": "eu", "date": "2026-01-03"}


def _range_blocks(lake: Lake) -> set[str]:
    """Blocks of metadata (ranges, metaranges): every block not of an object's data."""
    data = set()
    for ref in ("main", "dev"):
        for o in listing.list_objects(lake, REPO, ref):
            assert o.entry is not None
            data |= {loc.split("+")[0] for loc in o.entry.locators}
    return {loc.split("+")[0] for loc in lake.blocks.list()} - data


def test_partition_key_and_moved_rows(lake: Lake) -> None:
    put(lake, "main", "t/date=1/a.parquet", parquet([{"id": 1, "v": 1}, {"id": 2, "v": 2}]))
    put(lake, "main", "t/date=2/a.parquet", parquet([{"id": 3, "v": 3}]))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t/date=1/a.parquet", parquet([{"id": 1, "v": 1}]))
    put(lake, "dev", "t/date=2/a.parquet", parquet([{"id": 3, "v": 3}, {"id": 2, "v": 2}]))
    commit(lake, "dev")
    moved = diff_table(lake, REPO, "main", "dev", "t/", key=["id"])
    assert (moved.changed, moved.changed_columns) == (1, {"date": 1})
    assert moved.partitions == (PartitionSummary("date=2", 1, 2, 0, 0, 1),)
    by_partition = diff_table(lake, REPO, "main", "dev", "t/", key=["date", "id"])
    assert (by_partition.added, by_partition.removed, by_partition.changed) == (1, 1, 0)
    assert [p.partition for p in by_partition.partitions] == ["date=1", "date=2"]


# -- paging ----------------------------------------------------------------------------------


def _all_pages(lake: Lake, path: str, key: tuple[str, ...], amount: int) -> list[RowChange]:
    seen: list[RowChange] = []
    after = ""
    for _ in range(100):
        diff = diff_table(lake, REPO, "main", "dev", path, key=key, amount=amount, after=after)
        assert len(diff.rows) <= amount
        seen.extend(diff.rows)
        if not diff.next_offset:
            return seen
        after = diff.next_offset
    raise AssertionError("paging does not end")


def test_paging_covers_every_change_once(lake: Lake) -> None:
    orders_lake(lake)
    whole = diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", key=["id"])
    first = diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", key=["id"], amount=2)
    assert [r.key for r in first.rows] == [{"id": 1}, {"id": 2}] and first.next_offset == "[2]"
    assert (first.added, first.removed, first.changed) == (whole.added, whole.removed, whole.changed)
    assert _all_pages(lake, "tables/orders.parquet", ("id",), 2) == list(whole.rows)
    assert _all_pages(lake, "tables/orders.parquet", ("id",), 1) == list(whole.rows)
    assert diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", key=["id"], amount=0).rows == ()


def test_paging_by_string_and_date_keys(lake: Lake) -> None:
    import datetime

    rows = [{"d": datetime.date(2026, 1, i), "s": f"k{i}", "v": i} for i in range(1, 8)]
    put(lake, "main", "t.parquet", parquet(rows))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet([{**r, "v": -1} for r in rows]))
    commit(lake, "dev")
    pages = _all_pages(lake, "t.parquet", ("d", "s"), 3)
    assert [r.key["s"] for r in pages] == [f"k{i}" for i in range(1, 8)]


def test_keyless_paging_keeps_equal_rows_of_two_partitions(lake: Lake) -> None:
    """The same row added in two partitions is two changes: a page boundary between them loses
    neither."""
    for day in ("1", "2"):
        put(lake, "main", f"t/day={day}/p.parquet", parquet([{"v": 0}]))
    commit(lake, "main")
    branch_off(lake)
    for day in ("1", "2"):
        put(lake, "dev", f"t/day={day}/p.parquet", parquet([{"v": 0}, {"v": 1}, {"v": 2}]))
    commit(lake, "dev")
    whole = diff_table(lake, REPO, "main", "dev", "t/")
    assert whole.added == 4 and len(whole.rows) == 4
    assert _all_pages(lake, "t/", (), 1) == list(whole.rows)
    first = diff_table(lake, REPO, "main", "dev", "t/", amount=1)
    assert json.loads(first.next_offset) == [1, "1", "day=1"]  # v, day, then the partition


def test_paging_by_nanosecond_timestamps_ends(lake: Lake) -> None:
    """Offsets keep nanoseconds (pandas writes them): a page never starts again at its own row."""
    stamps = pa.array([1_767_225_600_000_000_000 + i for i in range(5)], pa.timestamp("ns", tz="UTC"))
    put(lake, "main", "t.parquet", parquet(pa.table({"at": stamps, "v": pa.array([0] * 5)})))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet(pa.table({"at": stamps, "v": pa.array([1] * 5)})))
    commit(lake, "dev")
    pages = _all_pages(lake, "t.parquet", ("at",), 2)
    assert len(pages) == 5 and len({str(r.key["at"]) for r in pages}) == 5


def test_dictionary_columns_compare_by_their_values(lake: Lake) -> None:
    """pandas categoricals are stored dictionary-encoded, with each object's own dictionary."""
    left = pa.table({"id": [1, 2], "c": pa.array(["a", "b"]).dictionary_encode()})
    right = pa.table({"id": [1, 2, 3], "c": pa.array(["z", "b", "a"]).dictionary_encode()})
    put(lake, "main", "t.parquet", parquet(left))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet(right))
    commit(lake, "dev")
    keyed = diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])
    assert (keyed.added, keyed.changed, keyed.schema) == (1, 1, ())
    assert keyed.rows[0].old == {"id": 1, "c": "a"} and keyed.rows[0].new == {"id": 1, "c": "z"}
    whole = diff_table(lake, REPO, "main", "dev", "t.parquet")
    assert (whole.added, whole.removed) == (2, 1)


# -- bad input -------------------------------------------------------------------------------


def test_missing_key_column(lake: Lake) -> None:
    orders_lake(lake)
    with pytest.raises(InvalidArgument, match="key column 'nope' is not in the table"):
        diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", key=["nope"])


def test_key_missing_on_one_side(lake: Lake) -> None:
    put(lake, "main", "t.parquet", parquet([{"id": 1, "v": 1}]))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet([{"ident": 1, "w": "x"}]))
    commit(lake, "dev")
    with pytest.raises(InvalidArgument, match=r"key column 'id' is not in the table t\.parquet at dev"):
        diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])


def test_duplicate_key(lake: Lake) -> None:
    put(lake, "main", "t.parquet", parquet(ORDERS))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "t.parquet", parquet([*ORDERS, {"id": 3, "item": "x", "amount": 1.0, "qty": 1}]))
    commit(lake, "dev")
    with pytest.raises(InvalidArgument, match=r'key is not unique at dev: \{"id": 3\} is on 2 rows'):
        diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])


def test_corrupt_parquet(lake: Lake) -> None:
    put(lake, "main", "tables/x.parquet", parquet(ORDERS))
    commit(lake, "main")
    branch_off(lake)
    put(lake, "dev", "tables/x.parquet", b"PAR1 this is not parquet PAR1")
    commit(lake, "dev")
    with pytest.raises(InvalidArgument, match=r"cannot read tables/x\.parquet as Parquet: "):
        diff_table(lake, REPO, "main", "dev", "tables/x.parquet", key=["id"])


def test_no_table(lake: Lake) -> None:
    put(lake, "main", "docs/readme.txt", b"hello")
    commit(lake, "main")
    branch_off(lake)
    for path in ("docs/", "docs", "nothing/here", "missing.parquet"):
        with pytest.raises(NotFound, match="no table at"):
            diff_table(lake, REPO, "main", "dev", path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"amount": -1}, "amount must be between"),
        ({"amount": tablediff.MAX_AMOUNT + 1}, "amount must be between"),
        ({"key": ["id", "id"]}, "named twice"),
        ({"key": ["id"], "after": "not json"}, "not JSON"),
        ({"key": ["id"], "after": "[1, 2]"}, "not a list of 1 value"),
        ({"key": ["id"], "after": '["x"]'}, "do not compare"),
    ],
)
def test_bad_arguments(lake: Lake, kwargs: dict[str, Any], message: str) -> None:
    orders_lake(lake)
    with pytest.raises(InvalidArgument, match=message):
        diff_table(lake, REPO, "main", "dev", "tables/orders.parquet", **kwargs)


def test_errors_are_ours_only(lake: Lake) -> None:
    """Whatever the bytes, the diff raises only errors of lakectl's tree."""
    put(lake, "main", "t.parquet", parquet(ORDERS))
    commit(lake, "main")
    branch_off(lake)
    for i, junk in enumerate((b"", b"PAR1", b"\x00" * 100, parquet(ORDERS)[:-10], parquet(ORDERS)[10:])):
        put(lake, "dev", "t.parquet", junk + bytes([i]))
        commit(lake, "dev")
        with pytest.raises(LakectlError):
            diff_table(lake, REPO, "main", "dev", "t.parquet", key=["id"])
