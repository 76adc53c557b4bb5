"""A branch's history and changes: the log (filtered by paths), the uncommitted diff, diffs
between refs and their merge base, a summary of changes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice

from lakectl.core import history
from lakectl.core.graph.commits import is_ancestor, merge_base, walk_log, walk_range
from lakectl.core.graph.refs import Resolved, parse_ref
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.lake import Lake, branch_target
from lakectl.core.model import Change, Commit, MetaRangeId, RepositoryId, same_row
from lakectl.core.porcelain import explained, get_repo, resolve
from lakectl.core.uri import check_path
from lakectl.errors import InvalidArgument


def log(
    lake: Lake,
    repo: str,
    ref: str,
    amount: int | None = None,
    first_parent: bool = False,
    no_merges: bool = False,
    objects: Sequence[str] = (),
    prefixes: Sequence[str] = (),
    *,
    after: str = "",
    since: str = "",
    stop_at: str = "",
    since_commit: str = "",
) -> Iterator[Commit]:
    """Commits reachable from ``ref``, newest first, filtered as ``git log`` would; with
    ``since_commit``, only those not reachable from that ref's commit (git's
    ``since_commit..ref``); then, as lakeFS's log: created ``since`` an RFC 3339 date-time, up to
    and including ``stop_at``'s commit, and the page that follows the commit ``after`` (ids or
    any ref)."""
    objects = [check_path(o) for o in objects]
    prefixes = [check_path(p, allow_empty=True) for p in prefixes]
    if amount is not None and amount < 0:
        raise InvalidArgument(f"the number of commits must not be negative, got {amount}")
    floor = history.parse_since(since)
    rid = get_repo(lake, repo).name
    start = resolve(lake, repo, ref).commit
    last = resolve(lake, repo, stop_at).commit.id if stop_at else None
    offset = resolve(lake, repo, after).commit.id if after else None
    # As lakeFS's log: ``after`` and ``stop_at`` place the page in the walk itself, so a commit
    # the filters leave out still marks where a page starts or the walk ends.
    walk: Iterator[Commit] = (
        walk_range(lake.refs, rid, start, resolve(lake, repo, since_commit).commit, first_parent)
        if since_commit
        else walk_log(lake.refs, rid, start, first_parent)
    )
    if offset is not None:
        walk = history.after(walk, offset)
    if last is not None:
        walk = history.stop_at(walk, last)
    found = (
        c
        for c in walk
        if not (no_merges and len(c.parents) > 1)
        and (floor is None or c.creation_date >= floor)
        and (not (objects or prefixes) or _touches(lake, rid, c, objects, prefixes))
    )
    yield from islice(found, amount)


def _touches(
    lake: Lake, rid: RepositoryId, c: Commit, objects: Sequence[str], prefixes: Sequence[str]
) -> bool:
    parent_mid = first_parent_tree(lake, rid, c)
    for path in objects:
        before = lake.trees.lookup(parent_mid, path)
        after = lake.trees.lookup(c.meta_range_id, path)
        if not same_row(before, after):
            return True
    return any(
        next(lake.trees.diff(parent_mid, c.meta_range_id, prefix), None) is not None for prefix in prefixes
    )


def first_parent_tree(lake: Lake, rid: RepositoryId, c: Commit) -> MetaRangeId:
    """The tree of ``c``'s first parent (the empty tree for a first commit): what ``c`` changed,
    as git's ``--first-parent`` sees it, is the diff from there."""
    return lake.refs.get_commit(rid, c.parents[0]).meta_range_id if c.parents else lake.trees.empty()


def diff_uncommitted(lake: Lake, repo: str, branch: str, prefix: str = "") -> list[Change]:
    rid, bid = branch_target(lake, repo, branch)
    check_path(prefix, allow_empty=True)

    def attempt() -> list[Change] | Again:
        before = lake.refs.get_branch(rid, bid)
        changes = list(lake.staging.changes(rid, before, prefix))
        return changes if lake.refs.get_branch(rid, bid) == before else AGAIN

    return retry(STAGING_TOKEN, attempt, f"could not diff branch {branch!r}: it kept changing")


def ancestor_of(lake: Lake, repo: str, ancestor: str, ref: str) -> bool:
    """Whether ``ancestor``'s commit is ``ref``'s commit or one of its ancestors."""
    rid = get_repo(lake, repo).name
    return is_ancestor(lake.refs, rid, resolve(lake, repo, ancestor).commit, resolve(lake, repo, ref).commit)


def diff_since(lake: Lake, repo: str, since: str, ref: str, prefix: str = "") -> Iterator[Change]:
    """What ``ref`` changed after ``since``'s commit, which must be its ancestor (else
    ``InvalidArgument``): the two-dot diff from ``since`` to ``ref``, which is then also the
    three-dot one."""
    check_since(lake, repo, since, ref, "a diff --since")
    return diff_refs(lake, repo, since, ref, two_way=True, prefix=prefix)


def check_since(lake: Lake, repo: str, since: str, ref: str, reader: str) -> tuple[Commit, Commit]:
    """``InvalidArgument`` unless ``since``'s commit is ``ref``'s or one of its ancestors: what
    ``reader`` (a diff --since, a read --since, a change feed) reads is a range of ``ref``'s
    history. Returns the two commits checked, ``since``'s then ``ref``'s: the range to read is
    the one checked, whatever the refs name a moment later."""
    rid = get_repo(lake, repo).name
    hidden, start = resolve(lake, repo, since).commit, resolve(lake, repo, ref).commit
    if not is_ancestor(lake.refs, rid, hidden, start):
        raise InvalidArgument(
            f"{since!r} is not an ancestor of {ref!r}: {reader} reads a range of {ref!r}'s history"
        )
    return hidden, start


def find_merge_base(lake: Lake, repo: str, left: str, right: str) -> Commit | None:
    """The best common ancestor of two refs' commits (None when their histories never meet)."""
    rid = get_repo(lake, repo).name
    return merge_base(lake.refs, rid, resolve(lake, repo, left).commit, resolve(lake, repo, right).commit)


def diff_refs(
    lake: Lake, repo: str, left: str, right: str, two_way: bool = False, prefix: str = ""
) -> Iterator[Change]:
    """Changes from ``left`` to ``right``: three-dot (since their merge base) by default, or
    two-dot with ``two_way``. A branch is its last commit (``main``, ``main@``); ``main$`` is
    its staging area, uncommitted changes included, as lakeFS's ref expressions say."""
    from lakectl.core import refdiff

    check_path(prefix, allow_empty=True)
    rid = get_repo(lake, repo).name

    def attempt() -> Iterator[Change] | Again:
        lres, rres = resolve(lake, repo, left), resolve(lake, repo, right)
        lc, rc = lres.commit, rres.commit
        base = lc
        if not two_way:
            found = merge_base(lake.refs, rid, lc, rc)
            base = found if found is not None else lc
        lstaged = lres.branch if two_way and parse_ref(left).staging else None
        rstaged = rres.branch if parse_ref(right).staging else None

        def sides() -> tuple[Resolved, Resolved]:  # where a read that fails was
            return Resolved(base), Resolved(rc)

        if lstaged is None and rstaged is None:
            return explained(lake, rid, lake.trees.diff(base.meta_range_id, rc.meta_range_id, prefix), sides)
        views = [
            refdiff.View(
                mid,
                refdiff.staged_rows(lake.staging, rid, b, prefix) if b is not None else {},
            )
            for mid, b in ((base.meta_range_id, lstaged), (rc.meta_range_id, rstaged))
        ]
        # A commit may move staged rows into the tree between the reads: read both again.
        if all(lake.refs.get_branch(rid, b.name) == b for b in (lstaged, rstaged) if b is not None):
            return explained(lake, rid, refdiff.diff_views(lake.trees, views[0], views[1], prefix), sides)
        return AGAIN

    return retry(STAGING_TOKEN, attempt, f"could not diff {left!r} and {right!r}: the branch kept changing")
