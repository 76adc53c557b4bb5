"""Garbage collection in-process: a lake of 1M blocks of which 10% are garbage.

Target: the collection (mark + sweep) in <= 60 s with a peak memory <= 1 GiB on this machine.

The lake is an embedded one (SQLite + a local block directory). 900k blocks are referenced by
one committed tree of 900k objects on ``main`` (staged with ``porcelain.stage_rows``, then
committed); 100k more blocks were written but never linked: the garbage, aged past the grace
period. The collection runs in a child process (``lakectl.core.gc.run``), so that its peak RSS
is its own and not the set-up's. The result is checked: exactly the garbage is gone, and a
sample of objects still reads back.

Writing 1M block files takes a few minutes; ``--blocks`` scales the run down.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

from _benchutil import Table, print_context, temp_dir, verdict

REPO = "gcbench"
TARGET_SECONDS = 60
TARGET_PEAK_MIB = 1024
BLOCK = 64

# Peak memory from VmHWM, the high-water mark of this process's own address space: on Linux
# ru_maxrss survives exec, so a child would report the parent's peak (the built lake) instead.
_CHILD = """
import json, sys, time
from lakectl.core import gc, porcelain
lake = porcelain.open_lake(sys.argv[1])
start = time.perf_counter()
report = gc.run(lake, sys.argv[2], grace_seconds=3600)
seconds = time.perf_counter() - start
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "report": report.to_dict()}))
"""


def build(home: str, blocks: int, garbage_share: float) -> tuple[list[str], list[str]]:
    """Write the blocks; commit the live ones as objects; age the garbage. Returns both lists."""
    from lakectl.core import porcelain
    from lakectl.core.model import Entry

    lake = porcelain.open_lake(home)
    porcelain.create_repo(lake, REPO)
    live: list[str] = []
    garbage: list[str] = []
    n_garbage = int(blocks * garbage_share)
    start = time.perf_counter()
    for i in range(blocks):
        data = i.to_bytes(8, "big") * (BLOCK // 8)
        locator = f"{hashlib.md5(data).hexdigest()}+{len(data)}"
        lake.blocks.put(locator, data)
        (garbage if i < n_garbage else live).append(locator)
        if (i + 1) % 200_000 == 0:
            print(f"  {i + 1:,} blocks written ({time.perf_counter() - start:.0f} s)", flush=True)
    lake.blocks.sync()
    rows = []
    for i, locator in enumerate(live):
        entry = Entry(BLOCK, locator.split("+")[0], (locator,), 1_767_225_600, "application/octet-stream", {})
        rows.append((f"data/{i // 1000:04d}/{i:07d}.bin", entry.to_row()))
    t0 = time.perf_counter()
    porcelain.stage_rows(lake, REPO, "main", rows)
    porcelain.commit(lake, REPO, "main", "900k objects", committer="bench")
    print(f"  {len(rows):,} objects staged and committed ({time.perf_counter() - t0:.0f} s)", flush=True)
    past = time.time() - 7 * 86_400
    for locator in garbage:
        md5 = locator.split("+")[0]
        os.utime(os.path.join(home, "blocks", md5[:3], md5), (past, past))
    lake.close()
    return live, garbage


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--blocks", type=int, default=1_000_000)
    parser.add_argument("--garbage", type=float, default=0.10, help="share of blocks nothing references")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    print_context("bench_gc")
    with temp_dir("lakectl-bench-gc-", args.dir) as work:
        home = os.path.join(work, "lake")
        print(f"building a lake of {args.blocks:,} blocks ({args.garbage:.0%} garbage)...", flush=True)
        live, garbage = build(home, args.blocks, args.garbage)
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, home, REPO],
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
        if child.returncode != 0:
            raise SystemExit(f"the collection failed:\n{child.stderr[-2000:]}")
        result = json.loads(child.stdout.strip().splitlines()[-1])
        report = result["report"]

        from lakectl.core import porcelain

        lake = porcelain.open_lake(home)
        remaining = set(lake.blocks.list())
        # What stays: every referenced block (and the trees' metarange and range blocks).
        exact = set(live) <= remaining and remaining.isdisjoint(garbage) and report["deleted"] == len(garbage)
        sample = [
            o.path for _, o in zip(range(100), porcelain.list_objects(lake, REPO, "main"), strict=False)
        ]
        readable = all(len(b"".join(porcelain.read(lake, REPO, "main", p))) == BLOCK for p in sample)
        lake.close()

        print(f"report: {report}")
        judged = args.blocks >= 1_000_000
        table = Table("figure", "measured", "target", "result")
        table.add(
            f"gc run, {args.blocks:,} blocks, {len(garbage):,} garbage: time",
            f"{result['seconds']:.1f} s",
            f"<= {TARGET_SECONDS} s",
            verdict(result["seconds"] <= TARGET_SECONDS if judged else None),
        )
        table.add(
            "gc run: peak memory (VmHWM of the collecting process)",
            f"{result['peak_mib']:,.0f} MiB",
            f"<= {TARGET_PEAK_MIB:,} MiB",
            verdict(result["peak_mib"] <= TARGET_PEAK_MIB if judged else None),
        )
        table.add(
            "exactly the garbage deleted, objects read back",
            f"{'yes' if exact else 'NO'}; sample {'ok' if readable else 'FAILED'}",
            "yes",
            verdict(exact and readable),
        )
        table.print("Garbage collection, in-process (embedded lake)")
        if not judged:
            print("(time and memory not judged below 1M blocks)")


if __name__ == "__main__":
    main()
