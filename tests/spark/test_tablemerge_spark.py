"""The ``rows`` merge strategy on Spark against in-process: two lakes built alike, the same
branches merged by rows once in-process and once as a Spark job on the session-wide ``local[2]``
(tests/spark/conftest.py): the same merged objects (byte for byte), the same untouched blocks,
the same conflicts as data, and an executor's error rebuilt as the same exception."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core import listing, merging, opening, porcelain, tablemerge, writes
from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument, MergeConflict
from lakectl.sparkjobs import tablemerge as spark_tablemerge

REPO = "repo"
RULE = "orders/**=rows:key=id"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04")
ROWS = 500


def _put(lake: Lake, branch: str, path: str, rows: list[dict[str, object]]) -> None:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink, compression="zstd", row_group_size=128)
    writes.upload(lake, REPO, branch, path, io.BytesIO(sink.getvalue()))


def _orders(p: int) -> list[dict[str, object]]:
    return [{"id": p * ROWS + i, "item": f"item {i % 13}", "amount": i / 4} for i in range(ROWS)]


def _build(home: Path, conflicting: bool = False) -> Lake:
    """main with four partitions; ``fix`` rewrites day 1 under new names (as a Spark job does)
    and edits day 3 in place; main then edits rows of days 1 and 3 in place and appends to day 2
    (which ``fix`` leaves alone). With ``conflicting``, both change row 3 of day 3."""
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, REPO, "main", "local://repo")
    for p, day in enumerate(DAYS):
        _put(lake, "main", f"orders/day={day}/part-0.parquet", _orders(p))
    porcelain.commit(lake, REPO, "main", "orders", committer="t")
    porcelain.create_branch(lake, REPO, "fix", "main")

    day0 = _orders(0)
    for r in day0[:50]:
        r["amount"] = -1.0
    writes.delete_objects(lake, REPO, "fix", [f"orders/day={DAYS[0]}/part-0.parquet"])
    _put(lake, "fix", f"orders/day={DAYS[0]}/part-00000-f1x.parquet", day0[:250])
    _put(lake, "fix", f"orders/day={DAYS[0]}/part-00001-f1x.parquet", day0[250:])
    day2 = _orders(2)
    day2[3]["item"] = "fixed"
    del day2[400:]
    _put(lake, "fix", f"orders/day={DAYS[2]}/part-0.parquet", day2)
    porcelain.commit(lake, REPO, "fix", "a job's fixes", committer="t")

    day0 = _orders(0)
    for r in day0[300:320]:
        r["item"] = "main's"
    _put(lake, "main", f"orders/day={DAYS[0]}/part-0.parquet", day0)
    _put(lake, "main", f"orders/day={DAYS[1]}/part-1.parquet", [{"id": 9999, "item": "new", "amount": 1.0}])
    day2 = _orders(2)
    day2[3]["item"] = "other" if conflicting else day2[3]["item"]
    day2[10]["amount"] = 10.0
    _put(lake, "main", f"orders/day={DAYS[2]}/part-0.parquet", day2)
    porcelain.commit(lake, REPO, "main", "main's fixes", committer="t")
    return lake


def _state(lake: Lake) -> list[tuple[str, str, tuple[str, ...]]]:
    return [
        (o.path, o.entry.checksum, o.entry.locators)
        for o in listing.list_objects(lake, REPO, "main", "orders/")
        if o.entry is not None
    ]


def _merged(tmp_path: Path, name: str, runner: tablemerge.UnitRunner | None, strategy: str = RULE) -> Lake:
    lake = _build(tmp_path / name)
    merging.merge(lake, REPO, "fix", "main", [strategy], rows_runner=runner)
    return lake


def test_spark_merges_as_in_process(spark: object, tmp_path: Path) -> None:
    local = _merged(tmp_path, "local", None)
    on_spark = _merged(tmp_path, "spark", spark_tablemerge.runner("local[2]"))
    try:
        assert _state(on_spark) == _state(local)
        paths = [p for p, _, _ in _state(local)]
        assert [p for p in paths if p.startswith(f"orders/day={DAYS[0]}/")] == [
            f"orders/day={DAYS[0]}/part-0.parquet"  # the destination's name, one object
        ]
        assert f"orders/day={DAYS[1]}/part-1.parquet" in paths  # only main changed day 2
        note = porcelain.get_commit(on_spark, REPO, "main").metadata[tablemerge.NOTE]
        assert note == f"orders/day={DAYS[0]}/,orders/day={DAYS[2]}/part-0.parquet"
        data = b"".join(porcelain.read(on_spark, REPO, "main", f"orders/day={DAYS[0]}/part-0.parquet"))
        rows = pq.read_table(io.BytesIO(data)).to_pylist()
        assert len(rows) == ROWS and len({r["id"] for r in rows}) == ROWS
        assert sum(r["amount"] == -1.0 for r in rows) == 50 and sum(r["item"] == "main's" for r in rows) == 20
    finally:
        local.close()
        on_spark.close()


@pytest.mark.parametrize("winner", ["", ";winner=source"])
def test_spark_conflicts_as_in_process(spark: object, tmp_path: Path, winner: str) -> None:
    outcomes: list[object] = []
    for name, runner in (("local", None), ("spark", spark_tablemerge.runner("local[2]"))):
        lake = _build(tmp_path / name, conflicting=True)
        head = porcelain.get_commit(lake, REPO, "main").id
        try:
            merging.merge(lake, REPO, "fix", "main", [RULE + winner], rows_runner=runner)
            outcomes.append(_state(lake))
        except MergeConflict as e:
            assert porcelain.get_commit(lake, REPO, "main").id == head
            outcomes.append((e.paths, e.details["rows"]))
        finally:
            lake.close()
    assert outcomes[0] == outcomes[1]
    if not winner:
        paths, rows = outcomes[0]  # type: ignore[misc]
        assert paths == [f"orders/day={DAYS[2]}/part-0.parquet"]
        (conflict,) = rows[paths[0]]["rows"]
        assert conflict["key"] == {"id": 2 * ROWS + 3} and conflict["kind"] == "both-changed"


def test_an_executors_error_is_the_same_error(spark: object, tmp_path: Path) -> None:
    for runner in (None, spark_tablemerge.runner("local[2]")):
        lake = _build(tmp_path / f"bad-{runner is None}")
        try:
            with pytest.raises(InvalidArgument, match="key column 'nope'"):
                merging.merge(lake, REPO, "fix", "main", ["orders/**=rows:key=nope"], rows_runner=runner)
        finally:
            lake.close()


def test_cli_merge_with_spark(spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = _build(tmp_path / "cli")
    lake.close()
    monkeypatch.setenv("LAKECTL_HOME", str(tmp_path / "cli"))
    monkeypatch.setenv("LAKECTL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", "")
    monkeypatch.setenv("LAKECTL_COMMITTER", "t")
    runner = CliRunner()
    plain = runner.invoke(app, ["merge", "lakefs://repo/fix", "lakefs://repo/main", "--spark", "local[2]"])
    assert plain.exit_code == 2 and "GLOB=rows" in plain.output
    done = runner.invoke(
        app,
        [
            "merge",
            "lakefs://repo/fix",
            "lakefs://repo/main",
            "--strategy",
            RULE,
            "--spark",
            "local[2]",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    again = opening.open_lake(str(tmp_path / "cli"))
    try:
        assert tablemerge.NOTE in porcelain.get_commit(again, REPO, "main").metadata
    finally:
        again.close()
