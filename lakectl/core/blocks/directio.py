"""Large writes to new files around the page cache (``O_DIRECT``), buffered where refused; and
large reads of a source file from what the page cache holds of it, the rest around the cache.

A buffered write of new data makes the kernel find, charge and fill fresh page-cache pages: on
the machines measured here that is ~1.7 ms of system CPU per MiB (~110 ms of a core for a 64 MiB
block), where a direct write costs ~0.03 ms per MiB and leaves the core to hashing
(docs/decisions/0015-big-file-pipeline.md). A direct write returns once the device has the
bytes; it is *not* a durability barrier (the file's size and extents, the device's cache):
callers still fsync before they publish what they wrote.

Direct I/O wants the memory address, the file offset and the length aligned to the device's
logical block size. :class:`Writer` writes aligned runs directly, from the caller's memory when
it is aligned, else through a reusable aligned bounce buffer, and the unaligned tail of the file
buffered. Where the filesystem refuses direct I/O (tmpfs, some network and FUSE filesystems) it
writes buffered throughout.

:class:`SourceFile` reads a file being uploaded. What the page cache holds of it (a file just
written, or read moments ago) is read from there (``mincore`` says which pages it holds); the
rest, read into the caller's aligned buffer, goes around the cache, as the block writes do. A
buffered read of 1 GiB the cache lacked cost 0.4-2.8 s of system CPU here, a direct one 0.2 s
(fresh page-cache pages filled, then copied out): CPU that the hashing of the blocks needs.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import io
import mmap
import os
import stat
import threading
from typing import Any, Final

ALIGN: Final = 4096
"""Alignment of direct writes: a multiple of every logical block size in use (512 or 4096)."""
DIRECT_MIN: Final = 4 << 20
"""Files written with fewer bytes stay buffered: a direct write waits for the device, and many
small files are made durable more cheaply together (one ``syncfs``) than one by one."""
_CHUNK: Final = 8 << 20
"""The bounce buffer's size: unaligned bytes are copied into it and written from it."""
_KEEP: Final = 4
"""Bounce buffers kept for reuse: fresh pages cost more than the copy (see above)."""

_O_DIRECT: Final = getattr(os, "O_DIRECT", 0)
_spare: list[mmap.mmap] = []
_spare_lock = threading.Lock()


def enable(fd: int) -> bool:
    """Switch an open file to direct I/O; False, leaving it as it was, where that is refused."""
    if not _O_DIRECT:
        return False
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT)
    except OSError:
        return False
    return True


def _disable(fd: int) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~_O_DIRECT)


def _aligned(view: memoryview) -> bool:
    """Whether the view's memory starts on an :data:`ALIGN` boundary (read-only memory is
    taken as unaligned: ctypes maps only writable buffers, and ``bytes`` never are aligned)."""
    if view.readonly or not len(view):
        return False
    return ctypes.addressof(ctypes.c_char.from_buffer(view)) % ALIGN == 0


class Writer:
    """Writes a file's bytes in order through ``fd``, open for writing at offset 0 (a new or
    truncated file), directly when ``direct`` (see :func:`enable`), else buffered.

    After the last :meth:`write`, :meth:`close` writes what the bounce buffer still holds (not
    the file's close); after a failure, :meth:`release` gives the buffer back without writing.
    ``OSError`` from the writes propagates.
    """

    def __init__(self, fd: int, direct: bool) -> None:
        self._fd, self._direct = fd, direct
        self._bounce: mmap.mmap | None = None
        self._filled = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        with memoryview(data) as whole:
            view = whole if whole.format == "B" and whole.ndim == 1 else whole.cast("B")
            if self._direct and not self._filled and _aligned(view):
                run = len(view) - len(view) % ALIGN
                self._write_direct(view[:run])
                view = view[run:]
            if not self._direct:
                self._flush_buffered()
                _write_all(self._fd, view)
                return
            while len(view):
                bounce = self._bounce_buffer()
                take = min(len(view), _CHUNK - self._filled)
                bounce[self._filled : self._filled + take] = view[:take]
                self._filled += take
                view = view[take:]
                if self._filled == _CHUNK:
                    with memoryview(bounce) as full:
                        self._write_direct(full)
                    self._filled = 0

    def close(self) -> None:
        """Write what is left (its unaligned tail buffered) and give the bounce buffer back."""
        try:
            if self._filled and self._bounce is not None:
                with memoryview(self._bounce) as held:
                    rest = held[: self._filled]
                    run = len(rest) - len(rest) % ALIGN
                    if run:
                        self._write_direct(rest[:run])
                    if self._direct and len(rest) > run:
                        _disable(self._fd)
                        self._direct = False
                    _write_all(self._fd, rest[run:])
                    del rest
                self._filled = 0
        finally:
            self.release()

    def release(self) -> None:
        """Give the bounce buffer back, writing nothing more."""
        bounce, self._bounce = self._bounce, None
        self._filled = 0
        if bounce is not None:
            _give_back(bounce)

    def _bounce_buffer(self) -> mmap.mmap:
        if self._bounce is None:
            self._bounce = _take()
        return self._bounce

    def _flush_buffered(self) -> None:
        if self._filled and self._bounce is not None:
            with memoryview(self._bounce) as held:
                _write_all(self._fd, held[: self._filled])
            self._filled = 0

    def _write_direct(self, view: memoryview) -> None:
        while len(view):
            if not self._direct:
                _write_all(self._fd, view)
                return
            try:
                written = os.write(self._fd, view)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # Accepted by fcntl, refused by the write (a larger logical block, a stacked
                # filesystem): nothing was written, so go on buffered from here.
                _disable(self._fd)
                self._direct = False
                continue
            view = view[written:]
            if written % ALIGN:  # a short, unaligned write: the rest cannot stay direct
                _disable(self._fd)
                self._direct = False


def write_file(fd: int, data: bytes | bytearray | memoryview) -> bool:
    """Write all of ``data`` to ``fd`` (a new file, at offset 0): directly when it is at least
    :data:`DIRECT_MIN` bytes and the filesystem allows it, else buffered. True if direct."""
    direct = len(data) >= DIRECT_MIN and enable(fd)
    writer = Writer(fd, direct)
    try:
        writer.write(data)
    except BaseException:
        writer.release()
        raise
    writer.close()
    return direct


def _write_all(fd: int, view: memoryview) -> None:
    while len(view):
        view = view[os.write(fd, view) :]


def _take() -> mmap.mmap:
    with _spare_lock:
        if _spare:
            return _spare.pop()
    return mmap.mmap(-1, _CHUNK)  # anonymous memory is page-aligned


def _give_back(bounce: mmap.mmap) -> None:
    with _spare_lock:
        if len(_spare) < _KEEP:
            _spare.append(bounce)
            return
    bounce.close()


_HELD_MIN: Final = 2 << 20
"""Cached runs shorter than this are read directly too: such a run is most often the head that
an earlier small read (and its read-ahead) left in the cache, and a buffered read of it would
start the kernel's read-ahead of what follows (a read-ahead mark in its last pages), window
after window through the file. Read directly, the cached pages are read again from the device
(those not yet written back are written first)."""


class SourceFile(io.RawIOBase):
    """A local file read as the source of an upload (see the module's docstring): a raw binary
    stream whose reads of :data:`DIRECT_MIN` bytes or more, into page-aligned memory, take what
    the page cache holds of the file from it and the rest directly. Smaller or unaligned reads,
    and files the kernel cannot read directly or say the cached pages of (tmpfs, some network
    filesystems), are read buffered, as any file. The bytes are the same either way: a direct
    read first writes back what is dirty in its range.

    :meth:`read_at` reads at an offset of its own and may be called from several threads at
    once (an upload reads its blocks side by side): the direct reads go through a second
    descriptor of the same file, opened ``O_DIRECT``, never switched back and forth."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.name = path
        self._fd = self._direct = -1
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        opened = os.fstat(fd)
        if stat.S_ISDIR(opened.st_mode):  # as open() says it
            os.close(fd)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        self._fd = fd
        self._pos = 0
        self._around = stat.S_ISREG(opened.st_mode) and self._open_direct(path, opened)
        if self._around:  # no read-ahead into the cache of what will be read around it
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)

    def _open_direct(self, path: str, opened: os.stat_result) -> bool:
        """Open the second, direct descriptor: False where the filesystem refuses it, or where
        the name now names another file (replaced since the first open)."""
        if not _O_DIRECT:
            return False
        try:
            direct = os.open(path, os.O_RDONLY | os.O_CLOEXEC | _O_DIRECT)
        except OSError:
            return False
        now = os.fstat(direct)
        if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
            os.close(direct)
            return False
        self._direct = direct
        return True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            offset += os.fstat(self._fd).st_size
        elif whence == os.SEEK_CUR:
            offset += self._pos
        elif whence != os.SEEK_SET:
            raise ValueError(f"invalid whence ({whence})")
        if offset < 0:
            raise OSError(errno.EINVAL, f"negative seek position {offset}")
        self._pos = offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        with memoryview(buffer) as whole:
            view = whole.cast("B")
            n = self._read(view, self._pos)
            del view
        self._pos += n
        return n

    def read_at(self, buffer: Any, offset: int) -> int:
        """Fill ``buffer`` with the file's bytes from ``offset``: all of it, fewer only at the
        end of the file. The stream's position does not move."""
        got = 0
        with memoryview(buffer) as whole:
            view = whole.cast("B")
            while got < len(view):
                n = self._read(view[got:], offset + got)
                if not n:
                    break
                got += n
            del view
        return got

    def _read(self, view: memoryview, pos: int) -> int:
        if self._around and len(view) >= DIRECT_MIN and pos % ALIGN == 0 and _aligned(view):
            run = self._run(len(view), pos)
            if run is not None:
                held, length = run
                if held and length >= _HELD_MIN:
                    return os.preadv(self._fd, [view[:length]], pos)
                if length >= ALIGN:
                    direct = self._read_direct(view[: length - length % ALIGN], pos)
                    if direct is not None:
                        return direct
        return os.preadv(self._fd, [view], pos)

    def _run(self, length: int, pos: int) -> tuple[bool, int] | None:
        """Whether the page cache holds the file's page at ``pos``, and the length of the run of
        pages from there that it holds too (or lacks too), up to ``length`` bytes and the end of
        the file; None where the kernel cannot say (reads are buffered from then on)."""
        length = min(length, os.fstat(self._fd).st_size - pos)
        if length <= 0:
            return None
        pages = _pages_held(self._fd, pos, length)
        if pages is None:
            self._buffered()
            return None
        held = pages[0] == 1
        other = pages.find(b"\x00" if held else b"\x01")
        return held, length if other < 0 else other * mmap.PAGESIZE

    def _read_direct(self, view: memoryview, pos: int) -> int | None:
        """Bytes read around the page cache; None where the filesystem refuses (nothing read)."""
        try:
            return os.preadv(self._direct, [view], pos)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._buffered()  # opened direct, refused at the read
            return None

    def _buffered(self) -> None:
        """Read as any file from now on, read-ahead included."""
        self._around = False
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def close(self) -> None:
        fd, direct, self._fd, self._direct = self._fd, self._direct, -1, -1
        for each in (fd, direct):
            if each >= 0:
                os.close(each)
        super().close()


_RESIDENT: Final = bytes(i & 1 for i in range(256))
"""``mincore``'s answer per page to 1 (in the page cache) or 0: its other bits are reserved."""
_libc: ctypes.CDLL | None = None


def _pages_held(fd: int, offset: int, length: int) -> bytes | None:
    """One byte per page of the file's ``[offset, offset + length)`` (``offset`` page-aligned):
    1 where the page cache holds it, else 0; asked with ``mincore`` of an untouched mapping,
    which reads nothing (a read that does not wait, ``RWF_NOWAIT``, would start a read-ahead of
    what it misses). None where the system cannot say."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        private, writable = mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE  # never written
        mapping = mmap.mmap(fd, length, flags=private, prot=writable, offset=offset)
    except (OSError, ValueError):
        return None
    pages = bytearray(-(-length // mmap.PAGESIZE))
    try:
        start = ctypes.c_char.from_buffer(mapping)
        answers = (ctypes.c_char * len(pages)).from_buffer(pages)
        failed = _libc.mincore(ctypes.c_void_p(ctypes.addressof(start)), ctypes.c_size_t(length), answers)
        del start, answers
    finally:
        mapping.close()
    return None if failed else bytes(pages).translate(_RESIDENT)
