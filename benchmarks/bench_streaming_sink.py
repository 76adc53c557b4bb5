"""Structured Streaming into a branch: commits per second with micro-batches of 1,000 rows.

A folder holds ``--batches`` JSON Lines files of ``--rows`` rows each; one query reads it as a file
stream (``maxFilesPerTrigger`` 1, so each file is one micro-batch) and writes it with
``writeStream.format("lakefs")`` into an embedded lake, ``Trigger.AvailableNow``: every batch one
commit, exactly once. Printed beside it, on the same session and data: the same query into
Spark's own ``json`` file sink (no commit, no exactly-once across a branch's history), the floor
of what Spark itself costs per micro-batch. The machine's load is printed first.

The end-to-end latency from a commit on a source branch to its rows committed downstream is
``bench_streaming_latency.py``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from _benchutil import Table, fmt_time, print_context, temp_dir


def fill(folder: str, batches: int, rows: int) -> None:
    for b in range(batches):
        lines = "".join(json.dumps({"id": b * rows + i, "name": f"n{i}"}) + "\n" for i in range(rows))
        with open(os.path.join(folder, f"part-{b:05d}.json"), "w") as f:
            f.write(lines)


def run(spark: Any, source: str, checkpoint: str, sink: Any) -> float:
    """Seconds for the query to drain the folder, one file a micro-batch."""
    stream = spark.readStream.schema("id long, name string").option("maxFilesPerTrigger", 1).json(source)
    started = time.perf_counter()
    query = sink(stream.writeStream.option("checkpointLocation", checkpoint).trigger(availableNow=True))
    query.awaitTermination()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--rows", type=int, default=1_000)
    args = parser.parse_args()
    print_context("streaming into a branch")
    import lakectl.spark
    from lakectl.core import changes, opening
    from lakectl.core import porcelain as p
    from lakectl.sparkjobs.session import session

    spark = session("local[2]", "bench-streaming")
    table = Table("sink", f"{args.batches} batches of {args.rows:,} rows", "per batch", "commits/s")
    with temp_dir("stream-") as work:
        source = os.path.join(work, "in")
        os.makedirs(source)
        fill(source, args.batches, args.rows)
        home = os.path.join(work, "lake")
        lake = opening.open_lake(home, create=True)
        p.create_repo(lake, "bench")
        lake.close()
        lakectl.spark.register(spark, home=home)
        uri = "lakefs://bench/main/events/"
        took = run(
            spark,
            source,
            os.path.join(work, "ck-lakefs"),
            lambda w: w.format("lakefs").option("format", "json").start(uri),
        )
        lake = opening.open_lake(home)
        commits = sum(1 for c in changes.log(lake, "bench", "main") if "lakectl_stream_id" in c.metadata)
        lake.close()
        table.add(
            "lakefs (one commit each)", fmt_time(took), fmt_time(took / args.batches), f"{commits / took:.1f}"
        )
        out = os.path.join(work, "out")
        floor = run(spark, source, os.path.join(work, "ck-files"), lambda w: w.format("json").start(out))
        table.add("Spark's json file sink (floor)", fmt_time(floor), fmt_time(floor / args.batches), "-")
    spark.stop()
    table.print()
    print(f"  {commits} commits for {args.batches} micro-batches (exactly one each)")


if __name__ == "__main__":
    main()
