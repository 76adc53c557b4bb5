"""The sealed journal as it is stored: its cursor, its batches (one Parquet block each, which
says what it is) and their entries, read back in order. Sealing them is :mod:`.seal`'s business;
this module reads and encodes, and changes nothing (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakectl.core import keys
from lakectl.core.journal.form import column, json_bytes, json_text
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix
from lakectl.errors import KeyNotFound

READ_CHUNK = 64
"""Entries decoded at once when a batch is read."""
MARK = b"lakectl"
BATCH = b"lakectl.journal.batch"


@dataclass(frozen=True, slots=True)
class Entry:
    """One sealed journal entry, as the feed shows it."""

    logical_timestamp: int
    time: int
    """The writer's clock when the intent was written, in microseconds since the epoch."""
    client_id: str
    repo_id: str
    event_type: str
    event_payload: Mapping[str, Any] = field(default_factory=dict)
    key: str = field(default="", compare=False)
    """Which live entry it was, ``<writer>/<key>`` (:func:`lakectl.core.journal.log.entry_id`):
    a rebuild replays a logged entry only when no batch holds it. Empty in older batches."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "logical_timestamp": self.logical_timestamp,
            "time": self.time,
            "client_id": self.client_id,
            "repo_id": self.repo_id,
            "event_type": self.event_type,
            "event_payload": dict(self.event_payload),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        return cls(
            int(data["logical_timestamp"]),
            int(data["time"]),
            str(data["client_id"]),
            str(data["repo_id"]),
            str(data["event_type"]),
            dict(data["event_payload"]),
        )


def read_cursor(kv: KVStore) -> tuple[dict[str, Any], bytes | None]:
    """The sealed journal's cursor and its stored bytes (None: never sealed), for a
    compare-and-swap."""
    try:
        raw = kv.get(keys.JOURNAL, keys.JOURNAL_CURSOR)
    except KeyNotFound:
        return {"next": 1, "batch": None, "sealed": []}, None
    return json.loads(raw), raw


def parquet(rows: list[Entry], about: Mapping[str, Any]) -> bytes:
    """A sealed batch's Parquet bytes from its entries (:func:`batch_parquet`)."""
    columns: list[list[Any]] = [
        [r.logical_timestamp for r in rows],
        [r.time for r in rows],
        [r.client_id for r in rows],
        [r.repo_id for r in rows],
        [r.event_type for r in rows],
        [json_text(r.event_payload) for r in rows],
        [r.key for r in rows],
    ]
    return batch_parquet(columns, about)


COLUMNS = ("logical_timestamp", "time", "client_id", "repo_id", "event_type", "event_payload", "entry")
"""A sealed batch's columns; ``entry`` names the live entry (absent from batches sealed before it)."""


def batch_parquet(columns: list[list[Any]], about: Mapping[str, Any]) -> bytes:
    """A sealed batch's Parquet bytes: :data:`COLUMNS` (the payload as JSON text) and ``about``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Columns from their buffers: pa.array would import pandas (0.2 s of every sealing command).
    types = [pa.int64(), pa.int64(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string()]
    arrays = [column(c, t) for c, t in zip(columns, types, strict=True)]
    table = pa.Table.from_arrays(arrays, names=list(COLUMNS))
    # The batch says what it is, so that a rebuild finds it among the blocks with no database.
    table = table.replace_schema_metadata({MARK: b"journal", BATCH: json_bytes(about)})
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def read_batch(blocks: Any, locator: str) -> Iterator[Entry]:
    """A batch's entries, a few at a time: memory follows the largest entry, not the batch."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(io.BytesIO(blocks.get(locator)))
    for chunk in handle.iter_batches(batch_size=READ_CHUNK):
        for row in chunk.to_pylist():
            yield Entry(
                row["logical_timestamp"],
                row["time"],
                row["client_id"],
                row["repo_id"],
                row["event_type"],
                json.loads(row["event_payload"]),
                row.get("entry") or "",
            )


def generation_of(cursor: Mapping[str, Any]) -> int:
    """Which generation of batches the cursor names (a compaction starts the next one)."""
    return int(cursor.get("generation", 0))


def batches(kv: KVStore) -> list[dict[str, Any]]:
    """The sealed batches' records, oldest first (the cursor's latest included)."""
    cursor = read_cursor(kv)[0]
    prefix = keys.journal_batch_prefix(generation_of(cursor))
    found = {json.loads(raw)["first"]: json.loads(raw) for _, raw in scan_prefix(kv, keys.JOURNAL, prefix)}
    latest = cursor.get("batch")
    if latest is not None:
        found[latest["first"]] = latest
    return [found[k] for k in sorted(found)]


def sealed_ids(blocks: Any, batches_: list[dict[str, Any]]) -> set[str]:
    """The ids of every entry the batches hold (their ``entry`` column alone is read)."""
    import pyarrow.parquet as pq

    out: set[str] = set()
    for batch in batches_:
        handle = pq.ParquetFile(io.BytesIO(blocks.get(batch["locator"])))
        if "entry" in handle.schema_arrow.names:
            out.update(v for v in handle.read(columns=["entry"]).column(0).to_pylist() if v)
    return out


def sealed_blocks(kv: KVStore) -> set[str]:
    """The locators of every sealed batch: garbage collection keeps them."""
    return {b["locator"] for b in batches(kv)}


def entries(kv: KVStore, blocks: Any, after: int = 0, repo: str = "") -> Iterator[Entry]:
    """Sealed entries with a logical timestamp above ``after``, oldest first; ``repo``: only
    that repository's."""
    for batch in batches(kv):
        if batch["last"] <= after:
            continue
        for entry in read_batch(blocks, batch["locator"]):
            if entry.logical_timestamp > after and (not repo or entry.repo_id == repo):
                yield entry
