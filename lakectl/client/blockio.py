"""The remote backend's block plumbing that needs no connection: reading a stream block by
block, and sending large bodies without copies."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from typing import BinaryIO, cast

from lakectl.core.model import BLOCK_SIZE

SEND_SLICE = 1024 * 1024
"""The size of the views a large body is sent in (:func:`slices`)."""


def bare(signed: str) -> str:
    """The bare locator ``<md5>+<size>`` of a signed one."""
    return signed.split("+A", 1)[0]


def read_block(stream: BinaryIO, block_size: int = BLOCK_SIZE) -> bytes:
    """The next block of the stream: ``block_size`` bytes, fewer only at its end (a pipe or a
    socket may return short reads before that)."""
    first = stream.read(block_size)
    if not first or len(first) == block_size:
        return first
    # Short: the end of a file (the next read says so), or a pipe's piece. No buffer of the
    # block's size is made for it: zeroing 64 MiB per file cost more than reading a small one.
    pieces, size = [first], len(first)
    while size < block_size:
        more = stream.read(block_size - size)
        if not more:
            break
        pieces.append(more)
        size += len(more)
    return first if len(pieces) == 1 else b"".join(pieces)


def read_into(stream: BinaryIO, buffer: bytearray | memoryview | mmap.mmap) -> int:
    """Fill ``buffer`` from the stream; fewer bytes only at its end."""
    view = memoryview(buffer)
    size = 0
    while size < len(view):
        n = stream.readinto(view[size:])  # type: ignore[attr-defined]
        if not n:
            break
        size += n
    return size


def slices(content: bytes | memoryview) -> Iterator[bytes]:
    """A large body as ``SEND_SLICE`` views, sent without copies: httpcore's sync writer copies the
    unsent rest of a ``bytes`` body after every ``send``, quadratic in the body's size."""
    view = memoryview(content)
    for start in range(0, len(view), SEND_SLICE):
        # httpx hands each chunk to socket.sendall, which takes any buffer; it is typed as bytes
        yield cast(bytes, view[start : start + SEND_SLICE])
