"""Staging and committing 1M entries through the library, on an embedded lake.

Rows are prepared in memory first (not timed: a real caller such as a manifest import builds
them from its own input), then ``writes.stage_rows`` stages all of them in one call
(target <= 30 s) and ``porcelain.commit`` turns them into a tree on a fresh lake handle
(target <= 10 s). ``--profile`` prints where the commit spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats

from _benchutil import Table, fmt_time, make_rows, median, print_context, temp_dir, timed, verdict

from lakectl.core import opening, porcelain, writes

REPO = "bench"
TARGET_STAGE = 30.0
TARGET_COMMIT = 10.0


def one_run(n: int, base_dir: str | None, profile: bool) -> tuple[float, float, float]:
    """(prepare, stage, commit) seconds for one fresh lake."""
    with temp_dir("lakectl-bench-commit-", base_dir) as home:
        lake = opening.open_lake(home)
        porcelain.create_repo(lake, REPO)
        t_prep, rows = timed(lambda: make_rows(n))
        gc.collect()
        t_stage, _ = timed(writes.stage_rows, lake, REPO, "main", rows)
        del rows
        lake.close()
        gc.collect()
        lake = opening.open_lake(home)
        prof = cProfile.Profile() if profile else None
        if prof is not None:
            prof.enable()
        t_commit, c = timed(lambda: porcelain.commit(lake, REPO, "main", f"{n} objects"))
        if prof is not None:
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
            print(
                f"\ncProfile of the commit (cumulative, top 25; profiling slows it down):\n{out.getvalue()}"
            )
        ranges = len(lake.trees.ranges(c.meta_range_id))
        lake.close()
        print(
            f"run: prepare {fmt_time(t_prep)}, stage_rows {fmt_time(t_stage)}, "
            f"commit {fmt_time(t_commit)} ({ranges} ranges)",
            flush=True,
        )
        return t_prep, t_stage, t_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1, help="fresh lakes (median reported)")
    parser.add_argument("--profile", action="store_true", help="cProfile the commit of the last run")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("stage + commit 1M entries")

    runs = [one_run(args.entries, args.dir, args.profile and i == args.runs - 1) for i in range(args.runs)]
    prep = median([r[0] for r in runs])
    stage = median([r[1] for r in runs])
    commit = median([r[2] for r in runs])
    scale = args.entries / 1_000_000
    table = Table("phase", "measured", "target", "result")
    table.add("prepare rows (not timed against a target)", fmt_time(prep), "-", "info")
    table.add(
        f"stage_rows of {args.entries:,} entries",
        fmt_time(stage),
        f"<= {TARGET_STAGE * scale:g} s",
        verdict(stage <= TARGET_STAGE * scale),
    )
    table.add(
        f"commit of {args.entries:,} entries",
        fmt_time(commit),
        f"<= {TARGET_COMMIT * scale:g} s",
        verdict(commit <= TARGET_COMMIT * scale),
    )
    scaled = " (targets scaled linearly to the entry count)" if args.entries != 1_000_000 else ""
    table.print(f"Staging and committing {args.entries:,} entries, median of {args.runs} run(s){scaled}")


if __name__ == "__main__":
    main()
