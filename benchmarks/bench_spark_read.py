"""Spark reading a 1M-row Parquet table through the ``lakefs`` data source, against
``spark.read.parquet`` of the same files on local disk.

The table has 1M rows in 8 files (an id, a string, a double, a timestamp), written once to a
local directory and uploaded as they are to an embedded lake. Both reads run on the same
``local[2]`` session, and the query forces every column of every row to be read and decoded:
``sum(id), sum(amount), sum(length(name)), max(ts)``. ``count()`` alone would let Spark's own
Parquet reader answer from the footers. The first run of each is a warm-up (JVM code paths, the
Python workers); the figure is the median of the next ``--runs``. Target: data source /
``spark.read.parquet`` ≤ 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from _benchutil import Table, print_context, temp_dir, verdict

TARGET_RATIO = 2.0
QUERY = ["sum(id)", "sum(amount)", "sum(length(name))", "max(ts)"]


def make_files(directory: str, rows: int, files: int) -> list[str]:
    paths = []
    per_file = rows // files
    for i in range(files):
        start = i * per_file
        ids = pa.array(range(start, start + per_file), pa.int64())
        table = pa.table(
            {
                "id": ids,
                "name": pa.array([f"customer-{n % 50_000:05d}" for n in range(start, start + per_file)]),
                "amount": pa.array([(n % 1000) * 0.25 for n in range(start, start + per_file)], pa.float64()),
                "ts": pa.array(
                    [1_767_225_600_000_000 + n * 1_000_000 for n in range(start, start + per_file)],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        )
        path = os.path.join(directory, f"part-{i:05d}.parquet")
        pq.write_table(table, path, compression="snappy")
        paths.append(path)
    return paths


def timed_query(df: Any) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    out = df.selectExpr(*QUERY).collect()
    return time.perf_counter() - start, list(out[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    print_context("bench_spark_read")

    import lakectl.spark
    from lakectl.client.local import LocalBackend
    from lakectl.spark.session import session

    with temp_dir("lakectl-bench-spark-") as work:
        local = os.path.join(work, "files")
        os.makedirs(local)
        paths = make_files(local, args.rows, args.files)
        size = sum(os.path.getsize(p) for p in paths)
        home = os.path.join(work, "lake")
        backend = LocalBackend(home)
        backend.create_repo("bench")
        backend.upload_files("bench", "main", [(f"table/{os.path.basename(p)}", p) for p in paths])
        backend.commit("bench", "main", "1M rows")
        backend.close()
        print(f"{args.rows:,} rows in {args.files} files, {size / 2**20:.1f} MiB", flush=True)

        t0 = time.perf_counter()
        spark = session(args.master, "bench-spark-read")
        lakectl.spark.register(spark, home=home)
        startup = time.perf_counter() - t0
        plain = spark.read.parquet(local)
        lake = spark.read.format("lakefs").load("lakefs://bench/main/table")
        results = {}
        times: dict[str, list[float]] = {"parquet": [], "lakefs": []}
        warm = {}
        for name, df in (("parquet", plain), ("lakefs", lake)):
            warm[name], results[name] = timed_query(df)
        for _ in range(args.runs):  # interleaved: load drifts hit both alike
            for name, df in (("parquet", plain), ("lakefs", lake)):
                seconds, answer = timed_query(df)
                assert answer == results[name], (name, answer, results[name])
                times[name].append(seconds)
        partitions = {"parquet": plain.rdd.getNumPartitions(), "lakefs": lake.rdd.getNumPartitions()}
        spark.stop()

    same = results["parquet"] == results["lakefs"]
    parquet_s = statistics.median(times["parquet"])
    lakefs_s = statistics.median(times["lakefs"])
    ratio = lakefs_s / parquet_s
    table = Table("figure", "measured", "target", "result")
    table.add(
        "spark.read.parquet (local files)",
        f"{parquet_s:.2f} s (runs {' / '.join(f'{t:.2f}' for t in times['parquet'])}; "
        f"warm-up {warm['parquet']:.2f} s; {partitions['parquet']} partitions)",
        "",
        "",
    )
    table.add(
        "format('lakefs') (embedded lake)",
        f"{lakefs_s:.2f} s (runs {' / '.join(f'{t:.2f}' for t in times['lakefs'])}; "
        f"warm-up {warm['lakefs']:.2f} s; {partitions['lakefs']} partitions)",
        "",
        "",
    )
    ok = ratio <= TARGET_RATIO
    table.add("time ratio lakefs / parquet", f"{ratio:.2f}", f"<= {TARGET_RATIO}", verdict(ok))
    table.add("same answer", "yes" if same else f"NO: {results}", "yes", verdict(same))
    table.add("session start-up (JVM)", f"{startup:.1f} s", "info", "info")
    table.print(f"Spark read of {args.rows:,} rows, {args.master}")


if __name__ == "__main__":
    main()
