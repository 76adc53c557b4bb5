"""Many small files: ``lakectl fs upload -r`` + ``lakectl commit`` against git and dvc.

A tree of ``--files`` files of 4 KiB (distinct random content) in ``--dirs`` directories is
generated once, flushed to disk, then added and committed by each tool in turn, through its
real command line (subprocesses, output discarded, one bytecode cache for all in the temp dir):

* lakectl: ``lakectl fs upload -r --source TREE lakefs://bench/main/data/`` then
  ``lakectl commit lakefs://bench/main -m ...`` on an embedded lake (target <= 10 s for 100k);
* git: ``git add -A && git commit`` (separate git dir, ``--work-tree`` on the tree; git's
  defaults except ``gc.auto=0``, so that a background ``gc --auto`` does not run into the next
  measurement);
* dvc: ``dvc add data && git add data.dvc .gitignore && git commit`` in a fresh git + dvc
  project (dvc's defaults: cache in ``.dvc/cache``, link type reflink-else-copy).

Peers are installed into this benchmark's own environment, ``benchmarks/.peers-venv``
(``pip install dvc`` on first run). A peer that cannot be installed or run is reported and
skipped. Every command has a time limit (``--timeout``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from _benchutil import Table, fmt_time, lakectl_binary, print_context, temp_dir, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_VENV = os.path.join(HERE, ".peers-venv")
TARGET_100K = 10.0
FILE_SIZE = 4096
GIT_CFG = [
    "-c", "user.name=bench",
    "-c", "user.email=bench@example.invalid",
    "-c", "commit.gpgsign=false",
    "-c", "gc.auto=0",
]  # fmt: skip


@dataclass
class Result:
    tool: str
    phases: list[tuple[str, float]] = field(default_factory=list)
    error: str = ""

    @property
    def total(self) -> float:
        return sum(t for _, t in self.phases) if not self.error else float("nan")


class StepFailed(Exception):
    pass


PYCACHE: dict[str, str] = {}
"""Set by main: Python's bytecode cache for every subprocess (see :func:`child_env`)."""


def child_env(env: dict[str, str] | None) -> dict[str, str]:
    """The environment of a subprocess, with a bytecode cache in the temp dir: an editable
    install under ``PYTHONDONTWRITEBYTECODE`` would otherwise recompile lakectl on every call."""
    out = dict(env if env is not None else os.environ, **PYCACHE)
    if PYCACHE:
        out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def run(cmd: list[str], timeout: float, cwd: str | None = None, env: dict[str, str] | None = None) -> float:
    """Run ``cmd`` with output discarded (stderr kept for errors); its wall time in seconds."""
    env = child_env(env)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise StepFailed(f"`{' '.join(cmd[:3])} ...` did not finish within {timeout:g} s") from e
    except OSError as e:
        raise StepFailed(f"cannot run {cmd[0]}: {e}") from e
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()[-600:]
        raise StepFailed(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}: {err}")
    return elapsed


def make_tree(root: str, files: int, dirs: int) -> float:
    start = time.perf_counter()
    per_dir = -(-files // dirs)
    made = 0
    for d in range(dirs):
        directory = os.path.join(root, f"dir{d:03d}")
        os.makedirs(directory)
        for i in range(min(per_dir, files - made)):
            with open(os.path.join(directory, f"file{i:05d}.bin"), "wb") as f:
                f.write(os.urandom(FILE_SIZE))
        made += min(per_dir, files - made)
    os.sync()  # the tree's own writeback must not be charged to whoever syncs first
    return time.perf_counter() - start


def bench_lakectl(tree: str, work: str, timeout: float) -> Result:
    res = Result("lakectl")
    exe = lakectl_binary()
    if exe is None:
        res.error = "lakectl is not installed (no lakectl next to this Python or on PATH)"
        return res
    env = dict(os.environ, LAKECTL_HOME=os.path.join(work, "lake"), LAKECTL_COMMITTER="bench")
    try:
        run([exe, "repo", "create", "lakefs://bench"], timeout, env=env)
        os.sync()
        res.phases.append(
            (
                "fs upload -r",
                run(
                    [exe, "fs", "upload", "-r", "--source", tree, "lakefs://bench/main/data/"],
                    timeout,
                    env=env,
                ),
            )
        )
        res.phases.append(
            ("commit", run([exe, "commit", "lakefs://bench/main", "-m", "small files"], timeout, env=env))
        )
    except StepFailed as e:
        res.error = str(e)
    return res


def bench_git(tree: str, work: str, timeout: float) -> Result:
    res = Result("git")
    git = shutil.which("git")
    if git is None:
        res.error = "git is not on PATH"
        return res
    gitproj = os.path.join(work, "git-peer")
    base = [git, *GIT_CFG, "-C", gitproj, f"--work-tree={tree}"]
    try:
        run([git, "init", "-q", gitproj], timeout)
        os.sync()
        res.phases.append(("add -A", run([*base, "add", "-A"], timeout)))
        res.phases.append(("commit", run([*base, "commit", "-q", "-m", "small files"], timeout)))
    except StepFailed as e:
        res.error = str(e)
    return res


def ensure_dvc(timeout: float) -> tuple[str | None, str]:
    """The dvc executable of the peers venv (created and filled on first use), or why not."""
    dvc = os.path.join(PEERS_VENV, "bin", "dvc")
    if os.access(dvc, os.X_OK):
        return dvc, ""
    print(f"installing dvc into {PEERS_VENV} (first run only) ...", flush=True)
    try:
        if not os.path.exists(os.path.join(PEERS_VENV, "bin", "python")):
            run([sys.executable, "-m", "venv", PEERS_VENV], timeout)
        pip = os.path.join(PEERS_VENV, "bin", "pip")
        run([pip, "install", "-q", "--disable-pip-version-check", "dvc>=3,<4"], timeout)
    except StepFailed as e:
        return None, f"could not install dvc into {PEERS_VENV}: {e}"
    if not os.access(dvc, os.X_OK):
        return None, f"pip install dvc did not provide {dvc}"
    return dvc, ""


def bench_dvc(tree: str, work: str, timeout: float) -> Result:
    """Moves ``tree`` into the dvc project (a rename: the same files, still in the page cache)."""
    res = Result("dvc")
    git = shutil.which("git")
    if git is None:
        res.error = "git is not on PATH (dvc needs it here)"
        return res
    dvc, why = ensure_dvc(max(timeout, 900))
    if dvc is None:
        res.error = why
        return res
    proj = os.path.join(work, "dvc-peer")
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    g = [git, *GIT_CFG]
    try:
        run([git, "init", "-q", proj], timeout)
        run([dvc, "init", "-q"], timeout, cwd=proj, env=env)
        run([dvc, "config", "core.analytics", "false"], timeout, cwd=proj, env=env)
        run([*g, "commit", "-q", "-m", "dvc init"], timeout, cwd=proj)
        os.rename(tree, os.path.join(proj, "data"))
        os.sync()
        res.phases.append(("dvc add", run([dvc, "add", "-q", "data"], timeout, cwd=proj, env=env)))
        t = run([*g, "add", "data.dvc", ".gitignore"], timeout, cwd=proj)
        t += run([*g, "commit", "-q", "-m", "small files"], timeout, cwd=proj)
        res.phases.append(("git add + commit", t))
    except StepFailed as e:
        res.error = str(e)
    finally:
        if os.path.isdir(os.path.join(proj, "data")) and not os.path.exists(tree):
            os.rename(os.path.join(proj, "data"), tree)
    return res


def breakdown(tree: str, work: str) -> list[tuple[str, float]]:
    """Where an upload of the tree goes, measured in this process through the library:
    the file-system floor (read + md5 + one new block file per object, single thread), then
    ``porcelain.upload_files`` split into its worker pool, its ``sync`` and its staging write,
    then the commit. The CLI adds its walk, per-file progress and output on top."""
    import hashlib

    from lakectl.core import porcelain

    files = sorted(
        (os.path.relpath(os.path.join(d, n), tree), os.path.join(d, n))
        for d, _, names in os.walk(tree)
        for n in names
    )
    out: list[tuple[str, float]] = []
    floor_dir = os.path.join(work, "floor")
    os.sync()
    start = time.perf_counter()
    for _, local in files:
        with open(local, "rb") as f:
            data = f.read()
        md5 = hashlib.md5(data).hexdigest()
        directory = os.path.join(floor_dir, md5[:3])
        tmp = os.path.join(directory, f".{md5}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(fd, data)
        os.close(fd)
        os.replace(tmp, os.path.join(directory, md5))
    out.append(("floor: read + md5 + create/rename a file per object, 1 thread", time.perf_counter() - start))
    shutil.rmtree(floor_dir, ignore_errors=True)

    lake = porcelain.open_lake(os.path.join(work, "lake-breakdown"))
    try:
        porcelain.create_repo(lake, "bench")
        spent: dict[str, float] = {}

        def timing(name: str, fn: Callable[..., None]) -> Callable[..., None]:
            def wrapper(*a: object) -> None:
                t = time.perf_counter()
                fn(*a)
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

            return wrapper

        # Instance attributes shadow the methods for this lake only (a benchmark-local probe).
        lake.blocks.sync = timing("sync", lake.blocks.sync)  # type: ignore[method-assign]
        lake.staging.write = timing("stage", lake.staging.write)  # type: ignore[method-assign]
        os.sync()
        start = time.perf_counter()
        porcelain.upload_files(lake, "bench", "main", [("data/" + p, local) for p, local in files])
        total = time.perf_counter() - start
        pool = total - spent.get("sync", 0.0) - spent.get("stage", 0.0)
        out.append(("porcelain.upload_files: thread pool (read, md5, put per file)", pool))
        out.append(("porcelain.upload_files: blocks.sync()", spent.get("sync", 0.0)))
        out.append(("porcelain.upload_files: staging write", spent.get("stage", 0.0)))
        t = time.perf_counter()
        porcelain.commit(lake, "bench", "main", "small files", committer="bench")
        out.append(("porcelain.commit", time.perf_counter() - t))
    finally:
        lake.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--dirs", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600, help="limit per command, seconds")
    parser.add_argument("--no-dvc", action="store_true", help="skip dvc (and its installation)")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time lakectl's phases in-process (library)"
    )
    args = parser.parse_args()
    print_context("many small files")

    judged = args.files >= 100_000
    results: list[Result] = []
    lake_phases: list[tuple[str, float]] = []
    with temp_dir("lakectl-bench-small-", args.dir) as work:
        tree = os.path.join(work, "tree")
        PYCACHE["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
        t_make = make_tree(tree, args.files, args.dirs)
        mb = args.files * FILE_SIZE / 1e6
        print(
            f"generated {args.files:,} files of {FILE_SIZE} B ({mb:.0f} MB) in {args.dirs} dirs: "
            f"{fmt_time(t_make)}"
        )
        for bench in (bench_lakectl, bench_git) + (() if args.no_dvc else (bench_dvc,)):
            r = bench(tree, work, args.timeout)
            results.append(r)
            state = r.error or ", ".join(f"{p} {fmt_time(t)}" for p, t in r.phases)
            print(f"  {r.tool}: {state}", flush=True)
            if args.breakdown and r.tool == "lakectl":
                lake_phases = breakdown(tree, work)

    table = Table("tool", "phases", "total", "files/s", "target", "result")
    for r in results:
        phases = " + ".join(f"{p} {fmt_time(t)}" for p, t in r.phases) if not r.error else "failed"
        rate = f"{args.files / r.total:,.0f}" if not r.error and r.total > 0 else "-"
        if r.tool == "lakectl":
            if judged:
                table.add(
                    r.tool,
                    phases,
                    fmt_time(r.total),
                    rate,
                    f"<= {TARGET_100K:g} s",
                    verdict(r.total <= TARGET_100K),
                )
            else:
                table.add(r.tool, phases, fmt_time(r.total), rate, f"<= {TARGET_100K:g} s for 100k", "n/a")
        else:
            table.add(r.tool, phases, fmt_time(r.total), rate, "(peer)", "info")
    scaled = "" if judged else " (scaled down: the target applies to 100k files)"
    table.print(f"{args.files:,} files of 4 KiB in {args.dirs} directories: add + commit, wall time{scaled}")
    if lake_phases:
        detail = Table("lakectl phase (in-process, library)", "time")
        for name, t in lake_phases:
            detail.add(name, fmt_time(t))
        detail.print("Breakdown (--breakdown): where lakectl's time goes")
    for r in results:
        if r.error:
            print(f"\n{r.tool}: {r.error}")


if __name__ == "__main__":
    main()
