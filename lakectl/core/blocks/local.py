"""A block adapter on a local directory: atomic puts, batched durability, verified reads."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import io
import mmap
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Final

from lakectl.core.blocks import Temporary, directio
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    StorageError,
)

# Bare locators only (hints never reach an adapter). The size is bounded to 20 digits so that
# int() can never hit the interpreter's digit limit and raise a foreign ValueError.
_LOCATOR: Final = re.compile(r"([0-9a-f]{32})\+([0-9]{1,20})")
_BLOCK_NAME: Final = re.compile(r"[0-9a-f]{32}")
_PREFIX: Final = re.compile(r"[0-9a-f]{3}")
# What _write_new names its temporary files: .<md5>.<16 random hex digits>.tmp
_TEMPORARY: Final = re.compile(r"\.([0-9a-f]{32})\.[0-9a-f]{16}\.tmp")

PREFIXES: Final = tuple(f"{i:03x}" for i in range(16**3))
"""The names of the directories a ``LocalAdapter`` may hold blocks in: its units of parallel listing."""

# Below this size, starting writeback at put time costs more (one I/O per tiny file) than it
# saves; the kernel and the final syncfs batch small files better on their own.
_EARLY_WRITEBACK_MIN: Final = 1 << 20
_SYNC_FILE_RANGE_WRITE: Final = 2

# Up to this many files put since the last sync, ``sync()`` fsyncs each of them (and their
# directories); beyond, one ``syncfs``. A syncfs also writes every other dirty page of the
# filesystem, whoever wrote it: after a job wrote gigabytes, or git added 100k files, it takes
# seconds where a few fsyncs take milliseconds. Many fsyncs cost more than one syncfs of a
# filesystem that holds nothing else to write (0.3 ms each against ~1 ms here).
FSYNC_EACH_UP_TO: Final = 32

_BLOCK_MODE: Final = 0o444  # blocks are immutable; read-only files guard against stray edits


def _split(locator: str) -> tuple[str, int]:
    """Validate a bare locator before any path is built from it."""
    match = _LOCATOR.fullmatch(locator) if isinstance(locator, str) else None
    if match is None:
        raise InvalidLocator(f"not a bare block locator: {locator!r}", locator=repr(locator))
    return match.group(1), int(match.group(2))


@functools.cache
def _libc_call(name: str) -> Callable[..., int] | None:
    """A libc function by name, or None where the platform lacks it."""
    try:
        func = ctypes.CDLL(None, use_errno=True)[name]
    except (OSError, AttributeError):
        return None
    if name == "syncfs":
        func.argtypes = [ctypes.c_int]
    elif name == "sync_file_range":
        func.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


class LocalAdapter:
    """Blocks as files ``<root>/<md5[:3]>/<md5>``; the locator's size must match the file's.

    ``put`` writes a temporary file and renames it into place, without fsync: durability is
    batched by ``sync()``, after which callers may publish metadata. It fsyncs the files put
    since the last sync and their directories, or with more than :data:`FSYNC_EACH_UP_TO` of
    them calls one ``syncfs``. Pass ``fsync_each=True`` to fsync every block (and its
    directory) as it is put instead. Blocks of :data:`directio.DIRECT_MIN` bytes or more are
    written around the page cache where the filesystem allows it (``O_DIRECT``): they too are
    durable only once synced, but their bytes are on the device by then and the fsync is quick.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync_each: bool = False) -> None:
        self.root = os.fspath(root)
        self.fsync_each = fsync_each
        # What sync() must make durable: the files put since the last one and the directories
        # their names went into, or None once there are too many to fsync one by one.
        self._unsynced: dict[str, None] | None = {}
        self._unsynced_lock = threading.Lock()
        # One sync at a time: a sync that finds nothing left to do must not return while
        # another one is still fsyncing the files it took (which may include this caller's).
        self._sync_lock = threading.Lock()
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create block directory {self.root}: {exc}") from exc

    def __repr__(self) -> str:
        return f"LocalAdapter({self.root!r}, fsync_each={self.fsync_each})"

    def _dir(self, md5: str) -> str:
        return os.path.join(self.root, md5[:3])

    def _path(self, md5: str) -> str:
        return os.path.join(self.root, md5[:3], md5)

    def put(self, locator: str, data: bytes | memoryview) -> None:
        """Store the block atomically; when a copy is already there, compare it with ``data``:
        touch it if equal, else (rotten or truncated) write a fresh copy over it.

        The md5 is not recomputed here (the caller just computed it, and every read verifies
        it). Comparing the stored bytes with ``data`` costs less than hashing them (64 MiB from
        the page cache: ~15 ms against ~150 ms for an md5) and catches any damage an md5 would.
        """
        md5, size = _split(locator)
        if len(data) != size:
            raise InvalidLocator(f"locator {locator} names {size} bytes, got {len(data)}", locator=locator)
        path = self._path(md5)
        try:
            if _holds(path, data):
                os.utime(path)  # written again: as fresh as a new write, for GC's grace period
                # Found, not written, but maybe not durable yet: the writer may not have synced.
                self._unsynced_add(path, self._dir(md5))
                return
        except OSError as exc:
            raise StorageError(f"cannot check block {locator}: {exc}", locator=locator) from exc
        try:
            self._write_new(md5, path, data)
        except OSError as exc:
            raise StorageError(f"cannot write block {locator}: {exc}", locator=locator) from exc

    def _write_new(self, md5: str, path: str, data: bytes | memoryview) -> None:
        directory = self._dir(md5)
        # A unique name per writer lets several processes put the same block at once: each
        # renames a complete copy over the other, and readers only ever see a complete file.
        tmp = os.path.join(directory, f".{md5}.{os.urandom(8).hex()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, _BLOCK_MODE)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            if self.fsync_each:
                fsync_dir(self.root)
            else:
                self._unsynced_add(self.root)  # the new directory's name
            fd = os.open(tmp, flags, _BLOCK_MODE)
        try:
            try:
                # Large blocks bypass the page cache (docs/decisions/0015): the same bytes reach
                # the disk for a fraction of the CPU, which the hashing of the next blocks needs.
                direct = directio.write_file(fd, data)
                if self.fsync_each:
                    os.fsync(fd)
                elif not direct and len(data) >= _EARLY_WRITEBACK_MIN:
                    _start_writeback(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):  # must not hide the error being raised
                os.unlink(tmp)
            raise
        if self.fsync_each:
            fsync_dir(directory)
        else:
            self._unsynced_add(path, directory)

    def _unsynced_add(self, *paths: str) -> None:
        with self._unsynced_lock:
            unsynced = self._unsynced
            if unsynced is None:
                return
            unsynced.update(dict.fromkeys(paths))
            if len(unsynced) > 2 * FSYNC_EACH_UP_TO:  # files and their directories
                self._unsynced = None

    @contextlib.contextmanager
    def _reading(self, locator: str, sized: bool = True) -> Iterator[io.FileIO]:
        """The block's file open for reading (unbuffered), its size checked against the
        locator's when ``sized``; ``BlockNotFound``, ``CorruptBlock`` or ``StorageError``."""
        md5, size = _split(locator)
        try:
            with open(self._path(md5), "rb", buffering=0) as f:
                actual = os.fstat(f.fileno()).st_size if sized else size
                if actual != size:
                    raise CorruptBlock(f"block {locator} has {actual} bytes on disk", locator=locator)
                yield f
        except FileNotFoundError as exc:
            raise BlockNotFound(f"no block {locator}", locator=locator) from exc
        except OSError as exc:
            raise StorageError(f"cannot read block {locator}: {exc}", locator=locator) from exc

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        """Return the block (or a slice) after checking the whole block's size and md5."""
        md5, size = _split(locator)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidArgument(f"bad range offset={offset} length={length}", locator=locator)
        with self._reading(locator) as f:
            data = f.readall()
        if len(data) != size or hashlib.md5(data).hexdigest() != md5:
            raise CorruptBlock(f"block {locator} does not match its locator", locator=locator)
        if offset == 0 and (length is None or length >= size):
            return data
        end = size if length is None else offset + length
        return data[offset:end]

    def get_mapped(self, locator: str) -> mmap.mmap | None:
        """The whole block mapped from its file, checked (:class:`~lakectl.core.blocks.HasMaps`).
        Block files are never written in place (a put renames a new file over the old), so a
        mapping keeps the bytes that were checked."""
        md5, size = _split(locator)
        if size == 0:
            return None
        with self._reading(locator) as f:
            private, writable = mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE
            mapping = mmap.mmap(f.fileno(), size, flags=private, prot=writable)
            mapping.madvise(mmap.MADV_WILLNEED)  # the whole block read ahead, not page by page
        if hashlib.md5(mapping).hexdigest() != md5:
            mapping.close()
            raise CorruptBlock(f"block {locator} does not match its locator", locator=locator)
        return mapping

    def get_part(self, locator: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``, unverified (:class:`~lakectl.core.blocks.HasParts`)."""
        with self._reading(locator, sized=False) as f:
            return os.pread(f.fileno(), length, offset)

    def exists(self, locator: str) -> bool:
        """True when a file of the locator's size is stored (content is checked on read)."""
        md5, size = _split(locator)
        try:
            return os.stat(self._path(md5)).st_size == size
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot stat block {locator}: {exc}", locator=locator) from exc

    def touch(self, locator: str) -> bool:
        md5, size = _split(locator)
        path = self._path(md5)
        try:
            if os.stat(path).st_size != size:
                return False
            os.utime(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot touch block {locator}: {exc}", locator=locator) from exc
        return True

    def modified(self, locator: str) -> float:
        md5, _ = _split(locator)
        try:
            return os.stat(self._path(md5)).st_mtime
        except FileNotFoundError as exc:
            raise BlockNotFound(f"no block {locator}", locator=locator) from exc
        except OSError as exc:
            raise StorageError(f"cannot stat block {locator}: {exc}", locator=locator) from exc

    def delete(self, locator: str) -> None:
        """Remove the block; absent is not an error."""
        md5, _ = _split(locator)
        try:
            os.unlink(self._path(md5))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot delete block {locator}: {exc}", locator=locator) from exc

    def list(self) -> Iterator[str]:
        """Yield ``<md5>+<size>`` of every stored block; temporary files are skipped."""
        try:
            with os.scandir(self.root) as top:
                prefixes = [e.name for e in top if len(e.name) == 3 and e.is_dir()]
            for prefix in prefixes:
                yield from _scan_prefix(os.path.join(self.root, prefix), prefix)
        except OSError as exc:
            raise StorageError(f"cannot list blocks in {self.root}: {exc}") from exc

    def list_prefix(self, prefix: str) -> tuple[str, ...]:
        """The locators of the blocks in one directory of :data:`PREFIXES` (their md5 starts with
        ``prefix``): the blocks of every prefix together are those ``list`` yields."""
        if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
            raise InvalidArgument(f"not a block directory prefix: {prefix!r}")
        try:
            return tuple(_scan_prefix(os.path.join(self.root, prefix), prefix))
        except OSError as exc:
            raise StorageError(f"cannot list blocks in {self.root}/{prefix}: {exc}") from exc

    def temporaries(self, prefix: str | None = None) -> Iterator[Temporary]:
        """Yield the temporary files writers left (``<md5[:3]>/.<md5>.<random>.tmp``: a put in
        flight, or a killed writer's), in every prefix directory or in one of :data:`PREFIXES`."""
        if prefix is not None and (not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None):
            raise InvalidArgument(f"not a block directory prefix: {prefix!r}")
        try:
            if prefix is None:
                with os.scandir(self.root) as top:
                    prefixes = [e.name for e in top if _PREFIX.fullmatch(e.name) and e.is_dir()]
            else:
                prefixes = [prefix]
            for name in prefixes:
                yield from _scan_temporaries(os.path.join(self.root, name), name)
        except OSError as exc:
            raise StorageError(f"cannot list temporary files in {self.root}: {exc}") from exc

    def remove_temporary(self, temporary: Temporary) -> bool:
        """Remove a file :meth:`temporaries` yielded; False when it is gone already."""
        prefix, _, name = temporary.name.partition("/")
        match = _TEMPORARY.fullmatch(name)
        if _PREFIX.fullmatch(prefix) is None or match is None or not match.group(1).startswith(prefix):
            raise InvalidArgument(f"not a temporary block file: {temporary.name!r}")
        try:
            os.unlink(os.path.join(self.root, prefix, name))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot remove {temporary.name} in {self.root}: {exc}") from exc
        return True

    def sync(self) -> None:
        """Make every block put so far durable: fsync the few files put since the last sync
        and their directories, or call one ``syncfs`` on the store's filesystem for many."""
        with self._sync_lock:
            with self._unsynced_lock:
                unsynced, self._unsynced = self._unsynced, {}
            try:
                if unsynced is None:
                    self._syncfs()
                    return
                for path in unsynced:  # every rename is done: files and directories in any order
                    try:
                        _fsync_path(path)
                    except FileNotFoundError:
                        continue  # deleted since (garbage collection): nothing left to keep
                    except OSError as exc:
                        raise StorageError(f"cannot sync {path}: {exc}", errno=exc.errno) from exc
            except BaseException:
                with self._unsynced_lock:  # still owed: the next sync syncs the filesystem
                    self._unsynced = None
                raise

    def _syncfs(self) -> None:
        syncfs = _libc_call("syncfs")
        if syncfs is None:
            os.sync()
            return
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise StorageError(f"cannot open block directory {self.root}: {exc}") from exc
        try:
            if syncfs(fd) != 0:
                code = ctypes.get_errno()
                if code == errno.ENOSYS:
                    os.sync()
                    return
                raise StorageError(f"syncfs failed on {self.root}: {os.strerror(code)}", errno=code)
        finally:
            os.close(fd)


def _scan_prefix(directory: str, prefix: str) -> list[str]:
    """The locators of the complete-named block files in one prefix directory."""
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith(prefix) and _BLOCK_NAME.fullmatch(name):
                    with contextlib.suppress(FileNotFoundError):  # deleted while listing
                        found.append(f"{name}+{entry.stat().st_size}")
    except FileNotFoundError:
        pass  # the prefix directory went away while listing
    return found


_COMPARE_CHUNK: Final = 1 << 20


def _holds(path: str, data: bytes | memoryview) -> bool:
    """Whether the file at ``path`` holds exactly ``data``; False when there is no file.

    Read in chunks into one buffer (no 64 MiB allocation) and compared as bytearray against a
    view: that comparison is a memcmp, where comparing two memoryviews goes byte by byte.
    """
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    with f:
        if os.fstat(f.fileno()).st_size != len(data):
            return False
        view = memoryview(data).cast("B")
        buffer = bytearray(min(_COMPARE_CHUNK, len(view)))
        chunk = memoryview(buffer)
        position = 0
        while position < len(view):
            n = f.readinto(chunk)
            if not n:
                return False  # shrank while being read
            stored = buffer if n == len(buffer) else buffer[:n]  # a bytearray either way
            if stored != view[position : position + n]:
                return False
            position += n
        return not f.read(1)  # nothing beyond: grew while being read


def _scan_temporaries(directory: str, prefix: str) -> list[Temporary]:
    """The temporary files of one prefix directory."""
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if _TEMPORARY.fullmatch(entry.name):
                    with contextlib.suppress(FileNotFoundError):  # renamed or removed meanwhile
                        stat = entry.stat()
                        found.append(Temporary(f"{prefix}/{entry.name}", stat.st_size, stat.st_mtime))
    except FileNotFoundError:
        pass
    return found


def _start_writeback(fd: int) -> None:
    """Ask the kernel to start writing the file now, so ``sync()`` finds little left to do.

    Without it a large upload sits dirty in the page cache until ``syncfs`` and the disk idles
    meanwhile; this is a hint, not a barrier, so failures are ignored.
    """
    sync_file_range = _libc_call("sync_file_range")
    if sync_file_range is not None:
        sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_path(path: str) -> None:
    """fsync a file or a directory (read-only opens: blocks are mode 0444)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
