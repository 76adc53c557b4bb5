"""Working copies: ``lakectl local`` status, commit and clone against git (and dvc, oxen if installed).

A tree of ``--files`` files of 4 KiB (random content) in directories of 1,000 is generated and
committed to an embedded lake (``fs upload -r`` + ``commit``, not timed). Then, each through the
real command line (subprocesses, one bytecode cache for all):

* clone: ``lakectl local clone`` of the prefix, against ``lakectl fs download -r`` of the same
  prefix with the same ``--parallelism``: clone's rate / download's rate (target >= 0.8);
* status with nothing changed: ``lakectl local status`` (median of 5, after a first one), against
  ``git status --porcelain`` on the same tree committed to git (target <= 0.3 s at 100k);
* commit of 100 changed + 100 new files: ``lakectl local commit -m``, against
  ``git add -A && git commit`` of the same edit (target <= 0.5 s at 100k), each after an
  ``os.sync()`` so that neither waits for the other's (or the set-up's) writeback.

Then both again with ``lakectl local monitor`` watching the directory: status with nothing
changed, and a commit of a second edit of the same files (git commits the same second edit).

``--lakectl`` times another install than this venv's editable one, e.g. the plain
``pip install .`` that ``make smoke`` leaves in ``.venv-smoke``: what users run.

dvc and oxen run only when already on PATH (nothing is installed); absent, they are reported so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from _benchutil import Table, fmt_time, lakectl_binary, print_context, temp_dir, verdict

FILE_SIZE = 4096
PER_DIR = 1000
EDITS = 100
GIT_CFG = [
    "-c", "user.name=bench",
    "-c", "user.email=bench@example.invalid",
    "-c", "commit.gpgsign=false",
    "-c", "gc.auto=0",
]  # fmt: skip
ENV: dict[str, str] = {}


def run(cmd: list[str], cwd: str | None = None, timeout: float = 3600) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}: {proc.stderr.decode()[-600:]}")
    return elapsed


def make_tree(root: str, files: int) -> None:
    for n in range(files):
        directory = os.path.join(root, f"dir{n // PER_DIR:03d}")
        if n % PER_DIR == 0:
            os.makedirs(directory)
        with open(os.path.join(directory, f"file{n % PER_DIR:05d}.bin"), "wb") as f:
            f.write(os.urandom(FILE_SIZE))
    os.sync()


def edit(root: str) -> None:
    """Rewrite ``EDITS`` files (same size, new bytes) and add ``EDITS`` new ones."""
    for n in range(EDITS):
        with open(os.path.join(root, "dir000", f"file{n:05d}.bin"), "wb") as f:
            f.write(os.urandom(FILE_SIZE))
        os.makedirs(os.path.join(root, "new"), exist_ok=True)
        with open(os.path.join(root, "new", f"added{n:05d}.bin"), "wb") as f:
            f.write(os.urandom(FILE_SIZE))


def median_of(cmd: list[str], cwd: str | None = None, runs: int = 5) -> float:
    run(cmd, cwd)  # warm: the first run may refresh an index (git's and ours)
    return statistics.median(run(cmd, cwd) for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--parallelism", type=int, default=4, help="clone's and download's -p")
    ap.add_argument("--dir", default=None, help="where the temporary directory goes")
    ap.add_argument(
        "--lakectl",
        default=None,
        help="the lakectl to time (default: this venv's); e.g. .venv-smoke/bin/lakectl, the plain "
        "`pip install .` that `make smoke` builds, as users install it (no numpy for pyarrow to import)",
    )
    args = ap.parse_args()
    exe = args.lakectl or lakectl_binary()
    if exe is None:
        raise SystemExit("lakectl is not installed")
    print_context(f"bench_local: {args.files} files of 4 KiB, {exe}")
    scale = args.files / 100_000
    rows = Table("figure", "lakectl", "git", "dvc", "oxen", "target", "result")
    with temp_dir("lakectl-bench-local-", args.dir) as work:
        ENV.update(os.environ, LAKECTL_HOME=os.path.join(work, "lake"), LAKECTL_COMMITTER="bench")
        ENV["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV.pop("LAKECTL_SERVER_ENDPOINT_URL", None)
        ENV["LAKECTL_CONFIG"] = os.path.join(work, "none.yaml")
        tree = os.path.join(work, "tree")
        make_tree(tree, args.files)
        run([exe, "repo", "create", "lakefs://bench"])
        run([exe, "fs", "upload", "-r", "-q", "--source", tree, "lakefs://bench/main/data/"])
        run([exe, "commit", "lakefs://bench/main", "-m", "tree"])
        os.sync()
        p = str(args.parallelism)
        t_dl = run(
            [
                exe,
                "fs",
                "download",
                "-r",
                "-q",
                "-p",
                p,
                "lakefs://bench/main/data/",
                os.path.join(work, "dl"),
            ]
        )
        shutil.rmtree(os.path.join(work, "dl"))
        os.sync()
        wc = os.path.join(work, "wc")
        t_clone = run([exe, "local", "clone", "--no-progress", "-p", p, "lakefs://bench/main/data/", wc])
        ratio = t_dl / t_clone
        print(f"fs download -r: {fmt_time(t_dl)}, local clone: {fmt_time(t_clone)}", flush=True)
        rows.add(
            "clone rate / fs download -r rate",
            f"{ratio:.2f} ({fmt_time(t_clone)} vs {fmt_time(t_dl)})",
            "n/a", "n/a", "n/a", ">= 0.80", verdict(ratio >= 0.8),
        )  # fmt: skip
        # git over the same tree, committed once (not timed).
        gitdir = os.path.join(work, "git")
        shutil.copytree(tree, gitdir)
        run(["git", *GIT_CFG, "init", "-q"], gitdir)
        run(["git", *GIT_CFG, "add", "-A"], gitdir)
        run(["git", *GIT_CFG, "commit", "-q", "-m", "tree"], gitdir)
        g_status = median_of(["git", "status", "--porcelain"], gitdir)
        judged = scale >= 1
        status_and_commit(rows, exe, wc, gitdir, g_status, "", "edit", judged)
        after = subprocess.run(
            [exe, "local", "status", wc, "--json"], env=ENV, capture_output=True, check=True
        )
        if b'"changes": []' not in after.stdout:
            print("warning: status after commit is not clean", file=sys.stderr)

        # The same two figures with the monitor watching the directory (inotify: the scans
        # stat only what changed); git once more on the same second edit, side by side.
        run([exe, "local", "monitor", "start", wc])
        try:
            run([exe, "local", "status", wc])  # the first monitored scan walks, and takes a token
            status_and_commit(rows, exe, wc, gitdir, g_status, ", monitored", "edit again", judged)
        finally:
            run([exe, "local", "monitor", "stop", wc])
    rows.print(f"lakectl local, {args.files} files of 4 KiB")


def status_and_commit(
    rows: Table, exe: str, wc: str, gitdir: str, g_status: float, label: str, message: str, judged: bool
) -> None:
    """The two judged rows: status with nothing changed (median), then a commit of
    :func:`edit` in both the working copy and git's tree, each after an ``os.sync()`` so that
    neither waits for the other's (or the set-up's) writeback."""
    os.sync()
    t_status = median_of([exe, "local", "status", wc])
    rows.add(
        f"status, nothing changed{label}",
        fmt_time(t_status), fmt_time(g_status), _absent("dvc"), _absent("oxen"),
        "<= 0.3 s at 100k", verdict(t_status <= 0.3) if judged else "n/a (scaled)",
    )  # fmt: skip
    edit(wc)
    edit(gitdir)
    os.sync()
    t_commit = run([exe, "local", "commit", wc, "-m", message])
    os.sync()
    g_commit = run(["git", *GIT_CFG, "add", "-A"], gitdir) + run(
        ["git", *GIT_CFG, "commit", "-q", "-m", message], gitdir
    )
    rows.add(
        f"commit {EDITS} changed + {EDITS} new{label}",
        fmt_time(t_commit), fmt_time(g_commit), _absent("dvc"), _absent("oxen"),
        "<= 0.5 s at 100k", verdict(t_commit <= 0.5) if judged else "n/a (scaled)",
    )  # fmt: skip


def _absent(tool: str) -> str:
    return "n/a" if shutil.which(tool) is None else "not run"


if __name__ == "__main__":
    main()
