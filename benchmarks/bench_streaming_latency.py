"""Streaming end to end: from a commit on a source branch to its rows committed downstream.

One query reads the ``ingest`` branch of an embedded lake as a stream
(``readStream.format("lakefs")``: each new commit is input) and writes every micro-batch as one
commit on the ``out`` branch (``writeStream.format("lakefs")``, exactly once), with a 1 s
processing-time trigger. ``--commits`` times, a file of ``--rows`` rows is committed on
``ingest`` and the clock runs until a commit of the stream holding it appears on ``out``.
Printed beside it, in the same session: the same query over Spark's own file source and file
sink (a file moved into a folder, until the sink's log records its batch), which versions
nothing: the floor of what Spark's trigger and micro-batch cost. The machine's load is printed
first. Commits are spaced by a varying pause so they land at every phase of the trigger: with a
1 s trigger, half a second of waiting is the mean any trigger adds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from _benchutil import Table, fmt_time, print_context, temp_dir

SCHEMA = "id long, name string"
TRIGGER = "1 second"


def lines(start: int, rows: int) -> bytes:
    return "".join(json.dumps({"id": start + i, "name": f"n{i}"}) + "\n" for i in range(rows)).encode()


def wait_for(done: Callable[[], bool], limit: float = 60.0) -> float:
    """Seconds until ``done()`` holds (polled every 10 ms); raise after ``limit``."""
    started = time.perf_counter()
    while not done():
        if time.perf_counter() - started > limit:
            raise TimeoutError(f"nothing arrived within {limit:.0f} s")
        time.sleep(0.01)
    return time.perf_counter() - started


def measure(commits: int, land: Callable[[int], None], arrived: Callable[[int], bool]) -> list[float]:
    """Latencies of ``commits`` landings, each until ``arrived(k)``; pauses vary over a trigger."""
    out = []
    for k in range(commits):
        time.sleep(0.25 + (k * 0.37) % 1.0)
        started = time.perf_counter()
        land(k)
        out.append(time.perf_counter() - started + wait_for(lambda k=k: arrived(k)))
    return out


def lakefs_pipeline(spark: Any, work: str, commits: int, rows: int) -> list[float]:
    import lakectl.spark
    from lakectl.client.local import LocalBackend

    home = os.path.join(work, "lake")
    backend = LocalBackend(home)
    backend.create_repo("bench")
    backend.create_branch("bench", "ingest", "main")
    backend.create_branch("bench", "out", "main")
    lakectl.spark.register(spark, home=home)
    stream = spark.readStream.format("lakefs").schema(SCHEMA).option("format", "json")
    query = (
        stream.load("lakefs://bench/ingest/in")
        .writeStream.format("lakefs")
        .option("checkpointLocation", os.path.join(work, "ck-lakefs"))
        .option("format", "json")
        .trigger(processingTime=TRIGGER)
        .start("lakefs://bench/out/events")
    )

    def land(k: int) -> None:
        backend.upload("bench", "ingest", f"in/part-{k:05d}.json", lines(k * rows, rows))
        backend.commit("bench", "ingest", f"file {k}")

    def arrived(k: int) -> bool:
        landed = sum(
            int(c.metadata.get("spark.rows", 0)) for c in backend.log("bench", "out", first_parent=True)
        )
        return landed >= (k + 1) * rows

    try:
        wait_for(lambda: query.lastProgress is not None)  # started: its first (empty) trigger ran
        return measure(commits, land, arrived)
    finally:
        query.stop()
        backend.close()


def file_pipeline(spark: Any, work: str, commits: int, rows: int) -> list[float]:
    source, out = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(source)
    query = (
        spark.readStream.schema(SCHEMA)
        .json(source)
        .writeStream.format("json")
        .option("checkpointLocation", os.path.join(work, "ck-files"))
        .trigger(processingTime=TRIGGER)
        .start(out)
    )
    log = os.path.join(out, "_spark_metadata")

    def land(k: int) -> None:
        tmp = os.path.join(work, f".part-{k:05d}.json")
        with open(tmp, "wb") as f:
            f.write(lines(k * rows, rows))
        os.replace(tmp, os.path.join(source, f"part-{k:05d}.json"))

    def arrived(k: int) -> bool:  # the sink's log: a file per batch ("9.compact" every tenth)
        names = os.listdir(log) if os.path.isdir(log) else []
        return len([n for n in names if n.split(".")[0].isdigit()]) > k

    try:
        wait_for(lambda: query.lastProgress is not None)
        return measure(commits, land, arrived)
    finally:
        query.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--rows", type=int, default=1_000)
    args = parser.parse_args()
    print_context("streaming latency, commit to downstream commit")
    from lakectl.sparkjobs.session import session

    spark = session("local[2]", "bench-streaming-latency")
    table = Table("pipeline", "median", "min", "max")
    with temp_dir("latency-") as work:
        for name, pipeline in (
            ("lakefs branch → lakefs branch (commit to commit)", lakefs_pipeline),
            ("Spark file source → file sink (floor)", file_pipeline),
        ):
            took = pipeline(spark, work, args.commits, args.rows)
            table.add(name, fmt_time(statistics.median(took)), fmt_time(min(took)), fmt_time(max(took)))
    spark.stop()
    table.print(f"{args.commits} landings of {args.rows:,} rows each, trigger {TRIGGER}")


if __name__ == "__main__":
    main()
