"""Structured Streaming into a branch on a real local[2] Spark, embedded and against a server:
one commit per micro-batch, naming the stream and the batch; a batch Spark replays because its
end was not checkpointed (a driver that died between the commit and the checkpoint) is not
committed twice; a batch with no rows makes no commit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lakectl.spark.streaming import BATCH_ID, STREAM_ID
from tests.server.conftest import unique
from tests.spark.test_source import Lake, lake

__all__ = ["lake"]

SCHEMA = "id long, name string"


def drop_in(folder: Path, name: str, ids: range) -> None:
    """A JSON Lines file for the file stream source, written whole before it appears."""
    lines = "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in ids)
    tmp = folder / f".{name}.tmp"
    tmp.write_text(lines)
    os.replace(tmp, folder / name)


def run(spark: Any, source: Path, checkpoint: Path, uri: str) -> None:
    """One run of the query over what the folder holds now (``availableNow``), to its end."""
    stream = spark.readStream.schema(SCHEMA).json(str(source)).where("id >= 0")
    query = (
        stream.writeStream.format("lakefs")
        .option("checkpointLocation", str(checkpoint))
        .option("format", "json")
        .option("commit_message", "ingest")
        .trigger(availableNow=True)
        .start(uri)
    )
    assert query.awaitTermination(180)
    assert query.exception() is None


def stream_commits(lake: Lake, repo: str) -> list[dict[str, str]]:
    return [dict(c.metadata) for c in lake.backend.log(repo, "main") if STREAM_ID in c.metadata]


def landed(spark: Any, repo: str) -> list[int]:
    rows = spark.read.format("lakefs").option("format", "json").load(f"lakefs://{repo}/main/ingest/")
    return sorted(r.id for r in rows.collect())


def test_each_batch_is_one_commit_once_even_when_spark_replays_it(
    lake: Lake, spark: Any, tmp_path: Path
) -> None:
    repo = unique("stream")
    lake.backend.create_repo(repo)
    lake.register(spark)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    uri = f"lakefs://{repo}/main/ingest/"

    drop_in(source, "a.json", range(0, 50))
    run(spark, source, checkpoint, uri)
    drop_in(source, "b.json", range(50, 80))
    run(spark, source, checkpoint, uri)
    made = stream_commits(lake, repo)
    assert [m[BATCH_ID] for m in made] == ["1", "0"] and len({m[STREAM_ID] for m in made}) == 1
    assert landed(spark, repo) == list(range(80))

    # The state a driver leaves that dies after the sink's commit and before Spark's checkpoint
    # records the batch's end: Spark replays batch 1 on restart.
    for name in ("1", ".1.crc"):  # the batch's end and Hadoop's checksum of it
        (checkpoint / "commits" / name).unlink()
    run(spark, source, checkpoint, uri)
    assert len(stream_commits(lake, repo)) == 2, "the replayed batch made no second commit"
    assert landed(spark, repo) == list(range(80)), "every row exactly once"

    drop_in(source, "c.json", range(-5, 0))  # every row filtered out: a batch with no rows
    run(spark, source, checkpoint, uri)
    assert len(stream_commits(lake, repo)) == 2, "a batch with no rows makes no commit"

    drop_in(source, "d.json", range(80, 90))
    run(spark, source, checkpoint, uri)
    assert stream_commits(lake, repo)[0][BATCH_ID] == "3"
    assert landed(spark, repo) == list(range(90))


def test_a_driver_killed_mid_stream_then_restarted_lands_every_row_exactly_once(
    lake: Lake, spark: Any, tmp_path: Path
) -> None:
    """A real crash: the driver's process group killed with SIGKILL once three batches have landed
    (wherever it is then: in a batch's tasks, in the sink's commit, or between a commit and
    Spark's checkpoint), then a new driver on the same checkpoint runs the stream to its end."""
    repo = unique("streamkill")
    lake.backend.create_repo(repo)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    for n in range(10):
        drop_in(source, f"{n:02d}.json", range(n * 40, n * 40 + 40))
    uri = f"lakefs://{repo}/main/ingest/"
    argv = [sys.executable, "-m", "tests.spark.stream_driver", json.dumps(lake.connect), str(source)]
    argv += [str(checkpoint), uri]
    root = Path(__file__).resolve().parents[2]
    driver = subprocess.Popen(
        argv, cwd=root, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 240
        while len(stream_commits(lake, repo)) < 3 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert driver.poll() is None, "the driver ended before it could be killed"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)
    assert 3 <= len(stream_commits(lake, repo)) < 10, "killed mid-stream"

    again = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    made = stream_commits(lake, repo)
    batches = [int(m[BATCH_ID]) for m in made]
    assert sorted(batches) == list(range(10)), "each micro-batch committed once"
    lake.register(spark)
    assert landed(spark, repo) == list(range(400)), "every row exactly once"
