"""Rebuild: a fresh metadata database from the blocks and the sealed journal alone
(docs/decisions/0009-journal.md).

The sealed batches are found among the blocks by what each says it is (Parquet schema
metadata), chained by the locator of the batch before, and replayed into an empty KV store:
repositories, branches, tags, commits (each entry that made one carries the commit record),
staged entries, settings, and a server's auth records (:mod:`lakectl.core.journal.records`).
Writers seal what they finished on close and within a second, and log every acknowledged entry
in the block store before the acknowledgement (:mod:`lakectl.core.journal.log`): the logged
entries no batch holds are sealed into one more batch and replayed after the others, so every
acknowledged change is rebuilt.

Entries are replayed in logical-timestamp order, which follows the writers' clocks taken before each
mutation, not the order in which concurrent mutations landed. Where that order would decide the
outcome, the entries carry the engine's own state instead (:mod:`lakectl.core.journal.replayorder`),
and :class:`Replay` follows it: staged rows go to the staging tokens they were written to, a dropped
token stays dropped, a branch gets the newest record its moves name (by the time its staging token
was made, then the head's generation), of two writes of one path into one token the one whose
transaction read the later clock wins, and a token written after the branch's last recorded move is
its current token. Entries without that state (an older journal's; an intent that recovery decided
for a dead writer) are replayed in order.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from lakectl.core import keys, protection, repometadata
from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.data import block_locator
from lakectl.core.events import Verb
from lakectl.core.graph.ranges import PARQUET_MAGIC
from lakectl.core.graph.refs import new_staging_token, token_time
from lakectl.core.journal import form, journal, log, recovery, replayorder, sealed
from lakectl.core.journal import records as auth_records
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import partitions, scan_prefix, set_many
from lakectl.core.lake import Lake
from lakectl.core.model import (
    TOMBSTONE,
    Branch,
    BranchId,
    Commit,
    CommitId,
    Repository,
    RepositoryId,
    StagingToken,
    Tag,
    TagId,
    encode_row,
)
from lakectl.core.porcelain import delete_repo
from lakectl.core.upkeep import retention
from lakectl.core.workflow import pulls
from lakectl.errors import AlreadyExists, CommitNotFound, IntegrityError, InvalidArgument, NotFound


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
    ...}``. ``IntegrityError`` when the chain from timestamp 1 has a gap or a fork it cannot
    resolve (see :func:`find_journal`)."""
    return find_journal(blocks)[0]


def find_journal(blocks: BlockAdapter) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """The sealed batches among the blocks, in order (as :func:`find_batches`), the locators of
    the log blocks (:mod:`lakectl.core.journal.log`), and the batches left off the chain where it
    forked. A sealer killed between storing its batch and publishing it leaves a batch that
    follows the same one as the batch published there: the chain takes the one a later batch
    follows, or, at the chain's end, the larger; the entries of the other that the journal lacks
    are replayed after the rest (they were done, so they happened). Batches that do not name
    their entries (an older version's) cannot be told apart: a fork of those is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[int, list[dict[str, Any]]] = {}
    logs: list[str] = []
    # A local block directory keeps its log in files no upload can write: a block that begins
    # like a log record there is a user's object, never read as the journal's.
    in_blocks = log.directory(blocks) is None
    for locator in blocks.list():
        head = blocks.get(locator, 0, len(PARQUET_MAGIC))
        if head == log.MAGIC[: len(PARQUET_MAGIC)]:
            if in_blocks and log.is_log(blocks.get(locator)):
                logs.append(locator)
            continue
        if head != PARQUET_MAGIC:
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
        named = "entry" in pq.read_schema(io.BytesIO(data)).names
        found.setdefault(int(about["first"]), []).append({**about, "locator": locator, "named": named})
    ordered: list[dict[str, Any]] = []
    forks: list[dict[str, Any]] = []
    previous, first = "", 1
    while first in found:
        following = [b for b in found.pop(first) if b["previous"] == previous]
        # A compaction rewrote the journal as a newer generation: its chain wins over the old one
        # (whose blocks the compaction deletes, unless it was killed first).
        newest = max((int(b.get("generation", 0)) for b in following), default=0)
        candidates = [b for b in following if int(b.get("generation", 0)) == newest]
        if len(candidates) > 1 and all(b["named"] for b in candidates):
            continued = [
                b for b in candidates if any(n["previous"] == b["locator"] for v in found.values() for n in v)
            ]
            if len(continued) <= 1:
                chosen = continued or [max(candidates, key=lambda b: (int(b["count"]), b["locator"]))]
                forks.extend(b for b in candidates if b is not chosen[0])
                candidates = chosen
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
    for batch in (*ordered, *forks):
        del batch["named"]
    return ordered, logs, forks


def rebuild(blocks: BlockAdapter, kv: KVStore, seal: bytes | None = None) -> Rebuilt:
    """Replay the journal in ``blocks`` into ``kv``, which must hold nothing (``AlreadyExists``
    otherwise); the rebuilt lake keeps journalling from where the journal ended. ``seal``
    verifies a server's auth records (:mod:`lakectl.core.journal.records`): without it, a
    journal that holds some is refused (``InvalidArgument``)."""
    if partitions(kv, "") or next(iter(kv.scan(keys.REPOSITORIES)), None) is not None:
        raise AlreadyExists("the metadata database to rebuild into is not empty: give a new one")
    batches, logs, forks = find_journal(blocks)
    logs = [*log.files(blocks), *logs]
    logged, made = _unsealed(blocks, batches, logs, forks)
    if not batches and not logged:
        raise NotFound(
            "no journal among the blocks: the lake's journal was off, so there is nothing to "
            "rebuild its metadata from"
        )
    if logged:
        # Acknowledged but not sealed before the database was lost: sealed now, after the rest.
        batches.append(_seal_logged(blocks, batches, logged))
    lake = Lake(kv=kv, blocks=blocks)
    count = 0
    replaying = Replay(lake, seal)
    for entry in _entries(blocks, batches):
        replaying.apply(entry)
        count += 1
    named = sorted(
        [
            *_named_commits(lake, made),
            *_named_branches(lake, made, replaying.named),
            *_named_repositories(lake, made, replaying.named),
        ],
        key=lambda e: (e[1]["time"], e[1]["writer"], e[1]["seq"]),
    )
    if named:
        # Done by writers that died before logging it, and named by what was: sealed now, last.
        batches.append(_seal_logged(blocks, batches, named))
        for entry in _entries(blocks, batches[-1:]):
            replaying.apply(entry)
            count += 1
    replaying.finish()
    for name in [*logs, *(b["locator"] for b in forks)]:
        log.discard(blocks, name)  # every entry they held is in a batch now
    last = int(batches[-1]["last"]) if batches else 0
    kv.set(keys.LAKE, keys.JOURNAL_SETTING, form.json_bytes({"enabled": True, "since": _since(batches)}))
    generation = _gen(batches)
    for batch in batches:
        key = keys.journal_batch_key(int(batch["first"]), generation)
        kv.set(keys.JOURNAL, key, form.json_bytes(batch))
    cursor: dict[str, Any] = {"next": last + 1, "batch": batches[-1] if batches else None, "sealed": []}
    cursor["generation"] = generation
    kv.set(keys.JOURNAL, keys.JOURNAL_CURSOR, form.json_bytes(cursor))
    return Rebuilt(len(batches), count, last, sum(1 for _ in lake.refs.list_repos()))


Logged = tuple[str, dict[str, Any], str]
"""A logged entry: its id (``<writer>/<key>``), its header and its payload's JSON text."""


def _unsealed(
    blocks: BlockAdapter, batches: list[dict[str, Any]], logs: list[str], forks: list[dict[str, Any]]
) -> tuple[list[Logged], list[Logged]]:
    """The logged entries, and those of batches left off a fork, that no batch of the chain
    holds, as a seal would order them; and the commits logged as about to be published by
    verbs whose outcome neither holds (pending, with the commit in their payload)."""
    if not logs and not forks:
        return [], []
    in_batches = sealed.sealed_ids(blocks, batches)
    found: dict[str, Logged] = {}
    pending: list[Logged] = []
    for name in logs:
        held = log.read_file(name) if os.sep in name else log.decode(blocks.get(name), name)
        for id_, header, text in held:
            if id_ in in_batches:
                continue
            if header.get("state") == form.DONE:
                found[id_] = (id_, header, text)
            elif header.get("state") == form.PENDING:
                pending.append((id_, header, text))
    for fork in forks:
        for entry in sealed.read_batch(blocks, fork["locator"]):
            if entry.key and entry.key not in in_batches:
                writer, _, key = entry.key.partition("/")
                seq = int(key.split(".")[0].rpartition("-")[2] or "0", 16)
                header = {"time": entry.time, "writer": writer, "seq": seq, "client_id": entry.client_id,
                          "repo_id": entry.repo_id, "event_type": entry.event_type}  # fmt: skip
                found.setdefault(entry.key, (entry.key, header, form.json_text(entry.event_payload)))
    # Of a write redone into the next token, its last attempt (as a seal keeps it).
    last: dict[str, str] = {}
    for id_ in found:
        write, _, attempt = id_.partition(".")
        if write not in last or int(attempt or 1) > int(last[write].partition(".")[2] or 1):
            last[write] = id_
    kept = [found[id_] for id_ in last.values()]
    kept.sort(key=lambda e: (e[1]["time"], e[1]["writer"], e[1]["seq"]))
    return kept, [e for e in pending if e[0].partition(".")[0] not in last]


def _named_commits(lake: Lake, made: list[Logged]) -> list[Logged]:
    """Of the commits ``made`` (logged before their verb published them, by writers that died
    before logging the outcome), those the rebuilt lake names: a parent of one of its commits,
    a branch's head or a tag's commit (a merge of the branch a dead committer moved, the next
    commit on it). Their records are put back and their entries returned as done, in the order
    of their clocks; a commit nothing names is left out, as its verb was never acknowledged.
    Otherwise the lake would name commits it has no record of (a log that cannot be walked)."""
    waiting: dict[tuple[RepositoryId, CommitId], tuple[Logged, Commit]] = {}
    committing = {verb.value for verb in recovery.MAKES_COMMITS}
    for entry in made:
        if entry[1].get("event_type") not in committing:
            continue  # a creation's intent: _named_branches, _named_repositories
        commit = Commit.decode(str(json.loads(entry[2])["commit"]).encode())
        rid = RepositoryId(entry[1]["repo_id"])
        if not _found(partial(lake.refs.get_commit, rid, commit.id)):
            waiting.setdefault((rid, commit.id), (entry, commit))
    if not waiting:
        return []
    named: set[tuple[RepositoryId, CommitId]] = set()
    for rid in {rid for rid, _ in waiting}:
        for _, raw in scan_prefix(lake.kv, keys.repo_partition(rid), keys.COMMIT_PREFIX):
            named.update((rid, parent) for parent in Commit.decode(raw).parents)
        named.update((rid, b.commit_id) for b in lake.refs.list_branches(rid))
        named.update((rid, t.commit_id) for t in lake.refs.list_tags(rid))
    restored: dict[str, Logged] = {}
    found = [key for key in waiting if key in named]
    while found:
        rid, cid = found.pop()
        if (rid, cid) not in waiting:
            continue
        (id_, header, text), commit = waiting.pop((rid, cid))
        lake.refs.put_commit(rid, commit)
        restored.setdefault(id_, (id_, {**header, "state": form.DONE}, text))
        found.extend((rid, parent) for parent in commit.parents if (rid, parent) in waiting)
    return sorted(restored.values(), key=lambda e: (e[1]["time"], e[1]["writer"], e[1]["seq"]))


def _named_branches(lake: Lake, logged: list[Logged], named: set[tuple[RepositoryId, str]]) -> list[Logged]:
    """Of the branch creations logged as intents by writers that died before logging the
    outcome, those whose branch the rebuilt lake lacks and a replayed entry names (a write to
    it, a commit on it, a merge from it): their entries, as done. The intent names the record
    it was about to create; a creation nothing names is left out, never acknowledged."""
    found: dict[tuple[RepositoryId, BranchId], Logged] = {}
    for id_, header, text in logged:
        if header.get("event_type") != Verb.CREATE_BRANCH.value:
            continue
        payload = json.loads(text)
        rid, bid = RepositoryId(header["repo_id"]), BranchId(payload.get("branch", ""))
        if (rid, bid) in named and replayorder.record_of(bid, payload) is not None:
            found.setdefault((rid, bid), (id_, {**header, "state": form.DONE}, text))
    return [entry for key, entry in found.items() if not _found(partial(lake.refs.get_branch, *key))]


def _named_repositories(
    lake: Lake, logged: list[Logged], named: set[tuple[RepositoryId, str]]
) -> list[Logged]:
    """Of the repository creations logged as intents by writers that died before logging the
    outcome, those whose repository the rebuilt lake lacks and another replayed entry names:
    their entries, as done (the intent names the first commit and the default branch's record)."""
    found: dict[RepositoryId, Logged] = {}
    for id_, header, text in logged:
        if header.get("event_type") != Verb.CREATE_REPOSITORY.value:
            continue
        rid = RepositoryId(header["repo_id"])
        if (rid, "") in named and "commit" in json.loads(text):
            found.setdefault(rid, (id_, {**header, "state": form.DONE}, text))
    return [entry for rid, entry in found.items() if not _found(partial(lake.refs.get_repo, rid))]


def _found(get: Callable[[], object]) -> bool:
    """Whether ``get`` finds what it looks up (a repository, a branch, a commit)."""
    try:
        get()
    except NotFound:
        return False
    return True


def _seal_logged(
    blocks: BlockAdapter, batches: list[dict[str, Any]], logged: list[tuple[str, dict[str, Any], str]]
) -> dict[str, Any]:
    """One batch, chained after ``batches``, of the logged entries no batch holds."""
    first = int(batches[-1]["last"]) + 1 if batches else 1
    headers = [h for _, h, _ in logged]
    about = {
        "first": first,
        "last": first + len(logged) - 1,
        "count": len(logged),
        "min_time": headers[0]["time"],
        "max_time": max(h["time"] for h in headers),
        "previous": batches[-1]["locator"] if batches else "",
        "generation": _gen(batches),
    }
    columns = [
        list(range(first, first + len(logged))),
        [h["time"] for h in headers],
        [h["client_id"] for h in headers],
        [h["repo_id"] for h in headers],
        [h["event_type"] for h in headers],
        [t for _, _, t in logged],
        [i for i, _, _ in logged],
    ]
    data = sealed.batch_parquet(columns, about)
    locator = block_locator(data)
    blocks.put(locator, data)
    blocks.sync()
    return {**about, "locator": locator}


def _gen(batches: list[dict[str, Any]]) -> int:
    return int(batches[-1].get("generation", 0)) if batches else 0


def _since(batches: list[dict[str, Any]]) -> int:
    return int(batches[0]["min_time"]) // 1_000_000 if batches else 0


def _entries(blocks: BlockAdapter, batches: list[dict[str, Any]]) -> Iterator[journal.Entry]:
    for batch in batches:
        yield from sealed.read_batch(blocks, batch["locator"])


class Replay:
    """Replays a journal's entries into a lake, independently of their order where the engine's own
    state decides (:mod:`lakectl.core.journal.replayorder`): staged rows go to the tokens they were
    written to, a branch takes the newest record its moves name, a dropped token stays dropped, and
    of two staged writes of one path into one token the one that landed last wins."""

    def __init__(self, lake: Lake, seal: bytes | None = None) -> None:
        self.lake = lake
        self.seal = seal
        """The key a server's auth records are verified with (None: a journal without them)."""
        self.current: dict[tuple[RepositoryId, BranchId], tuple[Branch, tuple[int, int]]] = {}
        self.dead: dict[RepositoryId, set[str]] = {}
        self.clocks: dict[tuple[RepositoryId, str], dict[str, int]] = {}
        """Per live token written, per path, the clock of the write whose row it holds."""
        self.written: dict[tuple[RepositoryId, str], BranchId] = {}
        self.dated: set[str] = set()
        """Tokens this replay made for entries of an older journal, dated by the entry."""
        self.kept: dict[tuple[RepositoryId, str], tuple[str, list[str]]] = {}
        """A token a partial commit took, to the token it kept the rest in and its prefixes."""
        self.alias: dict[tuple[RepositoryId, str], str] = {}
        """A token of the older random form, which entries of an older journal never named, to
        the token this replay made for it."""
        self.named: set[tuple[RepositoryId, str]] = set()
        """The branches (and other refs) the replayed entries write to or read from, and
        ``(repository, "")`` for every repository an entry names."""

    def apply(self, entry: journal.Entry) -> None:
        lake = self.lake
        rid = RepositoryId(entry.repo_id)
        p = entry.event_payload
        verb = Verb(entry.event_type)
        if verb is Verb.AUTH:
            # A server's record, stored again as it was: in journal order, the last one wins.
            if self.seal is None:
                raise InvalidArgument(
                    "the journal holds a server's users and access keys: rebuild it with "
                    "--server-config <the server's configuration>, whose secret verifies them"
                )
            auth_records.replay(lake.kv, p, self.seal)
            return
        bid = BranchId(p.get("branch", ""))
        at = entry.time * 1000
        self._name(rid, verb, p)
        if verb is Verb.CREATE_REPOSITORY:
            repo = Repository(
                rid, BranchId(p["default_branch"]), int(p["creation_date"]), p["storage_namespace"]
            )
            if not p.get("bare"):
                first = _commit(lake, rid, p)
                made = replayorder.record_of(repo.default_branch, p)
                self._move(
                    rid,
                    repo.default_branch,
                    made or Branch(repo.default_branch, first.id, self._dated(at)),
                    [],
                    at,
                )
            lake.refs.create_repo(repo)
        elif verb is Verb.DELETE_REPOSITORY:
            delete_repo(lake, rid)
            self._forget(rid)
        elif verb in replayorder.STAGED and "rows" in p:
            self._stage(rid, bid, p, at)
        elif verb in (Verb.RESET, Verb.COMMIT, Verb.MERGE, Verb.REVERT, Verb.CHERRY_PICK):
            self._moved(rid, bid, verb, p, at)
        elif verb is Verb.CREATE_BRANCH:
            made = replayorder.record_of(bid, p)
            self._move(rid, bid, made or Branch(bid, CommitId(p["commit_id"]), self._dated(at)), [], at)
        elif verb is Verb.DELETE_BRANCH:
            dropped = p["dropped"] if "dropped" in p else list(self._branch(rid, bid).tokens)
            self._drop(rid, dropped)
            held = self.current.get((rid, bid))
            # A record newer than the deleted one (the branch made again) stays.
            if held is not None and held[0].staging_token in self.dead.get(rid, set()):
                lake.refs.delete_branch(rid, bid)
                del self.current[(rid, bid)]
        elif verb is Verb.RESTORE_REFS:
            commits = [Commit.decode(str(record).encode()) for record in p["commits"]]
            records = [(keys.commit_key(c.id), c.encode()) for c in commits]
            set_many(lake.kv, keys.repo_partition(rid), records)
            lake.refs.index_commits(rid, commits)
            for name, cid in p["tags"]:
                lake.refs.replace_tag(rid, Tag(TagId(name), CommitId(cid)))
            for name, record in p["branches"].items():
                made = replayorder.record_of(name, {"branch_record": record})
                assert made is not None
                self._move(rid, BranchId(name), made, [], at)
        elif verb is Verb.CREATE_TAG:
            lake.refs.replace_tag(rid, Tag(TagId(p["tag"]), CommitId(p["commit_id"])))
        elif verb is Verb.DELETE_TAG:
            lake.refs.delete_tag(rid, TagId(p["tag"]))
        elif verb is Verb.SETTINGS:
            replay_setting(lake, rid, p)
        elif verb is Verb.PULL_REQUEST:
            pulls.replay(lake, rid, p)
        # GARBAGE_COLLECTION: what it deleted were blocks and uploads in flight, neither replayed.
        # READ_OBJECT: an audited read changed nothing.

    def _moved(self, rid: RepositoryId, bid: BranchId, verb: Verb, p: Mapping[str, Any], at: int) -> None:
        """A commit, merge, revert, cherry-pick or reset: the branch record it left."""
        lake = self.lake
        head = _commit(lake, rid, p).id if verb is not Verb.RESET else None
        made = replayorder.record_of(bid, p)
        if made is not None and p.get("prefixes"):
            self._keep(rid, made, p.get("dropped", []), p["prefixes"])
        if made is not None:
            self._move(rid, bid, made, p.get("dropped", []), at)
            return
        if head is not None and p.get("prefixes"):
            # No record named (an intent recovery decided): the rest kept, as of the entry.
            was = self._branch(rid, bid)
            made = Branch(bid, head, self._dated(at), (self._dated(at + 1),))
            if self._newer(rid, made):
                self._keep(rid, made, list(was.tokens), p["prefixes"])
                self._move(rid, bid, made, was.tokens, at)
            return
        # No record named (an older journal; an intent recovery decided): the branch at the
        # commit with nothing staged, as of the entry's time, unless a newer record is in.
        was = self._branch(rid, bid)
        dated = Branch(bid, head or was.commit_id, self._dated(at))
        if self._newer(rid, dated):
            self._move(rid, bid, dated, was.tokens, at)

    def _name(self, rid: RepositoryId, verb: Verb, p: Mapping[str, Any]) -> None:
        """Note what an entry names (see :attr:`named`)."""
        self.named.update((rid, name) for name in (p.get("branch"), p.get("source_ref")) if name)
        if verb is not Verb.CREATE_REPOSITORY:
            self.named.add((rid, ""))

    def _dated(self, at: int) -> StagingToken:
        token = new_staging_token(at)
        self.dated.add(token)
        return token

    def _token(self, rid: RepositoryId, bid: BranchId, token: str) -> str:
        """The token a write names, as this replay knows it: a branch made by an older journal's
        entries has a token this replay dated; a write of this version into the token that branch
        really had (of the older random form) goes to it."""
        if (rid, token) not in self.alias and token_time(token) is None:
            held = self.current.get((rid, bid))
            if held is not None and held[0].staging_token in self.dated:
                self.alias[(rid, token)] = held[0].staging_token
        return self.alias.get((rid, token), token)

    def _branch(self, rid: RepositoryId, bid: BranchId) -> Branch:
        held = self.current.get((rid, bid))
        return held[0] if held is not None else self.lake.refs.get_branch(rid, bid)

    def _keep(self, rid: RepositoryId, made: Branch, dropped: list[str], prefixes: list[str]) -> None:
        """A partial commit's kept token: what its dropped tokens held outside ``prefixes``
        (newest token first), with the clocks of the writes it came from; a write the journal
        replays later into one of those tokens goes there too (:meth:`_stage`)."""
        known = set(dropped)
        kept = next((t for t in made.sealed_tokens if t not in known), None)
        if kept is None:
            return  # nothing stayed staged
        sources = [self.alias.get((rid, t), t) for t in dropped]
        live = [StagingToken(t) for t in sources if t not in self.dead.get(rid, set())]
        clocks = self.clocks.setdefault((rid, kept), {})
        items = []
        for path, value in self.lake.staging.iter_staged(rid, live):
            if not _under(path, prefixes):
                items.append((path, value))
                clock = max((self.clocks.get((rid, t), {}).get(path, -1) for t in sources), default=-1)
                clocks[path] = max(clock, clocks.get(path, -1))
        set_many(self.lake.kv, keys.staging_partition(rid, kept), items)
        self.written[(rid, kept)] = made.name
        for token in sources:
            self.kept[(rid, token)] = (kept, prefixes)

    def _stage(self, rid: RepositoryId, bid: BranchId, p: Mapping[str, Any], at: int) -> None:
        # An older journal's entry went to whatever token the branch had then.
        tokens = p.get("tokens") or [self._branch(rid, bid).staging_token]
        settled = int(p.get("settled", at))
        settled_in: Mapping[str, int] = p.get("settled_in", {})
        lost: Mapping[str, list[str]] = p.get("lost", {})
        dead = self.dead.get(rid, set())
        for written in dict.fromkeys(tokens):
            clock = int(settled_in.get(written, settled))
            named = self._token(rid, bid, written)
            token, prefixes = named, None
            while token in dead and (rid, token) in self.kept:
                # Into a token a partial commit took: what it did not commit, it kept (and a
                # later partial commit may have taken that token in turn, and kept the rest).
                token, more = self.kept[(rid, token)]
                prefixes = more if prefixes is None else [*prefixes, *more]
            if token in dead:
                continue  # dropped by a commit or reset that the journal has already replayed
            clocks = self.clocks.setdefault((rid, token), {})
            beaten = set(lost.get(token, ()))
            items = []
            for path, row in p["rows"]:
                if prefixes is not None and _under(path, prefixes):
                    continue  # committed by the partial commit that took its token
                if path in beaten or clocks.get(path, -1) > clock:
                    continue  # another write of the path landed after this one
                clocks[path] = clock
                items.append((path, encode_row(replayorder.row_of(row)) if row is not None else TOMBSTONE))
            set_many(self.lake.kv, keys.staging_partition(rid, StagingToken(token)), items)
            self.written[(rid, token)] = bid

    def _move(self, rid: RepositoryId, bid: BranchId, made: Branch, dropped: Iterable[str], at: int) -> None:
        self._drop(rid, dropped)
        if made.staging_token in self.dead.get(rid, set()):
            return  # a record older than a move already replayed
        order = replayorder.record_order(made, self._generation(rid, made.commit_id), at)
        held = self.current.get((rid, bid))
        if held is None or order > held[1]:
            self._set(rid, made, order)

    def _newer(self, rid: RepositoryId, made: Branch) -> bool:
        held = self.current.get((rid, made.name))
        order = replayorder.record_order(made, self._generation(rid, made.commit_id), 0)
        return held is None or order > held[1]

    def _set(self, rid: RepositoryId, made: Branch, order: tuple[int, int]) -> None:
        self.lake.kv.set(keys.repo_partition(rid), keys.branch_key(made.name), made.encode())
        self.current[(rid, made.name)] = (made, order)

    def _generation(self, rid: RepositoryId, cid: CommitId) -> int:
        try:
            return self.lake.refs.get_commit(rid, cid).generation
        except CommitNotFound:
            return 0

    def _drop(self, rid: RepositoryId, tokens: Iterable[str]) -> None:
        dead = self.dead.setdefault(rid, set())
        for named in tokens:
            token = self.alias.get((rid, named), named)
            dead.add(token)
            self.clocks.pop((rid, token), None)
            self.written.pop((rid, token), None)
            self.lake.staging.drop_tokens(rid, [StagingToken(token)])

    def _forget(self, rid: RepositoryId) -> None:
        self.current = {k: v for k, v in self.current.items() if k[0] != rid}
        self.clocks = {k: v for k, v in self.clocks.items() if k[0] != rid}
        self.dead.pop(rid, None)
        self.alias = {k: v for k, v in self.alias.items() if k[0] != rid}

    def finish(self) -> None:
        """What is staged once every entry is in. A token written after the last journalled
        move of its branch (made by a commit that then found nothing to commit, or died) is the
        branch's token: the writes confirmed it was. A token that no branch holds is dropped."""
        newer: dict[tuple[RepositoryId, BranchId], list[str]] = {}
        for (rid, token), bid in self.written.items():
            held = self.current.get((rid, bid))
            if held is None or token in held[0].tokens:
                continue
            made = token_time(token)
            if made is not None and made > (token_time(held[0].staging_token) or 0):
                newer.setdefault((rid, bid), []).append(token)
        for (rid, bid), tokens in newer.items():
            was, order = self.current[(rid, bid)]
            ordered = sorted(tokens, key=lambda t: token_time(t) or 0, reverse=True)
            adopted = Branch(
                bid, was.commit_id, StagingToken(ordered[0]), (*map(StagingToken, ordered[1:]), *was.tokens)
            )
            self._set(rid, adopted, order)
        held_tokens = {(rid, t) for (rid, _), (b, _) in self.current.items() for t in b.tokens}
        for rid, token in list(self.written):
            if (rid, token) not in held_tokens:
                self.lake.staging.drop_tokens(rid, [StagingToken(token)])
        for repo in self.lake.refs.list_repos():
            # Commits replayed before their parents were left for the ancestry index to place.
            stored = scan_prefix(self.lake.kv, keys.repo_partition(repo.name), keys.COMMIT_PREFIX)
            self.lake.refs.ancestry.record_all(repo.name, [Commit.decode(raw) for _, raw in stored])


def _commit(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any]) -> Commit:
    commit = Commit.decode(str(payload["commit"]).encode())
    lake.refs.put_commit(rid, commit)
    return commit


def _under(path: str, prefixes: list[str]) -> bool:
    return any(path.startswith(prefix) for prefix in prefixes)


def replay_setting(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any]) -> None:
    key, value = payload["key"], payload.get("value")
    if key == keys.GC_RULES:
        if value is None:
            retention.delete_rules(lake, rid)
        else:
            retention.set_rules(lake, rid, retention.GCRules.from_dict(value))
    elif key == keys.REPOSITORY_METADATA:
        repometadata.replace(lake, rid, value)
    elif key == keys.BRANCH_PROTECTION:
        # Older journals list bare patterns; newer ones lakeFS's rule objects.
        rules = [protection.parse_rule(v) if isinstance(v, dict) else v for v in value or []]
        protection.set_rules(lake, rid, rules)


def rebuild_embedded(home: str) -> dict[str, Any]:
    """Rebuild the embedded lake at ``home``: a new ``lake.db`` from its block directory, written
    aside and renamed into place once whole. ``AlreadyExists`` when a non-empty ``lake.db`` is
    there (move it aside first: a rebuild never overwrites metadata)."""
    from lakectl.core.blocks.local import LocalAdapter

    home = os.path.abspath(home)
    return rebuild_sqlite(os.path.join(home, "lake.db"), LocalAdapter(os.path.join(home, "blocks")))


def rebuild_sqlite(database: str, blocks: BlockAdapter, seal: bytes | None = None) -> dict[str, Any]:
    """Rebuild a lake's SQLite metadata ``database`` from ``blocks``: written aside and renamed
    into place once whole; ``AlreadyExists`` when a non-empty one is there."""
    from lakectl.core.identity import claim
    from lakectl.core.kv.sqlite import SQLiteStore

    if os.path.exists(database) and os.path.getsize(database) > 0:
        raise AlreadyExists(f"{database} exists: move it aside to rebuild the metadata from the journal")
    building = database + ".rebuilding"
    for stale in (building, building + "-wal", building + "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)  # a rebuild killed before: it starts over
    kv = SQLiteStore(building)
    try:
        done = rebuild(blocks, kv, seal)
        claim(kv, blocks, database)
    except BaseException:
        kv.close()
        for stale in (building, building + "-wal", building + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(stale)  # nothing half-built is left beside the lake
        raise
    kv.close()
    os.replace(building, database)
    return {"database": database, **done.to_dict()}


def rebuild_database(url: str, blocks: BlockAdapter, seal: bytes | None = None) -> dict[str, Any]:
    """Rebuild the metadata database at ``url`` (a server's: SQLite, or PostgreSQL, which must
    hold no lake) from ``blocks``. PostgreSQL is written in place: a rebuild that fails leaves
    it partly filled, to be emptied before the next attempt."""
    from lakectl.core.identity import claim
    from lakectl.core.kv.stores import open_store

    if url.startswith("sqlite:///"):
        return rebuild_sqlite(url.removeprefix("sqlite:///"), blocks, seal)
    kv = open_store(url)
    try:
        done = rebuild(blocks, kv, seal)
        claim(kv, blocks, url)
    finally:
        kv.close()
    return {"database": url.split("@", 1)[-1], **done.to_dict()}
