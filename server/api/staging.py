"""Staging an object from a backing address (lakeFS's ``staging`` API and its older
``PUT .../objects``): get an address, write the bytes to its URL, link it (:mod:`lakectl.core.backing`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool

from lakectl.core import backing
from lakectl.errors import InvalidArgument
from server import presigned
from server.api import shapes
from server.api.bodies import ObjectStageCreation, StagingMetadata
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.objects import BRANCH_OBJECTS, PathQuery, PresignExpiry, check_preconditions
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
BACKING = "/repositories/{repository}/branches/{branch}/staging/backing"


@router.get(BACKING, dependencies=[require(Permission.WRITE_REPO)])
def get_physical_address(
    request: Request,
    repository: str,
    branch: str,
    lake: LakeDep,
    user: UserDep,
    path: str = PathQuery,
    presign: bool = Query(False),
    presign_expiry: int | None = PresignExpiry,
) -> dict[str, Any]:
    """A new address for ``path``, and the URL that writes its bytes. The URL comes with or
    without ``presign``: the block store is reachable only through this server."""
    check_preconditions(lake, repository, branch, path, None, None)
    slot = backing.reserve(lake, repository, branch, path)
    url, expiry = presigned.write_url_for(request, lake, user, repository, slot, presign_expiry)
    return {"physical_address": slot.address, "presigned_url": url, "presigned_url_expiry": expiry}


@router.put(BACKING, dependencies=[require(Permission.WRITE_REPO)])
async def link_physical_address(
    repository: str,
    branch: str,
    body: StagingMetadata,
    lake: LakeDep,
    path: str = PathQuery,
    if_none_match: str | None = Header(None),
    if_match: str | None = Header(None),
) -> dict[str, Any]:
    """Stage the bytes written to ``staging.physical_address`` at ``path``."""
    address = body.staging.physical_address
    if not address:
        raise InvalidArgument("staging.physical_address is required")

    def link() -> dict[str, Any]:
        check_preconditions(lake, repository, branch, path, if_none_match, if_match)
        info = backing.link(
            lake,
            repository,
            branch,
            path,
            address,
            body.checksum,
            body.size_bytes,
            body.content_type,
            body.user_metadata,
            body.mtime,
        )
        return shapes.object_stats(info)

    return await run_in_threadpool(link)


@router.put(BRANCH_OBJECTS, status_code=201, dependencies=[require(Permission.WRITE_REPO)])
def stage_object(
    repository: str, branch: str, body: ObjectStageCreation, lake: LakeDep, path: str = PathQuery
) -> dict[str, Any]:
    """lakeFS's older form of the link: an address from ``staging/backing``, written."""
    info = backing.link(
        lake,
        repository,
        branch,
        path,
        body.physical_address,
        body.checksum,
        body.size_bytes,
        body.content_type,
        body.metadata,
        body.mtime,
    )
    return shapes.object_stats(info)
