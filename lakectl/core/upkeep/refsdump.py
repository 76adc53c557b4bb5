"""Dump a repository's refs (commits, branches, tags) to content-addressed blocks, and restore them.

lakeFS's ``refs-dump`` writes three metaranges to the storage namespace and prints a manifest of
their ids; ``refs-restore`` loads them into a *bare* repository (``repo create-bare``). Here each
kind is one JSON document stored as blocks of the lake's block store, named by its locator in
the same manifest shape (:class:`RefsManifest`). Commit ids hash commit content, so restoring the
same records reproduces the same ids, and a record that does not hash to its id is refused.

A document over one block is split: its locator then names an index of the parts' locators.
Staged (uncommitted) changes are not dumped, as in lakeFS.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakectl.core import keys
from lakectl.core.blocks.data import write_bytes
from lakectl.core.blocks.locator import parse_locator
from lakectl.core.events import Event, Verb, announced
from lakectl.core.graph.refs import (
    COMMIT_ID,
    check_branch_name,
    check_tag_name,
    commit_id_of,
    new_staging_token,
)
from lakectl.core.journal.replayorder import moved
from lakectl.core.kv.helpers import scan_prefix, set_many
from lakectl.core.lake import Lake
from lakectl.core.limits import MAX_MESSAGE_BYTES, check_metadata, check_name, check_text
from lakectl.core.model import BLOCK_SIZE, Branch, Commit, CommitId, RepositoryId, Tag
from lakectl.core.porcelain import get_repo
from lakectl.errors import Conflict, CorruptBlock, InvalidArgument, KeyNotFound, NotFound, PredicateFailed

FORMAT = 1
KINDS = ("commits", "tags", "branches")
MAX_DOCUMENT_BYTES = 16 * BLOCK_SIZE
"""A split document is read whole into memory on restore: bounded (about 3M commits)."""


@dataclass(frozen=True, slots=True)
class RefsManifest:
    """lakeFS's ``RefsDump``: the ids of the stored commits, tags and branches documents."""

    commits_meta_range_id: str
    tags_meta_range_id: str
    branches_meta_range_id: str

    def to_dict(self) -> dict[str, str]:
        return {
            "commits_meta_range_id": self.commits_meta_range_id,
            "tags_meta_range_id": self.tags_meta_range_id,
            "branches_meta_range_id": self.branches_meta_range_id,
        }

    @staticmethod
    def from_dict(data: object) -> RefsManifest:
        """From lakeFS's ``RefsDump`` or ``RefsRestore`` (whose ``force`` is accepted and unused)."""
        if not isinstance(data, Mapping):
            raise InvalidArgument("a refs manifest is a JSON object with commits_meta_range_id, ...")
        fields = [f"{kind}_meta_range_id" for kind in KINDS]
        unknown = sorted(str(k) for k in data if k not in (*fields, "force"))
        if unknown:
            raise InvalidArgument(f"unknown field(s) in the refs manifest: {', '.join(unknown)}")
        values: list[str] = []
        for name in fields:
            value = data.get(name)
            if not isinstance(value, str):
                raise InvalidArgument(f"the refs manifest needs {name} (a locator)")
            values.append(parse_locator(value).bare)
        return RefsManifest(*values)


def dump(lake: Lake, repo: str, block_size: int = BLOCK_SIZE) -> RefsManifest:
    """Store the repository's commits, tags and branches (committed heads) as blocks, and record
    the dump in the repository so that garbage collection keeps its blocks (:func:`dump_blocks`)."""
    rid = get_repo(lake, repo).name
    partition = keys.repo_partition(rid)
    commits = [Commit.decode(raw).to_dict() for _, raw in scan_prefix(lake.kv, partition, keys.COMMIT_PREFIX)]
    tags = [{"id": t.name, "commit_id": t.commit_id} for t in lake.refs.list_tags(rid)]
    branches = [{"id": b.name, "commit_id": b.commit_id} for b in lake.refs.list_branches(rid)]
    ids: list[str] = []
    blocks: list[str] = []
    for kind, records in zip(KINDS, (commits, tags, branches), strict=True):
        doc_id, stored = _store(lake, kind, records, block_size)
        ids.append(doc_id)
        blocks += stored
    manifest = RefsManifest(*ids)
    lake.blocks.sync()
    record = {"refs": manifest.to_dict(), "blocks": blocks}
    raw = json.dumps(record, sort_keys=True).encode()
    lake.kv.set(partition, keys.dump_key(hashlib.sha256(raw).hexdigest()), raw)
    return manifest


def dump_blocks(lake: Lake, repo: RepositoryId) -> Iterator[str]:
    """The blocks of every dump of the repository (while it exists): garbage collection keeps
    them, as lakeFS never collects the dumps it writes to a storage namespace."""
    for _, raw in scan_prefix(lake.kv, keys.repo_partition(repo), keys.DUMP_PREFIX):
        yield from json.loads(raw)["blocks"]


def _store(lake: Lake, kind: str, records: list[dict[str, Any]], block_size: int) -> tuple[str, list[str]]:
    """The id of the stored document, and every block it took."""
    doc = {"format": FORMAT, "kind": kind, "records": records}
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    written = write_bytes(lake.blocks, data, block_size)
    if len(written.locators) == 1:
        return written.locators[0], list(written.locators)
    index = {"format": FORMAT, "kind": kind, "parts": list(written.locators)}
    head = write_bytes(lake.blocks, json.dumps(index, sort_keys=True).encode()).locators[0]
    return head, [head, *written.locators]


def _load(lake: Lake, kind: str, locator: str) -> list[Any]:
    doc = _document(lake.blocks.get(locator), kind, locator)
    if "parts" in doc:
        parts = doc["parts"]
        if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
            raise InvalidArgument(f"the {kind} document {locator} has a bad list of parts")
        located = [parse_locator(p) for p in parts]
        if sum(loc.size or 0 for loc in located) > MAX_DOCUMENT_BYTES:
            raise InvalidArgument(f"the {kind} document {locator} is larger than a refs dump can be")
        doc = _document(b"".join(lake.blocks.get(loc.bare) for loc in located), kind, locator)
    records = doc.get("records")
    if not isinstance(records, list):
        raise InvalidArgument(f"the {kind} document {locator} has no records")
    return records


def _document(data: bytes, kind: str, locator: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("kind") != kind:
        raise InvalidArgument(f"{locator} is not a {kind} document of a refs dump")
    return doc


def restore(lake: Lake, repo: str, manifest: RefsManifest) -> dict[str, int]:
    """Load a dump into a bare repository: every record checked before any is written. Returns
    how many commits, tags and branches were restored."""
    r = get_repo(lake, repo)
    _check_bare(lake, r.name)
    try:
        commits = _commits(_load(lake, "commits", manifest.commits_meta_range_id))
        tags = [Tag(check_tag_name(n), c) for n, c in _refs(_load(lake, "tags", manifest.tags_meta_range_id))]
        branches = [
            Branch(check_branch_name(n), c, new_staging_token())
            for n, c in _refs(_load(lake, "branches", manifest.branches_meta_range_id))
        ]
    except NotFound as exc:
        raise NotFound(f"the refs dump is not in this lake: {exc.message}") from exc
    named: list[tuple[str, str, CommitId]] = [("tag", t.name, t.commit_id) for t in tags]
    named += [("branch", b.name, b.commit_id) for b in branches]
    for what, name, cid in named:
        if cid not in commits:
            raise InvalidArgument(f"{what} {name!r} of the dump names commit {cid}, not in it")
    if r.default_branch not in {b.name for b in branches}:
        raise InvalidArgument(
            f"the dump has no branch {r.default_branch!r}, the default branch of {r.name!r}"
        )
    # The journal's entry carries the records themselves: a rebuild needs no dump blocks.
    event = Event(
        Verb.RESTORE_REFS,
        r.name,
        payload={
            "commits": [c.encode().decode() for c in commits.values()],
            "tags": [[t.name, t.commit_id] for t in tags],
            "branches": {b.name: moved(b)["branch_record"] for b in branches},
        },
    )
    with announced(lake.events, event):
        partition = keys.repo_partition(r.name)
        set_many(lake.kv, partition, [(keys.commit_key(c.id), c.encode()) for c in commits.values()])
        lake.refs.index_commits(r.name, commits.values())
        for tag in tags:
            lake.refs.create_tag(r.name, tag)
        # Branches last, each by compare-and-swap: a concurrent restore into the same repository
        # fails here rather than mixing two dumps' heads.
        for branch in branches:
            lake.refs.create_branch(r.name, branch)
    lake.events.after(event)
    return {"commits": len(commits), "tags": len(tags), "branches": len(branches)}


def _check_bare(lake: Lake, rid: RepositoryId) -> None:
    partition = keys.repo_partition(rid)
    for prefix, what in (
        (keys.COMMIT_PREFIX, "commits"),
        (keys.BRANCH_PREFIX, "branches"),
        (keys.TAG_PREFIX, "tags"),
    ):
        if next(scan_prefix(lake.kv, partition, prefix), None) is not None:
            raise Conflict(
                f"repository {rid!r} is not bare (it has {what}): refs restore only into a repository "
                "made by `lakectl repo create-bare`"
            )


def _commits(records: list[Any]) -> dict[CommitId, Commit]:
    commits: dict[CommitId, Commit] = {}
    for record in records:
        commit = _commit(record)
        if _hashed(commit) != commit.id:
            raise InvalidArgument(f"commit {commit.id} of the dump does not hash to its id")
        commits[commit.id] = commit
    for commit in commits.values():
        parents = [commits.get(p) for p in commit.parents]
        if any(p is None for p in parents):
            raise InvalidArgument(f"commit {commit.id} of the dump has a parent not in it")
        expected = max((p.generation for p in parents if p is not None), default=0) + 1
        if commit.generation != expected:
            raise InvalidArgument(f"commit {commit.id} of the dump has generation {commit.generation}")
    return commits


def _hashed(commit: Commit) -> CommitId:
    return commit_id_of(
        commit.parents,
        commit.meta_range_id,
        commit.message,
        commit.committer,
        commit.metadata,
        commit.creation_date,
    )


def _commit(record: object, where: str = " of the dump") -> Commit:
    """A commit record with every field of its type, within the limits of a commit made here
    (message, committer, metadata), else ``InvalidArgument``."""
    malformed = InvalidArgument(f"a commit record{where} is malformed: {str(record)[:80]}")
    if not isinstance(record, dict):
        raise malformed
    try:
        commit = Commit.decode(json.dumps(record).encode())
    except (KeyError, TypeError, ValueError):
        raise malformed from None
    ids = [commit.id, *commit.parents]
    if (
        not all(isinstance(i, str) and COMMIT_ID.match(i) for i in ids)
        or not isinstance(commit.message, str)
        or not isinstance(commit.committer, str)
        or not all(type(v) is int for v in (commit.creation_date, commit.generation))
        or not isinstance(commit.metadata, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in commit.metadata.items())
        or not isinstance(commit.meta_range_id, str)
    ):
        raise malformed
    parse_locator(commit.meta_range_id)
    # A record is written as given: the limits of a commit made here apply to it too.
    check_text(commit.message, "commit message", MAX_MESSAGE_BYTES)
    check_name(commit.committer, "committer")
    check_metadata(commit.metadata, "commit metadata")
    return commit


def create_commit_record(lake: Lake, repo: str, record: Mapping[str, Any]) -> Commit:
    """Write one commit record as given: lakeFS's ``CreateCommitRecord``, how its refs restore
    writes commits one by one. ``record`` has :meth:`Commit.to_dict`'s fields. Refused with
    ``InvalidArgument`` unless the record is well formed, its id is the content hash of its
    fields (ids here hash commit content), its metarange is a tree stored in the lake, its
    parents are commits of the repository and its generation follows theirs. Writing a record
    already there is a no-op; a different one under the same id is a ``Conflict``. Moves no
    branch: the commit is reachable once a branch or tag names it."""
    rid = get_repo(lake, repo).name
    commit = _commit(dict(record), "")
    hashed = _hashed(commit)
    if hashed != commit.id:
        raise InvalidArgument(
            f"commit_id {commit.id} is not the id of this record: commit ids here are the content "
            f"hash of parents, metarange_id, message, committer, metadata and creation_date, and "
            f"this record hashes to {hashed}"
        )
    try:
        lake.ranges.pages(commit.meta_range_id)
    except (NotFound, CorruptBlock) as exc:
        raise InvalidArgument(
            f"metarange_id {commit.meta_range_id} of commit {commit.id} is not a tree of this lake: "
            f"{exc.message}"
        ) from exc
    generation = 0
    for parent in commit.parents:
        try:
            generation = max(generation, lake.refs.get_commit(rid, parent).generation)
        except NotFound:
            raise InvalidArgument(
                f"parent {parent} of commit {commit.id} is not a commit of repository {rid!r}"
            ) from None
    if commit.generation != generation + 1:
        raise InvalidArgument(
            f"commit {commit.id} has generation {commit.generation}; its parents make it {generation + 1}"
        )
    raw, key, partition = commit.encode(), keys.commit_key(commit.id), keys.repo_partition(rid)
    try:
        existing: bytes | None = lake.kv.get(partition, key)
    except KeyNotFound:
        existing = None
    if existing == raw:
        return commit
    if existing is not None:
        raise Conflict(f"repository {rid!r} has a different commit record under id {commit.id}")
    # The journal's entry is a restore of this one record (no tags, no branches).
    event = Event(Verb.RESTORE_REFS, rid, payload={"commits": [raw.decode()], "tags": [], "branches": {}})
    with announced(lake.events, event):
        try:
            lake.kv.set_if(partition, key, raw, None)
        except PredicateFailed:  # written meanwhile: the same record is the same write
            if lake.kv.get(partition, key) != raw:
                raise Conflict(
                    f"repository {rid!r} has a different commit record under id {commit.id}"
                ) from None
    lake.events.after(event)
    return commit


def _refs(records: list[Any]) -> list[tuple[str, CommitId]]:
    out: list[tuple[str, CommitId]] = []
    for record in records:
        if not isinstance(record, dict) or not all(
            isinstance(record.get(k), str) for k in ("id", "commit_id")
        ):
            raise InvalidArgument(f"a ref record of the dump is malformed: {str(record)[:80]}")
        out.append((record["id"], CommitId(record["commit_id"])))
    return out


# -- tasks: lakeFS's asynchronous dump and restore, as the REST API reports them -----------


def record_task(lake: Lake, repo: str, kind: str, refs: RefsManifest | None = None) -> dict[str, Any]:
    """Remember a finished dump or restore under a new task id; lakeFS's ``RepositoryDumpStatus``
    (with ``refs``) or ``RepositoryRestoreStatus``. The work runs in the request, so every task
    is done when it is first reported."""
    rid = get_repo(lake, repo).name
    task: dict[str, Any] = {
        "id": f"{kind}-{uuid.uuid4().hex}",
        "done": True,
        "update_time": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    if refs is not None:
        task["refs"] = refs.to_dict()
    lake.kv.set(keys.repo_partition(rid), keys.task_key(task["id"]), json.dumps(task).encode())
    return task


def get_task(lake: Lake, repo: str, kind: str, task_id: str) -> dict[str, Any]:
    rid = get_repo(lake, repo).name
    if not re.fullmatch(f"{kind}-[0-9a-f]{{32}}", task_id):
        raise NotFound(f"no {kind} task {task_id[:80]!r} in repository {rid!r}")
    try:
        raw = lake.kv.get(keys.repo_partition(rid), keys.task_key(task_id))
    except KeyNotFound:
        raise NotFound(f"no {kind} task {task_id[:80]!r} in repository {rid!r}") from None
    task: dict[str, Any] = json.loads(raw)
    return task
