"""What Spark's processes need of a lake: a connection the driver captures and executors rebuild.

The driver plans with a :class:`~lakectl.client.Backend` (listing, staging, committing); the
executors move the data and never go through the driver: embedded, they read and write block
files under the lake's home themselves; remote, they ``GET``/``PUT /blocks`` with signed
locators (the Keep block API).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakectl.core.model import BLOCK_SIZE
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.client import Backend

WHOLE_FILE = BLOCK_SIZE
"""Files up to this size are fetched whole into memory; larger ones are read by range."""


@dataclass(frozen=True)
class Connection:
    """Where the lake is: an embedded home directory, or a server with credentials. Picklable:
    shipped to executors inside the data source."""

    home: str | None = None
    endpoint: str | None = None
    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)

    @staticmethod
    def resolve(
        home: str | None = None,
        endpoint: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
    ) -> Connection:
        """Explicit arguments, else what the CLI would use: a server when one is configured
        (``$LAKECTL_SERVER_ENDPOINT_URL`` or ``~/.lakectl.yaml``), else the embedded lake at
        ``$LAKECTL_HOME`` (made absolute now: executors may run elsewhere)."""
        if home is not None:
            return Connection(home=os.path.abspath(home))
        if endpoint is None:
            from lakectl.client import server_settings

            server = server_settings()
            if server is None:
                from lakectl.core.lake import default_home

                return Connection(home=os.path.abspath(default_home()))
            endpoint, access_key_id, secret_access_key = server
        endpoint = endpoint.rstrip("/")
        if endpoint.endswith("/api/v1"):
            endpoint = endpoint[: -len("/api/v1")]
        return Connection(
            endpoint=endpoint,
            access_key_id=access_key_id or "",
            secret_access_key=secret_access_key or "",
        )

    @property
    def remote(self) -> bool:
        return self.endpoint is not None

    def backend(self) -> Backend:
        """The driver's handle for planning, staging and committing."""
        if self.endpoint is not None:
            from lakectl.client.remote import RemoteBackend

            return RemoteBackend(self.endpoint, self.access_key_id, self.secret_access_key)
        from lakectl.client.local import LocalBackend

        return LocalBackend(self.home)

    def blocks(self) -> Blocks:
        """The executors' handle on block data."""
        if self.endpoint is not None:
            return RemoteBlocks(self.endpoint, self.access_key_id, self.secret_access_key)
        assert self.home is not None
        return LocalBlocks(os.path.join(self.home, "blocks"))


class Blocks:
    """Reading and writing blocks by locator, as executors do."""

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        raise NotImplementedError

    def put(self, data: bytes | memoryview) -> str:
        """Store a block; return the locator to link it by."""
        raise NotImplementedError

    def sync(self) -> None:
        """Make every block put so far durable (before the driver links them)."""

    def close(self) -> None:
        pass


class LocalBlocks(Blocks):
    """The embedded lake's block directory, opened directly (no metadata database)."""

    def __init__(self, root: str) -> None:
        from lakectl.core.blocks.local import LocalAdapter

        if not os.path.isdir(root):
            raise InvalidArgument(f"no lake at {os.path.dirname(root)!r}: its block directory is missing")
        self.adapter = LocalAdapter(root)

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        return self.adapter.get(locator, offset, length)

    def put(self, data: bytes | memoryview) -> str:
        from lakectl.core.blocks.data import block_locator

        bare = block_locator(data)
        self.adapter.put(bare, data)
        return bare

    def sync(self) -> None:
        self.adapter.sync()


class RemoteBlocks(Blocks):
    """The server's block API, through the remote backend's client (retries, md5 checks, and
    blocks the server already has proven rather than sent)."""

    def __init__(self, endpoint: str, key: str, secret: str) -> None:
        from lakectl.client.remote import RemoteBackend

        self.remote = RemoteBackend(endpoint, key, secret)

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        return self.remote.get_block(locator, offset, length)

    def put(self, data: bytes | memoryview) -> str:
        return self.remote.store_block(data)

    def close(self) -> None:
        self.remote.close()


# -- files made of segments ---------------------------------------------------------------------


@dataclass(frozen=True)
class LakeFile:
    """One object to read: its path under the loaded prefix and its segments (locator, offset,
    length), in order."""

    path: str
    segments: tuple[tuple[str, int, int], ...]
    partition: tuple[tuple[str, str], ...] = ()
    """Hive-style ``key=value`` directories of its path."""
    labels: tuple[tuple[str, str], ...] = ()
    """String columns every row of it carries (a change feed's ``_change_type``, ...)."""

    @property
    def size(self) -> int:
        return sum(length for _, _, length in self.segments)

    def read_all(self, blocks: Blocks) -> bytes:
        return b"".join(blocks.get(loc, off, length) for loc, off, length in self.segments)

    def open(self, blocks: Blocks) -> Any:
        """A pyarrow file over the object: its bytes in memory when small, else read by range."""
        import pyarrow as pa

        if self.size <= WHOLE_FILE:
            return pa.BufferReader(self.read_all(blocks))
        return pa.PythonFile(SegmentFile(self, blocks), mode="r")


class SegmentFile(io.RawIOBase):
    """A seekable read-only file over a large object's segments: a Parquet reader fetches its
    footer and the column chunks it needs, not the whole object."""

    def __init__(self, file: LakeFile, blocks: Blocks) -> None:
        self.file = file
        self.blocks = blocks
        self.position = 0
        self.starts: list[int] = []
        total = 0
        for _, _, length in file.segments:
            self.starts.append(total)
            total += length
        self.length = total

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = b"".join(self._pieces(self.position, len(view)))
        view[: len(data)] = data
        self.position += len(data)
        return len(data)

    def _pieces(self, offset: int, size: int) -> Iterator[bytes]:
        end = min(self.length, offset + size)
        for start, (loc, seg_offset, seg_length) in zip(self.starts, self.file.segments, strict=True):
            stop = start + seg_length
            if stop <= offset or start >= end:
                continue
            lo, hi = max(offset, start) - start, min(end, stop) - start
            yield self.blocks.get(loc, seg_offset + lo, hi - lo)


def lake_files(manifest: str, partition_of: Any = None) -> list[LakeFile]:
    """The files a manifest lists, as :class:`LakeFile` records (paths relative to its prefix)."""
    from lakectl.core.blocks.manifest import parse_manifest

    out = []
    for path, segments in parse_manifest(manifest).files().items():
        segs = tuple((s.locator, s.offset, s.length) for s in segments)
        out.append(LakeFile(path, segs, partition_of(path) if partition_of else ()))
    return out


class BlockWriter(io.RawIOBase):
    """A write-only file that cuts what it is given into blocks and stores each block as soon as
    it is full: a task's output file never sits whole in memory."""

    def __init__(self, blocks: Blocks, block_size: int = BLOCK_SIZE) -> None:
        self.blocks = blocks
        self.block_size = block_size
        self.buffer = bytearray()
        self.locators: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.buffer += view
        self.size += len(view)
        while len(self.buffer) >= self.block_size:
            self.locators.append(self.blocks.put(memoryview(self.buffer)[: self.block_size]))
            del self.buffer[: self.block_size]
        return len(view)

    def finish(self) -> list[str]:
        """Store what remains; return the file's block locators in order."""
        if self.buffer or not self.locators:
            self.locators.append(self.blocks.put(bytes(self.buffer)))
            self.buffer = bytearray()
        return self.locators


def segments_of(tokens: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(locator, offset, length)`` of segment tokens: whole blocks (``<locator>``) or parts of
    blocks (``<locator>:<offset>:<length>``), their locators bare or signed."""
    out = []
    for token in tokens:
        loc, _, part = token.partition(":")
        offset, _, length = part.partition(":")
        out.append((loc, int(offset), int(length)) if part else (loc, 0, int(loc.split("+")[1])))
    return out


def segments_from(segments: Sequence[tuple[str, int, int]], offset: int) -> tuple[tuple[str, int, int], ...]:
    """The segments of an object's bytes from ``offset`` on (the blocks before it left out)."""
    out = []
    for loc, start, length in segments:
        if offset >= length:
            offset -= length
            continue
        out.append((loc, start + offset, length - offset))
        offset = 0
    return tuple(out)
