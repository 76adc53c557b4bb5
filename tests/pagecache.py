"""What the page cache holds of a file, for tests of reads around it: util-linux ``fincore``
counts the pages, ``POSIX_FADV_DONTNEED`` drops them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lakectl.core.blocks import directio


def resident(path: Path) -> int:
    """Bytes of the file in the page cache, as ``fincore`` counts them."""
    answer = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(answer.stdout.split()[0])


def drop(path: Path) -> None:
    """The file's clean pages dropped from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cold(path: Path, data: bytes) -> Path:
    """``data`` in a new file at ``path`` (parents made), durable and out of the page cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    drop(path)
    assert resident(path) == 0
    return path


def direct_reads_allowed(directory: Path) -> bool:
    """Whether the filesystem of ``directory`` lets a file be read directly (tmpfs does not)."""
    probe = directory / ".direct-probe"
    probe.write_bytes(b"")
    fd = os.open(probe, os.O_RDONLY)
    try:
        return directio.enable(fd)
    finally:
        os.close(fd)
        probe.unlink()
