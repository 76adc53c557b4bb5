"""The journal's cost, side by side: the two figures the journal must keep within 15 % of
(docs/decisions/0009-journal.md), each measured with the journal off and on in the same run.

* the 100k-file upload: ``lakectl fs upload -r`` of ``--files`` files of 4 KiB, then ``lakectl
  commit``, through the real CLI on a fresh embedded lake (as ``bench_small_files.py``); a new
  lake has its journal on, so "off" runs ``lakectl journal disable`` first and "on" ``lakectl
  journal enable``;
* the server write benchmark: uploads of 1 KiB objects to new paths on a real server process for
  ``--seconds`` at ``--connections`` connections (as ``bench_server_load.py``'s upload, with its
  Python load generator); "on" switches the journal on through ``POST /api/v1/journal/enable``,
  "off" off through ``POST /api/v1/journal/disable``. With the journal on, every answered
  upload's entry is in a log block (group-committed and synced) before the answer.

Modes alternate over ``--rounds`` rounds, each on a fresh lake or server, so that the machine's
drifting load falls on both alike: a round runs them in the order the last one ended with (off,
on; on, off; off, on; ...), so that neither mode always runs second. Each round gives one on/off
ratio of its two neighbouring runs; the figure judged is the median of those paired ratios (the
ratio of the two medians is printed too: on a machine whose load drifts by 20 % between runs,
unpaired medians can pair a quiet "off" with a busy "on"). The runs' lakes are deleted together
at the end, not between runs: on a filesystem mounted with ``discard``, deleting tens of
thousands of files slows the syncs of the next run for many seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from _benchutil import Table, fmt_time, lakectl_binary, median, print_context, temp_dir, verdict
from _liveserver import live_server
from bench_server_load import operations, prepare, run_python
from bench_small_files import PYCACHE, make_tree, run

BUDGET = 1.15
"""Journal on / journal off: at most 15 % slower (the log's sync before each answer included)."""


def upload_once(exe: str, tree: str, work: str, journal: bool, timeout: float) -> float:
    env = dict(os.environ, LAKECTL_HOME=os.path.join(work, "lake"), LAKECTL_COMMITTER="bench")
    env.pop("LAKECTL_SERVER_ENDPOINT_URL", None)
    run([exe, "repo", "create", "lakefs://bench"], timeout, env=env)
    run([exe, "journal", "enable" if journal else "disable"], timeout, env=env)
    os.sync()
    took = run([exe, "fs", "upload", "-r", "--source", tree, "lakefs://bench/main/data/"], timeout, env=env)
    return took + run([exe, "commit", "lakefs://bench/main", "-m", "small files"], timeout, env=env)


def server_once(work: str, journal: bool, seconds: float, connections: int) -> float:
    op = next(o for o in operations() if o.kind == "write")
    with live_server(work) as server:
        prepare(server)
        with server.client() as api:
            api.post("/journal/enable" if journal else "/journal/disable").raise_for_status()
        run_python(server, op, 2.0, connections, work, "warm")
        return run_python(server, op, seconds, connections, work, "timed").rps


def order(round_: int) -> tuple[bool, bool]:
    """The modes of a round (False: journal off), in the order the last round ended with."""
    return (True, False) if round_ % 2 else (False, True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed server load per run")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("upload", "server"), default=None)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    exe = lakectl_binary()
    if exe is None:
        raise SystemExit("no lakectl executable next to this Python or on PATH")
    print_context("the journal's cost: journal off and on, side by side")
    table = Table("figure", "journal off", "journal on", "on / off", "target", "result")
    if args.only in (None, "upload"):
        times: dict[bool, list[float]] = {False: [], True: []}
        with temp_dir("lakectl-bench-journal-") as work:
            # Every command with a bytecode cache, as a user's install has one: an environment
            # with PYTHONDONTWRITEBYTECODE would compile lakectl in every process, a constant
            # that dilutes the journal's share of each run.
            PYCACHE["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
            tree = os.path.join(work, "tree")
            os.makedirs(tree)
            make_tree(tree, args.files, 100)
            for r in range(args.rounds):
                for on in order(r):
                    run_dir = tempfile.mkdtemp(prefix="run-", dir=work)
                    times[on].append(upload_once(str(exe), tree, run_dir, on, args.timeout))
                    print(
                        f"  upload round {r + 1}, journal {'on ' if on else 'off'}: {fmt_time(times[on][-1])}"
                    )
        off, on_ = median(times[False]), median(times[True])
        ratio = median([b / a for a, b in zip(times[False], times[True], strict=True)])
        table.add(
            f"{args.files:,} files: fs upload -r + commit",
            fmt_time(off),
            fmt_time(on_),
            f"{ratio:.3f} ({on_ / off:.3f})",
            f"<= {BUDGET:.2f}",
            verdict(ratio <= BUDGET),
        )
    if args.only in (None, "server"):
        rates: dict[bool, list[float]] = {False: [], True: []}
        with temp_dir("lakectl-bench-journal-server-") as runs:
            for r in range(args.rounds):
                for on in order(r):
                    work = tempfile.mkdtemp(prefix="run-", dir=runs)
                    rates[on].append(server_once(work, on, args.seconds, args.connections))
                    mode = "on " if on else "off"
                    print(f"  server round {r + 1}, journal {mode}: {rates[on][-1]:,.0f} uploads/s")
        off, on_ = median(rates[False]), median(rates[True])
        ratio = median([a / b for a, b in zip(rates[False], rates[True], strict=True)])
        table.add(
            f"server uploads of 1 KiB, {args.connections} connections",
            f"{off:,.0f} req/s",
            f"{on_:,.0f} req/s",
            f"{ratio:.3f} ({off / on_:.3f})",
            f"<= {BUDGET:.2f}",
            verdict(ratio <= BUDGET),
        )
    table.print(
        "journal off vs on: medians of each mode; on / off in time: the median of the rounds' "
        "ratios (the ratio of the medians)"
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
