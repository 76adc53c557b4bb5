"""Start-up latency of the ``lakectl`` CLI, measured as wall time of whole processes.

* ``lakectl --help``: median of ``--runs`` runs, target <= 150 ms;
* ``lakectl log lakefs://bench/main --amount 20`` on a repository with ``--commits`` commits
  (built through the library: one small staged row per commit), target <= 300 ms;
* the read-only commands that touch one object, each target <= 150 ms on an idle machine:
  ``fs stat`` and ``fs cat`` of a small object committed last (its row is read from its tree's
  root, page and range: zlib, no pyarrow), ``show commit`` of the head commit and
  ``branch list`` (four branches) of the same repository.

Each round runs every command once, in turn, so that the commands and their floors see the
same minutes of a noisy machine; one untimed round first warms the page cache and Python's
bytecode cache. The floors are printed beside the figures: ``python -c pass``, ``python -c
'import typer'`` (what any typer CLI pays) and ``python -c 'import lakectl.cli.app'``.

Judged figures run with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the temp dir, so nothing is
written into the source tree), as an installed lakectl would; once as the venv is, and, when
numpy is installed (the test extras bring it), once more with numpy hidden, as in a plain ``pip
install lakectl`` (a command that imported pyarrow would import numpy with it). If the inherited environment
sets ``PYTHONDONTWRITEBYTECODE`` (an editable install then recompiles lakectl's modules on
every run), the figures in that environment are printed too, for information. The slowest
imports of each command (``python -X importtime``) are listed to show where start-up goes.
"""

from __future__ import annotations

import argparse
import importlib.util
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

from lakectl.core import opening, porcelain, writes

REPO = "bench"
TARGET_HELP = 0.150
TARGET_LOG = 0.300
TARGET_READ = 0.150
"""The issue's figure for a read-only command touching one object, on an idle machine."""
OBJECT = "small.txt"
BRANCHES = ("dev", "feature-a", "feature-b")
TIMEOUT = 60


def walls(cmds: list[list[str]], env: dict[str, str], runs: int) -> list[tuple[float, str]]:
    """Median wall time of each command over ``runs`` rounds (each round runs every command
    once, in turn) after one untimed round, and the error of a failing command ("" if none)."""
    samples: list[list[float]] = [[] for _ in cmds]
    errors = [""] * len(cmds)
    for i in range(runs + 1):
        for j, cmd in enumerate(cmds):
            if errors[j]:
                continue
            start = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, timeout=TIMEOUT, check=False)
            elapsed = time.perf_counter() - start
            if proc.returncode != 0:
                errors[j] = (proc.stderr or proc.stdout).decode(errors="replace").strip()[-400:]
            elif i:
                samples[j].append(elapsed)
    return [(float("nan") if e else median(t), e) for t, e in zip(samples, errors, strict=True)]


def without_numpy(env: dict[str, str], work: str) -> dict[str, str]:
    """``env`` with numpy hidden, as in a plain ``pip install lakectl``, which has no numpy
    (the test extras bring it, with pandas). pyarrow imports numpy at start when it can, which
    costs every command that reads a range ~50-100 ms; an ImportError makes it go without."""
    hidden = os.path.join(work, "no-numpy")
    os.makedirs(os.path.join(hidden, "numpy"), exist_ok=True)
    with open(os.path.join(hidden, "numpy", "__init__.py"), "w") as f:
        f.write('raise ImportError("numpy is hidden by bench_cli_latency.py")\n')
    path = os.pathsep.join(p for p in (hidden, env.get("PYTHONPATH", "")) if p)
    return dict(env, PYTHONPATH=path)


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


def build_history(home: str, commits: int) -> tuple[float, str]:
    """The repository: ``commits`` commits, the last one adding a small object with real bytes,
    and a few more branches. Returns the time taken and the head commit's id."""
    lake = opening.open_lake(home)
    try:
        porcelain.create_repo(lake, REPO)

        def build() -> str:
            for i in range(commits - 2):  # plus the repository's first commit and the last
                path = f"tables/t0/date=2026-01-{i % 28 + 1:02d}/part-{i:06d}.parquet"
                writes.stage_rows(lake, REPO, "main", [(path, synthetic_row(path))])
                porcelain.commit(lake, REPO, "main", f"commit {i}", committer="bench")
            writes.upload(lake, REPO, "main", OBJECT, b"a small object\n")
            head = porcelain.commit(lake, REPO, "main", "a small object", committer="bench")
            for name in BRANCHES:
                porcelain.create_branch(lake, REPO, name, "main")
            return head.id

        t, head = timed(build)
        return t, head
    finally:
        lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--amount", type=int, default=20)
    parser.add_argument("--top", type=int, default=6, help="slowest imports listed per command")
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
        # The embedded lake, whatever this machine's ~/.lakectl.yaml says.
        base["LAKECTL_CONFIG"] = os.path.join(work, "no-config.yaml")
        for name in ("LAKECTL_SERVER_ENDPOINT_URL", "FORCE_COLOR", "TTY_COMPATIBLE"):
            base.pop(name, None)
        cached = dict(base, PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"))
        cached.pop("PYTHONDONTWRITEBYTECODE", None)
        envs = [("bytecode cache", cached)]
        if importlib.util.find_spec("numpy") is not None:
            envs.append(("bytecode cache, no numpy", without_numpy(cached, work)))
        envs += [("inherited env", base)] if inherited_no_pyc else []
        t_build, head = build_history(home, args.commits)
        print(
            f"built a repository of {args.commits} commits, {OBJECT} in the last, and "
            f"{len(BRANCHES) + 1} branches, through the library in {fmt_time(t_build)}"
        )
        out = subprocess.run(
            [exe, *log_args, "--json"], env=cached, capture_output=True, timeout=TIMEOUT, check=False
        )
        try:
            shown = f"{len(json.loads(out.stdout))} commits"
        except ValueError:
            shown = f"{len(out.stdout.splitlines())} lines (exit {out.returncode}, output not JSON)"
        print(f"check: `lakectl {' '.join(log_args)} --json` returned {shown}")

        floors = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("python -c 'import typer'", [sys.executable, "-c", "import typer"]),
            ("python -c 'import lakectl.cli.app'", [sys.executable, "-c", "import lakectl.cli.app"]),
        ]
        judged = [
            ("lakectl --help", [exe, "--help"], TARGET_HELP),
            (f"lakectl log --amount {args.amount} ({args.commits} commits)", [exe, *log_args], TARGET_LOG),
            (
                f"lakectl fs stat lakefs://{REPO}/main/{OBJECT}",
                [exe, "fs", "stat", f"lakefs://{REPO}/main/{OBJECT}"],
                TARGET_READ,
            ),
            (
                f"lakectl fs cat lakefs://{REPO}/main/{OBJECT}",
                [exe, "fs", "cat", f"lakefs://{REPO}/main/{OBJECT}"],
                TARGET_READ,
            ),
            (
                f"lakectl show commit lakefs://{REPO}/<head>",
                [exe, "show", "commit", f"lakefs://{REPO}/{head}"],
                TARGET_READ,
            ),
            (
                f"lakectl branch list lakefs://{REPO}",
                [exe, "branch", "list", f"lakefs://{REPO}"],
                TARGET_READ,
            ),
        ]
        table = Table("command", "environment", f"median of {args.runs}", "target", "result")
        errors: list[str] = []
        for label, env in envs:
            figures = walls([cmd for _, cmd in floors] + [cmd for _, cmd, _ in judged], env, args.runs)
            for (name, _), (t, err) in zip(floors, figures, strict=False):
                table.add(f"{name} (floor)", label, fmt_time(t), "-", "info")
                errors += [f"{name} ({label}) failed: {err}"] if err else []
            for (name, _, target), (t, err) in zip(judged, figures[len(floors) :], strict=True):
                result = verdict(t <= target) if label.startswith("bytecode cache") and not err else "info"
                table.add(name, label, fmt_time(t), fmt_time(target), result)
                errors += [f"{name} ({label}) failed: {err}"] if err else []
        imports = [(name, slowest_imports(cmd, cached, args.top)) for name, cmd, _ in judged[1:]]

    note = " (PYTHONDONTWRITEBYTECODE is set in the inherited env)" if inherited_no_pyc else ""
    table.print(f"CLI latency, wall time of whole processes{note}")
    for name, found in imports:
        print(f"\nslowest imports of `{name}` (cumulative ms, with bytecode cache):")
        for us, module in found:
            print(f"  {us / 1000:7.1f}  {module}")
    for e in errors:
        print(f"\n{e}")


if __name__ == "__main__":
    main()
