"""A data-aware diff of a large partitioned table in which one partition changed.

An embedded lake holds a table of ``--rows`` rows (10M by default) and 5 columns (``id`` int64,
``user_id`` int64, ``amount`` double, ``category`` string, ``ts`` timestamp) in 20 hive
partitions (``date=2026-01-DD/part-0.parquet``, one Parquet object each) committed on ``main``.
A branch ``dev`` rewrites one partition with 1% of the table's rows changed in it: 80% of those
rows get a new ``amount``, 10% are removed and 10% are added. The figure is the wall time of
``tablediff.diff_table(lake, repo, "main", "dev", "tables/orders/", key=["id"])`` (a first page
of 100 row changes, every count over the whole diff) and the peak memory of the process that
runs it: a fresh child process per run (its ``VmHWM``: ``ru_maxrss`` survives exec, so a child
would report the parent's peak, the built table). The answer is checked (counts, objects read).
A diff without a key (a multiset of whole rows) of the same data is timed beside it, for
information. Building the table is not timed.
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
import pyarrow.parquet as pq
from _benchutil import Table, fmt_time, median, print_context, temp_dir, timed, verdict

from lakectl.core import porcelain

REPO = "tables"
TABLE = "tables/orders/"
PARTITIONS = 20
TARGET_SECONDS = 5.0
TARGET_PEAK_MIB = 2048
FULL_ROWS = 10_000_000

_CHILD = """
import json, sys, time
from lakectl.core import porcelain, tablediff
lake = porcelain.open_lake(sys.argv[1])
key = [k for k in sys.argv[3].split(",") if k]
start = time.perf_counter()
diff = tablediff.diff_table(lake, sys.argv[2], "main", "dev", "tables/orders/", key=key)
seconds = time.perf_counter() - start
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
out = diff.to_dict()
out["rows"] = len(out["rows"])
print(json.dumps({"seconds": seconds, "peak_mib": peak, "diff": out, "summary": diff.summary()}))
"""


def partition(p: int, per: int, rng: np.random.Generator) -> pa.Table:
    ids = np.arange(p * per, (p + 1) * per, dtype=np.int64)
    categories = pa.array([f"category-{i:02d}" for i in range(50)])
    return pa.table(
        {
            "id": ids,
            "user_id": rng.integers(0, 1_000_000, per, dtype=np.int64),
            "amount": np.round(rng.random(per) * 1000, 2),
            "category": categories.take(pa.array(rng.integers(0, 50, per))),
            "ts": pa.array(1_767_225_600_000_000 + ids * 1_000, pa.timestamp("us")),
        }
    )


def upload(lake: porcelain.Lake, branch: str, path: str, table: pa.Table) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    porcelain.upload(lake, REPO, branch, path, io.BytesIO(sink.getvalue()))


def build(home: str, rows: int) -> dict[str, int]:
    """The table on ``main`` and one partition rewritten on ``dev``; the expected counts."""
    lake = porcelain.open_lake(home)
    porcelain.create_repo(lake, REPO, "main", f"local://{REPO}")
    per = rows // PARTITIONS
    rng = np.random.default_rng(14)
    changed_part = PARTITIONS // 2
    original = None
    for p in range(PARTITIONS):
        table = partition(p, per, rng)
        upload(lake, "main", f"{TABLE}date=2026-01-{p + 1:02d}/part-0.parquet", table)
        if p == changed_part:
            original = table
    porcelain.commit(lake, REPO, "main", f"{rows:,} rows", committer="bench")
    porcelain.create_branch(lake, REPO, "dev", "main")
    assert original is not None
    touched = rows // 100  # 1% of the table, all in one partition
    n_changed, n_removed = touched * 8 // 10, touched // 10
    n_added = touched - n_changed - n_removed
    picked = rng.choice(per, n_changed + n_removed, replace=False)
    change_at, remove_at = picked[:n_changed], picked[n_changed:]
    amount = original["amount"].to_numpy().copy()
    amount[change_at] += 1.0
    keep = np.ones(per, dtype=bool)
    keep[remove_at] = False
    edited = original.set_column(2, "amount", pa.array(amount)).filter(pa.array(keep))
    added = partition(PARTITIONS, n_added, rng)  # ids past every partition's
    added = added.set_column(0, "id", pa.array(np.arange(rows, rows + n_added, dtype=np.int64)))
    edited = pa.concat_tables([edited, added])
    upload(lake, "dev", f"{TABLE}date=2026-01-{changed_part + 1:02d}/part-0.parquet", edited)
    porcelain.commit(lake, REPO, "dev", "1% of the rows of one partition", committer="bench")
    lake.close()
    return {"changed": n_changed, "removed": n_removed, "added": n_added}


def run_child(home: str, key: str) -> dict:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, home, REPO, key],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if child.returncode != 0:
        raise SystemExit(f"the diff failed:\n{child.stderr[-2000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=FULL_ROWS, help="rows of the table (default 10M)")
    parser.add_argument("--runs", type=int, default=3, help="keyed diffs, each in a fresh process")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    print_context(f"bench_table_diff: {args.rows:,} rows in {PARTITIONS} partitions")
    with temp_dir("lakectl-bench-tablediff-", args.dir) as work:
        home = os.path.join(work, "lake")
        t_build, expected = timed(build, home, args.rows)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(home) for f in fs)
        print(f"built in {fmt_time(t_build)} ({size / 2**20:,.0f} MiB on disk)", flush=True)
        runs = [run_child(home, "id") for _ in range(max(1, args.runs))]
        keyless = run_child(home, "")
    seconds = median([r["seconds"] for r in runs])
    peak = max(r["peak_mib"] for r in runs)
    diff = runs[0]["diff"]
    got = {k: diff[k] for k in ("changed", "removed", "added")}
    right = got == expected and diff["files_read"] == 2 and diff["files_unchanged"] == PARTITIONS - 1
    right = (
        right and len(diff["partitions"]) == 1 and diff["changed_columns"] == {"amount": expected["changed"]}
    )
    judged = args.rows >= FULL_ROWS
    table = Table("figure", "measured", "target", "result")
    table.add(
        "keyed diff (key id), median wall time",
        f"{fmt_time(seconds)} (runs {' / '.join(fmt_time(r['seconds']) for r in runs)})",
        f"\u2264 {TARGET_SECONDS:.0f} s",
        verdict(seconds <= TARGET_SECONDS if judged else None),
    )
    table.add(
        "keyed diff, peak memory (VmHWM)",
        f"{peak:,.0f} MiB",
        f"\u2264 {TARGET_PEAK_MIB // 1024} GiB",
        verdict(peak <= TARGET_PEAK_MIB if judged else None),
    )
    table.add(
        "answer: counts, objects read/unchanged, one partition",
        f"{got}, {diff['files_read']}/{diff['files_unchanged']}",
        f"{expected}, 2/{PARTITIONS - 1}",
        verdict(right),
    )
    table.add(
        "diff without a key (multiset of whole rows)",
        f"{fmt_time(keyless['seconds'])}, {keyless['peak_mib']:,.0f} MiB; "
        f"+{keyless['diff']['added']:,} \u2212{keyless['diff']['removed']:,}",
        "none",
        "info",
    )
    table.print(f"Table diff: {args.rows:,} rows x 5 columns, {PARTITIONS} partitions, 1% changed in one")
    print(runs[0]["summary"])
    if not judged:
        print(f"(time and memory not judged below {FULL_ROWS:,} rows)")


if __name__ == "__main__":
    main()
