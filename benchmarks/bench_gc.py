"""Garbage collection in-process, and as a Spark job: a lake of 1M blocks of which 10% are garbage.

Target: the in-process collection (mark + sweep) in <= 60 s with a peak memory <= 1 GiB on this
machine. The Spark job (``lakectl.sparkjobs.gc.run`` on ``local[2]``) is timed beside it, on a copy
of the same lake (``cp -a``, mtimes kept), for information: it must leave the same blocks and
report the same counts.

The lake is an embedded one (SQLite + a local block directory). 900k blocks are referenced by
one committed tree of 900k objects on ``main`` (staged with ``writes.stage_rows``, then
committed); 100k more blocks were written but never linked: the garbage, aged past the grace
period. The collection runs in a child process (``lakectl.core.upkeep.gc.run``), so that its peak RSS
is its own and not the set-up's. The result is checked: exactly the garbage is gone, and a
sample of objects still reads back.

The Spark job runs in another child: it starts its session (timed apart: the JVM), then runs
the job (its time includes starting the Python workers). Peak memory is the driver's own (the
Python process that holds the session); the JVM's and the largest Python worker's are printed
beside it. Without pyspark or Java, or with ``--no-spark``, only the in-process collection runs.

Writing 1M block files takes a few minutes; ``--blocks`` scales the run down.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from _benchutil import CHILD_PEAKS, Table, print_context, temp_dir, verdict

REPO = "gcbench"
TARGET_SECONDS = 60
TARGET_PEAK_MIB = 1024
BLOCK = 64

# Peak memory from VmHWM, the high-water mark of this process's own address space: on Linux
# ru_maxrss survives exec, so a child would report the parent's peak (the built lake) instead.
_CHILD = """
import json, sys, time
from lakectl.core import opening
from lakectl.core.upkeep import gc
lake = opening.open_lake(sys.argv[1])
start = time.perf_counter()
report = gc.run(lake, sys.argv[2], grace_seconds=3600)
seconds = time.perf_counter() - start
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "report": report.to_dict()}))
"""

_SPARK_CHILD = (
    """
import json, os, sys, time
from lakectl.core import opening
from lakectl.sparkjobs import gc
from lakectl.sparkjobs.session import session

"""
    + CHILD_PEAKS
    + """
t0 = time.perf_counter()
spark = session(sys.argv[3], "bench-gc", **{"spark.ui.showConsoleProgress": "false"})
spark.range(1).count()
started = time.perf_counter() - t0
lake = opening.open_lake(sys.argv[1])
start = time.perf_counter()
report = gc.run(lake, sys.argv[2], grace_seconds=3600, master=sys.argv[3])
seconds = time.perf_counter() - start
jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
workers = [peak(p) for p in descendants(jvm)]
print(json.dumps({
    "startup": started, "seconds": seconds, "peak_mib": peak(os.getpid()), "jvm_mib": peak(jvm),
    "worker_mib": max(workers, default=0.0), "report": report.to_dict(),
}))
spark.stop()
"""
)


def build(home: str, blocks: int, garbage_share: float) -> tuple[list[str], list[str]]:
    """Write the blocks; commit the live ones as objects; age the garbage. Returns both lists."""
    from lakectl.core import opening, porcelain, writes
    from lakectl.core.model import Entry

    lake = opening.open_lake(home)
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
    writes.stage_rows(lake, REPO, "main", rows)
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
    parser.add_argument("--master", default="local[2]", help="Spark master of the Spark job")
    parser.add_argument("--no-spark", action="store_true", help="time the in-process collection only")
    args = parser.parse_args()
    spark_ready = not args.no_spark and _spark_available()
    print_context("bench_gc")
    with temp_dir("lakectl-bench-gc-", args.dir) as work:
        home = os.path.join(work, "lake")
        print(f"building a lake of {args.blocks:,} blocks ({args.garbage:.0%} garbage)...", flush=True)
        live, garbage = build(home, args.blocks, args.garbage)
        spark_home = os.path.join(work, "lake-spark")
        if spark_ready:
            t0 = time.perf_counter()
            subprocess.run(["cp", "-a", home, spark_home], check=True)  # -a: the garbage stays aged
            print(f"  lake copied for the Spark job ({time.perf_counter() - t0:.0f} s)", flush=True)
        result = _child(_CHILD, home, REPO)
        report = result["report"]
        exact, readable, remaining = _check(home, live, garbage, report)
        if spark_ready:
            spark = _child(_SPARK_CHILD, spark_home, REPO, args.master)
            spark_exact, spark_readable, spark_remaining = _check(spark_home, live, garbage, spark["report"])
            same = spark["report"] == report and spark_remaining == remaining
            del spark_remaining
        del remaining

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
        if spark_ready:
            table.add(
                f"gc run --spark {args.master}: the job's time (session started)",
                f"{spark['seconds']:.1f} s",
                "info",
                "info",
            )
            table.add(
                "  + Spark session start-up (JVM; before the job)",
                f"{spark['startup']:.1f} s",
                "info",
                "info",
            )
            table.add(
                "  peak memory: driver (Python) / JVM / largest Python worker",
                f"{spark['peak_mib']:,.0f} / {spark['jvm_mib']:,.0f} / {spark['worker_mib']:,.0f} MiB",
                "info",
                "info",
            )
            table.add(
                "  same report and same blocks left as in-process",
                f"{'yes' if same else 'NO'}; exact {'yes' if spark_exact else 'NO'}; "
                f"sample {'ok' if spark_readable else 'FAILED'}",
                "yes",
                verdict(same and spark_exact and spark_readable),
            )
        table.print("Garbage collection, in-process and as a Spark job (embedded lake)")
        if not judged:
            print("(time and memory not judged below 1M blocks)")
        if not spark_ready and not args.no_spark:
            print("(Spark job not run: needs pyspark and Java 17+ on PATH)")


def _spark_available() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None


def _child(code: str, *argv: str) -> dict:
    child = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False, timeout=1800
    )
    if child.returncode != 0:
        raise SystemExit(f"the collection failed:\n{child.stderr[-2000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def _check(home: str, live: list[str], garbage: list[str], report: dict) -> tuple[bool, bool, set[str]]:
    """Exactly the garbage gone? A sample of objects reads back? And the blocks left."""
    from lakectl.core import listing, opening, porcelain

    lake = opening.open_lake(home)
    remaining = set(lake.blocks.list())
    # What stays: every referenced block (and the trees' metarange and range blocks).
    exact = set(live) <= remaining and remaining.isdisjoint(garbage) and report["deleted"] == len(garbage)
    sample = [o.path for _, o in zip(range(100), listing.list_objects(lake, REPO, "main"), strict=False)]
    readable = all(len(b"".join(porcelain.read(lake, REPO, "main", p))) == BLOCK for p in sample)
    lake.close()
    return exact, readable, remaining


if __name__ == "__main__":
    main()
