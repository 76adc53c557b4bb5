"""A change feed: what the commits after ``FROM`` up to ``REF`` changed under a prefix, object by
object, each object with the commit that changed it and the entry to read.

An object added or changed in the range is an insert, read at ``REF``; one removed is a delete,
read at ``FROM`` (its blocks are immutable: still readable). An object the range only appended to
is read from the first byte written after ``FROM`` (:mod:`lakectl.core.appended`'s rule).

The objects come from the diff of ``FROM``'s tree and ``REF``'s; the commit of each is the newest
commit along ``REF``'s first parents, each against its first parent, that changed it: a merge
counts as one commit of ``REF``'s line, and what it brought from the other branch is its change
(as ``git log --first-parent`` shows it, and as appends are followed). Both cost the changes,
never the objects under the prefix: a tree diff skips the ranges two trees share. When ``FROM`` is
not on that line and a merge kept the line's version of an object over ``FROM``'s, no commit of
the line changed the object: its change is the merge's that brought ``FROM`` into the line, and
it is read whole.

:func:`commit_feed` is the feed commit by commit, as Delta's change data feed reads versions:
each commit of the range along ``REF``'s first parents, oldest first, with what it changed
against its first parent, a changed object as the delete of its version before and the insert of
its version after (a row-level feed compares the two by key).
"""

from __future__ import annotations

from collections.abc import Iterable

from lakectl.core.appended import offset_after
from lakectl.core.changes import check_since, first_parent_tree
from lakectl.core.graph.commits import is_ancestor, walk_range
from lakectl.core.lake import Lake
from lakectl.core.model import Change, Commit, CommitId, Entry, FeedChange, FeedKind, RepositoryId, Row
from lakectl.core.porcelain import get_repo
from lakectl.core.uri import check_path
from lakectl.errors import InvalidArgument

Steps = dict[str, list[tuple[CommitId, Row | None]]]
"""Per path, the commits of the range that changed it, newest first, each with its row before."""


def change_feed(lake: Lake, repo: str, since: str, ref: str, prefix: str = "") -> list[FeedChange]:
    """The changes under ``prefix`` in the commits after ``since`` up to ``ref``, in path order
    (the module's rules). ``InvalidArgument`` unless ``since`` is an ancestor of ``ref``, or if a
    changed object is imported (its bytes are not blocks of the lake)."""
    prefix = check_path(prefix, allow_empty=True)
    hidden, start = check_since(lake, repo, since, ref, "a change feed")
    rid = get_repo(lake, repo).name
    net = {c.path: c for c in lake.trees.diff(hidden.meta_range_id, start.meta_range_id, prefix)}
    steps, line = _steps(lake, rid, start, hidden, prefix, net)
    joined: CommitId | None = None
    out = []
    for path, change in net.items():
        found = steps.get(path)
        if not found and joined is None:
            joined = _joining(lake, rid, hidden, line)
        commit_id = found[0][0] if found else joined
        assert commit_id is not None
        out.append(_feed_change(change, commit_id, [old for _, old in found or ()]))
    return out


def commit_feed(lake: Lake, repo: str, since: str, ref: str, prefix: str = "") -> list[FeedChange]:
    """The changes under ``prefix`` of each commit after ``since`` up to ``ref`` along ``ref``'s
    first parents, oldest commit first, each commit's in path order: an object removed or
    changed is a delete of its version before the commit, one added or changed an insert of its
    version after; every object is read whole. ``InvalidArgument`` as :func:`change_feed`."""
    prefix = check_path(prefix, allow_empty=True)
    hidden, start = check_since(lake, repo, since, ref, "a change feed")
    rid = get_repo(lake, repo).name
    line = list(walk_range(lake.refs, rid, start, hidden, first_parent=True))
    out = []
    for commit in reversed(line):
        for c in lake.trees.diff(first_parent_tree(lake, rid, commit), commit.meta_range_id, prefix):
            if c.old is not None:
                out.append(FeedChange(c.path, FeedKind.DELETE, commit.id, _readable(c.path, c.old)))
            if c.new is not None:
                out.append(FeedChange(c.path, FeedKind.INSERT, commit.id, _readable(c.path, c.new)))
    return out


def _steps(
    lake: Lake, rid: RepositoryId, start: Commit, hidden: Commit, prefix: str, paths: Iterable[str]
) -> tuple[Steps, list[Commit]]:
    """The changes of ``paths`` in each commit of the range along ``start``'s first parents (a
    tree diff per commit, under ``prefix``), and those commits, newest first."""
    wanted = set(paths)
    steps: Steps = {}
    line = []
    for commit in walk_range(lake.refs, rid, start, hidden, first_parent=True):
        line.append(commit)
        for c in lake.trees.diff(first_parent_tree(lake, rid, commit), commit.meta_range_id, prefix):
            if c.path in wanted:
                steps.setdefault(c.path, []).append((commit.id, c.old))
    return steps, line


def _joining(lake: Lake, rid: RepositoryId, hidden: Commit, line: list[Commit]) -> CommitId:
    """The oldest commit of ``line`` (newest first) that ``hidden`` is an ancestor of: the merge
    that brought it into the line (``hidden`` is then not on it)."""
    return next(c.id for c in reversed(line) if is_ancestor(lake.refs, rid, hidden, c))


def _feed_change(change: Change, commit_id: CommitId, befores: list[Row | None]) -> FeedChange:
    """An insert of the object at the range's end, from what the range wrote of it (the whole
    object when no commit of the line changed it), or a delete of the object at its start."""
    if change.new is None:
        assert change.old is not None
        return FeedChange(change.path, FeedKind.DELETE, commit_id, _readable(change.path, change.old))
    offset = offset_after(change.new, befores, lambda: change.old) if befores else 0
    return FeedChange(change.path, FeedKind.INSERT, commit_id, _readable(change.path, change.new), offset)


def _readable(path: str, row: Row) -> Entry:
    entry = Entry.from_row(row)
    if entry.external is not None:
        raise InvalidArgument(
            f"object {path!r} is imported (its bytes stay at {entry.external.address}): a change feed "
            "reads blocks of the lake; read a prefix without imported objects"
        )
    return entry
