"""The remote backend's block plumbing that needs no connection: reading a stream block by
block, sending large bodies without copies, and collecting the packs a client-side packer writes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import BinaryIO, cast

from lakectl.core.model import BLOCK_SIZE
from lakectl.errors import BlockNotFound

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
    buffer = bytearray(block_size)
    buffer[: len(first)] = first
    size = len(first) + read_into(stream, memoryview(buffer)[len(first) :])
    return bytes(buffer[:size])


def read_into(stream: BinaryIO, buffer: bytearray | memoryview) -> int:
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


class MemoryBlocks:
    """Collects the packs a client-side Packer writes, in the order it writes them."""

    def __init__(self) -> None:
        self.blocks: dict[str, bytes] = {}
        self.times: dict[str, float] = {}

    def put(self, locator: str, data: bytes | memoryview) -> None:
        self.blocks[locator] = bytes(data)
        self.times[locator] = time.time()

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        data = self.blocks[locator]
        return data[offset:] if length is None else data[offset : offset + length]

    def exists(self, locator: str) -> bool:
        return locator in self.blocks

    def touch(self, locator: str) -> bool:
        if locator not in self.blocks:
            return False
        self.times[locator] = time.time()
        return True

    def modified(self, locator: str) -> float:
        if locator not in self.times:
            raise BlockNotFound(f"no pack {locator}", locator=locator)
        return self.times[locator]

    def delete(self, locator: str) -> None:
        self.blocks.pop(locator, None)
        self.times.pop(locator, None)

    def list(self) -> Iterator[str]:
        return iter(list(self.blocks))

    def sync(self) -> None:
        pass


# -- wire format → records -------------------------------------------------------------------
