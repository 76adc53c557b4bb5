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
- two writes of one path into one token are blind ``set``\\ s: the last to land wins. Each
  write stores its entry in its own transaction, once its rows are written, with a clock read
  there (``settled``; ``settled_in`` per token for a write that went again into a new token).
  Two transactions that write one key are serialized by the store (SQLite's one write lock,
  PostgreSQL's row lock, held to the end of the transaction), so the one that lands later reads
  its clock after the other's was read: the clocks order them as they landed. Entries of older
  journals may say which paths read back another value (``lost``) instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lakectl.core.events import Verb
from lakectl.core.graph.refs import token_time
from lakectl.core.model import (
    Branch,
    BranchId,
    CommitId,
    Row,
    StagingToken,
)

STAGED = frozenset({Verb.WRITE_OBJECTS, Verb.DELETE_OBJECTS, Verb.RESET})


def moved(branch: Branch | None, dropped: Iterable[StagingToken] = ()) -> dict[str, Any]:
    """The payload of a branch move: the record it left and the tokens it dropped."""
    out: dict[str, Any] = {"dropped": list(dropped)}
    if branch is not None:
        out["branch_record"] = {
            "commit_id": branch.commit_id,
            "staging_token": branch.staging_token,
            "sealed_tokens": list(branch.sealed_tokens),
            **({"hidden": True} if branch.hidden else {}),
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
        hidden=bool(found.get("hidden", False)),
    )


def record_order(branch: Branch, generation: int, fallback_ns: int) -> tuple[int, int]:
    """Where a record stands in its branch's CAS chain: a CAS that changes the staging token made
    the token between reading the record it replaced and swapping it, so token times follow the
    chain; a CAS that keeps the token (a commit's last step) moves the head to a child commit, so
    the generation orders those. ``fallback_ns`` for a token of the older random form."""
    made = token_time(branch.staging_token)
    return (made if made is not None else fallback_ns, generation)


def row_of(row: Sequence[Any]) -> Row:
    """A row as a journal entry carries it (a JSON list), as the KV stores it."""
    size, checksum, locators, mtime, content_type, metadata = row
    return (int(size), str(checksum), str(locators), int(mtime), str(content_type), str(metadata))
