"""What was appended to an object over a range of commits: PFS v2's ``GetFile(from, to)``.

An append adds blocks after an object's own and rewrites none (:func:`~lakectl.core.writes.append`),
so a commit appended to an object when the object's locators in its first parent are a beginning
of its own. Over the range ``FROM..REF`` (``FROM`` an ancestor of ``REF``), the bytes appended are
those of the object at ``REF`` after the ones it had at ``FROM``, read by range: only the blocks of
the new bytes are read, whatever the object's size. A commit of the range that deleted, replaced
or created the object (one that did not append to it) restarts it: everything written since the
newest such commit is the object at ``REF`` whole. The range is followed along ``REF``'s first
parents, each commit against its first parent: a merge that brought appends from another branch
appended them. Where ``FROM``'s own version did not lead to ``REF``'s (a merge kept the other side),
the range starts from the version of ``REF``'s line where it leaves the range.
"""

from __future__ import annotations

from collections.abc import Iterator

from lakectl.core import porcelain as p
from lakectl.core import reads
from lakectl.core.changes import check_since
from lakectl.core.graph.commits import walk_range
from lakectl.core.lake import READ_AHEAD, Lake
from lakectl.core.model import Commit, RepositoryId, Row
from lakectl.core.uri import check_path


def extends(old: Row | None, new: Row) -> bool:
    """Whether ``new`` is ``old`` with blocks added at its end, or ``old`` itself (an imported
    object: only itself)."""
    if old is None:
        return False
    before, after = old[2], new[2]
    return after == before or (after.startswith(before) and after[len(before)] == " " and bool(before))


def open_since(lake: Lake, repo: str, since: str, ref: str, path: str) -> tuple[reads.ObjectRead, int]:
    """The object at ``ref``'s commit and the offset of the first of its bytes written after
    ``since``'s commit (the module's rule). ``InvalidArgument`` unless ``since`` is an ancestor of
    ``ref``; ``ObjectNotFound`` if the object is not at ``ref``. The cost is a tree lookup per
    commit of the range, none per byte."""
    path = check_path(path)
    check_since(lake, repo, since, ref, "a read --since")
    rid = p.get_repo(lake, repo).name
    start, hidden = p.resolve(lake, repo, ref).commit, p.resolve(lake, repo, since).commit
    found = p.open_object(lake, repo, start.id, path)
    return found, _offset(lake, rid, start, hidden, path, found.entry.to_row())


def _offset(lake: Lake, rid: RepositoryId, start: Commit, hidden: Commit, path: str, row: Row) -> int:
    """Where the bytes of ``row`` (the object at ``start``) written after ``hidden`` begin."""
    newer = row
    for commit in walk_range(lake.refs, rid, start, hidden, first_parent=True):
        parent = lake.refs.get_commit(rid, commit.parents[0]) if commit.parents else None
        older = lake.trees.lookup(parent.meta_range_id, path) if parent is not None else None
        if older is None or not extends(older, newer):
            return 0  # restarted inside the range: all of it was written since
        newer = older
    at_since = lake.trees.lookup(hidden.meta_range_id, path)
    base = at_since if at_since is not None and extends(at_since, row) else newer
    return base[0]


def read_since(lake: Lake, repo: str, since: str, ref: str, path: str) -> Iterator[bytes]:
    """The bytes appended to the object after ``since`` up to ``ref`` (:func:`open_since`),
    read by range: only the blocks holding them."""
    found, offset = open_since(lake, repo, since, ref, path)
    return p.read_opened(lake, found, offset, ahead=READ_AHEAD)
