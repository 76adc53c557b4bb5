"""What keeping the trees of expired commits costs garbage collection's mark.

A collection keeps the tree files (metarange, pages, ranges) of every commit, and deletes only the
object data of expired ones: a merge base or a three-dot diff older than the retention still
reads its tree. The mark therefore reads, beyond the kept commits' trees, the root and pages of
each expired commit's tree (each file once; a range shared with a kept tree is already marked).

The lake is an embedded one: a base commit of ``--objects`` synthetic entries (staged rows: the
mark reads trees, not data), then ``--commits`` commits of ``--changed`` rewritten objects each.
Rules of 0 days, a day later: every commit but the head is expired. Timed, each on a freshly
opened lake (no range cache), best of 3:

- floor: the mark of the kept trees alone (the rule before trees were kept: what a mark must read
  in any case);
- the mark with the expired commits' trees kept, and its cost per expired commit;
- the same on a lake twice as big with the same commits.

Each lake is built twice: with each commit's changes spread over the tree (each touches most of
its pages of ~30k rows, so a bigger lake has more pages to read per commit), and clustered
(neighbouring objects: one page). The added cost follows the pages the expired commits changed,
at most as many as their changes, not the number of objects.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import time

from _benchutil import Table, make_rows, print_context, synthetic_row, temp_dir

REPO = "expired"
RUNS = 3


def build(home: str, objects: int, commits: int, changed: int, spread: bool) -> None:
    """The base commit of ``objects`` entries, then ``commits`` commits of ``changed`` each:
    ``spread`` over the tree, or neighbours."""
    from lakectl.core import opening, porcelain, writes
    from lakectl.core.upkeep import retention

    lake = opening.open_lake(home)
    porcelain.create_repo(lake, REPO)
    rows = make_rows(objects)
    writes.stage_rows(lake, REPO, "main", rows)
    porcelain.commit(lake, REPO, "main", "base", committer="bench")
    for c in range(commits):
        step = 104_729 if spread else 1
        picked = sorted({rows[(c * 7919 + j * step) % objects][0] for j in range(changed)})
        writes.stage_rows(lake, REPO, "main", [(p, synthetic_row(p, version=c + 1)) for p in picked])
        porcelain.commit(lake, REPO, "main", f"change {c}", committer="bench")
    retention.set_rules(lake, REPO, retention.GCRules(0))
    lake.close()


def measure(home: str) -> dict[str, float]:
    """The roots a day later; the best mark time with and without the expired commits' trees."""
    from lakectl.core import opening
    from lakectl.core.upkeep import gc

    lake = opening.open_lake(home)
    start = gc.roots(lake, REPO, time.time() + 86_400)
    pages: set[str] = set()
    for metarange in start.trees:
        for _ in gc.tree_files(lake.ranges, metarange, pages):
            pass
    lake.close()
    figures: dict[str, float] = {"expired": start.expired, "pages": len(pages)}
    for label, roots in (("floor", dataclasses.replace(start, trees=frozenset())), ("kept", start)):
        best = float("inf")
        for _ in range(RUNS):
            lake = opening.open_lake(home)  # no range cache: every file is read again
            began = time.perf_counter()
            live = gc._live(lake, roots)
            best = min(best, time.perf_counter() - began)
            lake.close()
        figures[label], figures[f"{label}_live"] = best, len(live)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--changed", type=int, default=25, help="objects rewritten by each commit")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    print_context("bench_gc_expired")
    table = Table(
        "lake, changes",
        "expired (pages read)",
        "floor: kept trees only",
        "trees of expired kept",
        "added per expired",
    )
    with temp_dir("lakectl-bench-gc-expired-", args.dir) as work:
        for spread, objects in itertools.product((True, False), (args.objects, 2 * args.objects)):
            home = os.path.join(work, f"lake-{objects}-{'spread' if spread else 'clustered'}")
            began = time.perf_counter()
            build(home, objects, args.commits, args.changed, spread)
            print(
                f"  built {objects:,} objects + {args.commits} commits ({time.perf_counter() - began:.0f} s)"
            )
            f = measure(home)
            added = (f["kept"] - f["floor"]) / max(1, f["expired"]) * 1000
            table.add(
                f"{objects:,} objects, {'spread' if spread else 'clustered'}",
                f"{f['expired']:,.0f} ({f['pages']:,.0f})",
                f"{f['floor'] * 1000:,.0f} ms ({f['floor_live']:,.0f} live)",
                f"{f['kept'] * 1000:,.0f} ms ({f['kept_live']:,.0f} live)",
                f"{added:.2f} ms",
            )
    table.print("gc mark with the trees of expired commits kept (embedded lake, best of 3, no range cache)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
