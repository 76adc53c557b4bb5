"""Sources of uploads read around the page cache (lakectl.core.blocks.directio.SourceFile): the
bytes read are the file's, whether the page cache holds all of it, part of it, none of it, or
pages not yet written back; large aligned reads of what the cache lacks leave the cache as it
was; and a filesystem that cannot read directly gets the same bytes read buffered."""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakectl.core.blocks import directio
from tests.pagecache import cold, direct_reads_allowed, resident

MIB = 1 << 20


@pytest.fixture(autouse=True)
def small_direct_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of 1 MiB or more go around the cache, so that small files exercise it."""
    monkeypatch.setattr(directio, "DIRECT_MIN", MIB)


def read_in(source: directio.SourceFile, size: int) -> Iterator[bytes]:
    """The source's bytes, read into one reused page-aligned buffer of ``size`` bytes."""
    buffer = mmap.mmap(-1, size)
    with memoryview(buffer) as view:
        while n := source.readinto(view):
            yield bytes(view[:n])


def test_a_file_the_cache_lacks_is_read_whole_and_left_out_of_the_cache(tmp_path: Path) -> None:
    data = os.urandom(6 * MIB + 1234)  # an unaligned tail: read to the end all the same
    path = cold(tmp_path / "big.bin", data)
    assert resident(path) == 0
    with directio.SourceFile(str(path)) as source:
        assert b"".join(read_in(source, 2 * MIB)) == data
    if direct_reads_allowed(tmp_path):
        # Read around the page cache: no cache pages taken, but for the tail's page.
        assert resident(path) <= directio.ALIGN
    else:
        assert resident(path) > 0  # read as any file is


def test_what_the_cache_holds_is_read_from_it_and_the_rest_around_it(tmp_path: Path) -> None:
    data = os.urandom(8 * MIB)
    path = cold(tmp_path / "big.bin", data)
    fd = os.open(path, os.O_RDONLY)
    try:  # the middle of the file read moments ago (no read-ahead): in the cache
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.preadv(fd, [bytearray(3 * MIB)], 3 * MIB)
    finally:
        os.close(fd)
    cached = resident(path)  # 3 MiB, less what the kernel reclaimed since
    assert 2 * MIB < cached <= 3 * MIB
    with directio.SourceFile(str(path)) as source:
        assert b"".join(read_in(source, 2 * MIB)) == data
    if direct_reads_allowed(tmp_path):
        # What it lacked it still lacks (a page the kernel reclaims meanwhile is not a read).
        assert resident(path) <= cached


def test_a_head_read_moments_ago_starts_no_read_ahead_of_the_rest(tmp_path: Path) -> None:
    """A directory's upload reads each file's head first (is it small?): the kernel caches a
    little more than that head, marked to read ahead further when it is read again. Read
    around the cache, that head starts no read-ahead: the rest stays out of the cache."""
    data = os.urandom(24 * MIB)
    path = cold(tmp_path / "big.bin", data)
    with open(path, "rb", buffering=0) as f:
        f.read(64 * 1024 + 1)
    head = resident(path)
    assert 0 < head < directio._HELD_MIN
    with directio.SourceFile(str(path)) as source:
        assert b"".join(read_in(source, 8 * MIB)) == data
    if direct_reads_allowed(tmp_path):
        assert resident(path) <= head


def test_bytes_not_yet_written_back_are_read_as_written(tmp_path: Path) -> None:
    data = bytearray(os.urandom(4 * MIB))
    path = cold(tmp_path / "big.bin", bytes(data))
    change = os.urandom(100)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, change, MIB + 10)  # dirty in the cache, amid bytes the cache lacks
    finally:
        os.close(fd)
    data[MIB + 10 : MIB + 110] = change
    with directio.SourceFile(str(path)) as source:
        assert b"".join(read_in(source, 4 * MIB)) == bytes(data)


def test_small_and_unaligned_reads_are_read_buffered(tmp_path: Path) -> None:
    data = os.urandom(3 * MIB + 5)
    path = cold(tmp_path / "big.bin", data)
    with directio.SourceFile(str(path)) as source:
        head = source.read(1000)
        unaligned = bytearray(2 * MIB)  # not page-aligned memory
        n = source.readinto(memoryview(unaligned)[1:])
        rest = source.read()
    assert head + bytes(unaligned[1 : 1 + n]) + rest == data


def test_a_filesystem_that_cannot_read_directly_gets_buffered_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(4 * MIB + 7)
    path = cold(tmp_path / "big.bin", data)
    real_open = os.open

    def refusing(name: str, flags: int, *args: int, **kwargs: int) -> int:
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")  # as tmpfs answered before Linux 6.6
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(directio.os, "open", refusing)
    with directio.SourceFile(str(path)) as source:
        assert b"".join(read_in(source, 2 * MIB)) == data
    assert resident(path) >= len(data)  # read as any file is: all of it went through the cache


def test_blocks_read_at_their_offsets_from_several_threads_are_the_files(tmp_path: Path) -> None:
    data = os.urandom(12 * MIB + 99)
    path = cold(tmp_path / "big.bin", data)
    with open(path, "rb") as f:  # some of it cached, some not
        f.seek(5 * MIB)
        f.read(MIB)
    size = 2 * MIB
    buffers = [mmap.mmap(-1, size) for _ in range(7)]
    with directio.SourceFile(str(path)) as source, ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda k: source.read_at(buffers[k], k * size), range(7)))
        assert source.tell() == 0
    assert counts == [size] * 6 + [len(data) - 6 * size]
    assert b"".join(bytes(b[:n]) for b, n in zip(buffers, counts, strict=True)) == data


def test_seek_and_tell_follow_the_reads(tmp_path: Path) -> None:
    data = os.urandom(3 * MIB)
    path = cold(tmp_path / "big.bin", data)
    with directio.SourceFile(str(path)) as source:
        assert source.seek(MIB) == MIB
        assert b"".join(read_in(source, MIB)) == data[MIB:]
        assert source.tell() == len(data)
        assert source.seek(-10, os.SEEK_END) == len(data) - 10
        assert source.read() == data[-10:]
        with pytest.raises(OSError):
            source.seek(-1)


def test_a_directory_or_a_missing_file_is_refused_as_open_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as exc:
        directio.SourceFile(str(tmp_path))
    assert exc.value.filename == str(tmp_path)
    with pytest.raises(FileNotFoundError):
        directio.SourceFile(str(tmp_path / "nothing"))
