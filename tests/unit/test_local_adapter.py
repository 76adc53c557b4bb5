"""LocalAdapter: atomic puts, dedup, verified reads, strict locators, listing, durability."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import lakectl.core.blocks.local as local_module
from lakectl.core.blocks import BlockAdapter, HasTemporaries, Temporary, directio
from lakectl.core.blocks.local import LocalAdapter
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    StorageError,
)


def loc(data: bytes) -> str:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


def block_path(root: Path, locator: str) -> Path:
    md5 = locator.split("+")[0]
    return root / md5[:3] / md5


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def rewrite(path: Path, data: bytes) -> None:
    path.chmod(0o644)  # blocks are stored read-only
    path.write_bytes(data)


@pytest.fixture
def adapter(tmp_path: Path) -> LocalAdapter:
    return LocalAdapter(tmp_path / "blocks")


def test_satisfies_the_protocol(adapter: LocalAdapter) -> None:
    assert isinstance(adapter, BlockAdapter)


def test_put_get_round_trip_and_layout(adapter: LocalAdapter, tmp_path: Path) -> None:
    data = b"hello, blocks"
    locator = loc(data)
    adapter.put(locator, data)
    assert block_path(tmp_path / "blocks", locator).read_bytes() == data
    assert adapter.exists(locator)
    assert adapter.get(locator) == data
    assert adapter.get(locator, 7) == b"blocks"
    assert adapter.get(locator, 0, 5) == b"hello"
    assert adapter.get(locator, 7, 100) == b"blocks"
    assert adapter.get(locator, 100) == b""
    assert adapter.get(locator, 3, 0) == b""


def test_empty_block(adapter: LocalAdapter) -> None:
    locator = "d41d8cd98f00b204e9800998ecf8427e+0"
    adapter.put(locator, b"")
    assert adapter.exists(locator)
    assert adapter.get(locator) == b""
    assert list(adapter.list()) == [locator]


def test_put_leaves_no_temporary_files(adapter: LocalAdapter, tmp_path: Path) -> None:
    blobs = [os.urandom(n) for n in (0, 1, 4096, 2 << 20)]
    for data in blobs:
        adapter.put(loc(data), data)
    files = all_files(tmp_path / "blocks")
    assert sorted(p.name for p in files) == sorted(hashlib.md5(d).hexdigest() for d in blobs)


def test_failed_put_leaves_neither_block_nor_temporary_file(
    adapter: LocalAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lakectl.core.blocks.local.os.write", disk_full)
    data = b"x" * 1000
    with pytest.raises(StorageError) as info:
        adapter.put(loc(data), data)
    assert isinstance(info.value.__cause__, OSError)
    monkeypatch.undo()
    assert not adapter.exists(loc(data))
    assert all_files(tmp_path / "blocks") == []


def test_put_is_idempotent_and_a_no_op_for_a_complete_block(adapter: LocalAdapter, tmp_path: Path) -> None:
    data = os.urandom(10_000)
    locator = loc(data)
    adapter.put(locator, data)
    before = os.stat(block_path(tmp_path / "blocks", locator))
    adapter.put(locator, data)
    after = os.stat(block_path(tmp_path / "blocks", locator))
    assert before.st_ino == after.st_ino  # not rewritten
    assert list(adapter.list()) == [locator]


def test_put_rejects_data_of_another_size(adapter: LocalAdapter) -> None:
    with pytest.raises(InvalidLocator):
        adapter.put(loc(b"abc"), b"abcd")


def test_truncated_block_does_not_exist_reads_corrupt_and_put_repairs(
    adapter: LocalAdapter, tmp_path: Path
) -> None:
    data = os.urandom(5000)
    locator = loc(data)
    adapter.put(locator, data)
    rewrite(block_path(tmp_path / "blocks", locator), data[:1234])
    assert not adapter.exists(locator)
    with pytest.raises(CorruptBlock):
        adapter.get(locator)
    with pytest.raises(CorruptBlock):
        adapter.get(locator, 0, 10)
    adapter.put(locator, data)
    assert adapter.exists(locator)
    assert adapter.get(locator) == data


@pytest.mark.parametrize("position", [0, 2500, 4999])
def test_corrupted_byte_raises_corrupt_block_on_every_read(
    adapter: LocalAdapter, tmp_path: Path, position: int
) -> None:
    data = os.urandom(5000)
    locator = loc(data)
    adapter.put(locator, data)
    path = block_path(tmp_path / "blocks", locator)
    damaged = bytearray(data)
    damaged[position] ^= 0x01
    rewrite(path, bytes(damaged))
    assert adapter.exists(locator)  # same size: only reading can tell
    with pytest.raises(CorruptBlock):
        adapter.get(locator)
    with pytest.raises(CorruptBlock):  # even a range far from the damaged byte
        adapter.get(locator, 0 if position > 100 else 4000, 10)


def test_missing_block(adapter: LocalAdapter) -> None:
    locator = loc(b"never stored")
    assert not adapter.exists(locator)
    with pytest.raises(BlockNotFound) as info:
        adapter.get(locator)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    adapter.delete(locator)  # absent is not an error


def test_negative_range_is_invalid(adapter: LocalAdapter) -> None:
    adapter.put(loc(b"abc"), b"abc")
    with pytest.raises(InvalidArgument):
        adapter.get(loc(b"abc"), -1)
    with pytest.raises(InvalidArgument):
        adapter.get(loc(b"abc"), 0, -1)


BAD_LOCATORS = [
    "../../etc",
    "../../etc/passwd+1",
    "/etc/passwd",
    "",
    "d41d8cd98f00b204e9800998ecf8427e",
    "d41d8cd98f00b204e9800998ecf8427e+",
    "D41D8CD98F00B204E9800998ECF8427E+0",
    "d41d8cd98f00b204e9800998ecf8427+0",
    "d41d8cd98f00b204e9800998ecf8427e+0\n",
    "d41d8cd98f00b204e9800998ecf8427e+-1",
    "d41d8cd98f00b204e9800998ecf8427e+0+Afff@1234",
    "d41d8cd98f00b204e9800998ecf8427e+٣",  # a non-ASCII digit
    "d41d8cd98f00b204e9800998ecf8427e+" + "9" * 5000,
    "../d41d8cd98f00b204e9800998ecf8427e+0",
]


@pytest.mark.parametrize("bad", BAD_LOCATORS)
def test_invalid_locator_text_is_rejected_before_any_path_is_built(
    adapter: LocalAdapter, tmp_path: Path, bad: str
) -> None:
    with pytest.raises(InvalidLocator):
        adapter.put(bad, b"")
    with pytest.raises(InvalidLocator):
        adapter.get(bad)
    with pytest.raises(InvalidLocator):
        adapter.exists(bad)
    with pytest.raises(InvalidLocator):
        adapter.delete(bad)
    assert all_files(tmp_path) == []


def test_non_string_locator_is_invalid(adapter: LocalAdapter) -> None:
    with pytest.raises(InvalidLocator):
        adapter.exists(None)  # type: ignore[arg-type]


def test_list_and_delete(adapter: LocalAdapter, tmp_path: Path) -> None:
    blobs = [os.urandom(n) for n in (1, 100, 10_000)]
    for data in blobs:
        adapter.put(loc(data), data)
    # Leftovers of a crashed writer and foreign files are not blocks.
    some_dir = block_path(tmp_path / "blocks", loc(blobs[0])).parent
    (some_dir / f".{loc(blobs[0]).split('+')[0]}.deadbeef.tmp").write_bytes(b"partial")
    (tmp_path / "blocks" / "README").write_text("not a block")
    assert sorted(adapter.list()) == sorted(loc(d) for d in blobs)
    adapter.delete(loc(blobs[1]))
    assert not adapter.exists(loc(blobs[1]))
    assert sorted(adapter.list()) == sorted(loc(d) for d in (blobs[0], blobs[2]))
    adapter.delete(loc(blobs[1]))


def test_list_of_an_empty_store(adapter: LocalAdapter) -> None:
    assert list(adapter.list()) == []


def test_the_prefix_directories_together_list_every_block(adapter: LocalAdapter, tmp_path: Path) -> None:
    """``list_prefix`` is how the Spark GC job lists in parallel: the union over ``PREFIXES``
    is ``list()``, and nothing but a prefix directory name is accepted."""
    blobs = [os.urandom(n) for n in (1, 100, 10_000, 7)]
    for data in blobs:
        adapter.put(loc(data), data)
    (tmp_path / "blocks" / "abc").mkdir(exist_ok=True)
    (tmp_path / "blocks" / "abc" / ("f" * 32)).write_bytes(b"a file in the wrong directory")
    by_prefix = [b for prefix in local_module.PREFIXES for b in adapter.list_prefix(prefix)]
    assert sorted(by_prefix) == sorted(adapter.list()) == sorted(loc(d) for d in blobs)
    assert len(local_module.PREFIXES) == 4096 and len(set(local_module.PREFIXES)) == 4096
    for bad in ("", "ab", "abcd", "ABC", "../", "..", "a/b"):
        with pytest.raises(InvalidArgument):
            adapter.list_prefix(bad)


class SyncCalls:
    """The fsyncs (by path) and syncfs calls an adapter's sync makes, passed through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fsynced: list[str] = []
        self.syncfs = 0
        real_fsync_path = local_module._fsync_path
        real_libc_call = local_module._libc_call

        def fsync_path(path: str) -> None:
            self.fsynced.append(path)
            real_fsync_path(path)

        def libc_call(name: str) -> object:
            func = real_libc_call(name)
            if name != "syncfs" or func is None:
                return func

            def syncfs(fd: int) -> int:
                self.syncfs += 1
                return func(fd)

            return syncfs

        monkeypatch.setattr(local_module, "_fsync_path", fsync_path)
        monkeypatch.setattr(local_module, "_libc_call", libc_call)


def test_sync_after_a_few_puts_fsyncs_those_files_and_their_directories_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    other = tmp_path / "blocks" / "fff"
    other.mkdir()  # a prefix directory this adapter did not create
    (other / ("f" * 32)).write_bytes(b"not ours")
    calls = SyncCalls(monkeypatch)
    blobs = [f"block {i}".encode() for i in range(3)]
    for data in blobs:
        adapter.put(loc(data), data)
    adapter.sync()
    files = {str(block_path(tmp_path / "blocks", loc(d))) for d in blobs}
    directories = {os.path.dirname(f) for f in files}
    # each prefix directory is new, so the root that names it is synced too
    assert set(calls.fsynced) == files | directories | {str(tmp_path / "blocks")}
    assert len(calls.fsynced) == len(set(calls.fsynced))
    assert calls.syncfs == 0
    calls.fsynced.clear()
    adapter.sync()  # nothing new: nothing to do
    assert calls.fsynced == [] and calls.syncfs == 0


def test_sync_after_many_puts_is_one_syncfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    calls = SyncCalls(monkeypatch)
    for i in range(local_module.FSYNC_EACH_UP_TO + 1):
        data = f"block {i}".encode()
        adapter.put(loc(data), data)
    adapter.sync()
    assert calls.syncfs == 1 and calls.fsynced == []
    data = b"one more"
    adapter.put(loc(data), data)
    adapter.sync()  # back to fsyncs after the barrier
    assert calls.syncfs == 1 and str(block_path(tmp_path / "blocks", loc(data))) in calls.fsynced


def test_a_block_found_stored_is_synced_by_the_adapter_that_put_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process wrote it and may not have synced yet: linking it needs it durable.
    LocalAdapter(tmp_path / "blocks").put(loc(b"shared"), b"shared")
    adapter = LocalAdapter(tmp_path / "blocks")
    calls = SyncCalls(monkeypatch)
    adapter.put(loc(b"shared"), b"shared")
    adapter.sync()
    path = block_path(tmp_path / "blocks", loc(b"shared"))
    assert str(path) in calls.fsynced and str(path.parent) in calls.fsynced


def test_a_block_deleted_before_the_sync_is_skipped(adapter: LocalAdapter) -> None:
    adapter.put(loc(b"gone"), b"gone")
    adapter.put(loc(b"kept"), b"kept")
    adapter.delete(loc(b"gone"))
    adapter.sync()
    assert list(adapter.list()) == [loc(b"kept")]


def test_a_sync_waits_for_the_sync_that_took_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    entered, release = threading.Event(), threading.Event()
    real_fsync_path = local_module._fsync_path

    def slow_fsync_path(path: str) -> None:
        entered.set()
        assert release.wait(10)
        real_fsync_path(path)

    monkeypatch.setattr(local_module, "_fsync_path", slow_fsync_path)
    adapter.put(loc(b"block"), b"block")
    first = threading.Thread(target=adapter.sync)
    first.start()
    assert entered.wait(10)
    done = threading.Event()
    second = threading.Thread(target=lambda: (adapter.sync(), done.set()))
    second.start()
    # the second finds nothing to sync, but its block is durable only when the first is done
    assert not done.wait(0.2)
    release.set()
    first.join(10)
    second.join(10)
    assert done.is_set()


def test_sync_falls_back_to_os_sync_without_syncfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    for i in range(local_module.FSYNC_EACH_UP_TO + 1):
        data = f"block {i}".encode()
        adapter.put(loc(data), data)
    calls: list[str] = []
    monkeypatch.setattr(local_module, "_libc_call", lambda name: None)
    monkeypatch.setattr("lakectl.core.blocks.local.os.sync", lambda: calls.append("sync"))
    adapter.sync()
    assert calls == ["sync"]


def test_sync_failure_is_a_storage_error_and_the_next_sync_tries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    adapter.put(loc(b"block"), b"block")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr("lakectl.core.blocks.local.os.fsync", failing_fsync)
    with pytest.raises(StorageError):
        adapter.sync()
    monkeypatch.undo()

    def failing_syncfs(fd: int) -> int:
        ctypes.set_errno(errno.EIO)
        return -1

    # what the failed sync took is still owed: the next one syncs the whole filesystem
    monkeypatch.setattr(local_module, "_libc_call", lambda name: failing_syncfs)
    with pytest.raises(StorageError):
        adapter.sync()
    with pytest.raises(StorageError):
        adapter.sync()  # and still owed after a failed syncfs
    monkeypatch.undo()
    calls = SyncCalls(monkeypatch)
    adapter.sync()
    assert calls.syncfs == 1
    adapter.sync()  # paid: nothing owed any more
    assert calls.syncfs == 1 and calls.fsynced == []


def test_fsync_each_fsyncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "blocks", fsync_each=True)
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr("lakectl.core.blocks.local.os.fsync", counting_fsync)
    adapter.put(loc(b"durable"), b"durable")
    assert len(synced) >= 2  # the file, then the directory holding its new name
    assert adapter.get(loc(b"durable")) == b"durable"


def test_unreadable_store_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageError):
        LocalAdapter(tmp_path / "file" / "blocks")


WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from lakectl.core.blocks.local import LocalAdapter

    adapter = LocalAdapter(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()  # all start writing at once, when the parent closes stdin
    for i in range(int(sys.argv[2])):
        data = hashlib.sha256(str(i).encode()).digest() * (2048 + i)
        adapter.put(f"{hashlib.md5(data).hexdigest()}+{len(data)}", data)
    """
)


def test_processes_putting_the_same_blocks_concurrently(tmp_path: Path) -> None:
    root = tmp_path / "blocks"
    count = 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
        assert proc.stdout is not None
        proc.stdout.close()
    adapter = LocalAdapter(root)
    expected = set()
    for i in range(count):
        data = hashlib.sha256(str(i).encode()).digest() * (2048 + i)
        expected.add(loc(data))
        assert adapter.get(loc(data)) == data
    assert set(adapter.list()) == expected
    assert not [p for p in all_files(root) if p.name.startswith(".")]


def test_temporary_files_are_listed_and_removed_but_never_listed_as_blocks(tmp_path: Path) -> None:
    store = LocalAdapter(tmp_path)
    data = b"a block"
    locator = f"{hashlib.md5(data).hexdigest()}+{len(data)}"
    store.put(locator, data)
    md5 = locator[:32]
    name = f"{md5[:3]}/.{md5}.0123456789abcdef.tmp"
    (tmp_path / name).write_bytes(b"half")
    assert isinstance(store, HasTemporaries)
    [found] = list(store.temporaries())
    assert (found.name, found.size, found.volume) == (name, 4, None)
    assert found.modified == os.stat(tmp_path / name).st_mtime
    assert list(store.temporaries(md5[:3])) == [found]
    assert list(store.temporaries("fff" if md5[:3] != "fff" else "000")) == []
    assert list(store.list()) == [locator]
    with pytest.raises(InvalidArgument):
        store.remove_temporary(Temporary(f"{md5[:3]}/{md5}", 0, 0.0))  # a block, not a temporary
    with pytest.raises(InvalidArgument):
        store.remove_temporary(Temporary("../x/.tmp", 0, 0.0))
    assert store.remove_temporary(found) is True
    assert store.remove_temporary(found) is False, "gone already"
    assert list(store.temporaries()) == [] and store.get(locator) == data


# -- large blocks: written around the page cache (docs/decisions/0015) -----------------------


def aligned(data: bytes) -> memoryview:
    """``data`` in page-aligned writable memory, as write_object's buffers hold blocks."""
    memory = mmap.mmap(-1, len(data))
    memory[:] = data
    return memoryview(memory)


def direct_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the writes made with O_DIRECT on (passed through)."""
    seen: list[int] = []
    real_write = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0):
            seen.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(directio.os, "write", write)
    return seen


def direct_io_here(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / ".probe", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        return directio.enable(fd)
    finally:
        os.close(fd)
        os.unlink(path / ".probe")


@pytest.mark.parametrize("memory", ["aligned", "bytes"])
def test_a_large_block_is_written_direct_and_durable_when_sync_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: str
) -> None:
    root = tmp_path / "blocks"
    if not direct_io_here(root):
        pytest.skip("this filesystem refuses O_DIRECT")
    adapter = LocalAdapter(root)
    data = os.urandom(directio.DIRECT_MIN + 4096 + 17)  # an unaligned tail
    locator = loc(data)
    writes = direct_writes(monkeypatch)
    adapter.put(locator, aligned(data) if memory == "aligned" else data)
    assert sum(writes) == directio.DIRECT_MIN + 4096  # all but the tail, around the page cache
    calls = SyncCalls(monkeypatch)
    adapter.sync()
    path = block_path(root, locator)
    # A direct write is no barrier: the file (its size, its extents) and its name are fsynced.
    assert str(path) in calls.fsynced and str(path.parent) in calls.fsynced
    assert adapter.get(locator) == data
    assert all_files(root) == [path]  # no temporary file left


def test_small_blocks_stay_in_the_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    writes = direct_writes(monkeypatch)
    data = os.urandom(directio.DIRECT_MIN - 1)
    adapter.put(loc(data), aligned(data))
    assert writes == []
    assert adapter.get(loc(data)) == data


def test_a_large_block_on_a_filesystem_without_direct_io_is_written_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(directio, "enable", lambda fd: False)
    adapter = LocalAdapter(tmp_path / "blocks")
    writes = direct_writes(monkeypatch)
    data = os.urandom(directio.DIRECT_MIN + 1)
    adapter.put(loc(data), aligned(data))
    adapter.sync()
    assert writes == []
    assert adapter.get(loc(data)) == data
    assert all_files(tmp_path / "blocks") == [block_path(tmp_path / "blocks", loc(data))]


def test_a_failed_direct_put_leaves_neither_block_nor_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = LocalAdapter(tmp_path / "blocks")
    data = os.urandom(directio.DIRECT_MIN)

    def disk_full(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(directio.os, "write", disk_full)
    with pytest.raises(StorageError):
        adapter.put(loc(data), aligned(data))
    monkeypatch.undo()
    assert all_files(tmp_path / "blocks") == []
    assert not adapter.exists(loc(data))
