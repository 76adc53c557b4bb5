"""Compaction of the journal: a rewrite without the entries a replay no longer needs, on request
only, since it drops audit trail (docs/decisions/0009-journal.md, "Compaction")."""

from __future__ import annotations

from typing import Any

from lakectl.core import keys
from lakectl.core.blocks.data import block_locator
from lakectl.core.events import Verb
from lakectl.core.journal import log, records
from lakectl.core.journal.form import json_bytes
from lakectl.core.journal.seal import SEAL_BATCH, finish, seal
from lakectl.core.journal.sealed import Entry, batches, generation_of, parquet, read_batch, read_cursor
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import delete_many, scan_prefix
from lakectl.core.kv.retry import AGAIN, JOURNAL_CURSOR, Again, retry
from lakectl.errors import PredicateFailed


def superseded(entries_: list[Entry]) -> set[int]:
    """The logical timestamps of entries a replay no longer needs: everything of a repository up
    to its last deletion; staged writes, deletes and resets of a branch up to its deletion; every
    setting of a repository but the last of its key; every auth record but the last of its key,
    and that one too when it is a deletion (a rebuild starts from no records). Commits stay
    (other refs may reach them), and so do reads (no replay needs them; they are the audit trail
    of who read what)."""
    gone_repo: dict[str, int] = {}
    gone_branch: dict[tuple[str, str], int] = {}
    last_setting: dict[tuple[str, str], int] = {}
    last_record: dict[tuple[str, str], Entry] = {}
    for e in entries_:
        if e.event_type == "delete-repository":
            gone_repo[e.repo_id] = e.logical_timestamp
        elif e.event_type == "delete-branch":
            gone_branch[(e.repo_id, e.event_payload.get("branch", ""))] = e.logical_timestamp
        elif e.event_type == "settings":
            last_setting[(e.repo_id, e.event_payload.get("key", ""))] = e.logical_timestamp
        elif e.event_type == Verb.AUTH.value:
            last_record[_record_key(e)] = e
    out: set[int] = set()
    for e in entries_:
        if e.event_type == Verb.READ_OBJECT.value:
            continue  # a read is needed by no replay, but it is the audit trail: kept
        ts = e.logical_timestamp
        branch = (e.repo_id, e.event_payload.get("branch", ""))
        setting = (e.repo_id, e.event_payload.get("key", ""))
        by_repo = ts <= gone_repo.get(e.repo_id, 0)
        by_branch = e.event_type in STAGED_TYPES and ts < gone_branch.get(branch, 0)
        by_setting = e.event_type == "settings" and ts < last_setting[setting]
        by_record = e.event_type == Verb.AUTH.value and _record_superseded(e, last_record[_record_key(e)])
        if by_repo or by_branch or by_setting or by_record:
            out.add(ts)
    return out


def _record_key(e: Entry) -> tuple[str, str]:
    return str(e.event_payload.get("partition", "")), str(e.event_payload.get("key", ""))


def _record_superseded(e: Entry, last: Entry) -> bool:
    """Whether an auth record's entry is needed by no rebuild: a later one of its key replaces
    it, or the last one of its key deletes it (a rebuild starts from none)."""
    return e.logical_timestamp < last.logical_timestamp or records.deleted(last.event_payload)


STAGED_TYPES = frozenset({"write-objects", "delete-objects", "reset"})
"""Entries that change only a branch's staging (a branch deletion drops it all)."""


def compact(kv: KVStore, blocks: Any) -> dict[str, int]:
    """Rewrite the sealed journal without its superseded entries, as the next generation of
    batches (timestamps kept: a compacted journal has gaps); the old batches are deleted once the
    cursor names the new generation. Concurrent sealers make it start over."""

    def attempt() -> dict[str, int] | Again:
        seal(kv, blocks)
        cursor, raw = read_cursor(kv)
        old = batches(kv)
        if not old:
            return {"entries": 0, "dropped": 0, "batches": 0}
        every = [e for b in old for e in read_batch(blocks, b["locator"])]
        drop = superseded(every)
        # A log block whose entries are sealed is deleted now: once compaction dropped one of
        # them, a rebuild could no longer tell that it was sealed and would replay it again.
        sealed = {e.key for e in every if e.key}
        for name, ids in log.logged(blocks):
            if ids <= sealed:
                log.discard(blocks, name)
        generation = generation_of(cursor) + 1
        kept = [e for e in every if e.logical_timestamp not in drop]
        new: list[dict[str, Any]] = []
        previous = ""
        # One new batch for the old ones' whole range, cut at SEAL_BATCH entries.
        first = 1
        chunks = [kept[i : i + SEAL_BATCH] for i in range(0, len(kept), SEAL_BATCH)] or [[]]
        for n, chunk in enumerate(chunks):
            last = int(old[-1]["last"]) if n == len(chunks) - 1 else chunk[-1].logical_timestamp
            about = {
                "first": first,
                "last": last,
                "count": len(chunk),
                "min_time": min((e.time for e in chunk), default=0),
                "max_time": max((e.time for e in chunk), default=0),
                "previous": previous,
                "generation": generation,
            }
            data = parquet(chunk, about)
            locator = block_locator(data)
            blocks.put(locator, data)
            new.append({**about, "locator": locator})
            previous, first = locator, last + 1
        blocks.sync()
        for batch in new[:-1]:
            kv.set(keys.JOURNAL, keys.journal_batch_key(batch["first"], generation), json_bytes(batch))
        published = {**cursor, "batch": new[-1], "generation": generation, "sealed": []}
        try:
            kv.set_if(keys.JOURNAL, keys.JOURNAL_CURSOR, json_bytes(published), raw)
        except PredicateFailed:
            for batch in new:  # a sealer appended meanwhile: this generation never was
                kv.delete(keys.JOURNAL, keys.journal_batch_key(batch["first"], generation))
                blocks.delete(batch["locator"])
            return AGAIN
        finish(kv, published)
        delete_many(
            kv,
            keys.JOURNAL,
            [k for k, _ in scan_prefix(kv, keys.JOURNAL, keys.journal_batch_prefix(generation - 1))],
        )
        kept_locators = {b["locator"] for b in new}
        for batch in old:
            if batch["locator"] not in kept_locators:
                blocks.delete(batch["locator"])
        return {"entries": len(kept), "dropped": len(drop), "batches": len(new)}

    return retry(JOURNAL_CURSOR, attempt, "could not compact the journal: sealers kept appending")
