"""Sealing the journal: what dead writers left open decided first (:mod:`.recovery`), then the
done entries numbered with the lake's logical timestamps and stored as one Parquet block per batch
(:func:`seal`, in the form of :mod:`.sealed`), and read back after a seal (:func:`tail`,
:func:`follow`). Writers record entries through :class:`lakectl.core.journal.journal.Journal`,
which re-exports what callers use from here (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from lakectl.core import keys
from lakectl.core.blocks.data import block_locator
from lakectl.core.journal.form import DONE, json_bytes, split_live
from lakectl.core.journal.log import entry_id
from lakectl.core.journal.recovery import recover
from lakectl.core.journal.sealed import (
    Entry,
    batch_parquet,
    entries,
    generation_of,
    read_cursor,
    sealed_blocks,
)
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import delete_many, scan_prefix
from lakectl.core.kv.retry import AGAIN, JOURNAL_CURSOR, Again, retry
from lakectl.errors import LakectlError, PredicateFailed

SEAL_BATCH = 10_000
"""At most this many entries per sealed Parquet batch."""
FOLLOW_INTERVAL = 0.5
"""Seconds between two looks of a follower (``journal tail --follow``, the server's stream)."""


# -- sealing --------------------------------------------------------------------------------


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


# -- reading --------------------------------------------------------------------------------


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
