"""Object data over block adapters: block split, dedup, S3 ETag, ranged reads, bounded pipeline."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.data import (
    EMPTY_LOCATOR,
    WrittenObject,
    block_locator,
    read_object,
    write_bytes,
    write_object,
)
from lakectl.core.blocks.directio import SourceFile
from lakectl.core.blocks.local import LocalAdapter
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    MissingData,
    StorageError,
)

KIB = 1024


class MemoryAdapter:
    """A dict of blocks that counts calls and writes, so tests can see what the writer did."""

    def __init__(self) -> None:
        self.blocks: dict[str, bytes] = {}
        self.puts = 0
        self.writes = 0
        self.touches = 0
        self.lock = threading.Lock()

    def put(self, locator: str, data: bytes) -> None:
        assert block_locator(data) == locator
        with self.lock:
            self.puts += 1
            if self.blocks.get(locator) != data:  # as the protocol says: an intact copy stays
                self.writes += 1
                self.blocks[locator] = bytes(data)

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        try:
            data = self.blocks[locator]
        except KeyError:
            raise BlockNotFound(locator) from None
        return data[offset:] if length is None else data[offset : offset + length]

    def exists(self, locator: str) -> bool:
        return locator in self.blocks

    def touch(self, locator: str) -> bool:
        with self.lock:
            self.touches += 1
        return locator in self.blocks

    def modified(self, locator: str) -> float:
        if locator not in self.blocks:
            raise BlockNotFound(locator)
        return 0.0

    def delete(self, locator: str) -> None:
        self.blocks.pop(locator, None)

    def list(self) -> Iterator[str]:
        yield from list(self.blocks)

    def sync(self) -> None:
        pass


@pytest.fixture(params=["memory", "local"])
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> BlockAdapter:
    if request.param == "memory":
        return MemoryAdapter()
    return LocalAdapter(tmp_path / "blocks")


def etag(data: bytes, block_size: int) -> str:
    """The S3 ETag computed independently of the code under test."""
    parts = [data[i : i + block_size] for i in range(0, len(data), block_size)] or [b""]
    if len(parts) == 1:
        return hashlib.md5(data).hexdigest()
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f"{hashlib.md5(joined).hexdigest()}-{len(parts)}"


def read_all(adapter: BlockAdapter, written: WrittenObject, **kw: int) -> bytes:
    return b"".join(read_object(adapter, written.locators, **kw))


def test_satisfy_the_protocol() -> None:
    assert isinstance(MemoryAdapter(), BlockAdapter)


def test_block_locator() -> None:
    assert block_locator(b"") == EMPTY_LOCATOR
    assert block_locator(b"abc") == "900150983cd24fb0d6963f7d28e17f72+3"


def test_empty_object(adapter: BlockAdapter) -> None:
    for written in (write_object(adapter, io.BytesIO(b"")), write_bytes(adapter, b"")):
        assert written == WrittenObject(
            size=0, checksum="d41d8cd98f00b204e9800998ecf8427e", locators=(EMPTY_LOCATOR,)
        )
        assert read_all(adapter, written) == b""
    assert adapter.exists(EMPTY_LOCATOR)


@pytest.mark.parametrize("size", [1, 100, KIB - 1, KIB, KIB + 1, 2 * KIB, 5 * KIB + 17, 16 * KIB])
def test_round_trip(adapter: BlockAdapter, size: int) -> None:
    data = os.urandom(size)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    blocks = max(1, -(-size // KIB))
    assert written.size == size
    assert len(written.locators) == blocks
    assert written.locators == tuple(block_locator(data[i : i + KIB]) for i in range(0, size, KIB))
    assert written.checksum == etag(data, KIB)
    assert read_all(adapter, written) == data
    assert write_bytes(adapter, data, block_size=KIB) == written


def test_exactly_one_block_has_a_plain_md5_etag(adapter: BlockAdapter) -> None:
    data = os.urandom(KIB)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    assert written.locators == (block_locator(data),)
    assert written.checksum == hashlib.md5(data).hexdigest()


def test_multi_block_etag_is_md5_of_digests_dash_count(adapter: BlockAdapter) -> None:
    data = b"a" * KIB + b"b" * KIB + b"c" * 10
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    digests = hashlib.md5(b"a" * KIB).digest() + hashlib.md5(b"b" * KIB).digest()
    digests += hashlib.md5(b"c" * 10).digest()
    assert written.checksum == hashlib.md5(digests).hexdigest() + "-3"


def test_read_object_yields_block_by_block(adapter: BlockAdapter) -> None:
    data = os.urandom(3 * KIB + 5)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    chunks = list(read_object(adapter, written.locators))
    assert [len(c) for c in chunks] == [KIB, KIB, KIB, 5]


def test_range_reads_across_block_boundaries(adapter: BlockAdapter) -> None:
    data = os.urandom(4 * KIB + 300)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    points = [0, 1, KIB - 1, KIB, KIB + 1, 2 * KIB + 500, 4 * KIB, 4 * KIB + 299, 4 * KIB + 300]
    for offset in points:
        assert read_all(adapter, written, offset=offset) == data[offset:]
        for length in [0, 1, 2, KIB, KIB + 2, 3 * KIB, 10 * KIB]:
            got = read_all(adapter, written, offset=offset, length=length)
            assert got == data[offset : offset + length], (offset, length)
    assert read_all(adapter, written, offset=10 * KIB) == b""


def test_range_reads_only_the_blocks_needed() -> None:
    adapter = MemoryAdapter()
    data = os.urandom(4 * KIB)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    adapter.delete(written.locators[0])
    adapter.delete(written.locators[3])
    assert read_all(adapter, written, offset=KIB, length=2 * KIB) == data[KIB : 3 * KIB]
    with pytest.raises(MissingData) as lost:  # the object names it: lost data, not "no such thing"
        read_all(adapter, written)
    assert isinstance(lost.value.__cause__, BlockNotFound)


def test_the_empty_block_is_never_read() -> None:
    adapter = MemoryAdapter()
    a, b = write_bytes(adapter, b"a" * 10), write_bytes(adapter, b"b" * 10)
    locators = [EMPTY_LOCATOR, *a.locators, EMPTY_LOCATOR, *b.locators, EMPTY_LOCATOR]
    assert not adapter.exists(EMPTY_LOCATOR)
    assert b"".join(read_object(adapter, locators)) == b"a" * 10 + b"b" * 10
    assert b"".join(read_object(adapter, locators, offset=5, length=10)) == b"a" * 5 + b"b" * 5
    assert list(read_object(adapter, [EMPTY_LOCATOR])) == []


def test_read_object_checks_its_arguments_at_call_time(adapter: BlockAdapter) -> None:
    with pytest.raises(InvalidArgument):
        read_object(adapter, [EMPTY_LOCATOR], offset=-1)
    with pytest.raises(InvalidArgument):
        read_object(adapter, [EMPTY_LOCATOR], length=-1)
    with pytest.raises(InvalidLocator):
        read_object(adapter, ["../../etc+1"])
    with pytest.raises(InvalidLocator):
        read_object(adapter, [EMPTY_LOCATOR + "+Ahint@1"])


def test_block_size_must_be_positive(adapter: BlockAdapter) -> None:
    with pytest.raises(InvalidArgument):
        write_object(adapter, io.BytesIO(b"x"), block_size=0)
    with pytest.raises(InvalidArgument):
        write_bytes(adapter, b"x", block_size=-1)


def test_writing_the_same_data_twice_stores_no_new_block() -> None:
    adapter = MemoryAdapter()
    data = os.urandom(5 * KIB + 3)
    first = write_object(adapter, io.BytesIO(data), block_size=KIB)
    stored, writes = set(adapter.list()), adapter.writes
    assert writes == 6
    second = write_object(adapter, io.BytesIO(data), block_size=KIB)
    assert second == first
    assert adapter.writes == writes
    assert set(adapter.list()) == stored
    write_bytes(adapter, data, block_size=KIB)
    assert adapter.writes == writes


def test_dedup_on_disk(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    data = os.urandom(3 * KIB)
    write_object(adapter, io.BytesIO(data), block_size=KIB)
    files = sorted(p for p in (tmp_path / "blocks").rglob("*") if p.is_file())
    inodes = [p.stat().st_ino for p in files]
    past = time.time() - 3600
    for p in files:
        os.utime(p, (past, past))
    write_object(adapter, io.BytesIO(data), block_size=KIB)
    assert sorted(p for p in (tmp_path / "blocks").rglob("*") if p.is_file()) == files
    # Not rewritten (a write renames a new file into place: a new inode), but touched, so that a
    # garbage collection running meanwhile spares blocks an upload just deduplicated.
    assert [p.stat().st_ino for p in files] == inodes
    assert all(p.stat().st_mtime > past + 60 for p in files)


def test_repeated_blocks_in_one_object_are_stored_once() -> None:
    adapter = MemoryAdapter()
    data = b"z" * (4 * KIB)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    assert len(set(written.locators)) == 1
    assert len(written.locators) == 4
    assert len(adapter.blocks) == 1
    assert read_all(adapter, written) == data


class Trickle(io.RawIOBase):
    """A stream that returns at most a few bytes per read, like a slow socket."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.pos, self.step = data, 0, step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        n = self.step if size < 0 else min(size, self.step)
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk


def test_block_boundaries_do_not_depend_on_how_the_stream_chunks_its_reads() -> None:
    adapter = MemoryAdapter()
    data = os.urandom(3 * KIB + 7)
    expected = write_bytes(adapter, data, block_size=KIB)
    got = write_object(adapter, Trickle(data, 333), block_size=KIB)  # type: ignore[arg-type]
    assert got == expected


def test_write_object_from_a_file(adapter: BlockAdapter, tmp_path: Path) -> None:
    data = os.urandom(10 * KIB + 1)
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    with path.open("rb") as f:
        written = write_object(adapter, f, block_size=KIB)
    assert written.checksum == etag(data, KIB)
    assert read_all(adapter, written) == data


def test_write_object_uses_the_given_pool_and_leaves_it_open(adapter: BlockAdapter) -> None:
    data = os.urandom(6 * KIB)
    with ThreadPoolExecutor(4) as pool:
        first = write_object(adapter, io.BytesIO(data), block_size=KIB, pool=pool)
        second = write_object(adapter, io.BytesIO(data[::-1]), block_size=KIB, pool=pool)
    assert read_all(adapter, first) == data
    assert read_all(adapter, second) == data[::-1]


class SlowCountingAdapter(MemoryAdapter):
    """Tracks how many blocks were read from the source but not yet stored."""

    def __init__(self) -> None:
        super().__init__()
        self.stored = 0
        self.concurrent = 0
        self.max_concurrent = 0

    def put(self, locator: str, data: bytes) -> None:
        with self.lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        time.sleep(0.005)
        super().put(locator, data)
        with self.lock:
            self.concurrent -= 1
            self.stored += 1


class CountingSource(io.BytesIO):
    def __init__(self, data: bytes, adapter: SlowCountingAdapter) -> None:
        super().__init__(data)
        self.adapter = adapter
        self.blocks_read = 0
        self.max_in_memory = 0

    def _count(self, n: int) -> None:
        if n:
            self.blocks_read += 1
            with self.adapter.lock:
                in_memory = self.blocks_read - self.adapter.stored
            self.max_in_memory = max(self.max_in_memory, in_memory)

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self._count(len(chunk))
        return chunk

    def readinto(self, buffer: Any) -> int:  # what the writer uses, where a stream has it
        n = super().readinto(buffer)
        self._count(n)
        return n


def test_pipeline_keeps_at_most_three_blocks_in_memory() -> None:
    adapter = SlowCountingAdapter()
    data = os.urandom(40 * KIB)
    source = CountingSource(data, adapter)
    written = write_object(adapter, source, block_size=KIB)
    assert source.max_in_memory <= 3
    assert adapter.max_concurrent == 2  # both workers were busy at once
    assert read_all(adapter, written) == data


class FailingAdapter(MemoryAdapter):
    def put(self, locator: str, data: bytes) -> None:
        if self.puts == 3:
            raise StorageError("disk full")
        super().put(locator, data)


def test_a_failing_put_fails_the_write() -> None:
    adapter = FailingAdapter()
    with pytest.raises(StorageError):
        write_object(adapter, io.BytesIO(os.urandom(20 * KIB)), block_size=KIB)
    assert adapter.puts <= 4


class FailingSource(io.BytesIO):
    def read(self, size: int | None = -1) -> bytes:
        if self.tell() >= 3 * KIB:
            raise OSError("connection reset")
        return super().read(size)

    def readinto(self, buffer: Any) -> int:
        if self.tell() >= 3 * KIB:
            raise OSError("connection reset")
        return super().readinto(buffer)


def test_a_failing_source_fails_the_write() -> None:
    with pytest.raises(OSError, match="connection reset"):
        write_object(MemoryAdapter(), FailingSource(os.urandom(10 * KIB)), block_size=KIB)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=3000),
    block_size=st.integers(min_value=1, max_value=1100),
    offset=st.integers(min_value=0, max_value=3200),
    length=st.none() | st.integers(min_value=0, max_value=3200),
)
def test_property_write_read_round_trip(
    data: bytes, block_size: int, offset: int, length: int | None
) -> None:
    adapter = MemoryAdapter()
    written = write_object(adapter, io.BytesIO(data), block_size=block_size)
    assert written == write_bytes(MemoryAdapter(), data, block_size=block_size)
    assert written.size == len(data)
    assert written.checksum == etag(data, block_size)
    assert all(len(adapter.get(loc)) <= block_size for loc in written.locators)
    assert b"".join(read_object(adapter, written.locators)) == data
    end = None if length is None else offset + length
    got = b"".join(read_object(adapter, written.locators, offset=offset, length=length))
    assert got == data[offset:end]


# -- reading ahead (a download's reads, docs/decisions/0015) ----------------------------------


@pytest.mark.parametrize("ahead", [1, 2, 3])
def test_reading_ahead_yields_the_same_bytes(adapter: BlockAdapter, ahead: int) -> None:
    data = os.urandom(10 * KIB + 3)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    assert b"".join(read_object(adapter, written.locators, ahead=ahead)) == data
    got = b"".join(read_object(adapter, written.locators, 1500, 5000, ahead=ahead))
    assert got == data[1500:6500]


class SlowReads(MemoryAdapter):
    """Counts the gets started and how many run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.started = 0
        self.running = 0
        self.max_running = 0

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        with self.lock:
            self.started += 1
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        time.sleep(0.005)
        try:
            return super().get(locator, offset, length)
        finally:
            with self.lock:
                self.running -= 1


def test_reading_ahead_keeps_at_most_ahead_reads_in_flight_and_stops_with_its_reader() -> None:
    adapter = SlowReads()
    data = os.urandom(20 * KIB)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    chunks = read_object(adapter, written.locators, ahead=2)
    assert adapter.started == 0  # nothing is read before the first chunk is asked for
    got = [next(chunks) for _ in range(3)]
    assert b"".join(got) == data[: 3 * KIB]
    chunks.close()  # type: ignore[attr-defined]  # a reader that stops early (an error, Ctrl-C)
    assert adapter.started <= 3 + 2 and adapter.running == 0
    assert adapter.max_running <= 2


def test_reading_ahead_verifies_every_block_and_fails_in_order(tmp_path: Path) -> None:
    """A damaged third block: the first two are yielded, then CorruptBlock, nothing after."""
    adapter = LocalAdapter(tmp_path / "blocks")
    data = os.urandom(6 * KIB)
    written = write_object(adapter, io.BytesIO(data), block_size=KIB)
    md5 = written.locators[2].split("+")[0]
    path = tmp_path / "blocks" / md5[:3] / md5
    damaged = bytearray(path.read_bytes())
    damaged[7] ^= 1
    path.chmod(0o644)
    path.write_bytes(bytes(damaged))
    got: list[bytes] = []
    with pytest.raises(CorruptBlock):
        for chunk in read_object(adapter, written.locators, ahead=2):
            got.append(chunk)
    assert b"".join(got) == data[: 2 * KIB]


def test_write_object_hands_the_block_store_page_aligned_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks are read into reused, page-aligned buffers: a local store writes full blocks
    from them around the page cache, without copying them (docs/decisions/0015)."""
    from lakectl.core.blocks import directio

    root = tmp_path / "blocks"
    adapter = LocalAdapter(root)
    probe = os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if not directio.enable(probe):
            pytest.skip("this filesystem refuses O_DIRECT")
    finally:
        os.close(probe)
    copies: list[int] = []
    real_take = directio._take
    monkeypatch.setattr(directio, "_take", lambda: copies.append(1) or real_take())
    block = directio.DIRECT_MIN
    data = os.urandom(3 * block + 5)
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    with path.open("rb") as f:
        written = write_object(adapter, f, block_size=block)
    assert copies == []  # no bounce buffer was needed: no block was copied
    assert b"".join(read_object(adapter, written.locators)) == data


@pytest.mark.parametrize("size", [0, 1, KIB - 1, KIB, KIB + 1, 3 * KIB, 7 * KIB + 5])
def test_a_local_file_read_side_by_side_makes_the_blocks_a_stream_makes(
    adapter: BlockAdapter, tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    with SourceFile(str(path)) as f:
        f.seek(0)
        written = write_object(adapter, f, block_size=KIB)  # type: ignore[arg-type]
        assert f.tell() == size  # read to its end, as a stream is
    assert written == write_bytes(MemoryAdapter(), data, block_size=KIB)
    assert read_all(adapter, written) == data


class CountingFile(SourceFile):
    """A local file that counts the block reads under way at once."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.now = self.most = 0
        self.lock = threading.Lock()

    def read_at(self, buffer: Any, offset: int) -> int:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.02)  # a device read: the other workers get theirs under way meanwhile
        try:
            return super().read_at(buffer, offset)
        finally:
            with self.lock:
                self.now -= 1


def test_blocks_of_a_local_file_are_read_side_by_side_three_at_most(tmp_path: Path) -> None:
    data = os.urandom(20 * KIB + 3)
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    with CountingFile(str(path)) as f:
        written = write_object(MemoryAdapter(), f, block_size=KIB)  # type: ignore[arg-type]
    assert f.most == 3  # reads waited on the device side by side, and memory stayed bounded
    assert written.checksum == etag(data, KIB)


def test_a_failing_read_of_a_local_file_fails_the_write(tmp_path: Path) -> None:
    path = tmp_path / "source.bin"
    path.write_bytes(os.urandom(10 * KIB))

    class Failing(SourceFile):
        def read_at(self, buffer: Any, offset: int) -> int:
            if offset >= 4 * KIB:
                raise OSError(5, "Input/output error")
            return super().read_at(buffer, offset)

    with Failing(str(path)) as f, pytest.raises(OSError, match="Input/output"):
        write_object(MemoryAdapter(), f, block_size=KIB)  # type: ignore[arg-type]
