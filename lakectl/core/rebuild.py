"""Rebuild: a fresh metadata database from the blocks and the sealed journal alone
(docs/decisions/0009-journal.md).

The sealed batches are found among the blocks by what each says it is (Parquet schema
metadata), chained by the locator of the batch before, and replayed in logical-timestamp order
into an empty KV store: repositories, branches, tags, commits (each entry that made one carries
the commit record), staged entries and settings. Writers seal what they finished on close and
within a second; only what a process finished in its last second before it died together with
the database is not in the blocks, and so not rebuilt.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.core import gc, journal, keys, protection
from lakectl.core.blocks import BlockAdapter
from lakectl.core.events import Verb
from lakectl.core.graph.refs import new_staging_token
from lakectl.core.graph.tree import Update
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import partitions
from lakectl.core.model import Branch, BranchId, Commit, CommitId, Repository, RepositoryId, Row, Tag, TagId
from lakectl.core.porcelain import Lake, delete_repo
from lakectl.errors import AlreadyExists, IntegrityError

PARQUET_MAGIC = b"PAR1"


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """What a rebuild replayed."""

    batches: int
    entries: int
    last_logical_timestamp: int
    repositories: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "entries": self.entries,
            "last_logical_timestamp": self.last_logical_timestamp,
            "repositories": self.repositories,
        }


def find_batches(blocks: BlockAdapter) -> list[dict[str, Any]]:
    """The sealed batches among the blocks, in order: ``{"first", "last", "previous", "locator",
    ...}``. ``IntegrityError`` when the chain from timestamp 1 has a gap or a fork."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[int, list[dict[str, Any]]] = {}
    for locator in blocks.list():
        if blocks.get(locator, 0, len(PARQUET_MAGIC)) != PARQUET_MAGIC:
            continue
        data = blocks.get(locator)
        if len(data) < 12 or not data.endswith(PARQUET_MAGIC):
            continue  # object data that happens to start like Parquet
        try:
            meta = pq.read_schema(io.BytesIO(data)).metadata or {}
        except (pa.ArrowException, OSError):
            continue  # not Parquet after all
        if meta.get(journal.MARK) != b"journal":
            continue  # a range, a metarange, a user's Parquet file
        about = json.loads(meta[journal.BATCH])
        found.setdefault(int(about["first"]), []).append({**about, "locator": locator})
    ordered: list[dict[str, Any]] = []
    previous, first = "", 1
    while first in found:
        following = [b for b in found.pop(first) if b["previous"] == previous]
        # A compaction rewrote the journal as a newer generation: its chain wins over the old one
        # (whose blocks the compaction deletes, unless it was killed first).
        newest = max((int(b.get("generation", 0)) for b in following), default=0)
        candidates = [b for b in following if int(b.get("generation", 0)) == newest]
        if len(candidates) != 1:
            raise IntegrityError(
                f"the journal's batches from logical timestamp {first} do not chain: "
                f"{len(candidates)} follow the batch before",
                locator=previous,
            )
        ordered.append(candidates[0])
        previous, first = candidates[0]["locator"], int(candidates[0]["last"]) + 1
    found = {
        k: v
        for k, v in found.items()
        if k > first or any(int(b.get("generation", 0)) > _gen(ordered) for b in v)
    }
    if found:
        raise IntegrityError(
            f"the journal has batches after a gap at logical timestamp {first} "
            f"(from {min(found)}): a batch is missing from the blocks"
        )
    return ordered


def rebuild(blocks: BlockAdapter, kv: KVStore) -> Rebuilt:
    """Replay the journal in ``blocks`` into ``kv``, which must hold nothing (``AlreadyExists``
    otherwise); the rebuilt lake keeps journalling from where the journal ended."""
    if partitions(kv, "") or next(iter(kv.scan(keys.REPOSITORIES)), None) is not None:
        raise AlreadyExists("the metadata database to rebuild into is not empty: give a new one")
    batches = find_batches(blocks)
    lake = Lake(kv=kv, blocks=blocks)
    count = 0
    for entry in _entries(blocks, batches):
        replay(lake, entry)
        count += 1
    last = int(batches[-1]["last"]) if batches else 0
    kv.set(keys.LAKE, keys.JOURNAL_SETTING, journal._encode({"enabled": True, "since": _since(batches)}))
    generation = _gen(batches)
    for batch in batches:
        kv.set(keys.JOURNAL, keys.journal_batch_key(int(batch["first"]), generation), journal._encode(batch))
    cursor: dict[str, Any] = {"next": last + 1, "batch": batches[-1] if batches else None, "sealed": []}
    cursor["generation"] = generation
    kv.set(keys.JOURNAL, keys.JOURNAL_CURSOR, journal._encode(cursor))
    return Rebuilt(len(batches), count, last, sum(1 for _ in lake.refs.list_repos()))


def _gen(batches: list[dict[str, Any]]) -> int:
    return int(batches[-1].get("generation", 0)) if batches else 0


def _since(batches: list[dict[str, Any]]) -> int:
    return int(batches[0]["min_time"]) // 1_000_000 if batches else 0


def _entries(blocks: BlockAdapter, batches: list[dict[str, Any]]) -> Iterator[journal.Entry]:
    for batch in batches:
        yield from journal._read_batch(blocks, batch["locator"])


def replay(lake: Lake, entry: journal.Entry) -> None:
    """Apply one journal entry to the lake's metadata, as the verb it records left it."""
    rid = RepositoryId(entry.repo_id)
    p = entry.event_payload
    verb = Verb(entry.event_type)
    bid = BranchId(p.get("branch", ""))
    if verb is Verb.CREATE_REPOSITORY:
        repo = Repository(rid, BranchId(p["default_branch"]), int(p["creation_date"]), p["storage_namespace"])
        if not p.get("bare"):
            first = _commit(lake, rid, p)
            lake.refs.create_branch(rid, Branch(repo.default_branch, first.id, new_staging_token()))
        lake.refs.create_repo(repo)
    elif verb is Verb.DELETE_REPOSITORY:
        delete_repo(lake, rid)
    elif verb in (Verb.WRITE_OBJECTS, Verb.DELETE_OBJECTS) or (verb is Verb.RESET and "rows" in p):
        lake.staging.write(rid, bid, _rows(p))
    elif verb is Verb.RESET:
        _move(lake, rid, bid, None)
    elif verb is Verb.COMMIT and p.get("prefixes"):
        _commit_under(lake, rid, bid, _commit(lake, rid, p).id, p["prefixes"])
    elif verb in (Verb.COMMIT, Verb.MERGE, Verb.REVERT, Verb.CHERRY_PICK):
        _move(lake, rid, bid, _commit(lake, rid, p).id)
    elif verb is Verb.CREATE_BRANCH:
        lake.refs.create_branch(rid, Branch(bid, CommitId(p["commit_id"]), new_staging_token()))
    elif verb is Verb.DELETE_BRANCH:
        branch = lake.refs.get_branch(rid, bid)
        lake.refs.delete_branch(rid, bid)
        lake.staging.drop_tokens(rid, branch.tokens)
    elif verb is Verb.CREATE_TAG:
        lake.refs.replace_tag(rid, Tag(TagId(p["tag"]), CommitId(p["commit_id"])))
    elif verb is Verb.DELETE_TAG:
        lake.refs.delete_tag(rid, TagId(p["tag"]))
    elif verb is Verb.SETTINGS:
        _setting(lake, rid, p)
    # GARBAGE_COLLECTION: what it deleted were blocks and uploads in flight, neither replayed.


def _commit(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any]) -> Commit:
    commit = Commit.decode(str(payload["commit"]).encode())
    lake.refs.put_commit(rid, commit)
    return commit


def _rows(payload: Mapping[str, Any]) -> list[Update]:
    return [(path, _row(row) if row is not None else None) for path, row in payload["rows"]]


def _row(row: list[Any]) -> Row:
    size, checksum, locators, mtime, content_type, metadata = row
    return (int(size), str(checksum), str(locators), int(mtime), str(content_type), str(metadata))


def _move(lake: Lake, rid: RepositoryId, bid: BranchId, commit: CommitId | None) -> None:
    """The branch at ``commit`` (None: where it is) with nothing staged: as a commit or a reset
    leaves it."""
    branch, raw = lake.refs.get_branch_raw(rid, bid)
    lake.refs.swap_branch(rid, raw, Branch(bid, commit or branch.commit_id, new_staging_token()))
    lake.staging.drop_tokens(rid, branch.tokens)


def _commit_under(
    lake: Lake, rid: RepositoryId, bid: BranchId, commit: CommitId, prefixes: list[str]
) -> None:
    """The branch at ``commit`` with what was staged outside ``prefixes`` still staged: as a
    partial commit leaves it."""
    branch, raw = lake.refs.get_branch_raw(rid, bid)
    rest = [(path, row) for path, row in lake.staging.staged_updates(rid, branch.tokens)
            if not any(path.startswith(prefix) for prefix in prefixes)]  # fmt: skip
    kept = new_staging_token()
    lake.staging.fill(rid, kept, rest)
    lake.refs.swap_branch(rid, raw, Branch(bid, commit, kept))
    lake.staging.drop_tokens(rid, branch.tokens)


def _setting(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any]) -> None:
    key, value = payload["key"], payload.get("value")
    if key == keys.GC_RULES:
        if value is None:
            gc.delete_rules(lake, rid)
        else:
            gc.set_rules(lake, rid, gc.GCRules.from_dict(value))
    elif key == keys.BRANCH_PROTECTION:
        protection.set_rules(lake, rid, value or [])


def rebuild_embedded(home: str) -> dict[str, Any]:
    """Rebuild the embedded lake at ``home``: a new ``lake.db`` from its block directory, written
    aside and renamed into place once whole. ``AlreadyExists`` when a non-empty ``lake.db`` is
    there (move it aside first: a rebuild never overwrites metadata)."""
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.identity import claim
    from lakectl.core.kv.sqlite import SQLiteStore

    home = os.path.abspath(home)
    database = os.path.join(home, "lake.db")
    if os.path.exists(database) and os.path.getsize(database) > 0:
        raise AlreadyExists(f"{database} exists: move it aside to rebuild the metadata from the journal")
    blocks = LocalAdapter(os.path.join(home, "blocks"))
    building = database + ".rebuilding"
    for stale in (building, building + "-wal", building + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)  # a rebuild killed before: it starts over
    kv = SQLiteStore(building)
    try:
        done = rebuild(blocks, kv)
        claim(kv, blocks, database)
    finally:
        kv.close()
    os.replace(building, database)
    return {"database": database, **done.to_dict()}
