"""Copy imported objects into the lake: their bytes, read through the guard, become owned,
deduplicated Keep blocks, staged in place of the external entries (``lakectl import copy``)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from lakectl.core.blocks.data import write_object
from lakectl.core.importing.sources import read_external

if TYPE_CHECKING:
    from typing import BinaryIO

    from lakectl.core.graph.tree import Update
    from lakectl.core.lake import Lake


class _Chunks(io.RawIOBase):
    """A readable file over an iterator of chunks (a guarded read of a source)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


def copy_imported(lake: Lake, repo: str, branch: str, prefix: str = "") -> list[str]:
    """Copy every imported object under ``prefix`` on the branch into the lake's blocks and
    stage the owned entries (same path, size, content type and metadata), all or nothing; a
    source that changed fails it (``SourceChanged``) with nothing staged. Returns the paths."""
    from lakectl.core import listing, writes
    from lakectl.core.lake import now

    writes.check_writable(lake, repo, branch)
    updates: list[Update] = []
    for info in listing.list_objects(lake, repo, branch, prefix):
        entry = info.entry
        if entry is None or entry.external is None:
            continue
        chunks = read_external(entry, blocks=lake.blocks, confinement=lake.confinement)
        stream = io.BufferedReader(_Chunks(chunks))
        written = write_object(lake.blocks, cast("BinaryIO", stream))
        owned = dataclasses.replace(
            entry, locators=written.locators, checksum=written.checksum, external=None, mtime=now()
        )
        updates.append((info.path, owned.to_row()))
    if updates:
        lake.blocks.sync()  # blocks durable before the entries that name them
        writes.stage_rows(lake, repo, branch, updates)
    return [path for path, _ in updates]
