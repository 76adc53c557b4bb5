"""Many small files, then small changes spread over them: lakectl against git and dvc, and the
floor of the machine, in one run.

A tree of ``--files`` files of 4 KiB (distinct random content) in ``--dirs`` directories is
generated once, flushed to disk, then added and committed by each tool in turn, through its
real command line (subprocesses, output discarded, one bytecode cache for all in the temp dir).

*W1, the tree added and committed:*

* lakectl: ``lakectl fs upload -r --source TREE lakefs://bench/main/data/`` then
  ``lakectl commit lakefs://bench/main -m ...`` on an embedded lake;
* git: ``git add -A && git commit`` (separate git dir, ``--work-tree`` on the tree; git's
  defaults except ``gc.auto=0``, so that a background ``gc --auto`` does not run into the next
  measurement);
* dvc: ``dvc add data && git add data.dvc .gitignore && git commit`` in a fresh git + dvc
  project (dvc's defaults: cache in ``.dvc/cache``, link type reflink-else-copy);
* oxen: its Python API, one process per step as a script would run it:
  ``oxen.Repo(PROJ).add("data")`` then ``oxen.Repo(PROJ).commit(...)`` in a fresh Oxen
  repository (``Repo(PROJ).init()`` and the committer's configuration not timed; Oxen's
  defaults: every file hashed, new contents copied into ``.oxen/versions``);
* the floor: ``find TREE -type f -print0 | xargs -0 md5sum`` (the walk and the md5 of every
  file, which any tool that records content must do).

*W2, 100 files rewritten and 100 added, one of each per directory (the edits made once, the same
for every tool), then committed:* lakectl as a user with a working copy does it, ``lakectl local
commit TREE`` (the tree linked to ``data/`` with ``lakectl local init`` after W1, and a first
``local commit`` with nothing to commit that records the files it verified: not timed, a user
does it once);
git ``add -A && commit``; dvc ``dvc add data && git add && git commit``; oxen ``add("data")``
and ``commit``, two processes, as in W1.

Judged, as ratios to git in the same run: W1 <= 0.2 x git, W2 <= 0.5 x git (absolute seconds
are printed, never judged: the machine is shared). DVC's and Oxen's ratios to git are shown
beside, not judged.

Peers are installed into the benchmarks' own environment, ``benchmarks/.peers-venv``
(``pip install dvc`` and ``pip install oxenai`` on first use: ``_peers.py``). A peer that
cannot be installed or run is reported and skipped. Every command has a time limit (``--timeout``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from _benchutil import Table, fmt_time, lakectl_binary, print_context, temp_dir, verdict
from _peers import ensure_dvc, ensure_oxen, oxen_cmd, oxen_env

TARGET_W1 = 0.2
"""W1: lakectl's total over git's, at most."""
TARGET_W2 = 0.5
"""W2: lakectl's total over git's, at most."""
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


class Peer:
    """A tool's W1 and W2 on the same tree, through its command line; a phase that fails
    records why, and the tool's later phases are skipped."""

    name = ""

    def __init__(self, tree: str, work: str, timeout: float) -> None:
        self.tree, self.work, self.timeout = tree, work, timeout
        self.results = {"W1": Result(self.name), "W2": Result(self.name)}

    def step(self, workload: str, phase: str, cmd: list[str], **kw: object) -> None:
        res = self.results[workload]
        if res.error:
            return
        try:
            res.phases.append((phase, run(cmd, self.timeout, **kw)))  # type: ignore[arg-type]
        except StepFailed as e:
            res.error = str(e)

    def failed(self, why: str) -> None:
        for res in self.results.values():
            res.error = res.error or why

    def w1(self) -> None: ...

    def after_w1(self) -> None:
        """Set-up for W2 that a user does once, not timed."""

    def w2(self) -> None: ...


class Lakectl(Peer):
    name = "lakectl"

    def __init__(self, tree: str, work: str, timeout: float) -> None:
        super().__init__(tree, work, timeout)
        self.exe = lakectl_binary()
        self.env = dict(os.environ, LAKECTL_HOME=os.path.join(work, "lake"), LAKECTL_COMMITTER="bench")
        if self.exe is None:
            self.failed("lakectl is not installed (no lakectl next to this Python or on PATH)")

    def w1(self) -> None:
        if self.exe is None:
            return
        try:
            run([self.exe, "repo", "create", "lakefs://bench"], self.timeout, env=self.env)
        except StepFailed as e:
            self.failed(str(e))
        os.sync()
        upload = [self.exe, "fs", "upload", "-r", "--source", self.tree, "lakefs://bench/main/data/"]
        self.step("W1", "fs upload -r", upload, env=self.env)
        self.step(
            "W1", "commit", [self.exe, "commit", "lakefs://bench/main", "-m", "small files"], env=self.env
        )

    def after_w1(self) -> None:
        if self.exe is None or self.results["W1"].error:
            return
        link = [self.exe, "local", "init", "lakefs://bench/main/data/", self.tree]
        first = [self.exe, "local", "commit", self.tree, "-m", "linked"]
        try:  # linked once; its first commit (nothing to commit) records the files it verified
            run(link, self.timeout, env=self.env)
            run(first, self.timeout, env=self.env)
        except StepFailed as e:
            self.results["W2"].error = str(e)

    def w2(self) -> None:
        if self.exe is None:
            return
        os.sync()
        self.step(
            "W2", "local commit", [self.exe, "local", "commit", self.tree, "-m", "changes"], env=self.env
        )


class Git(Peer):
    name = "git"

    def __init__(self, tree: str, work: str, timeout: float) -> None:
        super().__init__(tree, work, timeout)
        git = shutil.which("git")
        self.base: list[str] = []
        if git is None:
            self.failed("git is not on PATH")
            return
        self.git = git
        self.proj = os.path.join(work, "git-peer")
        self.base = [git, *GIT_CFG, "-C", self.proj, f"--work-tree={tree}"]

    def w1(self) -> None:
        if not self.base:
            return
        try:
            run([self.git, "init", "-q", self.proj], self.timeout)
        except StepFailed as e:
            self.failed(str(e))
        self.commit("W1", "small files")

    def commit(self, workload: str, message: str) -> None:
        os.sync()
        self.step(workload, "add -A", [*self.base, "add", "-A"])
        self.step(workload, "commit", [*self.base, "commit", "-q", "-m", message])

    def w2(self) -> None:
        if self.base:
            self.commit("W2", "changes")


class Dvc(Peer):
    """Moves the tree into the dvc project for its steps (a rename: the same files, still in
    the page cache) and back."""

    name = "dvc"

    def __init__(self, tree: str, work: str, timeout: float) -> None:
        super().__init__(tree, work, timeout)
        self.proj = os.path.join(work, "dvc-peer")
        self.env = dict(os.environ, DVC_NO_ANALYTICS="1")
        git = shutil.which("git")
        self.dvc: str | None = None
        if git is None:
            self.failed("git is not on PATH (dvc needs it here)")
            return
        self.g = [git, *GIT_CFG]
        self.dvc, why = ensure_dvc(max(timeout, 900))
        if self.dvc is None:
            self.failed(why)

    def w1(self) -> None:
        if self.dvc is None:
            return
        try:
            run([self.g[0], "init", "-q", self.proj], self.timeout)
            run([self.dvc, "init", "-q"], self.timeout, cwd=self.proj, env=self.env)
            run([self.dvc, "config", "core.analytics", "false"], self.timeout, cwd=self.proj, env=self.env)
            run([*self.g, "commit", "-q", "-m", "dvc init"], self.timeout, cwd=self.proj)
        except StepFailed as e:
            self.failed(str(e))
        self.commit("W1", "small files")

    def commit(self, workload: str, message: str) -> None:
        if self.results[workload].error or self.dvc is None:
            return
        inside = os.path.join(self.proj, "data")
        os.rename(self.tree, inside)
        try:
            os.sync()
            self.step(workload, "dvc add", [self.dvc, "add", "-q", "data"], cwd=self.proj, env=self.env)
            self.step(workload, "git add", [*self.g, "add", "data.dvc", ".gitignore"], cwd=self.proj)
            self.step(workload, "git commit", [*self.g, "commit", "-q", "-m", message], cwd=self.proj)
        finally:
            os.rename(inside, self.tree)

    def w2(self) -> None:
        self.commit("W2", "changes")


class Oxen(Peer):
    """Oxen through its Python API, one process per call (``_peers.OXEN_STEPS``). Like dvc, it
    gets the tree renamed into its repository for its steps and back."""

    name = "oxen"

    def __init__(self, tree: str, work: str, timeout: float) -> None:
        super().__init__(tree, work, timeout)
        self.proj = os.path.join(work, "oxen-peer")
        self.env = oxen_env(os.path.join(work, "oxen-home"))
        self.py, why = ensure_oxen(max(timeout, 900))
        if self.py is None:
            self.failed(why)

    def w1(self) -> None:
        if self.py is None:
            return
        try:  # not timed: the committer's configuration and the repository's creation
            run(oxen_cmd(self.py, "config", "bench", "bench@example.invalid"), self.timeout, env=self.env)
            os.makedirs(self.proj)
            run(oxen_cmd(self.py, "init", self.proj), self.timeout, cwd=self.proj, env=self.env)
        except StepFailed as e:
            self.failed(str(e))
        self.commit("W1", "small files")

    def commit(self, workload: str, message: str) -> None:
        if self.results[workload].error or self.py is None:
            return
        inside = os.path.join(self.proj, "data")
        os.rename(self.tree, inside)
        try:
            os.sync()
            add = oxen_cmd(self.py, "add", self.proj, "data")
            self.step(workload, "add", add, cwd=self.proj, env=self.env)
            commit = oxen_cmd(self.py, "commit", self.proj, message)
            self.step(workload, "commit", commit, cwd=self.proj, env=self.env)
        finally:
            os.rename(inside, self.tree)

    def w2(self) -> None:
        self.commit("W2", "changes")


def edit_tree(tree: str, dirs: int) -> float:
    """W2's edits: in every directory, its first file rewritten and one file added."""
    start = time.perf_counter()
    for d in range(dirs):
        directory = os.path.join(tree, f"dir{d:03d}")
        for name in ("file00000.bin", "new00000.bin"):
            with open(os.path.join(directory, name), "wb") as f:
                f.write(os.urandom(FILE_SIZE))
    os.sync()
    return time.perf_counter() - start


def floor(tree: str, timeout: float, newer: str | None = None) -> Result:
    """The walk and md5 of the files (of those changed since ``newer`` was touched, with every
    file still stat-ed), as C tools do them."""
    res = Result("floor: find | md5sum")
    test = f"-newer {shlex.quote(newer)} " if newer else ""
    cmd = f"find {shlex.quote(tree)} -type f {test}-print0 | xargs -0 -r md5sum > /dev/null"
    os.sync()
    try:
        res.phases.append(("walk + md5", run(["bash", "-c", cmd], timeout)))
    except StepFailed as e:
        res.error = str(e)
    return res


def breakdown(tree: str, work: str) -> list[tuple[str, float]]:
    """Where an upload of the tree goes, measured in this process through the library:
    the file-system floor (read + md5 + one new block file per object, single thread), then
    ``writes.upload_files`` split into its read-and-pack loop, its ``sync`` and its staging
    write, then the commit, with the cyclic collector's threshold the CLI sets. The CLI adds
    its start-up, its walk and its output on top."""
    import gc
    import hashlib

    from lakectl.cli.app import GC_YOUNG_THRESHOLD
    from lakectl.core import opening, porcelain, writes

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

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

    lake = opening.open_lake(os.path.join(work, "lake-breakdown"))
    try:
        porcelain.create_repo(lake, "bench")
        spent: dict[str, float] = {}

        def timing(name: str, fn: Callable[..., object]) -> Callable[..., object]:
            def wrapper(*a: object) -> object:
                t = time.perf_counter()
                result = fn(*a)
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
                return result

            return wrapper

        # Instance attributes shadow the methods for this lake only (a benchmark-local probe).
        lake.blocks.sync = timing("sync", lake.blocks.sync)  # type: ignore[method-assign]
        lake.staging.write_values = timing("stage", lake.staging.write_values)  # type: ignore[method-assign]
        os.sync()
        start = time.perf_counter()
        writes.upload_files(lake, "bench", "main", [("data/" + p, local) for p, local in files])
        total = time.perf_counter() - start
        pool = total - spent.get("sync", 0.0) - spent.get("stage", 0.0)
        out.append(("porcelain.upload_files: read, md5, pack (and the rows built)", pool))
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
    parser.add_argument("--no-oxen", action="store_true", help="skip oxen (and its installation)")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    parser.add_argument(
        "--breakdown", action="store_true", help="also time lakectl's W1 phases in-process (library)"
    )
    args = parser.parse_args()
    print_context("many small files, then small changes")

    judged = args.files >= 100_000
    lake_phases: list[tuple[str, float]] = []
    floors: dict[str, Result] = {}
    with temp_dir("lakectl-bench-small-", args.dir) as work:
        tree = os.path.join(work, "tree")
        PYCACHE["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
        t_make = make_tree(tree, args.files, args.dirs)
        mb = args.files * FILE_SIZE / 1e6
        print(
            f"generated {args.files:,} files of {FILE_SIZE} B ({mb:.0f} MB) in {args.dirs} dirs: "
            f"{fmt_time(t_make)}"
        )
        kinds: list[type[Peer]] = [Lakectl, Git]
        kinds += ([] if args.no_dvc else [Dvc]) + ([] if args.no_oxen else [Oxen])
        peers = [kind(tree, work, args.timeout) for kind in kinds]
        floors["W1"] = floor(tree, args.timeout)
        for peer in peers:
            peer.w1()
            peer.after_w1()
            print(f"  W1 {peer.name}: {_state(peer.results['W1'])}", flush=True)
        stamp = os.path.join(work, "before-w2")
        with open(stamp, "w"):
            pass
        time.sleep(0.01)  # the edits' mtimes after the stamp's
        edit_tree(tree, args.dirs)
        floors["W2"] = floor(tree, args.timeout, newer=stamp)
        for peer in peers:
            peer.w2()
            print(f"  W2 {peer.name}: {_state(peer.results['W2'])}", flush=True)
        if args.breakdown:
            lake_phases = breakdown(tree, work)

    n_w2 = 2 * args.dirs
    for workload, what, target in (
        ("W1", f"{args.files:,} files of 4 KiB in {args.dirs} directories: add + commit", TARGET_W1),
        ("W2", f"then {n_w2} changes, one rewritten and one new file per directory: commit", TARGET_W2),
    ):
        results = {p.name: p.results[workload] for p in peers}
        git = results.get("git")
        base = git.total if git is not None and not git.error else float("nan")
        table = Table("tool", "phases", "total", "x git", "target", "result")
        for r in [*results.values(), floors[workload]]:
            phases = " + ".join(f"{p} {fmt_time(t)}" for p, t in r.phases) if not r.error else "failed"
            ratio = f"{r.total / base:.2f}" if not r.error and base == base and base > 0 else "-"
            if r.tool == "lakectl":
                ok = None if not judged or r.error or base != base else r.total <= target * base
                table.add(r.tool, phases, fmt_time(r.total), ratio, f"<= {target:g} x git", verdict(ok))
            else:
                table.add(
                    r.tool,
                    phases,
                    fmt_time(r.total),
                    ratio,
                    "(peer)" if r is not floors[workload] else "(floor)",
                    "info",
                )
        scaled = "" if judged else " (scaled down: the targets apply to 100k files)"
        table.print(f"{workload}: {what}, wall time{scaled}")
    if lake_phases:
        detail = Table("lakectl phase (in-process, library)", "time")
        for name, t in lake_phases:
            detail.add(name, fmt_time(t))
        detail.print("Breakdown (--breakdown): where lakectl's W1 upload goes")
    for p in peers:
        for workload, r in p.results.items():
            if r.error:
                print(f"\n{p.name} {workload}: {r.error}")


def _state(r: Result) -> str:
    return r.error or ", ".join(f"{p} {fmt_time(t)}" for p, t in r.phases)


if __name__ == "__main__":
    main()
