"""The journal's log: entries a writer acknowledged and not yet sealed, stored in the block store
before the answer, so that a rebuild after the loss of the metadata database misses none of them
(docs/decisions/0009-journal.md, "Acknowledged means in the blocks").

A log record holds one group commit of one writer (written after the last in the writer's log
file in a local block directory, :func:`directory`; a block of its own in other stores): a magic
line, a one-line JSON header naming the writer, each entry's key and length and the CRC-32 of the
entries, then the entries as their writer's KV partition stores them
(:func:`lakectl.core.journal.form.live`). A log file is made of zeros beforehand; its records end
where no record begins, and a record its writer died writing ends them too (its CRC fails).
Sealed batches name the entries they hold (``<writer>/<key>``), so a rebuild replays a logged
entry only when no batch holds it."""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from lakectl.core.journal.form import json_bytes, split_live
from lakectl.errors import IntegrityError

MAGIC = b"LKJL lakectl journal log 1\n"
"""How a log block begins (Parquet batches begin with ``PAR1``)."""


def entry_id(writer: str, key: str) -> str:
    """How a sealed batch names an entry (its ``entry`` column) and a log block finds it there."""
    return f"{writer}/{key}"


def encode(writer: str, items: Iterable[tuple[str, bytes]]) -> bytes:
    """One log block: ``items`` (key, stored entry) of ``writer``."""
    listed = list(items)
    crc = 0
    for _, raw in listed:
        crc = zlib.crc32(raw, crc)
    entries = [[key, len(raw)] for key, raw in listed]
    header = json_bytes({"writer": writer, "entries": entries, "crc": crc})
    return b"".join([MAGIC, header, b"\n", *(raw for _, raw in listed)])


def is_log(head: bytes) -> bool:
    """Whether a block beginning with ``head`` (at least ``len(MAGIC)`` bytes) is a log block."""
    return head.startswith(MAGIC)


def decode(data: bytes, locator: str = "", torn: bool = False) -> Iterator[tuple[str, dict[str, Any], str]]:
    """The entries of a log block, or of a log file (its records one after the other):
    ``(id, header, payload text)`` as a seal reads them from a writer's partition.
    ``IntegrityError`` for one that is cut or malformed; with ``torn``, a file's last record cut
    short (its writer died writing it: never acknowledged) ends it instead."""
    at = 0
    while at < len(data):
        try:
            if not data.startswith(MAGIC, at):
                raise ValueError("no record begins here")
            end = data.index(b"\n", at + len(MAGIC))
            header = json.loads(data[at + len(MAGIC) : end])
            writer, at = str(header["writer"]), end + 1
            raws = []
            for key, size in header["entries"]:
                raw = data[at : at + int(size)]
                if len(raw) != int(size):
                    raise ValueError("cut short")
                at += int(size)
                raws.append((str(key), raw))
            crc = 0
            for _, raw in raws:
                crc = zlib.crc32(raw, crc)
            if "crc" in header and crc != int(header["crc"]):
                raise ValueError("its entries do not match their CRC")
            found = [(entry_id(writer, key), *split_live(raw)) for key, raw in raws]
        except (ValueError, KeyError, TypeError) as e:
            if torn:
                return
            raise IntegrityError(f"a journal log is malformed: {e}", locator=locator) from e
        yield from found


FIRST_FILE_BYTES = 64 << 10
"""The size of a writer's first log file, zeros until records are written over them: about 90
records of one upload's entry, for a command that changes a few things (0.2 ms to make here)."""
FILE_BYTES = 1 << 20
"""The size of the log files of a writer that filled its files: about 1,500 records of one
upload's entry (0.8 ms to make; a writer's keeper retires its file each second anyway)."""

LOG_DIRECTORY = "journal"
"""Where a local block directory keeps its writers' log files: beside the blocks' prefix
directories, which its listing alone walks, so that they are neither blocks nor orphans."""


def directory(blocks: Any) -> str | None:
    """The log files' directory of a local block directory; None for other stores, where a
    log record is a block of its own."""
    from lakectl.core.blocks.local import LocalAdapter

    return os.path.join(blocks.root, LOG_DIRECTORY) if isinstance(blocks, LocalAdapter) else None


def file_name(writer: str, segment: int) -> str:
    return f"{writer}.{segment}.log"


def files(blocks: Any, writer: str = "") -> list[str]:
    """The paths of the log files (of ``writer``, or every writer's)."""
    folder = directory(blocks)
    if folder is None:
        return []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(
        os.path.join(folder, n)
        for n in names
        if n.endswith(".log") and (not writer or n.startswith(writer + "."))
    )


def read_file(path: str) -> list[tuple[str, dict[str, Any], str]]:
    """A log file's entries (a torn last record ignored); none when it is gone meanwhile."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return list(decode(data, path, torn=True))


def discard(blocks: Any, name: str) -> None:
    """Delete a log file (by path) or a log block (by locator), as :func:`logged` names them."""
    if os.sep in name:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
    else:
        blocks.delete(name)


def forget(blocks: Any, writer: str) -> None:
    """Delete a writer's log files (all its entries sealed: recovery found it dead with none left)."""
    for path in files(blocks, writer):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def logged(blocks: Any) -> Iterator[tuple[str, set[str]]]:
    """Every log file and log block in ``blocks`` and the ids of their entries: a listing of the
    whole block store, for a rebuild or a compaction (never on a write's path). A file is named by
    its path, a block by its locator."""
    for path in files(blocks):
        yield path, {id_ for id_, _, _ in read_file(path)}
    if directory(blocks) is not None:
        return  # a local block directory's log is in files alone
    for locator in blocks.list():
        if blocks.get(locator, 0, 4) != MAGIC[:4]:
            continue
        data = blocks.get(locator)
        if is_log(data):
            with contextlib.suppress(IntegrityError):  # a user's object that begins alike
                yield locator, {id_ for id_, _, _ in decode(data, locator)}
