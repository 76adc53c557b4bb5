"""Recovery of the intents a dead writer left open: each is decided from the lake's state, as
done (with what its verb produced) or withdrawn, so that the journal and the metadata agree
after a writer is killed between its intent and its outcome (docs/decisions/0009-journal.md).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from lakectl.core import keys
from lakectl.core.events import Verb
from lakectl.core.journal import form, log, records, sealed, writers
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix
from lakectl.core.model import BranchId, Commit, RepositoryId, TagId
from lakectl.errors import LakectlError, NotFound, PredicateFailed

if TYPE_CHECKING:
    from lakectl.core.lake import Lake

HISTORY_WALK = 10_000
"""Commits of a branch's history looked at to find the one a dead commit made."""
SKEW_US = 5_000_000
"""Entries this much older than an intent (microseconds) may still name the commits it made."""
VOID = "void"
"""An intent decided as never done, about to be deleted."""
MAKES_COMMITS = frozenset({Verb.COMMIT, Verb.MERGE, Verb.REVERT, Verb.CHERRY_PICK})
"""The verbs decided by the commit they made (:func:`decide`); the journal logs each of their
new commits before it is published (:meth:`lakectl.core.journal.journal.Journal._made`)."""


def recover(kv: KVStore, blocks: Any) -> int:
    """Decide every open intent of every dead writer, and unregister dead writers with nothing
    left; returns how many intents were decided. Recoverers racing over one intent agree by a
    compare-and-swap of the intent itself."""
    lake: Lake | None = None
    decided = 0
    for key, raw in list(scan_prefix(kv, keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX)):
        if writers.is_alive(json.loads(raw)):
            continue
        partition = keys.journal_live_partition(key[len(keys.JOURNAL_WRITER_PREFIX) :])
        left = list(kv.scan(partition))
        if not left:
            kv.delete(keys.JOURNAL, key)  # sealed and gone: nobody writes here any more
            log.forget(blocks, key[len(keys.JOURNAL_WRITER_PREFIX) :])  # so is its log
            continue
        for entry_key, value in left:
            intent = form.read_live(value)
            if intent["state"] == VOID:
                kv.delete(partition, entry_key)  # a recoverer died between deciding and deleting
            if intent["state"] != form.PENDING:
                continue
            if lake is None:
                from lakectl.core.lake import Lake

                lake = Lake(kv=kv, blocks=blocks)
            outcome = decide(lake, intent)
            if outcome is None:
                new = {**intent, "state": VOID}
            else:
                new = {**intent, "state": form.DONE, "event_payload": outcome, "recovered": True}
            try:
                kv.set_if(partition, entry_key, form.live(new), value)
            except PredicateFailed:
                continue  # another recoverer decided it
            if outcome is None:
                kv.delete(partition, entry_key)
            decided += 1
    return decided


def decide(lake: Lake, intent: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the verb of ``intent`` left in the lake: the payload its outcome would have had when
    it happened, else None. Decided from the state now; a target that changed again since (a
    branch created, then deleted and created again) is decided by what it is now."""
    payload = dict(intent["event_payload"])
    rid = RepositoryId(intent["repo_id"])
    try:
        verb = Verb(intent["event_type"])
    except ValueError:
        return None
    try:
        if verb in MAKES_COMMITS:
            made = _find_commit(lake, rid, payload, int(intent["time"]))
            if made is None:
                return None
            return {**payload, "commit_id": made.id, "commit": made.encode().decode()}
        return _decide_state(lake, verb, rid, payload)
    except (NotFound, LakectlError):
        return None


def _decide_state(
    lake: Lake, verb: Verb, rid: RepositoryId, payload: dict[str, Any]
) -> dict[str, Any] | None:
    from lakectl.core import porcelain

    refs = lake.refs
    if verb is Verb.CREATE_REPOSITORY:
        repo = refs.get_repo(rid)
        if repo.creation_date != payload.get("creation_date"):
            return None
        if payload.get("bare"):
            return payload
        first = porcelain.first_commit(lake, repo)
        return {**payload, "commit_id": first.id, "commit": first.encode().decode()}
    if verb is Verb.DELETE_REPOSITORY:
        return None if _exists(lambda: refs.get_repo(rid)) else payload
    if verb is Verb.AUTH:  # recorded if the store holds what it wrote (still signed)
        return records.decide(lake.kv, payload)
    bid = BranchId(payload.get("branch", ""))
    if verb is Verb.CREATE_BRANCH:
        return payload if _exists(lambda: refs.get_branch(rid, bid)) else None
    if verb is Verb.DELETE_BRANCH:
        return None if _exists(lambda: refs.get_branch(rid, bid)) else payload
    if verb is Verb.CREATE_TAG:
        tag = refs.get_tag(rid, TagId(payload["tag"]))
        return payload if tag.commit_id == payload.get("commit_id") else None
    if verb is Verb.DELETE_TAG:
        return None if _exists(lambda: refs.get_tag(rid, TagId(payload["tag"]))) else payload
    if verb is Verb.RESTORE_REFS:  # branches go last: one of them there, the refs are in
        names = [BranchId(n) for n in payload.get("branches", {})]
        if not names:  # commit records alone (refsdump.create_commit_record): all there or none
            ids = [Commit.decode(str(c).encode()).id for c in payload.get("commits", [])]
            return payload if ids and all(_exists(lambda c=c: refs.get_commit(rid, c)) for c in ids) else None
        return payload if any(_exists(lambda n=n: refs.get_branch(rid, n)) for n in names) else None
    if "rows" in payload:  # staged writes and deletes, one batch: all of it or none
        branch = refs.get_branch(rid, bid)
        for path, row in payload["rows"]:
            now = lake.staging.lookup(rid, branch, path)
            if (list(now) if now is not None else None) == row:
                return payload
        return None
    if verb is Verb.RESET:
        token = payload.get("staging_token")
        return payload if token and refs.get_branch(rid, bid).staging_token != token else None
    if verb is Verb.SETTINGS:
        # Replayed as the value it has now: the same lake whether it was set or not.
        return {**payload, "value": _setting(lake, rid, str(payload.get("key", "")))}
    return None  # garbage collection: what it removed (blocks, uploads) is not replayed


def _exists(get: Any) -> bool:
    try:
        get()
    except NotFound:
        return False
    return True


def _setting(lake: Lake, rid: RepositoryId, key: str) -> Any:
    from lakectl.core import protection, repometadata
    from lakectl.core.upkeep import retention

    if key == keys.REPOSITORY_METADATA:
        return repometadata.get(lake, rid)
    if key == keys.GC_RULES:
        try:
            return retention.get_rules(lake, rid).to_dict()
        except NotFound:
            return None
    return list(protection.get_rules(lake, rid).patterns)


def _find_commit(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any], since: int) -> Commit | None:
    """The newest commit of the branch's history that the intent describes (its committer,
    creation date and message) and that no done entry names already."""
    head = lake.refs.get_branch(rid, BranchId(payload.get("branch", ""))).commit_id
    date = payload.get("creation_date")
    if date is None:
        return None
    claimed = set(_claimed(lake.kv, lake.blocks, since - SKEW_US))
    seen = {head}
    todo = deque([head])
    for _ in range(HISTORY_WALK):
        if not todo:
            break
        commit = lake.refs.get_commit(rid, todo.popleft())
        if (
            commit.creation_date == date
            and commit.committer == payload.get("committer", commit.committer)
            and commit.message == payload.get("commit_message", commit.message)
            and commit.id not in claimed
        ):
            return commit
        if commit.creation_date < int(date) - SKEW_US // 1_000_000:
            continue  # older than the intent: nothing it made lies behind it
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return None


def _claimed(kv: KVStore, blocks: Any, since: int) -> Iterator[str]:
    """Commit ids named by done entries written after ``since`` (microseconds), sealed or not."""
    for key, _ in scan_prefix(kv, keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX):
        for _, raw in kv.scan(keys.journal_live_partition(key[len(keys.JOURNAL_WRITER_PREFIX) :])):
            record = form.read_live(raw)
            if record["state"] == form.DONE and record["event_payload"].get("commit_id"):
                yield record["event_payload"]["commit_id"]
    for batch in sealed.batches(kv):
        if int(batch["max_time"]) >= since:
            for entry in sealed.read_batch(blocks, batch["locator"]):
                if entry.time >= since and entry.event_payload.get("commit_id"):
                    yield entry.event_payload["commit_id"]
