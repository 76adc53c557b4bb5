"""How ``lakectl fs upload`` reads a large local file, embedded and against a server: what the
page cache lacks of it is read around the cache (an upload of a file not read since it was
written takes no cache pages for it), one file or a directory's; what the cache holds, a file
being written or just read, is read from it; the object is the file's bytes either way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lakectl.core.blocks import directio
from tests.cli.both_json import Cli, cli, live
from tests.pagecache import cold, direct_reads_allowed, resident

__all__ = ["cli", "live"]

MIB = 1 << 20


def test_a_large_file_the_cache_lacks_is_uploaded_around_it(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    data = os.urandom(9 * MIB + 100)
    one = cold(tmp_path / "one.bin", data)
    tree = {name: os.urandom(12 * MIB + 7) for name in ("t/a.bin", "t/sub/b.bin")}
    for name, content in tree.items():
        cold(tmp_path / name, content)
    cli("fs", "upload", "-s", str(one), "lakefs://R/main/one.bin")
    cli("fs", "upload", "-r", "-s", str(tmp_path / "t"), "lakefs://R/main/t/")
    if direct_reads_allowed(tmp_path):
        assert resident(one) <= directio.ALIGN  # the unaligned tail's page, read buffered
        # A directory's files are first read as small files are (the head, to tell a small one
        # from a large one): that head and the kernel's read-ahead of it stay cached (512 KiB
        # here), the rest did not go through the cache.
        cached = [resident(tmp_path / name) for name in tree]
        assert all(n <= MIB for n in cached), cached
    out = tmp_path / "out.bin"
    cli("fs", "download", "lakefs://R/main/one.bin", str(out))
    assert out.read_bytes() == data
    for name, content in tree.items():
        cli("fs", "download", f"lakefs://R/main/{name}", str(out))
        assert hashlib.md5(out.read_bytes()).digest() == hashlib.md5(content).digest()


def test_bytes_the_cache_holds_and_has_not_written_back_are_uploaded_as_written(
    cli: Cli, tmp_path: Path
) -> None:
    cli("repo", "create", "lakefs://R")
    data = bytearray(os.urandom(8 * MIB))
    path = cold(tmp_path / "f.bin", bytes(data))
    with open(path, "r+b") as f:  # a job still writing: dirty pages amid pages not cached
        for offset in (100, 3 * MIB + 5, 8 * MIB - 10):
            f.seek(offset)
            f.write(b"x" * 10)
            data[offset : offset + 10] = b"x" * 10
    cli("fs", "upload", "-s", str(path), "lakefs://R/main/f.bin")
    stat = cli("fs", "stat", "lakefs://R/main/f.bin")
    assert stat["size_bytes"] == len(data)
    out = tmp_path / "out.bin"
    cli("fs", "download", "lakefs://R/main/f.bin", str(out))
    assert out.read_bytes() == bytes(data)
