"""fsck scrub rate: ``lakectl.core.upkeep.fsck.check`` on a lake of large blocks and packed small objects,
next to the machine's floor measured in the same run.

The lake is an embedded one: ``--size-mib`` of random data in 64 MiB objects (one block each),
plus ``--small-files`` objects of 1 KiB uploaded as a batch (packed into shared blocks, as
``lakectl fs upload -r`` does), all committed. The check reads back and md5s every referenced
block (data, ranges, metaranges) with its threads (``fsck.VERIFY_THREADS``), and lists the
block directory for orphans and temporary files.

The floor is the same bytes, the block files, read and hashed without lakectl: plain Python
(``open().read()`` + ``hashlib.md5``) on one thread and on as many threads as fsck uses, and
``md5sum`` over the files (one process). Every figure is the median of ``--runs`` runs with a
warm page cache (a first pass reads every file): this is the CPU cost of a scrub, not the disk's
(a cold read of this machine's disk runs at ~2.7 GB/s, faster than md5 on one core).

No target: the figure is informational. fsck's rate over the floor's says what lakectl adds
(the walk, the Parquet reads of the ranges, the report).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from _benchutil import Table, median, print_context, temp_dir

REPO = "scrub"
BLOCK = 64 * 1024 * 1024
SMALL = 1024


def build(home: str, work: str, size_mib: int, small_files: int) -> None:
    from lakectl.core import opening, porcelain, writes

    lake = opening.open_lake(home)
    porcelain.create_repo(lake, REPO)
    t0 = time.perf_counter()
    for i in range(max(1, size_mib * 1024 * 1024 // BLOCK)):
        writes.upload(lake, REPO, "main", f"large/{i:04d}.bin", os.urandom(BLOCK))
    print(f"  {size_mib:,} MiB of 64 MiB objects uploaded ({time.perf_counter() - t0:.0f} s)", flush=True)
    t0 = time.perf_counter()
    files = []
    for i in range(small_files):
        directory = os.path.join(work, "small", f"{i // 1000:03d}")
        if i % 1000 == 0:
            os.makedirs(directory, exist_ok=True)
        local = os.path.join(directory, f"{i:06d}.bin")
        with open(local, "wb") as f:
            f.write(os.urandom(SMALL))
        files.append((f"small/{i // 1000:03d}/{i:06d}.bin", local))
    writes.upload_files(lake, REPO, "main", files)
    porcelain.commit(lake, REPO, "main", "scrub bench", committer="bench")
    print(
        f"  {small_files:,} small files packed and committed ({time.perf_counter() - t0:.0f} s)", flush=True
    )
    lake.close()


def block_files(home: str) -> list[str]:
    root = os.path.join(home, "blocks")
    return sorted(
        os.path.join(directory, name)
        for directory, _, names in os.walk(root)
        for name in names
        if not name.startswith(".")
    )


def md5_file(path: str) -> int:
    with open(path, "rb", buffering=0) as f:
        data = f.readall()
    hashlib.md5(data).hexdigest()
    return len(data)


def python_floor(paths: list[str], threads: int) -> tuple[float, int]:
    start = time.perf_counter()
    if threads == 1:
        total = sum(md5_file(p) for p in paths)
    else:
        with ThreadPoolExecutor(threads) as pool:
            total = sum(pool.map(md5_file, paths))
    return time.perf_counter() - start, total


def md5sum_floor(paths: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["xargs", "-0", "md5sum"], input="\0".join(paths).encode(), check=True, capture_output=True
    )
    return time.perf_counter() - start


def scrub(home: str) -> tuple[float, dict]:
    from lakectl.core import opening
    from lakectl.core.upkeep import fsck

    lake = opening.open_lake(home)
    start = time.perf_counter()
    report = fsck.check(lake)
    seconds = time.perf_counter() - start
    lake.close()
    return seconds, report.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=2048, help="MiB of data in 64 MiB blocks")
    parser.add_argument("--small-files", type=int, default=100_000, help="1 KiB objects, packed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    from lakectl.core.upkeep.fsck import VERIFY_THREADS

    print_context("bench_fsck")
    with temp_dir("lakectl-bench-fsck-", args.dir) as work:
        home = os.path.join(work, "lake")
        print(f"building a lake of {args.size_mib:,} MiB + {args.small_files:,} small files...", flush=True)
        build(home, work, args.size_mib, args.small_files)
        paths = block_files(home)
        python_floor(paths, 1)  # warm the page cache
        runs: dict[str, list[float]] = {"fsck": [], "py1": [], "pyN": [], "md5sum": []}
        size = 0
        report: dict = {}
        for _ in range(args.runs):
            seconds, report = scrub(home)
            runs["fsck"].append(seconds)
            seconds, size = python_floor(paths, 1)
            runs["py1"].append(seconds)
            runs["pyN"].append(python_floor(paths, VERIFY_THREADS)[0])
            runs["md5sum"].append(md5sum_floor(paths))
        assert report["ok"] and report["bytes"] == size and report["blocks"] == len(paths), report
        mb = size / 1e6
        fsck_s = median(runs["fsck"])
        table = Table("what", "time", "MB/s", "blocks/s", "fsck rate / this rate")
        table.add(
            f"lakectl fsck (in-process, {VERIFY_THREADS} threads)",
            f"{fsck_s:.2f} s",
            f"{mb / fsck_s:,.0f}",
            f"{len(paths) / fsck_s:,.0f}",
            "",
        )
        for key, label in (
            ("py1", "floor: read + hashlib.md5, 1 thread"),
            ("pyN", f"floor: read + hashlib.md5, {VERIFY_THREADS} threads"),
            ("md5sum", "floor: md5sum over the block files"),
        ):
            seconds = median(runs[key])
            table.add(
                label,
                f"{seconds:.2f} s",
                f"{mb / seconds:,.0f}",
                f"{len(paths) / seconds:,.0f}",
                f"{seconds / fsck_s:.2f}",
            )
        table.print(
            f"fsck scrub rate: {len(paths):,} blocks, {size / 2**20:,.0f} MiB "
            f"({report['commits']} commits), median of {args.runs}, warm cache"
        )
        print(f"fsck runs: {', '.join(f'{s:.2f}' for s in runs['fsck'])} s")


if __name__ == "__main__":
    main()
