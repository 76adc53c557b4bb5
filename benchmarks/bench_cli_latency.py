"""Start-up latency of the ``lakectl`` CLI, measured as wall time of whole processes.

* ``lakectl --help``: median of ``--runs`` runs, target <= 150 ms;
* ``lakectl log lakefs://bench/main --amount 20`` on a repository with ``--commits`` commits
  (built through the library: one small staged row per commit), target <= 300 ms.

One untimed run of each command warms the page cache and Python's bytecode cache first.
``python -c pass`` and ``python -c 'import lakectl.cli.app'`` are printed for reference.

Judged figures run with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the temp dir, so nothing is
written into the source tree), as an installed lakectl would. If the inherited environment sets
``PYTHONDONTWRITEBYTECODE`` (an editable install then recompiles lakectl's modules on every
run), the figures in that environment are printed too, for information. The slowest imports
of ``lakectl log`` (``python -X importtime``) are listed to show where start-up goes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _benchutil import (
    Table,
    fmt_time,
    lakectl_binary,
    median,
    print_context,
    synthetic_row,
    temp_dir,
    timed,
    verdict,
)

from lakectl.core import porcelain

REPO = "bench"
TARGET_HELP = 0.150
TARGET_LOG = 0.300
TIMEOUT = 60


def wall(cmd: list[str], env: dict[str, str], runs: int) -> tuple[float, str]:
    """Median wall time of ``runs`` runs after one warm-up, and the error of a failing run."""
    samples: list[float] = []
    for i in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, timeout=TIMEOUT, check=False)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            return float("nan"), (proc.stderr or proc.stdout).decode(errors="replace").strip()[-400:]
        if i:
            samples.append(elapsed)
    return median(samples), ""


def slowest_imports(cmd: list[str], env: dict[str, str], top: int) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the ``top`` slowest top-level-ish imports of ``cmd``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd], env=env, capture_output=True, timeout=TIMEOUT, check=False
    )
    found: list[tuple[int, str]] = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit():
            found.append((int(cumulative), name))
    found.sort(reverse=True)
    return found[:top]


def build_history(home: str, commits: int) -> float:
    lake = porcelain.open_lake(home)
    try:
        porcelain.create_repo(lake, REPO)

        def build() -> None:
            for i in range(commits - 1):  # plus the repository's first commit
                path = f"tables/t0/date=2026-01-{i % 28 + 1:02d}/part-{i:06d}.parquet"
                porcelain.stage_rows(lake, REPO, "main", [(path, synthetic_row(path))])
                porcelain.commit(lake, REPO, "main", f"commit {i}", committer="bench")

        t, _ = timed(build)
        return t
    finally:
        lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--amount", type=int, default=20)
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("CLI latency")

    exe = lakectl_binary()
    if exe is None:
        print("lakectl is not installed (no lakectl next to this Python or on PATH): nothing to measure")
        return
    inherited_no_pyc = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    log_args = ["log", f"lakefs://{REPO}/main", "--amount", str(args.amount)]
    with temp_dir("lakectl-bench-cli-", args.dir) as work:
        home = os.path.join(work, "lake")
        base = dict(os.environ, LAKECTL_HOME=home, NO_COLOR="1", TERM="dumb", COLUMNS="120")
        cached = dict(base, PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"))
        cached.pop("PYTHONDONTWRITEBYTECODE", None)
        envs = [("bytecode cache", cached)] + ([("inherited env", base)] if inherited_no_pyc else [])
        t_build = build_history(home, args.commits)
        print(f"built a repository of {args.commits} commits through the library in {fmt_time(t_build)}")
        out = subprocess.run(
            [exe, *log_args, "--json"], env=cached, capture_output=True, timeout=TIMEOUT, check=False
        )
        try:
            shown = f"{len(json.loads(out.stdout))} commits"
        except ValueError:
            shown = f"{len(out.stdout.splitlines())} lines (exit {out.returncode}, output not JSON)"
        print(f"check: `lakectl {' '.join(log_args)} --json` returned {shown}")

        table = Table("command", "environment", f"median of {args.runs}", "target", "result")
        errors: list[str] = []
        for label, env in envs:
            judged = env is cached
            t_pass, _ = wall([sys.executable, "-c", "pass"], env, args.runs)
            t_import, err_import = wall([sys.executable, "-c", "import lakectl.cli.app"], env, args.runs)
            t_help, err_help = wall([exe, "--help"], env, args.runs)
            t_log, err_log = wall([exe, *log_args], env, args.runs)
            table.add("python -c pass (reference)", label, fmt_time(t_pass), "-", "info")
            table.add("python -c 'import lakectl.cli.app'", label, fmt_time(t_import), "-", "info")
            for name, t, target in (
                ("lakectl --help", t_help, TARGET_HELP),
                (f"lakectl log --amount {args.amount} ({args.commits} commits)", t_log, TARGET_LOG),
            ):
                table.add(
                    name, label, fmt_time(t), fmt_time(target), verdict(t <= target) if judged else "info"
                )
            errors += [
                f"{w} ({label}) failed: {e}"
                for w, e in (("import", err_import), ("--help", err_help), ("log", err_log))
                if e
            ]
        imports = slowest_imports([exe, *log_args], cached, 10)

    note = " (PYTHONDONTWRITEBYTECODE is set in the inherited env)" if inherited_no_pyc else ""
    table.print(f"CLI latency, wall time of whole processes{note}")
    print("\nslowest imports of `lakectl log` (cumulative ms, with bytecode cache):")
    for us, name in imports:
        print(f"  {us / 1000:7.1f}  {name}")
    for e in errors:
        print(f"\n{e}")


if __name__ == "__main__":
    main()
