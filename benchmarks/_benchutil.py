"""Small helpers shared by the benchmark scripts: timing, temp dirs, synthetic rows, result tables.

The scripts import this module by name; Python puts the script's own directory on ``sys.path``,
so ``python benchmarks/bench_x.py`` works from anywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lakectl.core.model import Row

CHILD_PEAKS = """
import os

def peak(pid="self"):
    try:  # a process may have exited meanwhile, or be a zombie (no VmHWM)
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM")), 0) / 1024
    except OSError:
        return 0.0

def descendants(pid):
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    found += [int(child), *descendants(int(child))]
    except OSError:
        pass
    return found
"""
"""Source for a benchmark's child process (``python -c``): ``peak(pid)``, a process's peak
resident memory in MiB (``VmHWM``; ``ru_maxrss`` survives exec, so a child would report its
parent's), and ``descendants(pid)``, the processes under it (a Spark JVM's Python workers)."""


def print_context(what: str) -> None:
    """One line saying what runs and how busy the machine is (figures are only comparable
    between quiet runs: other processes on 2 cores change them a lot)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{what}: {os.cpu_count()} CPU(s), load average {load}, Python {sys.version.split()[0]}",
        flush=True,
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Wall time of ``fn(*args)`` in seconds, and what it returned."""
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


@contextlib.contextmanager
def temp_dir(prefix: str, base: str | None = None) -> Iterator[str]:
    """A fresh directory, removed afterwards whatever happens (also on Ctrl-C)."""
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def synthetic_row(path: str, version: int = 0, size: int = 4096, mtime: int = 1_767_225_600) -> Row:
    """A plausible entry row without data: md5-looking checksum and one block locator."""
    md5 = hashlib.md5(f"{path}#{version}".encode()).hexdigest()
    return (size, md5, f"{md5}+{size}", mtime + version, "application/octet-stream", "")


def make_rows(n: int) -> list[tuple[str, Row]]:
    """``n`` synthetic entries with data-lake shaped paths: 100 tables x 20 days x 500 parts per
    1M (``tables/t<T>/date=2026-01-<DD>/part-<NNNNNN>.parquet``), in table order, which is not
    path order past 10k (``t10`` sorts before ``t2``): staging sorts them, a tree needs them
    sorted."""
    per_table = 20 * 500
    out = []
    for i in range(n):
        t, rest = divmod(i, per_table)
        d, part = divmod(rest, 500)
        path = f"tables/t{t}/date=2026-01-{d + 1:02d}/part-{part:06d}.parquet"
        out.append((path, synthetic_row(path)))
    return out


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "n/a"
    if seconds < 1.0:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


@dataclass
class Table:
    """A small fixed-width text table, printed at once."""

    headers: Sequence[str]
    rows: list[Sequence[str]]

    def __init__(self, *headers: str) -> None:
        self.headers = headers
        self.rows = []

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def print(self, title: str = "") -> None:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        if title:
            print(f"\n{title}")
        line = "  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True))
        print(line)
        print("  ".join("-" * w for w in widths))
        for row in self.rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        sys.stdout.flush()


def lakectl_binary() -> str | None:
    """The ``lakectl`` next to this interpreter (same venv), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "lakectl")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("lakectl")
