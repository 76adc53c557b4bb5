"""A merge of two branches that each appended 100 versions to a Delta table of 10,000 versions.

An embedded lake holds a Delta table (``tables/events/``) of ``--versions`` versions on ``main``
(10,000 by default: a first version, then one append of one small Parquet file per version, and a
checkpoint at the last, as ``deltalake`` writes them; the log is written directly, in the form
``deltalake`` writes, and read back by ``deltalake`` to check it). Branches ``a`` and ``b`` each
append 100 versions (100 new data files, 100 log versions and the checkpoint ``deltalake`` makes
at the 100th, committed). Each run merges ``b`` into a fresh branch made from ``a`` in a fresh
child process: the Delta merge replays ``b``'s 100 versions after ``a``'s (a tail of 100 versions
after ``a``'s checkpoint: no checkpoint of its own, which a merge writes only past twice the
interval; what one would cost is printed as ``deltalake``'s own checkpoint of the merged table).
The answer is checked with ``deltalake``: the merged table's last version, its active files and
its history's last operation.

The peer is the merge of the same data files as a plain Parquet directory (no log), in a second
repository built alike: both branches add their 100 files and the tree merge takes them. The
target: the Delta merge within 2x of the plain merge, independent of the table's total versions:
the same is measured on a table of ``--small`` versions (1,000 by default) and the two Delta
times are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from _benchutil import Table, fmt_time, median, print_context, temp_dir, verdict

from lakectl.core import opening, porcelain, writes

ROOT = "tables/events/"
SIDE_VERSIONS = 100
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    ],
}

_CHILD = """
import json, sys, time
from lakectl.core import merging, opening
from lakectl.core.tables import deltamerge
home, repo, dest = sys.argv[1:4]
lake = opening.open_lake(home)
spent = []
checkpoint = deltamerge._checkpoint
def timed_checkpoint(*args):
    start = time.perf_counter()
    try:
        return checkpoint(*args)
    finally:
        spent.append(time.perf_counter() - start)
deltamerge._checkpoint = timed_checkpoint
start = time.perf_counter()
done = merging.merge(lake, repo, "b", dest)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "checkpoint": sum(spent), "commit": done.commit.id}))
"""


def data_file(directory: Path) -> bytes:
    """One small Parquet file (a row); every version's file holds these bytes under its name."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "one.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]}), out)
    return out.read_bytes()


def version(number: int, name: str, size: int, stamp: int) -> bytes:
    """A version as ``deltalake`` writes an append of one file (the first creates the table)."""
    actions: list[dict[str, object]] = [
        {
            "commitInfo": {
                "timestamp": stamp,
                "operation": "WRITE",
                "operationParameters": {"mode": "Append" if number else "ErrorIfExists"},
                "engineInfo": "bench",
                "clientVersion": "bench",
                **({"readVersion": number - 1} if number else {}),
                "isBlindAppend": True,
            }
        }
    ]
    if number == 0:
        actions.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
        meta = {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(SCHEMA),
            "partitionColumns": [],
            "configuration": {},
            "createdTime": stamp,
        }
        actions.append({"metaData": meta})
    add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": stamp, "dataChange": True}
    actions.append({"add": {**add, "stats": json.dumps({"numRecords": 1})}})
    return ("\n".join(json.dumps(a) for a in actions) + "\n").encode()


def write_versions(into: Path, first: int, count: int, data: bytes, delta: bool) -> None:
    """Versions ``first`` .. ``first + count - 1`` (each a data file, and with ``delta`` its log
    version) as files under ``into``."""
    log = into / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for n in range(first, first + count):
        name = f"part-{n:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        (into / name).write_bytes(data)
        if delta:
            (log / f"{n:020d}.json").write_bytes(version(n, name, len(data), 1_700_000_000_000 + n))
    if not delta:
        log.rmdir()


def side_checkpoint(table: Path, side: Path) -> None:
    """The checkpoint ``deltalake`` writes after a side's 100 appends (its last version ends an
    interval of 100), made from the table's last checkpoint and the side's versions."""
    import shutil

    from deltalake import DeltaTable

    log = side.parent / f"{side.name}-log" / "_delta_log"
    log.mkdir(parents=True)
    for f in (table / "_delta_log").iterdir():
        if f.name == "_last_checkpoint" or f.name.endswith(".checkpoint.parquet"):
            shutil.copy(f, log / f.name)
    for f in (side / "_delta_log").iterdir():
        shutil.copy(f, log / f.name)
    made = DeltaTable(str(log.parent))
    made.create_checkpoint()
    for f in log.iterdir():
        if f.name == "_last_checkpoint" or f.name.startswith(f"{made.version():020d}.checkpoint"):
            shutil.copy(f, side / "_delta_log" / f.name)


def upload_dir(lake: object, repo: str, branch: str, directory: Path, message: str) -> None:
    files = sorted(
        (ROOT + p.relative_to(directory).as_posix(), str(p)) for p in directory.rglob("*") if p.is_file()
    )
    writes.upload_files(lake, repo, branch, files)  # type: ignore[arg-type]
    porcelain.commit(lake, repo, branch, message, committer="bench")  # type: ignore[arg-type]


def build(home: str, work: Path, versions: int, delta: bool) -> str:
    """A repository with the table on ``main`` and 100 more versions on each of ``a`` and ``b``."""
    from deltalake import DeltaTable

    repo = f"{'delta' if delta else 'plain'}-{versions}"
    lake = opening.open_lake(home)
    porcelain.create_repo(lake, repo, "main", f"local://{repo}")
    data = data_file(work)
    table = work / repo / "main"
    write_versions(table, 0, versions, data, delta)
    if delta:
        DeltaTable(str(table)).create_checkpoint()
    upload_dir(lake, repo, "main", table, "the table")
    for side, first in (("a", versions), ("b", versions)):
        porcelain.create_branch(lake, repo, side, "main")
        more = work / repo / side
        write_versions(more, first, SIDE_VERSIONS, data, delta)
        if delta:
            side_checkpoint(table, more)
        upload_dir(lake, repo, side, more, f"{side}: {SIDE_VERSIONS} appends")
    lake.close()
    return repo


def run_child(home: str, repo: str, dest: str) -> dict:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, home, repo, dest], capture_output=True, text=True, check=False
    )
    if child.returncode:
        raise SystemExit(f"merge failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def merges(home: str, repo: str, runs: int) -> list[tuple[float, float]]:
    """Each run's merge time, and the part of it that wrote the checkpoint."""
    seconds = []
    for i in range(runs):
        dest = f"run{i}"
        lake = opening.open_lake(home)
        porcelain.create_branch(lake, repo, dest, "a")
        lake.close()
        found = run_child(home, repo, dest)
        seconds.append((found["seconds"], found.get("checkpoint", 0.0)))
    return seconds


def deltalake_checkpoint(home: str, repo: str, work: Path) -> float:
    """The floor under the checkpoint: ``deltalake`` checkpointing the merged table itself, its
    log (from the last checkpoint on) copied to a local directory first, untimed."""
    import time

    from deltalake import DeltaTable

    from lakectl.core.tables import delta

    lake = opening.open_lake(home)
    try:
        tree = delta.at_ref(lake, repo, "run0")
        head = delta.head_version(tree, ROOT)
        _, files = delta.log_files(tree, ROOT, (head or 0) - 2 * SIDE_VERSIONS)
        log = work / "floor" / "_delta_log"
        log.mkdir(parents=True)
        for path, handle in files:
            (log / path.rpartition("/")[2]).write_bytes(tree.read(handle))
        for number in range((head or 0) - 2 * SIDE_VERSIONS + 1, (head or 0) + 1):
            handle = tree.lookup(f"{ROOT}_delta_log/{number:020d}.json")
            (log / f"{number:020d}.json").write_bytes(tree.read(handle))
    finally:
        lake.close()
    start = time.perf_counter()
    DeltaTable(str(log.parent)).create_checkpoint()
    return time.perf_counter() - start


def check(home: str, repo: str, versions: int) -> tuple[bool, str]:
    """The merged table read by ``deltalake`` (its log from the lake): its last version, its
    active files, the last operations and that a checkpoint ends the merged log."""
    from lakectl.core.tables import delta

    lake = opening.open_lake(home)
    try:
        tree = delta.at_ref(lake, repo, "run0")
        with delta.open_table(tree, ROOT) as table:
            last = table.version()
            files = len(table.file_uris())
            ops = [h["operation"] for h in table.history(1)]
        head = delta.head_version(tree, ROOT)
    finally:
        lake.close()
    want = versions - 1 + 2 * SIDE_VERSIONS
    ok = last == want == head and files == versions + 2 * SIDE_VERSIONS and ops == ["WRITE"]
    return ok, f"version {last} (want {want}), {files:,} active files, last operations {ops}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_context(
        f"bench_delta_merge: Delta tables of {args.small:,} and {args.versions:,} versions, 2 x 100 appends"
    )
    results: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    notes = []
    floor = float("nan")
    with temp_dir("bench-delta-merge-") as tmp:
        home = os.path.join(tmp, "lake")
        for versions in (args.small, args.versions):
            for delta in (True, False):
                repo = build(home, Path(tmp) / "work", versions, delta)
                results[(versions, delta)] = merges(home, repo, args.runs)
                if delta:
                    ok, text = check(home, repo, versions)
                    notes.append((versions, ok, text))
                    if versions == args.versions:
                        floor = deltalake_checkpoint(home, repo, Path(tmp))
    table = Table(
        "table", "Delta merge", "of it, the checkpoint", "plain Parquet merge", "ratio", "target", "result"
    )
    for versions in (args.small, args.versions):
        d = median([t for t, _ in results[(versions, True)]])
        c = median([c for _, c in results[(versions, True)]])
        p = median([t for t, _ in results[(versions, False)]])
        runs = " / ".join(fmt_time(t) for t, _ in results[(versions, True)])
        table.add(
            f"{versions:,} versions",
            f"{fmt_time(d)} ({runs})",
            fmt_time(c),
            fmt_time(p),
            f"{d / p:.2f}x",
            "<= 2x",
            verdict(d <= 2 * p),
        )
        table.add(
            "  without the checkpoint",
            fmt_time(d - c),
            "",
            fmt_time(p),
            f"{(d - c) / p:.2f}x",
            "<= 2x",
            verdict(d - c <= 2 * p),
        )
    big = median([t for t, _ in results[(args.versions, True)]])
    small = median([t for t, _ in results[(args.small, True)]])
    table.add(
        "10x the versions",
        f"{fmt_time(big)} vs {fmt_time(small)}",
        "",
        "",
        f"{big / small:.2f}x",
        "independent",
        "info",
    )
    table.add("floor: deltalake's checkpoint", fmt_time(floor), "", "", "", "", "floor")
    table.print("Merge of 2 x 100 appended versions (median of runs, each a fresh child process)")
    for versions, ok, text in notes:
        print(f"check ({versions:,} versions): {verdict(ok)}: {text}")
    print_context("bench_delta_merge done")


if __name__ == "__main__":
    main()
