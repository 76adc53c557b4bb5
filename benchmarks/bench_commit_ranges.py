"""Ancestry over long histories: the merge base, the ancestor test and a range log (git's
``FROM..REF``) between a short branch and a main that moved far since the branch split.

The history is synthetic: commit records (an empty tree each) written straight into a fresh
embedded lake's metadata, ``--main`` commits in a line on main and ``--branch`` commits on a
branch that split from main's first. The three operations run in-process on the lake reopened
(nothing cached), on a small history (``--small`` commits on main) and on the large one, and
their times are printed side by side with the target: each at most 50 ms on the large history
and at most twice its time on the small one.

The records are stored as a history from before the ancestry index was (no index), so the
build also times the indexing an upgraded lake does on first use. The operations walk along the
index's lineages: main's 500,000 commits are one lineage, crossed in one step.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from typing import Any

from _benchutil import Table, fmt_time, median, print_context, temp_dir, timed, verdict

from lakectl.core import changes, keys, opening, porcelain
from lakectl.core.graph.commits import CommitRequest, make_commit
from lakectl.core.kv.helpers import set_many
from lakectl.core.lake import Lake
from lakectl.core.model import Commit

REPO = "ranges"
TARGET_S = 0.050
"""Each operation on the large history, at most."""
TARGET_RATIO = 2.0
"""Large history / small history, at most."""
BATCH = 10_000


def chain(start: Commit, count: int, name: str) -> Iterator[Commit]:
    """``count`` commits in a line after ``start``."""
    parent = start
    for i in range(count):
        req = CommitRequest(f"{name} {i}", "bench", {}, start.creation_date + i + 1)
        parent = make_commit((parent.id,), [parent], start.meta_range_id, req)
        yield parent


def store(lake: Lake, commits: Iterator[Commit]) -> Commit:
    """Write the commits' records in batches; the last one."""
    partition = keys.repo_partition(REPO)
    batch: list[tuple[str, bytes]] = []
    last: Commit | None = None
    for last in commits:
        batch.append((keys.commit_key(last.id), last.encode()))
        if len(batch) == BATCH:
            set_many(lake.kv, partition, batch)
            batch = []
    set_many(lake.kv, partition, batch)
    assert last is not None
    return last


def index(lake: Lake, heads: list[Commit]) -> None:
    """What an upgraded lake does on first use of a history stored before the ancestry index."""
    for head in heads:
        lake.refs.ancestry.place(REPO, head)


def build(home: str, main: int, branch: int) -> dict[str, str]:
    """The history; the commit ids the operations start from."""
    lake = opening.open_lake(home, create=True)
    try:
        porcelain.create_repo(lake, REPO)
        first = porcelain.get_commit(lake, REPO, "main")
        split = store(lake, chain(first, 1, "split"))
        main_head = store(lake, chain(split, main, "main"))
        branch_head = store(lake, chain(split, branch, "branch"))
        took, _ = timed(index, lake, [main_head, branch_head])
        print(f"  indexed the history stored without its index in {fmt_time(took)}", flush=True)
    finally:
        lake.close()
    return {"split": split.id, "main": main_head.id, "branch": branch_head.id}


def operations(ids: dict[str, str]) -> dict[str, Callable[[Lake], Any]]:
    return {
        "merge base": lambda lake: changes.find_merge_base(lake, REPO, ids["branch"], ids["main"]),
        "ancestor test": lambda lake: changes.ancestor_of(lake, REPO, ids["split"], ids["main"]),
        "log --since-commit": lambda lake: sum(
            1 for _ in changes.log(lake, REPO, ids["branch"], since_commit=ids["main"])
        ),
    }


def measure(home: str, ids: dict[str, str], reps: int) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for _ in range(reps):
        for name, op in operations(ids).items():
            lake = opening.open_lake(home)
            try:
                out.setdefault(name, []).append(timed(op, lake)[0])
            finally:
                lake.close()
    return {name: median(times) for name, times in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--main", type=int, default=500_000, help="commits on main after the split")
    parser.add_argument("--small", type=int, default=10_000, help="main's commits in the small history")
    parser.add_argument("--branch", type=int, default=1_000, help="commits on the branch")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print_context("ancestry over long histories")
    table = Table(
        "operation", f"main +{args.small:,}", f"main +{args.main:,}", "large / small", "target", "result"
    )
    with temp_dir("ranges-") as work:
        results = []
        for size in (args.small, args.main):
            home = os.path.join(work, f"lake-{size}")
            took, ids = timed(build, home, size, args.branch)
            print(f"  built {size + args.branch + 2:,} commits in {fmt_time(took)}", flush=True)
            results.append(measure(home, ids, args.reps))
        small, large = results
        for name in small:
            ratio = large[name] / small[name]
            ok = large[name] <= TARGET_S and ratio <= TARGET_RATIO
            target = f"<= {fmt_time(TARGET_S)}, <= {TARGET_RATIO:.0f}x"
            table.add(
                name, fmt_time(small[name]), fmt_time(large[name]), f"{ratio:.1f}x", target, verdict(ok)
            )
    table.print()


if __name__ == "__main__":
    main()
