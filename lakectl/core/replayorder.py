"""What a journal entry says so that a rebuild replays concurrent writers as they landed
(docs/decisions/0009-journal.md, "Concurrent writers"): the staging tokens a write went to, the
branch record a move left and the tokens it dropped, and which staged write of a path won.

Journal entries are sealed in the order of their writers' clocks taken before the mutation, which
under concurrency is not the order in which the mutations landed. So the entries carry the engine's
own state instead, and a rebuild never has to trust their order for staging or branch records:

- a staged write names its tokens (``tokens``); it is replayed into them, whatever the branch's
  token is at that point of the replay;
- a branch move (commit, merge, revert, cherry-pick, reset, creation) names the record its final
  compare-and-swap wrote (``branch_record``) and the tokens it dropped (``dropped``); the replayed
  record is the newest by :func:`record_order` (a branch's tokens are made in its CAS order);
- two writes of one path into one token are blind ``set``\\ s: the last to land wins. After its
  write, the journal takes a clock (``settled``) and then reads the path back; a write that reads
  another value lost (``lost``: a later write landed). Two writes that read back their own values
  have disjoint [write, read-back] spans (a write landing inside the other's span would have been
  read), so the clocks taken inside the spans order them as they landed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lakectl.core import keys
from lakectl.core.events import Event, Verb
from lakectl.core.graph.refs import token_time
from lakectl.core.kv import KVStore
from lakectl.core.model import (
    TOMBSTONE,
    Branch,
    BranchId,
    CommitId,
    RepositoryId,
    Row,
    StagingToken,
    encode_row,
)
from lakectl.errors import KeyNotFound

STAGED = frozenset({Verb.WRITE_OBJECTS, Verb.DELETE_OBJECTS, Verb.RESET})
STORED = "stored"
"""The event note in which a staged write hands over the (path, value) pairs it stored, so
that reading them back compares bytes and encodes nothing twice."""
SCAN_FROM = 32
"""Above this many paths, a write's paths are read back by one scan instead of one get each."""


def moved(branch: Branch | None, dropped: Iterable[StagingToken] = ()) -> dict[str, Any]:
    """The payload of a branch move: the record it left and the tokens it dropped."""
    out: dict[str, Any] = {"dropped": list(dropped)}
    if branch is not None:
        out["branch_record"] = {
            "commit_id": branch.commit_id,
            "staging_token": branch.staging_token,
            "sealed_tokens": list(branch.sealed_tokens),
        }
    return out


def record_of(name: str, payload: Mapping[str, Any]) -> Branch | None:
    """The branch record a move's entry names; None for an entry of an older journal."""
    found = payload.get("branch_record")
    if not found:
        return None
    return Branch(
        BranchId(name),
        CommitId(found["commit_id"]),
        StagingToken(found["staging_token"]),
        tuple(StagingToken(t) for t in found["sealed_tokens"]),
    )


def record_order(branch: Branch, generation: int, fallback_ns: int) -> tuple[int, int]:
    """Where a record stands in its branch's CAS chain: a CAS that changes the staging token made
    the token between reading the record it replaced and swapping it, so token times follow the
    chain; a CAS that keeps the token (a commit's last step) moves the head to a child commit, so
    the generation orders those. ``fallback_ns`` for a token of the older random form."""
    made = token_time(branch.staging_token)
    return (made if made is not None else fallback_ns, generation)


def settle(kv: KVStore, event: Event) -> dict[str, Any]:
    """For a staged write that has landed: the clock taken after it (ns) and, per token written,
    the paths that read back another value (another write of the path landed later). Empty for
    other verbs."""
    tokens: Sequence[str] = event.payload.get("tokens", ())
    if event.verb not in STAGED or not tokens:
        return {}
    clock = time.time_ns()  # after the write landed, before it is read back: see the docstring
    stored: Sequence[tuple[str, bytes]] | None = event.notes.get(STORED)
    if stored is not None:
        rows = dict(stored)
    else:
        rows = {
            path: encode_row(row_of(row)) if row is not None else TOMBSTONE
            for path, row in event.payload["rows"]
        }
    paths = sorted(rows)
    lost: dict[str, list[str]] = {}
    for token in dict.fromkeys(tokens):
        partition = keys.staging_partition(RepositoryId(event.repository), StagingToken(token))
        now = _read_back(kv, partition, paths)
        # A path not found at all was taken with its token by a commit or reset (the token
        # dropped, or the path unstaged as committed), not overwritten: a later write leaves a
        # row or a tombstone. The replay finds where the commit put it.
        gone = [path for path, value in rows.items() if path in now and now[path] != value]
        if gone:
            lost[token] = sorted(gone)
    return {"settled": clock, "lost": lost} if lost else {"settled": clock}


def _read_back(kv: KVStore, partition: str, paths: list[str]) -> dict[str, bytes]:
    if len(paths) <= SCAN_FROM:
        out: dict[str, bytes] = {}
        for path in paths:
            try:
                out[path] = kv.get(partition, path)
            except KeyNotFound:
                continue
        return out
    wanted, last = set(paths), paths[-1]
    found: dict[str, bytes] = {}
    for key, value in kv.scan(partition, paths[0]):
        if key > last:
            break
        if key in wanted:
            found[key] = value
    return found


def row_of(row: Sequence[Any]) -> Row:
    """A row as a journal entry carries it (a JSON list), as the KV stores it."""
    size, checksum, locators, mtime, content_type, metadata = row
    return (int(size), str(checksum), str(locators), int(mtime), str(content_type), str(metadata))
