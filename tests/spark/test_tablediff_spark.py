"""The Spark table diff against the in-process one: on the same partitioned table and edits, the
same answer, page by page. Spark runs on the session-wide ``local[2]`` of tests/spark/conftest.py."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core import porcelain, tablediff
from lakectl.core.porcelain import Lake
from lakectl.errors import InvalidArgument
from lakectl.spark import tablediff as spark_tablediff

REPO = "repo"
PARTITIONS = ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05")
ROWS = 3000


def _put(lake: Lake, branch: str, day: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    porcelain.upload(lake, REPO, branch, f"orders/day={day}/part-0.parquet", io.BytesIO(sink.getvalue()))


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
    lk = porcelain.open_lake(str(home))
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


def test_needs_a_key(spark: object, lake: Lake) -> None:
    with pytest.raises(InvalidArgument, match="--spark needs --key"):
        spark_tablediff.diff_table(lake, REPO, "main", "dev", "orders/")


def test_key_not_unique(spark: object, lake: Lake) -> None:
    # which duplicate the message names may differ: both sides' first found
    with pytest.raises(InvalidArgument, match="key is not unique at main"):
        tablediff.diff_table(lake, REPO, "main", "dev", "orders/", ("qty",))
    with pytest.raises(InvalidArgument, match="key is not unique at main"):
        spark_tablediff.diff_table(lake, REPO, "main", "dev", "orders/", ("qty",))


def test_on_the_command_line(spark: object, lake: Lake, home: Path, tmp_path: Path) -> None:
    env = {
        "LAKECTL_HOME": str(home),
        "LAKECTL_CONFIG": str(tmp_path / "no-config.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
    }
    args = ["diff", "--table", f"lakefs://{REPO}/main", f"lakefs://{REPO}/dev", "orders/", "--key", "id"]

    def cli(*extra: str) -> dict[str, object]:
        result = CliRunner().invoke(app, [*args, *extra, "--json"], env=env)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        answer: dict[str, object] = json.loads(result.stdout)
        return answer

    assert cli("--spark", "local[2]", "--amount", "20") == cli("--amount", "20")


def test_a_server_refuses_spark() -> None:
    from lakectl.client.remote import RemoteBackend

    remote = RemoteBackend("http://127.0.0.1:9", "key", "secret")
    with pytest.raises(InvalidArgument, match="--spark runs against an embedded lake"):
        remote.diff_table(REPO, "main", "dev", "orders/", ("id",), spark_master="local[2]")
