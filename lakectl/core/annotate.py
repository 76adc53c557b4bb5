"""Annotate (lakeFS's ``lakectl annotate``, git's blame for a tree): each entry under a prefix with
the last commit that changed it, found in one walk of the history for all entries at once.

The walk compares each commit with its first parent (as ``log --objects`` does, so a change
brought in by a merge is the merge's), restricted to the prefix: ranges both trees share are
skipped unopened, so a commit costs what it changed under the prefix. It stops as soon as every
entry has its commit, so recent changes cost a short walk whatever the depth of the history.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lakectl.core import listing, porcelain
from lakectl.core.graph.commits import walk_log
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, MetaRangeId, PathType, RepositoryId
from lakectl.core.uri import check_path

DELIMITER = "/"
PAGE = 1000
"""Entries annotated per walk of the history."""


@dataclass(frozen=True, slots=True)
class Annotation:
    """An object (or, listed one level, a common prefix) and the last commit that changed it
    (anything under it); None for an object only staged, never committed."""

    path: str
    path_type: PathType
    commit: Commit | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "path_type": self.path_type.value,
            "commit": self.commit.to_dict() if self.commit is not None else None,
        }


def annotate(
    lake: Lake,
    repo: str,
    ref: str,
    prefix: str = "",
    recursive: bool = False,
    after: str = "",
    amount: int | None = None,
) -> list[Annotation]:
    """The entries under ``prefix`` at ``ref`` (objects; one level of objects and common
    prefixes unless ``recursive``), after ``after`` and at most ``amount`` of them, in path
    order, each with the last commit that changed it."""
    check_path(prefix, allow_empty=True)
    delimiter = "" if recursive else DELIMITER
    entries = list(listing.list_objects(lake, repo, ref, prefix, delimiter, after, amount))
    rid = porcelain.get_repo(lake, repo).name
    head = porcelain.resolve(lake, repo, ref).commit
    found: dict[str, Commit] = {}
    # Only entries the head commit holds have a last commit; staged-only ones would make the
    # walk read the whole history for nothing.
    wanted = {e.path for e in entries if _committed(lake, head, e.path, e.path_type)}
    if wanted:
        found = _walk(lake, rid, head, prefix, wanted)
    return [Annotation(e.path, e.path_type, found.get(e.path)) for e in entries]


def _committed(lake: Lake, head: Commit, path: str, kind: PathType) -> bool:
    if kind is PathType.COMMON_PREFIX:
        return next(lake.trees.iter(head.meta_range_id, "", path), None) is not None
    return lake.trees.lookup(head.meta_range_id, path) is not None


def _walk(lake: Lake, rid: RepositoryId, head: Commit, prefix: str, wanted: set[str]) -> dict[str, Commit]:
    """For each wanted path (an object, or a common prefix ending in ``/``), the newest commit
    whose tree differs from its first parent's there."""
    found: dict[str, Commit] = {}
    prefixes = {p for p in wanted if p.endswith(DELIMITER)}
    empty: MetaRangeId | None = None
    for commit in walk_log(lake.refs, rid, head):
        if commit.parents:
            before = lake.refs.get_commit(rid, commit.parents[0]).meta_range_id
        else:
            empty = empty if empty is not None else lake.trees.empty()
            before = empty
        for path in _changed(lake, before, commit.meta_range_id, prefix, prefixes):
            if path in wanted and path not in found:
                found[path] = commit
        if len(found) == len(wanted):
            break
    return found


def _changed(
    lake: Lake, before: MetaRangeId, after: MetaRangeId, prefix: str, prefixes: set[str]
) -> Iterator[str]:
    """Paths changed between two trees under ``prefix``, and the common prefixes they fall in."""
    for change in lake.trees.diff(before, after, prefix):
        yield change.path
        if prefixes:
            cut = change.path.find(DELIMITER, len(prefix))
            if cut >= 0:
                yield change.path[: cut + 1]
