"""The journal's log: entries a writer acknowledged and not yet sealed, stored in the block store
before the answer, so that a rebuild after the loss of the metadata database misses none of them
(docs/decisions/0009-journal.md, "Acknowledged means in the blocks").

A log block holds one group commit of one writer: a magic line, a one-line JSON header naming the
writer and each entry's key and length, then the entries as their writer's KV partition stores
them (:func:`lakectl.core.journalform.live`). Sealed batches name the entries they hold
(``<writer>/<key>``), so a rebuild replays a logged entry only when no batch holds it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from lakectl.core.journalform import _encode, _split_live
from lakectl.errors import IntegrityError

MAGIC = b"LKJL lakectl journal log 1\n"
"""How a log block begins (Parquet batches begin with ``PAR1``)."""


def entry_id(writer: str, key: str) -> str:
    """How a sealed batch names an entry (its ``entry`` column) and a log block finds it there."""
    return f"{writer}/{key}"


def encode(writer: str, items: Iterable[tuple[str, bytes]]) -> bytes:
    """One log block: ``items`` (key, stored entry) of ``writer``."""
    listed = list(items)
    header = _encode({"writer": writer, "entries": [[key, len(raw)] for key, raw in listed]})
    return b"".join([MAGIC, header, b"\n", *(raw for _, raw in listed)])


def is_log(head: bytes) -> bool:
    """Whether a block beginning with ``head`` (at least ``len(MAGIC)`` bytes) is a log block."""
    return head.startswith(MAGIC)


def decode(data: bytes, locator: str = "") -> Iterator[tuple[str, dict[str, Any], str]]:
    """A log block's entries: ``(id, header, payload text)`` as a seal reads them from a
    writer's partition. ``IntegrityError`` for a block that is cut or malformed."""
    try:
        end = data.index(b"\n", len(MAGIC))
        header = json.loads(data[len(MAGIC) : end])
        writer, at = str(header["writer"]), end + 1
        for key, size in header["entries"]:
            raw = data[at : at + int(size)]
            if len(raw) != int(size):
                raise ValueError("cut short")
            at += int(size)
            fields, text = _split_live(raw)
            yield entry_id(writer, str(key)), fields, text
    except (ValueError, KeyError, TypeError) as e:
        raise IntegrityError(f"a journal log block is malformed: {e}", locator=locator) from e


def logged(blocks: Any) -> Iterator[tuple[str, set[str]]]:
    """Every log block in ``blocks`` and the ids of its entries: a listing of the whole block
    store, for a rebuild or a compaction (never on a write's path)."""
    for locator in blocks.list():
        if blocks.get(locator, 0, 4) != MAGIC[:4]:
            continue
        data = blocks.get(locator)
        if is_log(data):
            with contextlib.suppress(IntegrityError):  # a user's object that begins alike
                yield locator, {id_ for id_, _, _ in decode(data, locator)}
