"""Repositories: list, create, get, delete (``/repositories``), and their metadata."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from lakectl.core import porcelain as p
from lakectl.core import repometadata
from lakectl.errors import InvalidArgument
from server.api import shapes
from server.api.bodies import (
    RepositoryCreation,
    RepositoryMetadataKeys,
    RepositoryMetadataSet,
    unsupported,
)
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, by_name, page
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)


@router.get("/repositories", dependencies=[require(Permission.READ_REPO)])
async def list_repositories(
    lake: LakeDep,
    user: UserDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
    search: str = Query("", description="return repositories whose name contains this"),
) -> dict[str, Any]:
    """The repositories whose name matches and that the caller's policies let it read."""
    repos = (
        r
        for r in by_name(p.list_repos(lake), lambda r: r.name, prefix, after)
        if search in r.name and user.allows(Permission.READ_REPO, r.name)
    )
    return page(repos, amount, lambda r: r.name, shapes.repository)


@router.post("/repositories", status_code=201, dependencies=[require(Permission.CREATE_REPO)])
def create_repository(body: RepositoryCreation, lake: LakeDep, bare: bool = Query(False)) -> dict[str, Any]:
    if body.sample_data:
        raise unsupported("sample_data")
    if body.read_only:
        raise unsupported("read_only")
    if body.storage_id:
        raise unsupported("storage_id")
    if not body.storage_namespace:
        raise InvalidArgument("a storage namespace is required, such as local://<name>")
    # bare: no initial commit and no branch, for a refs restore (lakeFS's create-bare).
    repo = p.create_repo(lake, body.name, body.default_branch, body.storage_namespace, bare=bare)
    return shapes.repository(repo)


@router.get("/repositories/{repository}", dependencies=[require(Permission.READ_REPO)])
async def get_repository(repository: str, lake: LakeDep) -> dict[str, Any]:
    return shapes.repository(p.get_repo(lake, repository))


@router.delete("/repositories/{repository}", status_code=204, dependencies=[require(Permission.DELETE_REPO)])
def delete_repository(repository: str, lake: LakeDep, force: bool = Query(False)) -> Response:
    p.delete_repo(lake, repository)
    return Response(status_code=204)


METADATA = "/repositories/{repository}/metadata"


@router.get(METADATA, dependencies=[require(Permission.READ_REPO)])
def get_repository_metadata(repository: str, lake: LakeDep) -> dict[str, str]:
    """lakeFS ``RepositoryMetadata``: the repository's key-value pairs (``{}`` when none)."""
    return repometadata.get(lake, repository)


@router.post(METADATA, status_code=204, dependencies=[require(Permission.UPDATE_REPO)])
def set_repository_metadata(repository: str, body: RepositoryMetadataSet, lake: LakeDep) -> Response:
    """Set these keys; the others stay."""
    repometadata.update(lake, repository, body.metadata)
    return Response(status_code=204)


@router.delete(METADATA, status_code=204, dependencies=[require(Permission.UPDATE_REPO)])
def delete_repository_metadata(repository: str, body: RepositoryMetadataKeys, lake: LakeDep) -> Response:
    """Remove these keys (absent ones are not an error)."""
    repometadata.delete(lake, repository, body.keys)
    return Response(status_code=204)
