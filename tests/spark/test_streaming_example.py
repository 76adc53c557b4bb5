"""examples/streaming.py, run as written on an embedded lake: each round streams only the commits
made on ``ingest`` since the last, lands each cleaned event on ``staging`` exactly once (a replayed
batch included), and a failed check leaves ``main`` untouched."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import lakectl.spark
from lakectl.client.local import LocalBackend

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "streaming.py"
CLEAN_PER_FILE = 180  # 200 events, 10 without a user and 10 with a negative amount


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("streaming_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_ids(spark: Any) -> list[int]:
    table = spark.read.format("lakefs").load("lakefs://clicks/main/clean/clicks")
    return sorted(r.event_id for r in table.select("event_id").collect())


def test_rounds_stream_only_what_is_new_exactly_once_then_merge(
    spark: Any, example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = LocalBackend(str(tmp_path / "lake"))
    lakectl.spark.register(spark, home=str(tmp_path / "lake"))
    checkpoint = str(tmp_path / "checkpoint")
    assert example.run(spark, backend, checkpoint, rounds=2) is True
    assert f"checked {2 * CLEAN_PER_FILE} rows on staging; merged into main" in capsys.readouterr().out
    ids = main_ids(spark)
    assert len(ids) == 2 * CLEAN_PER_FILE and len(set(ids)) == len(ids)

    assert example.run(spark, backend, checkpoint, rounds=1) is True
    assert len(main_ids(spark)) == 3 * CLEAN_PER_FILE
    streamed = [c for c in backend.log("clicks", "staging") if "lakectl_batch_id" in c.metadata]
    assert len(streamed) == 2  # one micro-batch a run

    # A driver that died after its last commit and before Spark's checkpoint recorded it: the
    # batch is replayed on restart, and lands nothing twice.
    commits = tmp_path / "checkpoint" / "commits"
    last = max(int(n.name) for n in commits.iterdir() if n.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # the batch's end and Hadoop's checksum of it
        (commits / name).unlink()
    assert example.run(spark, backend, checkpoint, rounds=0) is True
    assert "main is up to date" in capsys.readouterr().out
    assert len(main_ids(spark)) == 3 * CLEAN_PER_FILE
    backend.close()


def test_a_failing_check_leaves_main_untouched(
    spark: Any, example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = LocalBackend(str(tmp_path / "lake"))
    lakectl.spark.register(spark, home=str(tmp_path / "lake"))
    example.seed(backend)
    head = backend.get_commit("clicks", "main").id
    bad = spark.createDataFrame([(1, None, 2.0)], example.SCHEMA)  # a writer that skipped the cleaning
    bad.write.format("lakefs").mode("append").option("commit_message", "unchecked").save(
        "lakefs://clicks/staging/clean/clicks"
    )
    assert example.promote(spark, backend, "clicks") is False
    assert "check failed: 1 malformed event(s) on staging" in capsys.readouterr().out
    assert backend.get_commit("clicks", "main").id == head
    backend.close()
