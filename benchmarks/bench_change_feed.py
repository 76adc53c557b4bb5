"""Spark's change feed (``option("since", FROM)``) of 100 changed objects among 100,000, against
reading those 100 objects directly with the same source.

An embedded lake holds 100,000 small text objects under ``t/`` (one line each, packed in one
block and staged in one write: built in seconds), committed; then every 1,000th object is
rewritten and committed. On one ``local[2]`` session: the change feed of ``t/`` since the first
commit, against ``format("lakefs")`` of ``t/`` with ``pathGlobFilter`` naming exactly the 100
changed objects (``*000.txt``). Both read the same bytes; the direct read lists the prefix (a
manifest of 100,000 objects), the feed lists the range's diff. One warm-up each, then ``--runs``
interleaved; medians. Target: feed / direct ≤ 2. Spark's start-up and per-query planning weigh on
both, so the core's listings are timed in-process too: the feed's verb (``feed.change_feed``)
against the prefix's manifest (``manifests.export_manifest``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time
from typing import Any

from _benchutil import Table, fmt_time, print_context, temp_dir, timed, verdict

TARGET_RATIO = 2.0
QUERY = ["count(*)", "sum(length(value))"]


def pack(lake: Any, repo: str, paths: list[str], version: int) -> None:
    """Stage one line per path, the lines packed in one block (as small uploads are)."""
    from lakectl.core import writes
    from lakectl.core.blocks.data import block_locator, segment_token
    from lakectl.core.lake import now
    from lakectl.core.model import Entry

    lines = [f"{path} version {version}\n".encode() for path in paths]
    data = b"".join(lines)
    locator = block_locator(data)
    lake.blocks.put(locator, data)
    lake.blocks.sync()
    rows, offset, mtime = [], 0, now()
    for path, line in zip(paths, lines, strict=True):
        token = segment_token(locator, offset, len(line))
        entry = Entry(len(line), hashlib.md5(line).hexdigest(), (token,), mtime, "text/plain")
        rows.append((path, entry.to_row()))
        offset += len(line)
    writes.stage_rows(lake, repo, "main", rows)


def build(home: str, objects: int, every: int) -> str:
    """The lake: ``objects`` committed, then every ``every``-th rewritten and committed; returns
    the first commit's id."""
    from lakectl.core import opening
    from lakectl.core import porcelain as p

    lake = opening.open_lake(home)
    try:
        p.create_repo(lake, "bench")
        paths = [f"t/{i:06d}.txt" for i in range(objects)]
        pack(lake, "bench", paths, 0)
        first = p.commit(lake, "bench", "main", f"{objects:,} objects").id
        pack(lake, "bench", paths[::every], 1)
        p.commit(lake, "bench", "main", f"every {every}th rewritten")
        return first
    finally:
        lake.close()


def core_listings(home: str, first: str, runs: int = 3) -> tuple[float, float, int]:
    """The feed's verb and the prefix's manifest, in-process, each the median of ``runs`` after
    a first (cold) one: their times, and the changes."""
    from lakectl.core import feed, manifests, opening

    lake = opening.open_lake(home)
    try:
        feeds = [timed(feed.change_feed, lake, "bench", first, "main", "t/") for _ in range(runs + 1)]
        lists = [timed(manifests.export_manifest, lake, "bench", "main", "t/")[0] for _ in range(runs + 1)]
        return statistics.median(t for t, _ in feeds[1:]), statistics.median(lists[1:]), len(feeds[0][1])
    finally:
        lake.close()


def timed_query(load: Any) -> tuple[float, list[Any]]:
    """The query over a fresh load: the source lists and plans at load (in a Python worker)."""
    start = time.perf_counter()
    out = load().selectExpr(*QUERY).collect()
    return time.perf_counter() - start, list(out[0])


def spark_runs(home: str, first: str, every: int, master: str, runs: int) -> dict[str, Any]:
    """Both reads, a warm-up each then ``runs`` interleaved: times, answers, start-up."""
    import lakectl.spark
    from lakectl.spark.session import session

    t0 = time.perf_counter()
    spark = session(master, "bench-change-feed")
    lakectl.spark.register(spark, home=home)
    startup = time.perf_counter() - t0
    glob = "*" + str(every)[1:] + ".txt"  # every 1,000th: *000.txt
    options = {"feed": {"since": first}, "direct": {"pathGlobFilter": glob}}

    def load(name: str) -> Any:  # a fresh reader each time: a DataFrameReader keeps its options
        reader = spark.read.format("lakefs").options(format="text", **options[name])
        return reader.load("lakefs://bench/main/t").select("value")

    reads = {name: (lambda name=name: load(name)) for name in options}
    out: dict[str, Any] = {"times": {k: [] for k in reads}, "answers": {}, "startup": startup, "warm": {}}
    try:
        for name, make in reads.items():
            out["warm"][name], out["answers"][name] = timed_query(make)
        for _ in range(runs):  # interleaved: load drifts hit both alike; planning included
            for name, make in reads.items():
                seconds, answer = timed_query(make)
                assert answer == out["answers"][name], (name, answer)
                out["times"][name].append(seconds)
    finally:
        spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1_000, help="rewrite every N-th object (a power of 10)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    print_context("bench_change_feed")
    with temp_dir("lakectl-bench-feed-") as work:
        home = os.path.join(work, "lake")
        build_s, first = timed(build, home, args.objects, args.every)
        changed = len(range(0, args.objects, args.every))
        print(f"{args.objects:,} objects, {changed} rewritten: built in {build_s:.1f} s", flush=True)
        feed_s, manifest_s, listed = core_listings(home, first)
        spark = spark_runs(home, first, args.every, args.master, args.runs)
    times = {k: statistics.median(v) for k, v in spark["times"].items()}
    ratio = times["feed"] / times["direct"]
    same = spark["answers"]["feed"] == spark["answers"]["direct"] and spark["answers"]["feed"][0] == changed
    table = Table("figure", "measured", "target", "result")
    for name, label in (("direct", "direct read, pathGlobFilter"), ("feed", "change feed, since")):
        runs = " / ".join(f"{t:.2f}" for t in spark["times"][name])
        table.add(label, f"{times[name]:.2f} s (runs {runs}; warm-up {spark['warm'][name]:.2f} s)", "", "")
    table.add(
        "time ratio feed / direct", f"{ratio:.2f}", f"<= {TARGET_RATIO}", verdict(ratio <= TARGET_RATIO)
    )
    table.add("same rows", "yes" if same else f"NO: {spark['answers']}", "yes", verdict(same))
    table.add("core: change_feed listing", f"{fmt_time(feed_s)} ({listed} changes)", "info", "info")
    table.add(
        "core: manifest of the prefix", f"{fmt_time(manifest_s)} ({args.objects:,} objects)", "info", "info"
    )
    table.add("session start-up (JVM)", f"{spark['startup']:.1f} s", "info", "info")
    table.print(f"Change feed of {changed} changed objects among {args.objects:,}, {args.master}")


if __name__ == "__main__":
    main()
