"""A seekable, read-only binary file over one object version that reads only the ranges asked for.

For readers that seek (pyarrow's Parquet reader takes the footer first, then the column chunks it
needs): nothing is read at open, and a read fetches the block segments under the range asked for,
through :func:`lakectl.core.porcelain.read_entry`. Every read verifies its whole block's md5
(``blocks.data``), so a segment is fetched whole and the last few are kept: the reader's many small
reads of one block (a footer, then the chunks of a row group) cost one block read, not one each.
An imported object (no blocks of ours) is read at the ranges asked for, from its source.

:func:`open_read` opens the object :func:`lakectl.core.porcelain.open_object` found and announces
the read to the journal once, as :func:`lakectl.core.porcelain.read_opened` does for a stream.
"""

from __future__ import annotations

import bisect
import io
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lakectl.core import reads
from lakectl.core.blocks.data import parse_segment
from lakectl.core.lake import Lake
from lakectl.core.model import Entry
from lakectl.core.porcelain import read_entry
from lakectl.errors import InvalidArgument

KEEP_SEGMENTS = 2
"""Segments kept after their read (a block is 64 MiB at most): a footer's block and the one being
read, so that a Parquet reader moving from the footer to the first row group reads each once."""


class ObjectFile(io.RawIOBase):
    """The bytes of ``entry`` as a seekable read-only file. ``asked`` counts the bytes returned to
    the reader, ``fetched`` the bytes read from the block layer (whole segments) or the source."""

    def __init__(self, lake: Lake, entry: Entry, keep: int = KEEP_SEGMENTS) -> None:
        super().__init__()
        self._lake, self._entry, self._keep = lake, entry, max(1, keep)
        self._pos = 0
        self.asked = 0
        self.fetched = 0
        self._starts: list[int] = []  # each segment's first byte in the object; empty: imported
        if entry.external is None:
            position = 0
            for token in entry.locators:
                self._starts.append(position)
                position += parse_segment(token)[3]
        self._kept: OrderedDict[int, bytes] = OrderedDict()

    @property
    def size(self) -> int:
        return self._entry.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._entry.size}.get(whence)
        if base is None:
            raise InvalidArgument(f"bad whence {whence!r}")
        if base + offset < 0:
            raise InvalidArgument(f"cannot seek to {base + offset}: before the start of the object")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes from the position (to the end when ``size`` is None or negative)."""
        self._check_open()
        end = self._entry.size if size is None or size < 0 else min(self._entry.size, self._pos + size)
        if end <= self._pos:
            return b""
        data = self._range(self._pos, end)
        self._pos = end
        self.asked += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:  # typeshed's WriteableBuffer: a private module
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def _range(self, start: int, end: int) -> bytes:
        if not self._starts:  # imported: its source serves ranges
            data = b"".join(read_entry(self._lake, self._entry, start, end - start))
            self.fetched += len(data)
            return data
        parts = []
        i = bisect.bisect_right(self._starts, start) - 1
        while start < end and i < len(self._starts):
            seg_start = self._starts[i]
            segment = self._segment(i)
            take = segment[start - seg_start : end - seg_start]
            parts.append(take)
            start += len(take)
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _segment(self, i: int) -> bytes:
        """Segment ``i``, read whole (its block is verified whole anyway) or kept from before."""
        kept = self._kept.get(i)
        if kept is not None:
            self._kept.move_to_end(i)
            return kept
        return self._keep_segment(i, self._fetch(i))

    def _fetch(self, i: int) -> bytes:
        length = parse_segment(self._entry.locators[i])[3]
        return b"".join(read_entry(self._lake, self._entry, self._starts[i], length))

    def _keep_segment(self, i: int, data: bytes) -> bytes:
        self.fetched += len(data)
        self._kept[i] = data
        while len(self._kept) > self._keep:
            self._kept.popitem(last=False)
        return data

    def prefetch(self, *offsets: int) -> None:
        """Read the segments holding these offsets now, each on a thread of its own: a block
        read is mostly its md5, which runs beside the others (for a reader that will want both
        ends of the object, as a Parquet reader wants its footer and its first row group)."""
        if not self._starts:
            return
        size = self._entry.size
        wanted = sorted({bisect.bisect_right(self._starts, o) - 1 for o in offsets if 0 <= o < size})
        wanted = [i for i in wanted if i not in self._kept][: self._keep]
        if len(wanted) < 2:
            for i in wanted:
                self._segment(i)
            return
        with ThreadPoolExecutor(len(wanted), thread_name_prefix="lakectl-prefetch") as pool:
            for i, data in zip(wanted, pool.map(self._fetch, wanted), strict=True):
                self._keep_segment(i, data)

    def close(self) -> None:
        self._kept.clear()
        super().close()


def open_read(lake: Lake, found: reads.ObjectRead, keep: int = KEEP_SEGMENTS) -> ObjectFile:
    """The object :func:`lakectl.core.porcelain.open_object` found, as a file; the read is
    announced to the journal once (for the whole object: the ranges are the reader's choice)."""
    reads.announce(lake, found)
    return ObjectFile(lake, found.entry, keep)
