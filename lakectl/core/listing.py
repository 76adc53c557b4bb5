"""Listing a ref's objects: in path order, a page at a time, each page from one state of a branch,
with common prefixes under a delimiter."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from itertools import islice

from lakectl.core.graph.refs import Resolved
from lakectl.core.graph.tree import prefix_end
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.lake import LIST_PAGE, Lake
from lakectl.core.model import Entry, ObjectInfo, PathType, RepositoryId, Row
from lakectl.core.porcelain import check_after, explain_missing, get_repo
from lakectl.core.uri import check_path
from lakectl.errors import BlockNotFound, MissingData


def _iter_view(
    lake: Lake, res: Resolved, rid: RepositoryId, start: str, prefix: str
) -> Iterator[tuple[str, Row]]:
    if res.branch is not None:
        return lake.staging.iter_view(rid, res.branch, start, prefix)
    return lake.trees.iter(res.commit.meta_range_id, start, prefix)


def list_objects(
    lake: Lake,
    repo: str,
    ref: str,
    prefix: str = "",
    delimiter: str = "",
    after: str = "",
    amount: int | None = None,
) -> Iterator[ObjectInfo]:
    """Objects (and, with a delimiter, common prefixes) under ``prefix`` in path order, after
    ``after``. On a branch, each page is read from one state of the branch: a page during which
    the branch record changed (a commit moved staged rows into the tree) is read again."""
    check_path(prefix, allow_empty=True)
    check_after(after)
    rid = get_repo(lake, repo).name

    def page_after(cursor: str, want: int) -> list[ObjectInfo] | Again:
        res = lake.refs.resolve(rid, ref)
        try:
            page = list(islice(_list_view(lake, res, rid, prefix, delimiter, cursor), want))
        except (BlockNotFound, MissingData) as exc:  # a file of the tree is gone
            raise explain_missing(lake, rid, res, exc) from exc
        if res.branch is None or lake.refs.get_branch(rid, res.branch.name) == res.branch:
            return page
        return AGAIN

    count = 0
    cursor = after
    while amount is None or count < amount:
        want = LIST_PAGE if amount is None else min(LIST_PAGE, amount - count)
        gave_up = f"could not list {ref!r}: the branch kept changing"
        page = retry(STAGING_TOKEN, partial(page_after, cursor, want), gave_up)
        yield from page
        count += len(page)
        if len(page) < want:
            return
        cursor = page[-1].path


def _list_view(
    lake: Lake, res: Resolved, rid: RepositoryId, prefix: str, delimiter: str, after: str
) -> Iterator[ObjectInfo]:
    """Every listing entry after ``after`` in one state of the ref; a common prefix is listed
    once and then skipped by seeking past it, so listing a huge directory reads one row.

    Where nothing is staged under the prefix, the directories that follow one another are
    stepped over by their paths alone (:meth:`Trees.next_key`), never decoding their rows: a
    page of 100 directories that each start in another range costs 100 path reads, not 100
    range decodes."""
    start = after + "\x00" if after else ""
    committed_only = (
        res.branch is None
        or next(lake.staging.iter_staged(rid, res.branch.tokens, prefix=prefix), None) is None
    )
    while True:
        seek = None
        for path, row in _iter_view(lake, res, rid, start, prefix):
            if delimiter:
                cut = path.find(delimiter, len(prefix))
                if cut >= 0:
                    common = path[: cut + len(delimiter)]
                    if common > after:
                        yield ObjectInfo(common, PathType.COMMON_PREFIX)
                    seek = prefix_end(common)
                    break
            yield ObjectInfo(path, PathType.OBJECT, Entry.from_row(row))
        while seek is not None and committed_only:
            key = lake.trees.next_key(res.commit.meta_range_id, seek, prefix)
            if key is None:
                return
            cut = key.find(delimiter, len(prefix))
            if cut < 0:
                break  # an object: its row is read by the view from here
            common = key[: cut + len(delimiter)]
            if common > after:
                yield ObjectInfo(common, PathType.COMMON_PREFIX)
            seek = prefix_end(common)
        if seek is None:
            return
        start = seek
