"""A merge by rows of a large partitioned table that two branches changed in the same partition.

An embedded lake holds bench_table_diff's table (``--rows`` rows, 10M by default, 5 columns, 20
hive partitions of one Parquet object each) on ``main``. A branch ``fix`` changes the ``amount`` of
0.5% of the table's rows in partition 10 and rewrites partition 3; then ``main`` changes the
``category`` of another 0.5% of partition 10's rows (some of them rows ``fix`` changed too: a
cell-level merge) and rewrites partition 15. ``fix`` is merged into a fresh branch made from
``main`` per run with ``--strategy 'tables/orders/**=rows:key=id'``: partition 10 is merged by
rows, 3 and 15 keep their one side's objects, the 17 others their blocks. The figure is the wall
time and peak memory (``VmHWM``) of a fresh child process running ``merging.merge``; the answer
is checked (every change of both sides in the merged partition, the row count, the untouched
objects' locators). The plain merge (objects, no strategy) is timed beside it: it refuses with
one conflicting path. With ``--spark MASTER`` the merge also runs as a Spark job, and its merged
object must be byte-identical.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from _benchutil import Table, fmt_time, median, print_context, temp_dir, timed, verdict
from bench_table_diff import PARTITIONS, REPO, TABLE, partition, upload

from lakectl.core import opening, porcelain

FULL_ROWS = 10_000_000
RULE = f"{TABLE}**=rows:key=id"
MERGED, FIX_ONLY, MAIN_ONLY = 10, 3, 15

_CHILD = """
import json, sys, time
from lakectl.core import merging, opening
from lakectl.errors import MergeConflict
home, repo, dest, strategy, master = sys.argv[1:6]
lake = opening.open_lake(home)
runner = None
if master:
    from lakectl.sparkjobs import tablemerge
    runner = tablemerge.runner(master)
start = time.perf_counter()
try:
    done = merging.merge(lake, repo, "fix", dest, [strategy] if strategy else [], rows_runner=runner)
    outcome = {"commit": done.commit.id}
except MergeConflict as e:
    outcome = {"conflicts": e.paths}
seconds = time.perf_counter() - start
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, **outcome}))
"""


def path(p: int) -> str:
    return f"{TABLE}date=2026-01-{p + 1:02d}/part-0.parquet"


def build(home: str, rows: int, runs: int) -> dict[str, object]:
    """main and fix as the module doc says, ``runs`` destination branches made from main, and
    the merged partition's expected rows."""
    lake = opening.open_lake(home)
    porcelain.create_repo(lake, REPO, "main", f"local://{REPO}")
    per = rows // PARTITIONS
    rng = np.random.default_rng(15)
    tables = {}
    for p in range(PARTITIONS):
        table = partition(p, per, rng)
        upload(lake, "main", path(p), table)
        if p in (MERGED, FIX_ONLY, MAIN_ONLY):
            tables[p] = table
    porcelain.commit(lake, REPO, "main", f"{rows:,} rows", committer="bench")
    porcelain.create_branch(lake, REPO, "fix", "main")
    touched = rows // 200  # 0.5% of the table a side, in one partition
    picked = rng.choice(per, 2 * touched, replace=False)
    fix_at, main_at = (
        picked[:touched],
        picked[touched // 2 : touched // 2 + touched],
    )  # half of them the same rows
    original = tables[MERGED]
    amount = original["amount"].to_numpy().copy()
    amount[fix_at] += 1.0
    upload(lake, "fix", path(MERGED), original.set_column(2, "amount", pa.array(amount)))
    upload(lake, "fix", path(FIX_ONLY), tables[FIX_ONLY].slice(1))
    porcelain.commit(lake, REPO, "fix", "fix amounts", committer="bench")
    category = original["category"].to_pylist()
    for i in main_at:
        category[i] = "category-fixed"
    upload(lake, "main", path(MERGED), original.set_column(3, "category", pa.array(category)))
    upload(lake, "main", path(MAIN_ONLY), tables[MAIN_ONLY].slice(1))
    porcelain.commit(lake, REPO, "main", "fix categories", committer="bench")
    for run in range(runs):
        porcelain.create_branch(lake, REPO, f"dest-{run}", "main")
    lake.close()
    want = original.set_column(2, "amount", pa.array(amount)).set_column(3, "category", pa.array(category))
    return {"rows": want, "fix_changed": touched, "main_changed": touched}


def run_child(home: str, dest: str, strategy: str, master: str = "") -> dict:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, home, REPO, dest, strategy, master],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if child.returncode != 0:
        raise SystemExit(f"the merge failed:\n{child.stderr[-2000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def check(home: str, dest: str, want: pa.Table) -> tuple[bool, str]:
    """Whether ``dest`` holds the merged partition and every other object as expected."""
    lake = opening.open_lake(home)
    try:
        data = b"".join(porcelain.read(lake, REPO, dest, path(MERGED)))
        got = pq.read_table(io.BytesIO(data)).sort_by("id")
        same_rows = got.num_rows == want.num_rows and got.equals(want.sort_by("id"))
        kept = {
            p: porcelain.stat(lake, REPO, dest, path(p)).entry.locators
            == porcelain.stat(lake, REPO, "fix" if p == FIX_ONLY else "main", path(p)).entry.locators
            for p in range(PARTITIONS)
            if p != MERGED
        }
        changed = int(pc.sum(pc.not_equal(got["category"], "category-fixed").cast(pa.int64())).as_py())
        fixed = got.num_rows - changed
        text = f"{got.num_rows:,} rows, {fixed:,} fixed categories, {sum(kept.values())}/19 kept"
        return same_rows and all(kept.values()), text
    finally:
        lake.close()


def checksum(home: str, dest: str) -> str:
    lake = opening.open_lake(home)
    try:
        return porcelain.stat(lake, REPO, dest, path(MERGED)).entry.checksum
    finally:
        lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=FULL_ROWS, help="rows of the table (default 10M)")
    parser.add_argument("--runs", type=int, default=3, help="merges by rows, each in a fresh process")
    parser.add_argument("--spark", default="", metavar="MASTER", help="also merge as a Spark job")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    runs = max(1, args.runs)
    print_context(f"bench_rows_merge: {args.rows:,} rows in {PARTITIONS} partitions")
    with temp_dir("lakectl-bench-rowsmerge-", args.dir) as work:
        home = os.path.join(work, "lake")
        t_build, built = timed(build, home, args.rows, runs + 2)
        print(f"built in {fmt_time(t_build)}", flush=True)
        want = built["rows"]
        assert isinstance(want, pa.Table)
        plain = run_child(home, f"dest-{runs}", "")
        merges = [run_child(home, f"dest-{run}", RULE) for run in range(runs)]
        right, text = check(home, "dest-0", want)
        same = all(checksum(home, f"dest-{run}") == checksum(home, "dest-0") for run in range(runs))
        spark = run_child(home, f"dest-{runs + 1}", RULE, args.spark) if args.spark else None
        spark_same = spark is not None and checksum(home, f"dest-{runs + 1}") == checksum(home, "dest-0")
    seconds = median([m["seconds"] for m in merges])
    table = Table("figure", "measured", "target", "result")
    table.add(
        "merge by rows (key id), median wall time",
        f"{fmt_time(seconds)} (runs {' / '.join(fmt_time(m['seconds']) for m in merges)})",
        "none",
        "info",
    )
    table.add(
        "merge by rows, peak memory (VmHWM)", f"{max(m['peak_mib'] for m in merges):,.0f} MiB", "none", "info"
    )
    table.add(
        "answer: merged rows, untouched objects' blocks",
        text,
        f"{want.num_rows:,} rows, both sides' fixes, 19/19 kept",
        verdict(right and same and all("commit" in m for m in merges)),
    )
    table.add(
        "plain merge (objects), for comparison",
        f"{fmt_time(plain['seconds'])}: {len(plain.get('conflicts', []))} conflicting path(s)",
        "1 conflicting path",
        verdict(plain.get("conflicts") == [path(MERGED)]),
    )
    if spark is not None:
        table.add(
            f"Spark ({args.spark}) merge by rows, wall time; driver peak",
            f"{fmt_time(spark['seconds'])}; {spark['peak_mib']:,.0f} MiB",
            "none",
            "info",
        )
        table.add(
            f"Spark ({args.spark}): the same merged object",
            "identical" if spark_same else "DIFFERENT",
            "identical",
            verdict(spark_same),
        )
    table.print(
        f"Merge by rows: {args.rows:,} rows x 5 columns, {PARTITIONS} partitions; "
        f"{built['fix_changed']:,} + {built['main_changed']:,} rows changed in one"
    )


if __name__ == "__main__":
    main()
