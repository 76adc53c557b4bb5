"""Diff and merge: refs two-dot and three-dot, a branch's uncommitted changes, merge into a branch;
symlink manifests of a branch."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import APIRouter, Body, Query

from lakectl.core import changes as lake_changes
from lakectl.core import merging, provenance, symlinks
from lakectl.core import porcelain as p
from lakectl.core.model import Change
from lakectl.errors import NotFound
from server.api import shapes
from server.api.bodies import Merge, unsupported
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, page
from server.auth.users import User
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)


class DiffKind(enum.Enum):
    TWO_DOT = "two_dot"
    THREE_DOT = "three_dot"
    SINCE = "since"
    """lakectl: two-dot, refused (400) unless the left ref's commit is an ancestor of the right's."""


Row = tuple[str, dict[str, Any]]


def _rows(changes: Iterable[Change], prefix: str, delimiter: str, after: str) -> Iterator[Row]:
    """``(path, Diff JSON)`` in path order after ``after``; with a delimiter, the changes under
    one common prefix are folded into a single ``prefix_changed`` row."""
    last_common = None
    for c in changes:
        if delimiter:
            cut = c.path.find(delimiter, len(prefix))
            if cut >= 0:
                common = c.path[: cut + len(delimiter)]
                if common != last_common and common > after:
                    yield common, shapes.prefix_changed(common)
                last_common = common
                continue
        if c.path > after:
            yield c.path, shapes.diff(c)


def _page(
    changes: Iterable[Change], prefix: str, delimiter: str, after: str, amount: int | None
) -> dict[str, Any]:
    return page(_rows(changes, prefix, delimiter, after), amount, lambda r: r[0], lambda r: r[1])


@router.get(
    "/repositories/{repository}/refs/{left_ref}/diff/{right_ref}",
    dependencies=[require(Permission.READ_REPO)],
)
def diff_refs(
    repository: str,
    left_ref: str,
    right_ref: str,
    lake: LakeDep,
    after: After = "",
    amount: Amount = None,
    prefix: Prefix = "",
    delimiter: str = Query(""),
    type: DiffKind = Query(DiffKind.THREE_DOT),
    include_right_stats: bool = Query(False),
) -> dict[str, Any]:
    """Committed changes from ``left_ref`` to ``right_ref``: since their merge base
    (``three_dot``, the default), between the two trees (``two_dot``), or (``since``) in the
    right ref's history after the left ref's commit."""
    if type is DiffKind.SINCE:
        changes = lake_changes.diff_since(lake, repository, left_ref, right_ref, prefix)
    else:
        two_way = type is DiffKind.TWO_DOT
        changes = lake_changes.diff_refs(lake, repository, left_ref, right_ref, two_way, prefix)
    return _page(changes, prefix, delimiter, after, amount)


@router.get("/repositories/{repository}/branches/{branch}/diff", dependencies=[require(Permission.READ_REPO)])
def diff_branch(
    repository: str,
    branch: str,
    lake: LakeDep,
    after: After = "",
    amount: Amount = None,
    prefix: Prefix = "",
    delimiter: str = Query(""),
) -> dict[str, Any]:
    """The branch's uncommitted changes."""
    changes = lake_changes.diff_uncommitted(lake, repository, branch, prefix)
    return _page(changes, prefix, delimiter, after, amount)


@router.get(
    "/repositories/{repository}/refs/{source_ref}/merge/{destination_branch}",
    dependencies=[require(Permission.READ_REPO)],
)
def find_merge_base(
    repository: str, source_ref: str, destination_branch: str, lake: LakeDep
) -> dict[str, Any]:
    """lakeFS's FindMergeBaseResult: the two commits and their best common ancestor (404 when
    their histories never meet)."""
    source = p.get_commit(lake, repository, source_ref)
    dest = p.get_commit(lake, repository, destination_branch)
    base = lake_changes.find_merge_base(lake, repository, source.id, dest.id)
    if base is None:
        raise NotFound(
            f"{source_ref!r} and {destination_branch!r} have no merge base: their histories never meet"
        )
    return {"source_commit_id": source.id, "destination_commit_id": dest.id, "base_commit_id": base.id}


@router.get(
    "/repositories/{repository}/refs/{ref}/ancestor-of/{other_ref}",
    dependencies=[require(Permission.READ_REPO)],
)
def ancestor_of(repository: str, ref: str, other_ref: str, lake: LakeDep) -> dict[str, Any]:
    """lakectl extension: whether ``ref``'s commit is ``other_ref``'s or one of its ancestors,
    with both commits' ids."""
    commit = p.get_commit(lake, repository, ref)
    other = p.get_commit(lake, repository, other_ref)
    found = lake_changes.ancestor_of(lake, repository, commit.id, other.id)
    return {"ancestor": found, "commit_id": commit.id, "other_commit_id": other.id}


@router.get("/repositories/{repository}/refs/{ref}/provenance", dependencies=[require(Permission.READ_REPO)])
def provenance_of(
    repository: str,
    ref: str,
    lake: LakeDep,
    user: UserDep,
    path: str = Query(""),
    depth: int = Query(5, ge=0, le=provenance.MAX_DEPTH),
) -> dict[str, Any]:
    """lakectl extension: what ``path`` at ``ref`` was made from, followed into the repositories
    the caller may read (:func:`lakectl.core.provenance.upstream`)."""
    return provenance.upstream(lake, repository, ref, path, depth, _readable(user)).to_dict()


@router.get("/repositories/{repository}/refs/{ref}/downstream", dependencies=[require(Permission.READ_REPO)])
def downstream_of(
    repository: str, ref: str, lake: LakeDep, user: UserDep, path: str = Query("")
) -> dict[str, Any]:
    """lakectl extension: the commits made from ``ref``'s commit, in the repositories the caller
    may read (:func:`lakectl.core.provenance.downstream`)."""
    made = provenance.downstream(lake, repository, ref, path, _readable(user))
    return {"results": [s.to_dict() for s in made]}


def _readable(user: User) -> provenance.Readable:
    return lambda repo: user.allows(Permission.READ_REPO, repo)


@router.post(
    "/repositories/{repository}/refs/{source_ref}/merge/{destination_branch}",
    dependencies=[require(Permission.WRITE_REPO)],
)
def merge_into_branch(
    repository: str,
    source_ref: str,
    destination_branch: str,
    lake: LakeDep,
    user: UserDep,
    body: Merge | None = Body(None),
) -> dict[str, Any]:
    """Three-way merge as a merge commit: ``{"reference": <commit id>}``; conflicts answer 409
    with the conflicting paths in ``details.conflicts``."""
    body = body or Merge()
    if body.allow_empty:
        raise unsupported("allow_empty")
    strategies = list(body.strategies or [])
    if body.strategy:
        strategies.insert(0, body.strategy)
    result = merging.merge(
        lake,
        repository,
        source_ref,
        destination_branch,
        strategies,
        body.message or None,
        committer=user.id,
        metadata=body.metadata,
        squash=body.squash_merge,
    )
    return {"reference": result.commit.id, "changed": result.changed}


@router.post(
    "/repositories/{repository}/refs/{branch}/symlink",
    status_code=201,
    dependencies=[require(Permission.WRITE_REPO)],
)
def create_symlink_file(
    repository: str,
    branch: str,
    lake: LakeDep,
    location: str = Query("", description="the path prefix whose directories get manifests"),
) -> dict[str, Any]:
    """Symlink manifests of the branch's head commit for Hive-style tables; the answer is the S3
    URI of the directory holding them (:mod:`lakectl.core.symlinks`)."""
    return {"location": symlinks.create(lake, repository, branch, location)}
