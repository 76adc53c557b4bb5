"""The sealed journal: done entries numbered with the lake's logical timestamps and stored as one
Parquet block per batch (:func:`seal`), and read back (:func:`entries`, :func:`tail`,
:func:`follow`). Writers record entries through :class:`lakectl.core.journal.journal.Journal`, which
re-exports what callers use from here (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lakectl.core import keys
from lakectl.core.blocks.data import block_locator
from lakectl.core.journal.form import DONE, column, json_bytes, json_text, split_live
from lakectl.core.journal.log import entry_id
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import delete_many, scan_prefix
from lakectl.core.kv.retry import AGAIN, JOURNAL_CURSOR, Again, retry
from lakectl.errors import KeyNotFound, LakectlError, PredicateFailed

SEAL_BATCH = 10_000
"""At most this many entries per sealed Parquet batch."""
READ_CHUNK = 64
"""Entries decoded at once when a batch is read."""
FOLLOW_INTERVAL = 0.5
"""Seconds between two looks of a follower (``journal tail --follow``, the server's stream)."""
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


# -- sealing --------------------------------------------------------------------------------


def read_cursor(kv: KVStore) -> tuple[dict[str, Any], bytes | None]:
    """The sealed journal's cursor and its stored bytes (None: never sealed), for a
    compare-and-swap."""
    try:
        raw = kv.get(keys.JOURNAL, keys.JOURNAL_CURSOR)
    except KeyNotFound:
        return {"next": 1, "batch": None, "sealed": []}, None
    return json.loads(raw), raw


def finish(kv: KVStore, cursor: Mapping[str, Any]) -> None:
    """The work the last seal published but may not have done: its batch record, its deletes."""
    batch = cursor.get("batch")
    if batch is not None:
        kv.set(keys.JOURNAL, keys.journal_batch_key(batch["first"], generation_of(cursor)), json_bytes(batch))
    by_partition: dict[str, list[str]] = {}
    for partition, key in cursor.get("sealed", []):
        by_partition.setdefault(partition, []).append(key)
    for partition, keys_ in by_partition.items():
        delete_many(kv, partition, keys_)


def done_entries(kv: KVStore) -> list[tuple[str, str, dict[str, Any], str]]:
    """(partition, key, header, payload text) of every writer's done entries, in clock order;
    the payloads are never parsed."""
    out: list[tuple[str, str, dict[str, Any], str]] = []
    for key, _ in scan_prefix(kv, keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX):
        partition = keys.journal_live_partition(key[len(keys.JOURNAL_WRITER_PREFIX) :])
        for entry_key, raw in kv.scan(partition):
            if raw.startswith(DONE.encode()) or raw[:1] == b"{":
                header, text = split_live(raw)
                if header["state"] == DONE:
                    out.append((partition, entry_key, header, text))
    out.sort(key=lambda e: (e[2]["time"], e[2]["writer"], e[2]["seq"]))
    return out[:SEAL_BATCH]


def _last_attempts(
    done: list[tuple[str, str, dict[str, Any], str]],
) -> list[tuple[str, str, dict[str, Any], str]]:
    """``done`` without the entries a later attempt of the same write supersedes: a redone
    staged write (:meth:`lakectl.core.journal.journal.Journal._carrier`) stores its entry again
    under ``<key>.<attempt>``, with every token it went to. Their keys are sealed all the same."""
    last: dict[tuple[str, str], str] = {}
    for partition, key, _, _ in done:
        write = (partition, key.split(".", 1)[0])
        if write not in last or _attempt(key) > _attempt(last[write]):
            last[write] = key
    return [e for e in done if last[(e[0], e[1].split(".", 1)[0])] == e[1]]


def _attempt(key: str) -> int:
    _, _, attempt = key.partition(".")
    return int(attempt) if attempt else 1


def seal(kv: KVStore, blocks: Any) -> int:
    """Decide what dead writers left open, then seal the done entries of every writer into one
    Parquet batch; returns how many."""
    from lakectl.core.journal.recovery import recover

    with contextlib.suppress(LakectlError):
        recover(kv, blocks)

    def attempt() -> int | Again:
        cursor, raw = read_cursor(kv)
        finish(kv, cursor)
        found = done_entries(kv)
        if not found:
            return 0
        done = _last_attempts(found)
        first = int(cursor["next"])
        headers = [h for _, _, h, _ in done]
        previous = cursor["batch"]["locator"] if cursor.get("batch") else ""
        about = {
            "first": first,
            "last": first + len(done) - 1,
            "count": len(done),
            "min_time": headers[0]["time"],
            "max_time": max(h["time"] for h in headers),
            "previous": previous,
            "generation": generation_of(cursor),
        }
        columns = [
            list(range(first, first + len(done))),
            [h["time"] for h in headers],
            [h["client_id"] for h in headers],
            [h["repo_id"] for h in headers],
            [h["event_type"] for h in headers],
            [t for _, _, _, t in done],
            [entry_id(h["writer"], k) for _, k, h, _ in done],
        ]
        data = batch_parquet(columns, about)
        locator = block_locator(data)
        blocks.put(locator, data)
        blocks.sync()
        batch = {**about, "locator": locator}
        sealed = [[p, k] for p, k, _, _ in found]
        new = {**cursor, "next": first + len(done), "batch": batch, "sealed": sealed}
        try:
            kv.set_if(keys.JOURNAL, keys.JOURNAL_CURSOR, json_bytes(new), raw)
        except PredicateFailed:
            # Another sealer published first. Our block names entries a rebuild must not read
            # twice: gone, unless a published batch is these very bytes (the same entries,
            # sealed by another sealer at the same timestamp; it may be superseded as the
            # cursor's batch by now, so every batch record is asked).
            if locator not in sealed_blocks(kv):
                blocks.delete(locator)
            return AGAIN
        finish(kv, new)
        return len(done)

    return retry(JOURNAL_CURSOR, attempt, "could not seal the journal: other sealers kept winning")


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


# -- reading --------------------------------------------------------------------------------


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


def tail(kv: KVStore, blocks: Any, amount: int = 20, after: int = 0, repo: str = "") -> list[Entry]:
    """Seal what is done, then the last ``amount`` entries above ``after`` (all when ``after``
    is given: a follower reads everything new)."""
    seal(kv, blocks)
    if after:
        return list(entries(kv, blocks, after, repo))
    return list(deque(entries(kv, blocks, 0, repo), maxlen=amount))


def poll(kv: KVStore, blocks: Any, after: int, repo: str = "") -> list[Entry]:
    """Seal what is done, then every entry above ``after``: one look of a follower."""
    seal(kv, blocks)
    return list(entries(kv, blocks, after, repo))


def follow(
    kv: KVStore, blocks: Any, after: int = 0, repo: str = "", interval: float = FOLLOW_INTERVAL
) -> Iterator[Entry]:
    """Every entry above ``after`` as it is sealed, polling every ``interval`` seconds, forever."""
    while True:
        found = poll(kv, blocks, after, repo)
        yield from found
        if found:
            after = found[-1].logical_timestamp
        time.sleep(interval)


def last_timestamp(kv: KVStore) -> int:
    """The logical timestamp of the newest sealed entry (0: none yet)."""
    return int(read_cursor(kv)[0]["next"]) - 1
