"""Large writes to new files around the page cache (``O_DIRECT``), buffered where refused.

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
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import threading
from typing import Final

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
