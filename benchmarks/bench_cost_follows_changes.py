"""Cost follows the changes: commit, diff and merge of 100 changed objects on 10k vs 1M objects.

For each tree size, a base tree of synthetic rows (``tables/t{k}/date=2026-01-{d:02d}/part-{i:06d}
.parquet``, 20 days x 500 parts per table) is staged with ``writes.stage_rows`` and committed
on ``main``. Then, per repetition, on fresh branches made from the base commit:

* a destination branch (standing in for ``main``) gets its own small unrelated change, committed;
* a feature branch gets 100 changed objects (80 rewritten, 10 deleted, 10 added) staged, then
  we time ``diff_uncommitted`` on it, its ``commit``, ``diff_refs(dest, feature)`` (three-dot,
  including the merge-base walk) and the three-way ``merge`` of feature into dest.

Every timed operation runs on a freshly opened ``Lake`` (empty in-process range cache), as a CLI
call would; the OS page cache stays warm. Both trees are built first; then the sizes take turns,
a repetition of each at a time, so that a pair sees the same minutes of the machine. Times are
medians of ``--reps`` repetitions; a ratio is the median of the repetitions' ratios.

The 100 changes clustered in one partition, as a data job rewriting a partition would make them:
time(1M) / time(10k) <= 2 for commit, both diffs and merge. The same 100 changes spread uniformly
at random over the tree (each change lands in a different range, so the work grows with the
number of ranges touched, ~100 at 1M against ~40 of the 45 at 10k): time(1M) / time(10k) <= 3
for each.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _benchutil import Table, fmt_time, median, print_context, synthetic_row, temp_dir, timed, verdict

from lakectl.core import changes as lake_changes
from lakectl.core import merging, opening, porcelain, writes
from lakectl.core.graph.tree import Update
from lakectl.core.lake import Lake

REPO = "bench"
DAYS = 20
PARTS = 500
PER_TABLE = DAYS * PARTS
TARGET_RATIO = 2.0
"""Clustered changes: time(1M) / time(10k), at most."""
TARGET_SPREAD_RATIO = 3.0
"""Changes spread uniformly over the tree: time(1M) / time(10k), at most."""
OPS = ("commit", "diff uncommitted", "diff refs", "merge")


def path_of(table: int, day: int, part: int) -> str:
    return f"tables/t{table}/date=2026-01-{day:02d}/part-{part:06d}.parquet"


def base_paths(n: int) -> list[str]:
    """``n`` paths, sorted (``t10`` sorts before ``t2``: the tree is in path order, not table order)."""
    out: list[str] = []
    table = 0
    while len(out) < n:
        for d in range(1, DAYS + 1):
            out.extend(path_of(table, d, i) for i in range(PARTS))
        table += 1
    del out[n:]
    out.sort()
    return out


def changes_from(paths: list[str], version: int) -> list[Update]:
    """80 rewrites, 10 deletes and 10 additions (next to the deleted/rewritten paths), sorted."""
    updates: list[Update] = []
    for p in paths[:80]:
        updates.append((p, synthetic_row(p, version)))
    for p in paths[80:90]:
        updates.append((p, None))
    for p in paths[90:100]:
        new = p.replace(".parquet", f".v{version}.parquet")
        updates.append((new, synthetic_row(new, version)))
    updates.sort(key=lambda u: u[0])
    return updates


def clustered_paths(all_paths: list[str], rng: random.Random, n: int, avoid: set[str]) -> list[str]:
    """``n`` paths of one partition in the middle of the tree (a job rewriting a partition)."""
    mid = all_paths[len(all_paths) // 2]
    partition = mid.rsplit("/", 1)[0] + "/"
    start = next(i for i, p in enumerate(all_paths) if p.startswith(partition))
    chosen = [p for p in all_paths[start : start + PARTS] if p not in avoid][:n]
    rng.shuffle(chosen)
    return chosen


def uniform_paths(all_paths: list[str], rng: random.Random, n: int, avoid: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        p = all_paths[rng.randrange(len(all_paths))]
        if p not in avoid and p not in out:
            out.append(p)
    return out


def dest_change(all_paths: list[str], rep: int) -> list[Update]:
    """The destination's own unrelated change: rewrite 5 objects of the tree's last partition."""
    return [(p, synthetic_row(p, 1000 + rep)) for p in all_paths[-5:]]


def fresh(home: str, fn: Callable[[Lake], Any]) -> tuple[float, Any]:
    """Time ``fn`` on a newly opened lake (not counting the open)."""
    lake = opening.open_lake(home)
    try:
        gc.collect()
        return timed(lambda: fn(lake))
    finally:
        lake.close()


@dataclass
class Base:
    """A lake holding a committed base tree of ``n`` objects."""

    n: int
    home: str
    base_id: str
    paths: list[str]
    rng: random.Random


def build(n: int, seed: int, home: str) -> Base:
    lake = opening.open_lake(home)
    porcelain.create_repo(lake, REPO)
    t0 = time.perf_counter()
    all_paths = base_paths(n)
    rows = [(p, synthetic_row(p)) for p in all_paths]
    t_prep = time.perf_counter() - t0
    t_stage, _ = timed(writes.stage_rows, lake, REPO, "main", rows)
    del rows
    t_commit, base = timed(lambda: porcelain.commit(lake, REPO, "main", f"base of {n} objects"))
    n_ranges = len(lake.trees.ranges(base.meta_range_id))
    lake.close()
    print(
        f"{n:,} objects: rows prepared {fmt_time(t_prep)}, staged {fmt_time(t_stage)}, "
        f"committed {fmt_time(t_commit)} ({n_ranges} ranges)",
        flush=True,
    )
    return Base(n, home, base.id, all_paths, random.Random(seed))


def one_rep(b: Base, mode: str, rep: int, changes: int) -> dict[str, float]:
    """Seconds of each operation for one repetition on fresh branches of ``b``."""
    dest_paths = {p for p, _ in dest_change(b.paths, 0)}
    pick = clustered_paths if mode == "clustered" else uniform_paths
    updates = changes_from(pick(b.paths, b.rng, changes, dest_paths), rep + 2)
    feature, dest = f"{mode}-feature-{rep}", f"{mode}-dest-{rep}"
    lake = opening.open_lake(b.home)
    porcelain.create_branch(lake, REPO, feature, b.base_id)
    porcelain.create_branch(lake, REPO, dest, b.base_id)
    writes.stage_rows(lake, REPO, dest, dest_change(b.paths, rep))
    porcelain.commit(lake, REPO, dest, "unrelated change on the destination")
    writes.stage_rows(lake, REPO, feature, updates)
    lake.close()

    times: dict[str, float] = {}
    times["diff uncommitted"], diff = fresh(
        b.home, lambda lk: lake_changes.diff_uncommitted(lk, REPO, feature)
    )
    assert len(diff) == changes, (len(diff), changes)
    times["commit"], _ = fresh(b.home, lambda lk: porcelain.commit(lk, REPO, feature, "job output"))
    times["diff refs"], diff = fresh(b.home, lambda lk: list(lake_changes.diff_refs(lk, REPO, dest, feature)))
    assert len(diff) == changes, (len(diff), changes)
    times["merge"], res = fresh(b.home, lambda lk: merging.merge(lk, REPO, feature, dest))
    assert res.changed and len(res.commit.parents) == 2
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=10_000, help="objects in the small tree")
    parser.add_argument("--large", type=int, default=1_000_000, help="objects in the large tree")
    parser.add_argument("--changes", type=int, default=100, help="changed objects (multiple of 10)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (medians reported)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-uniform", action="store_true", help="skip the uniform (spread) case")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("cost follows the changes")
    if args.changes % 10 or args.changes > PARTS:
        parser.error(f"--changes must be a multiple of 10 and at most {PARTS}")
    modes = ["clustered"] if args.no_uniform else ["clustered", "uniform"]

    with (
        temp_dir(f"lakectl-bench-cost-{args.small}-", args.dir) as small_home,
        temp_dir(f"lakectl-bench-cost-{args.large}-", args.dir) as large_home,
    ):
        print()
        small = build(args.small, args.seed, small_home)
        large = build(args.large, args.seed, large_home)
        # The two sizes take turns, a repetition of each at a time: both see the same minutes of
        # a shared machine, whose disk and CPU speed drift by tens of percent.
        times: dict[tuple[str, int, str], list[float]] = {}
        for mode in modes:
            for rep in range(-1, args.reps):  # repetition -1 warms up (lazy imports) and is not counted
                for b in (small, large):
                    for op, seconds in one_rep(b, mode, rep, args.changes).items():
                        if rep >= 0:
                            times.setdefault((mode, b.n, op), []).append(seconds)

    s, lg = f"{args.small:,}", f"{args.large:,}"
    for mode in modes:
        target = TARGET_RATIO if mode == "clustered" else TARGET_SPREAD_RATIO
        table = Table("operation", s, lg, "ratio", "target", "result")
        for op in OPS:
            a_runs, b_runs = times[(mode, args.small, op)], times[(mode, args.large, op)]
            # The median of each repetition's ratio: a pair measured in the same minutes.
            ratio = median([y / x if x > 0 else float("inf") for x, y in zip(a_runs, b_runs, strict=True)])
            table.add(
                op,
                fmt_time(median(a_runs)),
                fmt_time(median(b_runs)),
                f"{ratio:.2f}",
                f"<= {target:g}",
                verdict(ratio <= target),
            )
        title = (
            f"{args.changes} changes clustered in one partition (medians of {args.reps}, fresh lake per op)"
            if mode == "clustered"
            else f"{args.changes} changes spread uniformly at random over the tree (medians of {args.reps})"
        )
        table.print(title)


if __name__ == "__main__":
    main()
