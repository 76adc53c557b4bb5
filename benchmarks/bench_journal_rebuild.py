"""Rebuild from the journal: a lake of ``--writes`` journalled object writes in ``--commits``
commits (each commit preceded by one staged batch of writes, rows without data as
``bench_commit_1m.py`` stages them), then its ``lake.db`` removed and rebuilt from the blocks
alone (``lakectl.core.journal.rebuild.rebuild_embedded``) in a child process, whose wall time
and peak memory (``VmHWM``) are the figures. The rebuilt head is checked against the original.
Target (decision 0009): 1M writes and 1,000 commits in <= 120 s, memory bounded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

from _benchutil import Table, fmt_time, print_context, synthetic_row, temp_dir, verdict

TARGET_S = 120.0


def build(home: str, writes: int, commits: int) -> str:
    from lakectl.core import opening
    from lakectl.core import porcelain as p
    from lakectl.core import writes as lake_writes
    from lakectl.core.journal import journal

    lake = opening.open_lake(home)
    journal.enable(lake)
    p.create_repo(lake, "bench")
    per = max(1, writes // commits)
    for c in range(commits):
        rows = [(f"d{c:04d}/f{i:06d}", synthetic_row(f"{c}/{i}")) for i in range(per)]
        lake_writes.stage_rows(lake, "bench", "main", rows)
        p.commit(lake, "bench", "main", f"commit {c}", committer="bench")
    while journal.seal(lake.kv, lake.blocks):
        pass
    head = p.get_branch(lake, "bench", "main").commit_id
    lake.close()
    return head


def _rebuild(home: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from lakectl.core import opening
    from lakectl.core import porcelain as p
    from lakectl.core.journal import rebuild

    start = time.perf_counter()
    done = rebuild.rebuild_embedded(home)
    took = time.perf_counter() - start
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    lake = opening.open_lake(home)
    out.put((took, hwm / 1024, done, p.get_branch(lake, "bench", "main").commit_id))
    lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=1_000)
    args = parser.parse_args()
    print_context("rebuild from the journal")
    with temp_dir("lakectl-bench-rebuild-") as work:
        home = os.path.join(work, "lake")
        start = time.perf_counter()
        head = build(home, args.writes, args.commits)
        built = fmt_time(time.perf_counter() - start)
        print(f"  built {args.writes:,} writes in {args.commits:,} commits in {built}")
        os.remove(os.path.join(home, "lake.db"))
        ctx = multiprocessing.get_context("spawn")
        out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        child = ctx.Process(target=_rebuild, args=(home, out))
        child.start()
        took, peak_mib, done, rebuilt_head = out.get(timeout=3600)
        child.join()
    table = Table("figure", "value", "target", "result")
    table.add(
        f"rebuild: {args.writes:,} writes, {args.commits:,} commits ({done['entries']:,} entries)",
        fmt_time(took),
        f"<= {TARGET_S:.0f} s at 1M/1,000",
        verdict(took <= TARGET_S) if args.writes >= 1_000_000 else "scaled down",
    )
    table.add("peak memory of the rebuilding process", f"{peak_mib:,.0f} MiB", "bounded", "info")
    table.add(
        "rebuilt head = original head", str(rebuilt_head == head), "True", verdict(rebuilt_head == head)
    )
    table.print("rebuild from the journal")


if __name__ == "__main__":
    main()
