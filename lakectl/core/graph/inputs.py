"""What a commit says it was made from, and the reverse: which commits were made from a commit.

A commit's ``lakectl_inputs`` metadata is a JSON list of ``{"repository", "commit", "path"}``: the
data it was computed from, each a resolved commit id and the path read there (a prefix or an
object; ``""`` for the whole commit). The ``lakefs`` Spark data source records it for every
commit it makes; anyone may set it (``lakectl commit --meta``): it is a record, not a proof.
``lakectl_code`` says what code ran (a JSON object: ``script``, ``git_commit``, ``dirty``).

The reverse index is kept with the commit record (:meth:`RefStore.put_commit`): for each input,
a key ``<input repository>/<input commit>/<repository>/<commit>`` in the lake-wide
:data:`~lakectl.core.keys.PROVENANCE` partition, so the commits made from a commit are one prefix
scan. It is derived from the metadata, so a rebuild or a restore that stores the commits stores it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lakectl.core import keys
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix, set_many
from lakectl.core.model import Commit, CommitId, RepositoryId

INPUTS = "lakectl_inputs"
"""Commit metadata key: the JSON list of what the commit was made from."""
CODE = "lakectl_code"
"""Commit metadata key: the JSON object saying what code made the commit."""


@dataclass(frozen=True, slots=True)
class Input:
    """Data a commit was made from: ``path`` (a prefix or an object) at ``commit`` of ``repository``."""

    repository: RepositoryId
    commit: CommitId
    path: str

    def to_dict(self) -> dict[str, str]:
        return {"repository": self.repository, "commit": self.commit, "path": self.path}


def encode_inputs(inputs: list[Input]) -> str:
    """The ``lakectl_inputs`` value of ``inputs``, each once, in order."""
    return json.dumps([i.to_dict() for i in dict.fromkeys(inputs)], separators=(",", ":"))


def inputs_of(commit: Commit) -> list[Input]:
    """The inputs ``commit`` records; what is not a well-formed input is left out (metadata is
    anyone's to set)."""
    if INPUTS not in commit.metadata:
        return []  # most commits: nothing to parse on every commit stored
    try:
        found = json.loads(commit.metadata[INPUTS])
    except ValueError:
        return []
    if not isinstance(found, list):
        return []
    return [i for i in map(_input, found) if i is not None]


def _input(item: Any) -> Input | None:
    if not isinstance(item, dict):
        return None
    repo, cid, path = item.get("repository"), item.get("commit"), item.get("path", "")
    if not (isinstance(repo, str) and isinstance(cid, str) and isinstance(path, str)):
        return None
    if not repo or "/" in repo or not cid or "/" in cid:
        return None
    return Input(RepositoryId(repo), CommitId(cid), path)


def code_of(commit: Commit) -> dict[str, Any] | None:
    """What code made ``commit``, as it records it (None when it does not)."""
    try:
        found = json.loads(commit.metadata[CODE])
    except (KeyError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def index(kv: KVStore, repo: RepositoryId, commits: list[Commit]) -> None:
    """Store the reverse edges of ``commits``' inputs (idempotent)."""
    edges = [
        (keys.provenance_key(i.repository, i.commit, repo, c.id), b"") for c in commits for i in inputs_of(c)
    ]
    if edges:
        set_many(kv, keys.PROVENANCE, edges)


def made_from(kv: KVStore, repo: RepositoryId, commit: CommitId) -> Iterator[tuple[RepositoryId, CommitId]]:
    """``(repository, commit)`` of every commit whose inputs name ``commit`` of ``repo``."""
    prefix = keys.provenance_prefix(repo, commit)
    for key, _ in scan_prefix(kv, keys.PROVENANCE, prefix):
        out_repo, _, out_commit = key[len(prefix) :].partition("/")
        yield RepositoryId(out_repo), CommitId(out_commit)
