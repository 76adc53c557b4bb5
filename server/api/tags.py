"""Tags: list, create, get, delete (``/repositories/{r}/tags``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from lakectl.core import porcelain as p
from server.api import shapes
from server.api.bodies import TagCreation
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.api.pagination import After, Amount, Prefix, by_name, page
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
TAG = "/repositories/{repository}/tags/{tag}"


@router.get("/repositories/{repository}/tags", dependencies=[require(Permission.READ_REPO)])
async def list_tags(
    repository: str, lake: LakeDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    tags = by_name(p.list_tags(lake, repository), lambda t: t.name, prefix, after)
    return page(tags, amount, lambda t: t.name, shapes.ref)


# Verbs with action hooks are plain functions: a webhook is waited for in the thread pool,
# never on the event loop.
@router.post(
    "/repositories/{repository}/tags", status_code=201, dependencies=[require(Permission.WRITE_REPO)]
)
def create_tag(repository: str, body: TagCreation, lake: LakeDep) -> dict[str, Any]:
    return shapes.ref(p.create_tag(lake, repository, body.id, body.ref, body.force))


@router.get(TAG, dependencies=[require(Permission.READ_REPO)])
async def get_tag(repository: str, tag: str, lake: LakeDep) -> dict[str, Any]:
    return shapes.ref(p.get_tag(lake, repository, tag))


@router.delete(TAG, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def delete_tag(repository: str, tag: str, lake: LakeDep, force: bool = Query(False)) -> Response:
    p.delete_tag(lake, repository, tag)
    return Response(status_code=204)
