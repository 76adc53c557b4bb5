"""Branches: list, create, get, delete, reset, revert, cherry-pick (``/repositories/{r}/branches``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from lakectl.core import merging
from lakectl.core import porcelain as p
from lakectl.core.model import ResetKind
from lakectl.errors import InvalidArgument
from server.api import shapes
from server.api.bodies import BranchCreation, CherryPickCreation, ResetCreation, RevertCreation, unsupported
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, by_name, page
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
BRANCH = "/repositories/{repository}/branches/{branch}"


@router.get("/repositories/{repository}/branches", dependencies=[require(Permission.READ_REPO)])
async def list_branches(
    repository: str,
    lake: LakeDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
    show_hidden: bool = Query(False),
) -> dict[str, Any]:
    branches = by_name(
        p.list_branches(lake, repository, show_hidden=show_hidden), lambda b: b.name, prefix, after
    )
    return page(branches, amount, lambda b: b.name, shapes.ref)


# Verbs with action hooks are plain functions: a webhook is waited for in the thread pool,
# never on the event loop.
@router.post(
    "/repositories/{repository}/branches", status_code=201, dependencies=[require(Permission.WRITE_REPO)]
)
def create_branch(repository: str, body: BranchCreation, lake: LakeDep) -> Response:
    """lakeFS answers with the new branch's commit id as text."""
    branch = p.create_branch(lake, repository, body.name, body.source, body.hidden)
    return Response(branch.commit_id, status_code=201, media_type="text/html")


@router.get(BRANCH, dependencies=[require(Permission.READ_REPO)])
async def get_branch(repository: str, branch: str, lake: LakeDep) -> dict[str, Any]:
    return shapes.ref(p.get_branch(lake, repository, branch))


@router.delete(BRANCH, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def delete_branch(repository: str, branch: str, lake: LakeDep, force: bool = Query(False)) -> Response:
    p.delete_branch(lake, repository, branch)
    return Response(status_code=204)


@router.put(BRANCH, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def reset_branch(repository: str, branch: str, body: ResetCreation, lake: LakeDep) -> Response:
    """Discard uncommitted changes: all (``reset``), under a prefix (``common_prefix``) or of
    one path (``object``)."""
    try:
        kind = ResetKind(body.type)
    except ValueError:
        choices = ", ".join(k.value for k in ResetKind)
        raise InvalidArgument(f"invalid reset type {body.type!r} (choose from {choices})") from None
    count = merging.reset(lake, repository, branch, kind, body.path)
    return Response(status_code=204, headers={"X-Lakectl-Reset-Count": str(count)})


@router.post(BRANCH + "/revert", status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def revert_branch(
    repository: str, branch: str, body: RevertCreation, lake: LakeDep, user: UserDep
) -> Response:
    if body.commit_overrides is not None:
        raise unsupported("commit_overrides")
    if body.allow_empty:
        raise unsupported("allow_empty")
    if body.parent_number < 0:
        raise InvalidArgument("parent_number must not be negative")
    merging.revert(lake, repository, branch, body.ref, body.parent_number, committer=user.id)
    return Response(status_code=204)


@router.post(BRANCH + "/cherry-pick", status_code=201, dependencies=[require(Permission.WRITE_REPO)])
def cherry_pick(
    repository: str, branch: str, body: CherryPickCreation, lake: LakeDep, user: UserDep
) -> dict[str, Any]:
    if body.commit_overrides is not None:
        raise unsupported("commit_overrides")
    if body.parent_number < 0:
        raise InvalidArgument("parent_number must not be negative")
    commit = merging.cherry_pick(lake, repository, branch, body.ref, body.parent_number, committer=user.id)
    return shapes.commit(commit)
