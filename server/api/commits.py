"""Commits: commit a branch, get a commit, and the log of a ref."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from lakectl.core import changes
from lakectl.core import porcelain as p
from server.api import shapes
from server.api.bodies import CommitCreation, unsupported
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, page
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)


@router.post(
    "/repositories/{repository}/branches/{branch}/commits",
    status_code=201,
    dependencies=[require(Permission.WRITE_REPO)],
)
def commit(
    repository: str,
    branch: str,
    body: CommitCreation,
    lake: LakeDep,
    user: UserDep,
    source_metarange: str | None = Query(None),
    allow_empty_message: bool = Query(False, description="lakectl extension: commit with an empty message"),
) -> dict[str, Any]:
    """Commit the branch's staged changes (lakectl's extension ``prefixes``: only those under
    them); the committer is the authenticated user."""
    if source_metarange:
        raise unsupported("source_metarange")
    if body.date is not None:
        raise unsupported("date")
    c = p.commit(
        lake,
        repository,
        branch,
        body.message,
        body.metadata,
        user.id,
        body.allow_empty,
        allow_empty_message,
        prefixes=body.prefixes,
    )
    return shapes.commit(c)


@router.get("/repositories/{repository}/commits/{commit_id}", dependencies=[require(Permission.READ_REPO)])
async def get_commit(repository: str, commit_id: str, lake: LakeDep) -> dict[str, Any]:
    return shapes.commit(p.get_commit(lake, repository, commit_id))


@router.get("/repositories/{repository}/refs/{ref}/commits", dependencies=[require(Permission.READ_REPO)])
def log_commits(
    repository: str,
    ref: str,
    lake: LakeDep,
    after: After = "",
    amount: Amount = None,
    objects: list[str] = Query([], description="only commits that changed these objects"),
    prefixes: list[str] = Query([], description="only commits that changed objects under these"),
    limit: bool = Query(False, description="return this page only (has_more is false)"),
    first_parent: bool = Query(False),
    since: str = Query("", description="only commits created at or after this RFC 3339 date-time"),
    stop_at: str = Query("", description="stop after this ref's commit"),
    no_merges: bool = Query(False, description="lakectl extension: leave merge commits out"),
    since_commit: str = Query(
        "", description="lakectl extension: only commits this ref's commit does not reach (git's FROM..REF)"
    ),
) -> dict[str, Any]:
    """Commits reachable from ``ref``, newest first; ``after`` is the id of the last commit of
    the previous page."""
    commits = changes.log(
        lake,
        repository,
        ref,
        None,
        first_parent,
        no_merges,
        tuple(objects),
        tuple(prefixes),
        after=after,
        since=since,
        stop_at=stop_at,
        since_commit=since_commit,
    )
    return page(commits, amount, lambda c: c.id, shapes.commit, limit=limit)
