"""Writes around the page cache (lakectl.core.blocks.directio): the file holds exactly the bytes
written, whatever their alignment in memory and their lengths, direct writes are only ever
aligned, and a filesystem that refuses direct I/O (when asked, or only at the write) gets the
same bytes written buffered."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core.blocks import directio

ALIGN = directio.ALIGN
O_DIRECT = getattr(os, "O_DIRECT", 0)


@pytest.fixture(autouse=True)
def small_bounce(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bounce buffer of four alignment units, so that small tests cross its boundaries."""
    monkeypatch.setattr(directio, "_CHUNK", 4 * ALIGN)
    monkeypatch.setattr(directio, "_spare", [])


class Writes:
    """Every ``os.write`` made, with whether its file was in direct mode then."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, refuse_direct: bool = False) -> None:
        self.calls: list[tuple[bool, int]] = []
        real_write = os.write

        def write(fd: int, data: bytes | memoryview) -> int:
            direct = bool(O_DIRECT) and bool(fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT)
            self.calls.append((direct, len(data)))
            if direct and refuse_direct:
                raise OSError(errno.EINVAL, "Invalid argument")
            return real_write(fd, data)

        monkeypatch.setattr(directio.os, "write", write)

    @property
    def direct(self) -> list[int]:
        return [n for direct, n in self.calls if direct]


def supports_direct(directory: Path) -> bool:
    fd, name = tempfile.mkstemp(dir=directory)
    try:
        return directio.enable(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def placed(data: bytes, shift: int) -> memoryview:
    """``data`` in writable anonymous memory, ``shift`` bytes past a page boundary."""
    memory = mmap.mmap(-1, max(1, shift + len(data)))
    memory[shift : shift + len(data)] = data
    return memoryview(memory)[shift : shift + len(data)]


def write_chunks(path: Path, chunks: list[bytes | memoryview], direct: bool = True) -> bool:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        direct = direct and directio.enable(fd)
        writer = directio.Writer(fd, direct)
        for chunk in chunks:
            writer.write(chunk)
        writer.close()
    finally:
        os.close(fd)
    return direct


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "out.bin"


pieces = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=6 * ALIGN + 3),  # length
        st.sampled_from([0, 1, 512, ALIGN]),  # place in memory: 0 is page-aligned
        st.booleans(),  # bytes (read-only: always copied) or a writable view
    ),
    max_size=6,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=pieces)
def test_any_chunks_make_the_same_file_and_direct_writes_are_aligned(
    tmp_path: Path, pieces: list[tuple[int, int, bool]]
) -> None:
    chunks: list[bytes | memoryview] = []
    for length, shift, as_bytes in pieces:
        data = os.urandom(length)
        chunks.append(data if as_bytes else placed(data, shift))
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(dir=tmp_path) as directory:
        writes = Writes(patch)
        path = Path(directory) / "out.bin"
        write_chunks(path, chunks)
        assert path.read_bytes() == b"".join(bytes(c) for c in chunks)
    assert all(n % ALIGN == 0 for n in writes.direct)


def test_aligned_memory_is_written_without_a_copy(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not supports_direct(scratch.parent):
        pytest.skip("this filesystem refuses O_DIRECT")
    taken: list[int] = []
    real_take = directio._take
    monkeypatch.setattr(directio, "_take", lambda: taken.append(1) or real_take())
    writes = Writes(monkeypatch)
    data = os.urandom(10 * ALIGN)
    assert write_chunks(scratch, [placed(data, 0)])
    assert scratch.read_bytes() == data
    assert writes.direct == [10 * ALIGN] and taken == []  # one write, from the caller's memory


def test_an_unaligned_tail_is_written_buffered(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not supports_direct(scratch.parent):
        pytest.skip("this filesystem refuses O_DIRECT")
    writes = Writes(monkeypatch)
    data = os.urandom(9 * ALIGN + 100)
    write_chunks(scratch, [placed(data, 0)])
    assert scratch.read_bytes() == data
    assert writes.calls == [(True, 9 * ALIGN), (False, 100)]


def test_a_filesystem_that_refuses_direct_io_gets_buffered_writes(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fcntl = fcntl.fcntl

    def no_direct(fd: int, cmd: int, arg: int = 0) -> int:
        if cmd == fcntl.F_SETFL and arg & O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_fcntl(fd, cmd, arg)

    monkeypatch.setattr(directio.fcntl, "fcntl", no_direct)
    writes = Writes(monkeypatch)
    data = os.urandom(9 * ALIGN + 5)
    assert not write_chunks(scratch, [placed(data, 0), data])
    assert scratch.read_bytes() == data + data
    assert writes.direct == []


def test_a_direct_write_refused_midway_goes_on_buffered(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fcntl accepts O_DIRECT but the write does not (a larger logical block, a stacked
    filesystem): what was accepted stays, the rest is written buffered, in order."""
    if not supports_direct(scratch.parent):
        pytest.skip("this filesystem refuses O_DIRECT")
    writes = Writes(monkeypatch, refuse_direct=True)
    first, second = os.urandom(6 * ALIGN + 7), os.urandom(3 * ALIGN)
    write_chunks(scratch, [placed(first, 0), first, placed(second, 0)])
    assert scratch.read_bytes() == first + first + second
    assert writes.direct == [6 * ALIGN]  # the one refused; every other write was buffered


def test_write_file_writes_small_files_buffered(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = Writes(monkeypatch)
    data = os.urandom(directio.DIRECT_MIN - 1)
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert not directio.write_file(fd, placed(data, 0))
    finally:
        os.close(fd)
    assert scratch.read_bytes() == data
    assert writes.direct == []


def test_bounce_buffers_are_given_back_after_a_failed_write(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not supports_direct(scratch.parent):
        pytest.skip("this filesystem refuses O_DIRECT")

    def disk_full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        monkeypatch.setattr(directio.os, "write", disk_full)
        with pytest.raises(OSError, match="No space"):
            directio.write_file(fd, os.urandom(directio.DIRECT_MIN))  # bytes: through the bounce
    finally:
        os.close(fd)
    assert len(directio._spare) == 1
