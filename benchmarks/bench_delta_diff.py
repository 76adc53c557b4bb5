"""The logical diff of a 10M-row Delta table with 1% of its rows changed on one side.

``deltalake`` writes a Delta table of ``--rows`` rows (10M by default; bench_table_diff's five
columns) in 20 ``date`` partitions, one version each, into a local directory, uploaded to an
embedded lake's ``main``. A branch ``dev`` changes 1% of the table's rows, all in one partition,
as a job would: ``deltalake``'s ``UPDATE`` of their ``amount`` (it rewrites that partition's file:
one version). The figure is the wall time and peak memory of ``tablediff.diff_table(lake, repo,
"main", "dev", "tables/orders/", key=["id"])`` in a fresh child process (each run): the Delta
versions since the merge base, the data files active on one side only (2 of 21 read), the
schema, and the rows by key (every count over the whole diff, a first page of 100 rows). The
answer is checked: 1% of the rows changed, in ``amount`` alone, none added or removed.

Peers in the same run: the same diff of the same data as a plain Parquet directory (``dev``
replaces the partition's object), and a floor: ``pyarrow`` reading the two changed files from a
local directory and lakectl's keyed comparison of them (no lake, no log).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _benchutil import CHILD_PEAKS, Table, fmt_time, median, print_context, temp_dir
from bench_table_diff import PARTITIONS, partition

from lakectl.core import opening, porcelain, writes

REPO = "delta"
PLAIN = "plain"
ROOT = "tables/orders/"
CHANGED = PARTITIONS // 2

_CHILD = (
    """
import json, sys, time
from lakectl.core import opening, tablediff
"""
    + CHILD_PEAKS
    + """
lake = opening.open_lake(sys.argv[1])
start = time.perf_counter()
diff = tablediff.diff_table(lake, sys.argv[2], "main", "dev", "tables/orders/", key=["id"])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mib": peak(), "diff": diff.to_dict()}))
"""
)


def day(p: int) -> str:
    return f"2026-01-{p + 1:02d}"


def build(home: str, work: Path, rows: int) -> dict[str, object]:
    """The Delta table on ``main`` and its 1% update on ``dev``; the same data as a plain Parquet
    directory in a second repository; the two changed files kept for the floor."""
    from deltalake import DeltaTable, write_deltalake

    per = rows // PARTITIONS
    rng = np.random.default_rng(35)
    table_dir = work / "orders"
    start = time.perf_counter()
    for p in range(PARTITIONS):
        t = partition(p, per, rng)
        t = t.append_column("date", pa.array([day(p)] * t.num_rows))
        write_deltalake(str(table_dir), t, partition_by=["date"], mode="append")
    built = time.perf_counter() - start
    lake = opening.open_lake(home)
    for repo in (REPO, PLAIN):
        porcelain.create_repo(lake, repo, "main", f"local://{repo}")
    before = set(_files(table_dir))
    _upload(lake, REPO, "main", table_dir, sorted(before))
    plain = {f: f for f in before if "_delta_log" not in f}
    _upload(lake, PLAIN, "main", table_dir, sorted(plain))
    for repo in (REPO, PLAIN):
        porcelain.commit(lake, repo, "main", "orders", committer="bench")
        porcelain.create_branch(lake, repo, "dev", "main")

    changed = per // 5  # 1% of the table: a fifth of one partition of twenty
    first = CHANGED * per
    DeltaTable(str(table_dir)).update(
        predicate=f"date = '{day(CHANGED)}' AND id < {first + changed}", updates={"amount": "amount + 1"}
    )
    after = set(_files(table_dir))
    _upload(lake, REPO, "dev", table_dir, sorted(after - before))
    new_file = next(f for f in after - before if "_delta_log" not in f)
    old_file = next(f for f in before if f"date={day(CHANGED)}/" in f)
    writes.delete_objects(lake, PLAIN, "dev", [ROOT + old_file])
    _upload(lake, PLAIN, "dev", table_dir, [new_file])
    for repo in (REPO, PLAIN):
        porcelain.commit(lake, repo, "dev", "1% of the amounts", committer="bench")
    lake.close()
    return {"changed": changed, "built": built, "old": table_dir / old_file, "new": table_dir / new_file}


def _files(directory: Path) -> list[str]:
    return [p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()]


def _upload(lake: object, repo: str, branch: str, directory: Path, names: list[str]) -> None:
    files = [(ROOT + n, str(directory / n)) for n in names]
    writes.upload_files(lake, repo, branch, files)  # type: ignore[arg-type]


def run_child(home: str, repo: str) -> dict:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, home, repo], capture_output=True, text=True, check=False
    )
    if child.returncode:
        raise SystemExit(f"diff failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def floor(old: Path, new: Path) -> float:
    """pyarrow reading the two changed files from local disk and the keyed comparison of their
    rows (lakectl's, as the diff runs it), with nothing of a lake or a log."""
    from lakectl.core.tables.parts import PART_COLUMN
    from lakectl.core.tables.rows import compare_keyed

    start = time.perf_counter()
    sides = []
    for f in (old, new):
        t = pq.read_table(f)
        t = t.cast(
            pa.schema([x.with_type(pa.string()) if x.type == pa.string_view() else x for x in t.schema])
        )
        sides.append(t.append_column(PART_COLUMN, pa.array([""] * t.num_rows)))
    pairs = tuple((n, n) for n in sides[0].column_names if n != PART_COLUMN)
    compare_keyed(sides[0], sides[1], ("id",), pairs, ("main", "dev"), 100, "")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_context(f"bench_delta_diff: a Delta table of {args.rows:,} rows, 1% changed")
    with temp_dir("bench-delta-diff-") as tmp:
        home = os.path.join(tmp, "lake")
        made = build(home, Path(tmp) / "work", args.rows)
        print(f"built with deltalake in {fmt_time(float(made['built']))}")  # type: ignore[arg-type]
        delta = [run_child(home, REPO) for _ in range(args.runs)]
        plain = [run_child(home, PLAIN) for _ in range(args.runs)]
        floors = [floor(made["old"], made["new"]) for _ in range(args.runs)]  # type: ignore[arg-type]
    found = delta[0]["diff"]
    ok = (found["added"], found["removed"], found["changed"]) == (0, 0, made["changed"])
    ok = (
        ok
        and found["changed_columns"] == {"amount": made["changed"]}
        and found["delta"]["right"]["count"] == 1
    )
    table = Table("figure", "median (runs)", "peak", "result")
    for name, runs in (("Delta table diff, key id", delta), ("plain Parquet diff, key id", plain)):
        seconds = [r["seconds"] for r in runs]
        table.add(
            name,
            f"{fmt_time(median(seconds))} ({' / '.join(fmt_time(s) for s in seconds)})",
            f"{max(r['peak_mib'] for r in runs):,.0f} MiB",
            "checked" if ok or name.startswith("plain") else "WRONG",
        )
    table.add("floor: pyarrow reads the 2 files + keyed compare", fmt_time(median(floors)), "", "floor")
    table.print(f"Diff of {args.rows:,} rows, {made['changed']:,} changed (each run a fresh child process)")
    print(
        f"answer: {found['summary']}; files read {found['files_read']}, unchanged {found['files_unchanged']}"
    )
    print_context("bench_delta_diff done")


if __name__ == "__main__":
    main()
