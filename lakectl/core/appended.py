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

from collections.abc import Callable, Iterable, Iterator

from lakectl.core import porcelain as p
from lakectl.core import reads
from lakectl.core.changes import check_since, first_parent_tree
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
    hidden, start = check_since(lake, repo, since, ref, "a read --since")
    rid = p.get_repo(lake, repo).name
    found = p.open_object(lake, repo, start.id, path)
    return found, _offset(lake, rid, start, hidden, path, found.entry.to_row())


def _offset(lake: Lake, rid: RepositoryId, start: Commit, hidden: Commit, path: str, row: Row) -> int:
    """Where the bytes of ``row`` (the object at ``start``) written after ``hidden`` begin."""

    def befores() -> Iterator[Row | None]:
        for commit in walk_range(lake.refs, rid, start, hidden, first_parent=True):
            yield lake.trees.lookup(first_parent_tree(lake, rid, commit), path)

    return offset_after(row, befores(), lambda: lake.trees.lookup(hidden.meta_range_id, path))


def offset_after(row: Row, befores: Iterable[Row | None], at_since: Callable[[], Row | None]) -> int:
    """The module's rule: where the bytes of ``row`` (an object at the range's end) written in
    the range begin. ``befores`` are its rows before commits of the range along the first
    parents, newest first: every commit's, or only those of the commits that changed it (a
    commit that did not leaves the row as it was); ``at_since`` looks up its row at the range's
    start, asked only when no commit restarted it."""
    newer = row
    for older in befores:
        if older is None or not extends(older, newer):
            return 0  # restarted inside the range: all of it was written since
        newer = older
    base = at_since()
    return (base if base is not None and extends(base, row) else newer)[0]


def read_since(lake: Lake, repo: str, since: str, ref: str, path: str) -> Iterator[bytes]:
    """The bytes appended to the object after ``since`` up to ``ref`` (:func:`open_since`),
    read by range: only the blocks holding them."""
    found, offset = open_since(lake, repo, since, ref, path)
    return p.read_opened(lake, found, offset, ahead=READ_AHEAD)
