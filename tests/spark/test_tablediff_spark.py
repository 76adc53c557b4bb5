"""The Spark table diff against the in-process one, with a key and without: on the same tables and
edits, the same answer, page by page. Spark runs on the session-wide ``local[2]`` of
tests/spark/conftest.py."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core import opening, porcelain, tablediff, writes
from lakectl.core.blocks.volumes import local_volumes
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument
from lakectl.sparkjobs import tablediff as spark_tablediff

REPO = "repo"
PARTITIONS = ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05")
ROWS = 3000


def _put(lake: Lake, branch: str, day: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    writes.upload(lake, REPO, branch, f"orders/day={day}/part-0.parquet", io.BytesIO(sink.getvalue()))


def _orders(p: int) -> list[dict[str, object]]:
    return [
        {"id": p * ROWS + i, "item": f"item {i % 97}", "amount": float(i) / 4, "qty": i % 7}
        for i in range(ROWS)
    ]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tablediff-spark") / "lake"


@pytest.fixture(scope="module")
def lake(home: Path) -> Iterator[Lake]:
    lk = opening.open_lake(str(home))
    porcelain.create_repo(lk, REPO, "main", "local://repo")
    for p, day in enumerate(PARTITIONS):
        _put(lk, "main", day, pa.Table.from_pylist(_orders(p)))
    porcelain.commit(lk, REPO, "main", "orders", committer="tester")
    porcelain.create_branch(lk, REPO, "dev", "main")
    # day 2: updates (a value, a null, a NaN) and deletes; day 4: updates and adds
    rows = _orders(1)
    for r in rows[:40]:
        r["amount"] = float(r["amount"]) + 1  # type: ignore[arg-type]
    rows[41]["item"] = None
    rows[42]["amount"] = float("nan")
    rows[43]["qty"] = 100
    del rows[100:160]
    _put(lk, "dev", PARTITIONS[1], pa.Table.from_pylist(rows))
    rows = _orders(3)
    for r in rows[500:530]:
        r["item"] = "changed"
    rows.extend({"id": 100_000 + i, "item": "new", "amount": 1.5, "qty": 1} for i in range(50))
    _put(lk, "dev", PARTITIONS[3], pa.Table.from_pylist(rows))
    porcelain.commit(lk, REPO, "dev", "edits", committer="tester")
    yield lk
    lk.close()


def _both(lake: Lake, **kwargs: object) -> tuple[dict[str, object], dict[str, object]]:
    args = (lake, REPO, "main", "dev", "orders/", ("id",))
    local = tablediff.diff_table(*args, **kwargs).to_dict()  # type: ignore[arg-type]
    spark = spark_tablediff.diff_table(*args, **kwargs).to_dict()  # type: ignore[arg-type]
    return local, spark


def test_same_answer_page_by_page(spark: object, lake: Lake) -> None:
    local, found = _both(lake, amount=70)
    assert found == local
    assert local["added"] == 50 and local["removed"] == 60 and local["changed"] == 73
    assert local["next_offset"]
    local2, found2 = _both(lake, amount=70, after=local["next_offset"])
    assert found2 == local2
    assert local2["rows"] and local2["rows"] != local["rows"]


def test_same_answer_for_equal_refs_and_the_last_page(spark: object, lake: Lake) -> None:
    local, found = _both(lake, amount=1000)
    assert found == local and not local["next_offset"]
    same = spark_tablediff.diff_table(lake, REPO, "main", "main", "orders/", ("id",)).to_dict()
    assert same == tablediff.diff_table(lake, REPO, "main", "main", "orders/", ("id",)).to_dict()


def test_same_answer_without_a_key(spark: object, lake: Lake) -> None:
    def both(**kwargs: Any) -> dict[str, Any]:
        args = (lake, REPO, "main", "dev", "orders/")
        local = tablediff.diff_table(*args, **kwargs).to_dict()
        assert spark_tablediff.diff_table(*args, **kwargs).to_dict() == local
        return local

    first = both(amount=40)
    assert (first["added"], first["removed"]) == (123, 133) and first["next_offset"]
    assert both(amount=40, after=first["next_offset"])["rows"]


def test_key_not_unique(spark: object, lake: Lake) -> None:
    # which duplicate the message names may differ: both sides' first found
    with pytest.raises(InvalidArgument, match="key is not unique at main"):
        tablediff.diff_table(lake, REPO, "main", "dev", "orders/", ("qty",))
    with pytest.raises(InvalidArgument, match="key is not unique at main"):
        spark_tablediff.diff_table(lake, REPO, "main", "dev", "orders/", ("qty",))


def test_on_the_command_line(spark: object, lake: Lake, rows: str, home: Path, tmp_path: Path) -> None:
    env = {
        "LAKECTL_HOME": str(home),
        "LAKECTL_CONFIG": str(tmp_path / "no-config.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
    }

    def cli(repo: str, *args: str) -> dict[str, object]:
        refs = [f"lakefs://{repo}/main", f"lakefs://{repo}/dev"]
        result = CliRunner().invoke(app, ["diff", "--table", *refs, *args, "--json"], env=env)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        answer: dict[str, object] = json.loads(result.stdout)
        return answer

    keyed = ("orders/", "--key", "id", "--amount", "20")
    assert cli(REPO, *keyed, "--spark", "local[2]") == cli(REPO, *keyed)
    keyless = ("mixed/", "--amount", "3")
    found = cli(rows, *keyless, "--spark", "local[2]")
    assert found == cli(rows, *keyless) and found["next_offset"]
    after = ("--after", str(found["next_offset"]))
    assert cli(rows, *keyless, *after, "--spark", "local[2]") == cli(rows, *keyless, *after)


# -- without a key ---------------------------------------------------------------------------

MULTI = "rows"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _write(lake: Lake, branch: str, path: str, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    writes.upload(lake, MULTI, branch, path, io.BytesIO(sink.getvalue()))


def _row(name: str | None, x: float | None, n: int | None, day: int | None, u: int | None) -> dict[str, Any]:
    ts = None if day is None else T0 + datetime.timedelta(days=day, microseconds=day)
    return {"name": name, "x": x, "n": n, "ts": ts, "u": u}


MIXED = pa.schema(
    [
        ("name", pa.string()),
        ("x", pa.float64()),
        ("n", pa.int64()),
        ("ts", pa.timestamp("us", "UTC")),
        ("u", pa.uint32()),
    ]
)
NAN = float("nan")

MOVED = pa.schema([("k", pa.string()), ("v", pa.int64())])


TYPES = {
    "f32": pa.float32(),
    "u64": pa.uint64(),
    "u8": pa.uint8(),
    "tsn": pa.timestamp("ns"),
    "d": pa.date32(),
    "t": pa.time64("us"),
    "dur": pa.duration("ms"),
    "dec": pa.decimal128(10, 2),
    "bin": pa.binary(),
    "b": pa.bool_(),
    "nul": pa.null(),
}


def _types(values: list[int | None]) -> dict[str, list[Any]]:
    def each(f: Any) -> list[Any]:
        return [None if v is None else f(v) for v in values]

    return {
        "f32": each(lambda v: v * 0.5),
        "u64": each(lambda v: 2**64 - 1 - v),
        "u8": each(lambda v: v),
        "tsn": each(lambda v: datetime.datetime(2026, 1, 1) + datetime.timedelta(microseconds=v)),
        "d": each(lambda v: datetime.date(2026, 1, 1 + v)),
        "t": each(lambda v: datetime.time(0, 0, v)),
        "dur": each(lambda v: datetime.timedelta(milliseconds=v)),
        "dec": each(lambda v: decimal.Decimal(v) / 4),
        "bin": each(lambda v: bytes([v, 255 - v])),
        "b": each(lambda v: v % 2 == 0),
        "nul": [None] * len(values),
    }


@pytest.fixture(scope="module")
def rows(lake: Lake) -> str:
    """Repository ``rows``: ``mixed/`` (partitioned: copies of rows added and removed, nulls, NaN,
    0.0 against -0.0), ``moved/`` (repartitioned: equal rows in three partitions),
    ``retyped.parquet`` (columns whose type changed, one compared as text) and ``types.parquet``
    (types Spark holds in another form)."""
    porcelain.create_repo(lake, MULTI, "main", "local://rows")
    a, b = _row("a", 1.0, 1, 0, 1), _row("b", NAN, 2, 1, 2)
    c, c_neg = _row(None, 0.0, 3, None, 3), _row(None, -0.0, 3, None, 3)
    d, e = _row("d", None, None, 2, None), _row("e", NAN, 5, 3, 2**32 - 1)
    f, g = _row("f", 2.5, 6, 4, 0), _row("g", -1.5, None, None, 7)
    _write(lake, "main", "mixed/day=1/part-0.parquet", [a, b, a, c, a, d, c], MIXED)
    _write(lake, "main", "mixed/day=2/part-0.parquet", [a, f, f], MIXED)
    _write(lake, "main", "moved/part-0.parquet", [{"k": "q", "v": 2}, {"k": "p", "v": 1}] * 2, MOVED)
    left = {"n": [1, 2, 3], "s": ["1", "2", "x"], "m": ["5", "6", "7"], "z": [0.5, -0.0, NAN]}
    _write_columns(lake, "main", "retyped.parquet", left, {"n": pa.int32()})
    _write_columns(lake, "main", "types.parquet", _types([0, 1, 2, 3, None, 3]), TYPES)
    porcelain.commit(lake, MULTI, "main", "rows", committer="tester")
    porcelain.create_branch(lake, MULTI, "dev", "main")
    _write(lake, "dev", "mixed/day=1/part-0.parquet", [d, c_neg, b, a, d, e, d, c_neg, d], MIXED)
    _write(lake, "dev", "mixed/day=2/part-0.parquet", [f, a, g, f, a], MIXED)
    writes.delete_objects(lake, MULTI, "dev", ["moved/part-0.parquet"])
    _write(lake, "dev", "moved/k=1/part-0.parquet", [{"k": "q", "v": 2}, {"k": "p", "v": 1}], MOVED)
    _write(lake, "dev", "moved/k=2/part-0.parquet", [{"k": "p", "v": 1}, {"k": "q", "v": None}], MOVED)
    right = {"n": [1, 2, 4], "s": [1, 2, 3], "m": [5, 6, 8], "z": [0.5, 0.0, NAN]}
    _write_columns(lake, "dev", "retyped.parquet", right, {})
    _write_columns(lake, "dev", "types.parquet", _types([1, 2, 4, 5, None, None, 6]), TYPES)
    porcelain.commit(lake, MULTI, "dev", "edits", committer="tester")
    return MULTI


def _write_columns(
    lake: Lake, branch: str, path: str, columns: dict[str, list[Any]], types: dict[str, pa.DataType]
) -> None:
    table = pa.table({n: pa.array(v, types.get(n)) for n, v in columns.items()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    writes.upload(lake, MULTI, branch, path, io.BytesIO(sink.getvalue()))


def _same(lake: Lake, path: str, **kwargs: Any) -> dict[str, Any]:
    """The keyless diff of ``path`` in-process, checked equal to the Spark one."""
    local = tablediff.diff_table(lake, MULTI, "main", "dev", path, **kwargs).to_dict()
    found = spark_tablediff.diff_table(lake, MULTI, "main", "dev", path, **kwargs).to_dict()
    assert found == local
    return local


def test_without_a_key_counts_copies_of_rows(spark: object, lake: Lake, rows: str) -> None:
    found = _same(lake, "mixed/")
    # day=1: a -2, c(0.0) -2, c(-0.0) +2, d +3, e +1; day=2: a +1, g +1 (b's NaN equals NaN)
    assert (found["added"], found["removed"]) == (8, 4)
    assert [(p["partition"], p["added"], p["removed"]) for p in found["partitions"]] == [
        ("day=1", 6, 4),
        ("day=2", 2, 0),
    ]
    counts = {
        (r["type"], json.dumps(r["old"] or r["new"], sort_keys=True)): r["count"] for r in found["rows"]
    }
    assert sorted(counts.values()) == [1, 1, 1, 2, 2, 2, 3]
    xs = [(r["old"] or r["new"])["x"] for r in found["rows"]]
    assert "nan" in xs and -0.0 in xs and None in xs


def test_without_a_key_page_by_page(spark: object, lake: Lake, rows: str) -> None:
    after, pages = "", 0
    while True:
        found = _same(lake, "mixed/", amount=2, after=after)
        pages += 1
        if not found["next_offset"]:
            break
        after = found["next_offset"]
    assert pages >= 3
    assert _same(lake, "mixed/", amount=0)["rows"] == []


def test_without_a_key_rows_equal_in_several_partitions(spark: object, lake: Lake, rows: str) -> None:
    found = _same(lake, "moved/")
    assert [(r["type"], r["count"]) for r in found["rows"]] == [
        ("removed", 2),
        ("added", 1),
        ("added", 1),
        ("removed", 2),
        ("added", 1),
        ("added", 1),
    ]
    _same(lake, "moved/", amount=1)
    _same(lake, "moved/", amount=2, after='["p", 1, "k=1"]')  # the values, then the partition


def test_without_a_key_retyped_columns(spark: object, lake: Lake, rows: str) -> None:
    found = _same(lake, "retyped.parquet")  # n: int32 to int64; s: text ("x"); m: as int64
    assert [(r["type"], json.dumps(r["old"] or r["new"])) for r in found["rows"]] == [
        ("removed", '{"n": 2, "s": "2", "m": 6, "z": -0.0}'),
        ("added", '{"n": 2, "s": "2", "m": 6, "z": 0.0}'),
        ("removed", '{"n": 3, "s": "x", "m": 7, "z": "nan"}'),
        ("added", '{"n": 4, "s": "3", "m": 8, "z": "nan"}'),
    ]


def test_without_a_key_types_spark_holds_otherwise(spark: object, lake: Lake, rows: str) -> None:
    after, seen = "", []
    for _ in range(10):
        found = _same(lake, "types.parquet", amount=2, after=after)
        seen.extend((r["type"], r["count"]) for r in found["rows"])
        after = found["next_offset"]
        if not after:
            break
    assert seen == [("removed", 1), ("removed", 2), ("added", 1), ("added", 1), ("added", 1), ("added", 1)]


def test_without_a_key_bad_input_fails_as_in_process(spark: object, lake: Lake, rows: str) -> None:
    for after in ("not json", "[1]"):
        with pytest.raises(InvalidArgument, match="bad offset"):
            tablediff.diff_table(lake, MULTI, "main", "dev", "mixed/", after=after)
        with pytest.raises(InvalidArgument, match="bad offset"):
            spark_tablediff.diff_table(lake, MULTI, "main", "dev", "mixed/", after=after)


def test_other_block_stores_are_refused(tmp_path: Path) -> None:
    other = Lake(kv=MemoryStore(), blocks=local_volumes([tmp_path / "v1", tmp_path / "v2"]))
    with pytest.raises(InvalidArgument, match=r"diff --table --spark reads .*: diff without --spark"):
        spark_tablediff.diff_table(other, MULTI, "main", "dev", "mixed/")


def test_a_server_refuses_spark() -> None:
    from lakectl.client.remote import RemoteBackend

    remote = RemoteBackend("http://127.0.0.1:9", "key", "secret")
    with pytest.raises(InvalidArgument, match="--spark runs against an embedded lake"):
        remote.diff_table(REPO, "main", "dev", "orders/", ("id",), spark_master="local[2]")
