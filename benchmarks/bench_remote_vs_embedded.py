"""The same uploads through a server and into the embedded lake, whole CLI processes, one run.

Issue 16's "Remote" targets: a 1 GiB upload through a server at >= 0.6 x the embedded rate, and
100k small files through a server in <= 2 x the embedded time. Each figure is one whole
``lakectl`` process as a user times it (output discarded, ``--no-progress``):

* big: ``lakectl fs upload --source FILE lakefs://bench/main/big.bin`` of one file (1 GiB by
  default, 64 MiB pieces that all differ), judged by rate: embedded seconds / remote seconds
  (the remote rate as a fraction of the embedded one), target >= 0.6;
* small: ``lakectl fs upload -r --source TREE lakefs://bench/main/data/`` of N files of 4 KiB in
  100 directories (100k by default, generated once), judged by time: remote seconds / embedded
  seconds, target <= 2;
* mixed: ``lakectl fs upload -r`` of a directory as a user has one: 2,000 files of 1 KiB to
  10 MiB (sizes log-normal around 32 KiB, ~330 MiB in all, random bytes, in 20 directories),
  judged by time: remote seconds / embedded seconds, target <= 1.5;
* down (with small, not judged: no target names it): ``lakectl fs download -r`` of the small
  files just uploaded into a new local directory, remote seconds / embedded seconds.

Embedded: ``LAKECTL_HOME`` is a fresh lake each round, no endpoint, ``LAKECTL_CONFIG`` names a
file that does not exist. Remote: a real ``lakectl server setup`` + ``lakectl server run``
(default configuration: SQLite + local blocks) on 127.0.0.1, a fresh one each round (a server
that already holds the data would dedup it: nothing new would cross the network), reached through
``LAKECTL_SERVER_ENDPOINT_URL`` and the admin's key in ``LAKECTL_CREDENTIALS_*``. Client and
server share the machine's cores, as the embedded CLI has them to itself: that is the comparison
a user makes on one machine. Each new lake and server gets an untimed warm-up upload of one small
file (bytecode caches filled, the server's lazy imports done).

Before every timed command: ``os.sync()`` (nobody pays for another's writeback) and, for the big
file, the source dropped from the page cache (``posix_fadvise(DONTNEED)``); the small-file tree is
read warm by both. Embedded and remote take turns, the first alternating each round; a ratio is
the median of the rounds' ratios (same minutes), judged only at full size. The server's CPU
seconds (user + system, from /proc) during each remote upload are printed beside its wall time;
absolute seconds are printed, never judged.

With ``--pinned``, each round also runs the remote uploads on a second fresh server pinned to
one core (``taskset -c 1``) with the client pinned to the other (``taskset -c 0``): what a client
on a machine of its own would see, beside the shared figure (the judged ratios stay the shared
ones, as a user on one machine has them). The server CPU column says how each remote upload's
time splits between client and server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from _benchutil import Table, fmt_time, lakectl_binary, print_context, temp_dir, verdict
from _liveserver import LiveServer, live_server
from bench_big_file import Timing, remove, run
from bench_small_files import PYCACHE, StepFailed, make_tree
from bench_upload_1gib import drop_from_cache, make_source

MiB = 1024 * 1024
TARGET_BIG_RATE = 0.6
"""Remote rate / embedded rate for the big file, at least."""
TARGET_SMALL_TIME = 2.0
"""Remote time / embedded time for the small files, at most."""
TARGET_MIXED_TIME = 1.5
"""Remote time / embedded time for the directory of mixed sizes, at most."""
FULL_MIXED = 2000
FULL_SIZE_MIB = 1024
FULL_FILES = 100_000
BIG = "lakefs://bench/main/big.bin"
DATA = "lakefs://bench/main/data/"
MIXED = "lakefs://bench/main/mixed/"
KiB = 1024


def make_mixed(root: str, files: int) -> int:
    """``files`` files of 1 KiB to 10 MiB of random bytes (log-normal sizes around 32 KiB, the
    same every run), 100 a directory; their total size."""
    import math
    import random

    rng, total = random.Random(33), 0
    for i in range(files):
        size = int(min(10 * MiB, max(KiB, math.exp(rng.gauss(math.log(32 * KiB), 2.0)))))
        directory = os.path.join(root, f"part={i // 100:02d}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{i:05d}.bin"), "wb") as f:
            f.write(os.urandom(size))
        total += size
    os.sync()
    return total


@dataclass
class Side:
    """One way of running the CLI (embedded or remote) and its timings per case."""

    label: str
    env: dict[str, str]
    prefix: list[str] = field(default_factory=list)
    """Before the command (``taskset -c 0`` for a pinned client)."""
    server: LiveServer | None = None
    big: list[Timing] = field(default_factory=list)
    small: list[Timing] = field(default_factory=list)
    mixed: list[Timing] = field(default_factory=list)
    down: list[Timing] = field(default_factory=list)
    server_cpu: dict[str, list[float]] = field(
        default_factory=lambda: {"big": [], "small": [], "mixed": [], "down": []}
    )
    error: str = ""


class Bench:
    def __init__(self, exe: str, work: str, timeout: float, src: str, tree: str, small: str) -> None:
        self.exe, self.work, self.timeout = exe, work, timeout
        self.src, self.tree, self.small = src, tree, small
        self.mixed_tree = os.path.join(work, "mixed")
        base = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
        base["LAKECTL_CONFIG"] = os.path.join(work, "no-config.yaml")
        base["LAKECTL_COMMITTER"] = "bench"
        self.home = os.path.join(work, "lake-embedded")
        self.embedded = Side("embedded", dict(base, LAKECTL_HOME=self.home))
        self.remote = Side("remote", dict(base))
        self.pinned = Side("remote, a core each", dict(base), prefix=["taskset", "-c", "0"])

    def cli(self, side: Side, *args: str) -> Timing:
        return run([*side.prefix, self.exe, *args], self.timeout, env=side.env)

    def fresh_embedded(self) -> None:
        remove(self.home)
        self.cli(self.embedded, "repo", "create", "lakefs://bench")
        self.cli(
            self.embedded, "fs", "upload", "--no-progress", "-s", self.small, "lakefs://bench/main/warm.bin"
        )

    def attach(self, server: LiveServer, side: Side) -> None:
        side.server = server
        side.env.update(
            LAKECTL_SERVER_ENDPOINT_URL=server.url,
            LAKECTL_CREDENTIALS_ACCESS_KEY_ID=server.key_id,
            LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=server.secret,
        )
        self.cli(side, "repo", "create", "lakefs://bench")
        self.cli(side, "fs", "upload", "--no-progress", "-s", self.small, "lakefs://bench/main/warm.bin")

    def timed(self, side: Side, case: str, args: list[str], before: Callable[[], None]) -> None:
        if side.error:
            return
        before()
        cpu0 = side.server.cpu_seconds() if side.server else 0.0
        try:
            t = self.cli(side, *args)
        except StepFailed as e:
            side.error = f"{case}: {e}"
            return
        getattr(side, case).append(t)
        if side.server:
            side.server_cpu[case].append(side.server.cpu_seconds() - cpu0)

    def big(self, side: Side) -> None:
        def before() -> None:
            os.sync()
            drop_from_cache(self.src)

        self.timed(side, "big", ["fs", "upload", "--no-progress", "--source", self.src, BIG], before)

    def small_files(self, side: Side) -> None:
        args = ["fs", "upload", "-r", "--no-progress", "--source", self.tree, DATA]
        self.timed(side, "small", args, os.sync)

    def download_files(self, side: Side) -> None:
        """The small files back into a new directory (deleted after: the next round's is new too)."""
        target = os.path.join(self.work, f"down-{len(side.down)}-{side.label.split(',')[0]}")
        self.timed(side, "down", ["fs", "download", "-r", "--no-progress", DATA, target], os.sync)
        remove(target)

    def mixed_files(self, side: Side) -> None:
        args = ["fs", "upload", "-r", "--no-progress", "--source", self.mixed_tree, MIXED]
        self.timed(side, "mixed", args, os.sync)


def run_cases(bench: Bench, sides: list[Side], cases: tuple[bool, bool, bool]) -> None:
    do_big, do_small, do_mixed = cases
    for side in sides if do_big else []:
        bench.big(side)
    for side in sides if do_small else []:
        bench.small_files(side)
    for side in sides if do_small else []:
        bench.download_files(side)
    for side in sides if do_mixed else []:
        bench.mixed_files(side)


def pinned_round(
    bench: Bench, where: str, server_env: dict[str, str], cases: tuple[bool, bool, bool]
) -> None:
    """The remote uploads again, on a fresh server pinned to core 1, the client to core 0."""
    side = bench.pinned
    exe = bench.exe
    os.makedirs(where)
    with live_server(where, env_extra=server_env, command=["taskset", "-c", "1", exe]) as server:
        try:
            bench.attach(server, side)
        except StepFailed as e:
            side.error = side.error or f"set-up: {e}"
        run_cases(bench, [side], cases)
        if server.process.poll() is not None:
            side.error = side.error or f"the server died:\n{server.log_tail()}"
    side.server = None
    remove(where)


def paired_rate(embedded: list[Timing], remote: list[Timing]) -> float:
    """Median over rounds of embedded seconds / remote seconds (the remote rate as a fraction)."""
    ratios = [e.wall / r.wall for e, r in zip(embedded, remote, strict=False) if r.wall > 0]
    return statistics.median(ratios) if ratios else float("nan")


def paired_time(embedded: list[Timing], remote: list[Timing]) -> float:
    """Median over rounds of remote seconds / embedded seconds."""
    ratios = [r.wall / e.wall for e, r in zip(embedded, remote, strict=False) if e.wall > 0]
    return statistics.median(ratios) if ratios else float("nan")


def walls(runs: list[Timing]) -> str:
    return " / ".join(f"{t.wall:.2f}" for t in runs) if runs else "-"


def cpu(runs: list[Timing]) -> str:
    if not runs:
        return "-"
    return f"{statistics.median(t.user for t in runs):.2f} + {statistics.median(t.sys for t in runs):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="rounds, each side once per round per case")
    parser.add_argument("--size-mib", type=int, default=FULL_SIZE_MIB, help="the big file (default 1 GiB)")
    parser.add_argument("--files", type=int, default=FULL_FILES, help="small files (default 100k)")
    parser.add_argument("--dirs", type=int, default=100, help="directories the small files are spread over")
    parser.add_argument("--mixed", type=int, default=FULL_MIXED, help="files of mixed sizes (default 2,000)")
    parser.add_argument("--only", choices=("big", "small", "mixed"), default=None, help="run one case only")
    parser.add_argument("--timeout", type=float, default=900, help="limit per command, seconds")
    parser.add_argument(
        "--pinned",
        action="store_true",
        help="also run remote with server and client on a core each (taskset)",
    )
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    exe = lakectl_binary()
    if exe is None:
        raise SystemExit("lakectl is not installed (no lakectl next to this Python or on PATH)")
    do_big, do_small = args.only in (None, "big"), args.only in (None, "small")
    do_mixed = args.only in (None, "mixed")
    print_context(f"remote vs embedded ({args.size_mib} MiB file, {args.files:,} small files)")

    with temp_dir("lakectl-bench-rve-", args.dir) as work:
        PYCACHE["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
        server_env = {"PYTHONPYCACHEPREFIX": PYCACHE["PYTHONPYCACHEPREFIX"], "PYTHONDONTWRITEBYTECODE": ""}
        src, tree = os.path.join(work, "source.bin"), os.path.join(work, "tree")
        small = os.path.join(work, "small.bin")
        with open(small, "wb") as f:
            f.write(os.urandom(4096))
        if do_big:
            start = time.perf_counter()
            make_source(src, args.size_mib * MiB)
            print(
                f"big file: {args.size_mib} MiB, 64 MiB pieces all different "
                f"({time.perf_counter() - start:.1f} s)"
            )
        if do_small:
            t_make = make_tree(tree, args.files, args.dirs)
            print(f"small files: {args.files:,} x 4 KiB in {args.dirs} dirs ({fmt_time(t_make)})")
        if do_mixed:
            total = make_mixed(os.path.join(work, "mixed"), args.mixed)
            print(f"mixed files: {args.mixed:,} of 1 KiB to 10 MiB, {total / MiB:,.0f} MiB in all")

        bench = Bench(exe, work, args.timeout, src, tree, small)
        emb, rem = bench.embedded, bench.remote
        for r in range(args.runs):
            t0 = time.perf_counter()
            round_dir = os.path.join(work, f"round-{r}")
            os.makedirs(round_dir)
            try:
                bench.fresh_embedded()
            except StepFailed as e:
                emb.error = emb.error or f"set-up: {e}"
            with live_server(round_dir, env_extra=server_env) as server:
                try:
                    bench.attach(server, rem)
                except StepFailed as e:
                    rem.error = rem.error or f"set-up: {e}"
                sides = [emb, rem] if r % 2 == 0 else [rem, emb]
                run_cases(bench, sides, (do_big, do_small, do_mixed))
                if server.process.poll() is not None:
                    rem.error = rem.error or f"the server died:\n{server.log_tail()}"
            remove(round_dir)
            if args.pinned:
                pinned_round(
                    bench, os.path.join(work, f"pinned-{r}"), server_env, (do_big, do_small, do_mixed)
                )
            line = []
            if do_big and emb.big and rem.big:
                line.append(f"big {emb.big[-1].wall:.2f} / {rem.big[-1].wall:.2f} s")
            if do_small and emb.small and rem.small:
                line.append(f"small {emb.small[-1].wall:.2f} / {rem.small[-1].wall:.2f} s")
            if do_mixed and emb.mixed and rem.mixed:
                line.append(f"mixed {emb.mixed[-1].wall:.2f} / {rem.mixed[-1].wall:.2f} s")
            order = ", ".join(s.label for s in sides)
            print(
                f"round {r + 1} ({order}): embedded / remote: {'; '.join(line) or '-'} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )

    table = Table("step", "runs (s, wall)", "median", "CPU user + sys (median, s)", "server CPU (median, s)")
    for case, label, on in (
        ("big", f"fs upload of {args.size_mib} MiB", do_big),
        ("small", f"fs upload -r of {args.files:,} files", do_small),
        ("mixed", f"fs upload -r of {args.mixed:,} mixed files", do_mixed),
        ("down", f"fs download -r of {args.files:,} files", do_small),
    ):
        if not on:
            continue
        for side in (emb, rem, bench.pinned) if args.pinned else (emb, rem):
            runs = getattr(side, case)
            med = f"{statistics.median(t.wall for t in runs):.2f}" if runs else "-"
            scpu = side.server_cpu[case]
            srv = f"{statistics.median(scpu):.2f}" if scpu else ""
            table.add(f"{side.label}: {label}", walls(runs), med, cpu(runs), srv)
    table.print(f"{args.runs} rounds: seconds (absolute figures are not judged)")

    judge = Table("ratio (median of the rounds' ratios)", "measured", "target", "result")
    if do_big:
        rate = paired_rate(emb.big, rem.big)
        judged = args.size_mib >= FULL_SIZE_MIB and rate == rate
        mb = args.size_mib * MiB / 1e6
        rates = ""
        if emb.big and rem.big:
            e_rate = mb / statistics.median(t.wall for t in emb.big)
            r_rate = mb / statistics.median(t.wall for t in rem.big)
            rates = f" ({r_rate:,.0f} vs {e_rate:,.0f} MB/s)"
        judge.add(
            f"{args.size_mib} MiB upload: remote rate / embedded rate",
            f"{rate:.2f}{rates}",
            f">= {TARGET_BIG_RATE}",
            verdict(rate >= TARGET_BIG_RATE if judged else None),
        )
    if do_small:
        ratio = paired_time(emb.small, rem.small)
        judged = args.files >= FULL_FILES and ratio == ratio
        judge.add(
            f"{args.files:,} small files: remote time / embedded time",
            f"{ratio:.2f}",
            f"<= {TARGET_SMALL_TIME}",
            verdict(ratio <= TARGET_SMALL_TIME if judged else None),
        )
    if do_small:
        judge.add(
            f"{args.files:,} small files downloaded: remote time / embedded time",
            f"{paired_time(emb.down, rem.down):.2f}",
            "(none)",
            verdict(None),
        )
    if do_mixed:
        ratio = paired_time(emb.mixed, rem.mixed)
        judged = args.mixed >= FULL_MIXED and ratio == ratio
        judge.add(
            f"{args.mixed:,} files of mixed sizes: remote time / embedded time",
            f"{ratio:.2f}",
            f"<= {TARGET_MIXED_TIME}",
            verdict(ratio <= TARGET_MIXED_TIME if judged else None),
        )
    full = (not do_big or args.size_mib >= FULL_SIZE_MIB) and (not do_small or args.files >= FULL_FILES)
    full = full and (not do_mixed or args.mixed >= FULL_MIXED)
    judge.print("Judged" + ("" if full else " (scaled down: targets apply to 1 GiB and 100k files)"))
    print_context("at the end")
    for side in (emb, rem, bench.pinned):
        if side.error:
            print(f"{side.label}: {side.error}")


if __name__ == "__main__":
    main()
