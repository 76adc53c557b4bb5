"""Upload throughput of one 1 GiB file (target >= 400 MB/s), against md5 and plain-copy limits.

The judged figure is `lakectl fs upload` of the file into an embedded lake, through the
library (writes.upload: blocks, sync, staging); the block layer alone is printed beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from lakectl.core import opening, porcelain, writes
from lakectl.core.blocks.data import write_object
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.model import BLOCK_SIZE

CHUNK = 64 * 1024 * 1024


def make_source(path: str, size: int) -> None:
    """Random-looking data whose 64 MiB pieces all differ (a counter is mixed into each)."""
    base = os.urandom(CHUNK)
    with open(path, "wb") as f:
        written, counter = 0, 0
        while written < size:
            piece = counter.to_bytes(16, "big") + base[16:]
            piece = piece[: size - written]
            f.write(piece)
            written += len(piece)
            counter += 1
        f.flush()
        # Flush now so the source's own writeback does not compete with the timed runs.
        os.fsync(f.fileno())


def drop_from_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def md5_file(path: str) -> None:
    digest = hashlib.md5()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            digest.update(view[:n])


def copy_file(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Timing:
    write: float
    sync: float
    cpu: float

    @property
    def total(self) -> float:
        return self.write + self.sync

    def __str__(self) -> str:
        return f"write_object {self.write:.2f} s + sync {self.sync:.2f} s, CPU {self.cpu:.2f} s"


def upload(adapter: LocalAdapter, src: str, block_size: int) -> Timing:
    cpu = time.process_time()
    start = time.perf_counter()
    with open(src, "rb") as f:
        write_object(adapter, f, block_size=block_size)
    written = time.perf_counter()
    adapter.sync()
    synced = time.perf_counter()
    return Timing(written - start, synced - written, time.process_time() - cpu)


TARGET_MB_S = 400


def upload_to_lake(home: str, src: str) -> float:
    """Seconds for writes.upload of the file onto a branch of a fresh embedded lake."""
    lake = opening.open_lake(home)
    porcelain.create_repo(lake, "bench")
    start = time.perf_counter()
    with open(src, "rb") as f:
        writes.upload(lake, "bench", "main", "big.bin", f)
    elapsed = time.perf_counter() - start
    lake.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=1024, help="file size (default 1 GiB)")
    parser.add_argument("--block-size", type=int, default=BLOCK_SIZE)
    parser.add_argument("--runs", type=int, default=3, help="timed uploads (median reported)")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    parser.add_argument(
        "--cold", action="store_true", help="evict the source from the page cache before each run"
    )
    args = parser.parse_args()
    size = args.size_mib * 1024 * 1024
    mb = size / 1e6

    work = tempfile.mkdtemp(prefix="lakectl-bench-", dir=args.dir)
    try:
        src = os.path.join(work, "source.bin")
        make_source(src, size)

        def prepare() -> None:
            if args.cold:
                drop_from_cache(src)

        prepare()
        t_md5 = timed(lambda: md5_file(src))
        prepare()
        t_copy = timed(lambda: copy_file(src, os.path.join(work, "copy.bin")))
        os.unlink(os.path.join(work, "copy.bin"))
        print(
            f"file: {args.size_mib} MiB, blocks of {args.block_size} bytes, "
            f"source {'cold' if args.cold else 'warm'} in page cache; MB = 10^6 bytes"
        )
        print(f"md5 of the file, one thread:      {mb / t_md5:8.0f} MB/s")
        print(f"plain copy + fsync (same disk):   {mb / t_copy:8.0f} MB/s")

        firsts: list[float] = []
        seconds: list[float] = []
        for run in range(args.runs):
            store = os.path.join(work, f"store-{run}")
            adapter = LocalAdapter(store)
            prepare()
            first = upload(adapter, src, args.block_size)
            before = sum(1 for _ in adapter.list())
            prepare()
            second = upload(adapter, src, args.block_size)
            new_blocks = sum(1 for _ in adapter.list()) - before
            firsts.append(mb / first.total)
            seconds.append(mb / second.total)
            print(
                f"run {run + 1}: upload + sync {mb / first.total:5.0f} MB/s ({first}, "
                f"{before} blocks)\n"
                f"       again (dedup) {mb / second.total:5.0f} MB/s ({second}, "
                f"{new_blocks} new blocks written)"
            )
            shutil.rmtree(store)
        print(f"median upload + sync:             {statistics.median(firsts):8.0f} MB/s")
        print(f"median dedup re-upload:           {statistics.median(seconds):8.0f} MB/s")
        lake_runs: list[float] = []
        for run in range(args.runs):
            home = os.path.join(work, f"lake-{run}")
            prepare()
            lake_runs.append(mb / upload_to_lake(home, src))
            shutil.rmtree(home)
        figure = statistics.median(lake_runs)
        verdict = "PASS" if figure >= TARGET_MB_S else "FAIL"
        runs = " / ".join(f"{r:.0f}" for r in lake_runs)
        print(
            f"lakectl upload into a lake (runs {runs}): median {figure:.0f} MB/s, "
            f"target >= {TARGET_MB_S} MB/s  {verdict}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
