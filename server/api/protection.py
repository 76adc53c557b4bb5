"""Branch protection rules over HTTP, as lakeFS: ``/repositories/{r}/settings/branch_protection``
(the whole list, with ETag and If-Match), the older per-rule ``/repositories/{r}/branch_protection``,
and lakeFS's internal checks ``.../objects/stage_allowed`` (may this caller stage on the branch:
a client asks before it sends any data) and ``.../branch_protection/set_allowed``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Header, Query, Response

from lakectl.core import protection, writes
from lakectl.errors import InvalidArgument
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.policies import Permission
from server.responses import SafeJSONResponse

router = APIRouter(route_class=AuthFirstRoute)
SETTINGS = "/repositories/{repository}/settings/branch_protection"
RULES = "/repositories/{repository}/branch_protection"


def _pattern(body: Any) -> str:
    if not isinstance(body, dict) or set(body) != {"pattern"}:
        raise InvalidArgument('expected {"pattern": <glob>}')
    return protection.check_pattern(body["pattern"])


@router.get(SETTINGS, dependencies=[require(Permission.READ_REPO)])
async def get_rules(repository: str, lake: LakeDep) -> Response:
    """The rules (``[]`` when none) and, in ``ETag``, what a ``PUT`` names in ``If-Match``."""
    rules = protection.get_rules(lake, repository)
    return SafeJSONResponse(rules.to_list(), headers={"ETag": f'"{rules.etag}"'})


# Rules decide who may change a branch: admins only (DeleteRepo), as lakeFS keeps
# SetBranchProtectionRules out of the developers' policy.
@router.put(SETTINGS, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def set_rules(
    repository: str,
    lake: LakeDep,
    body: Any = Body(...),
    if_match: str | None = Header(None),
) -> Response:
    """Replace the list; with ``If-Match`` only while it is the list last read (else 412)."""
    rules = protection.set_rules(lake, repository, protection.parse_rules(body), if_match)
    return Response(status_code=204, headers={"ETag": f'"{rules.etag}"'})


@router.get(RULES, dependencies=[require(Permission.READ_REPO)])
async def list_rules(repository: str, lake: LakeDep) -> list[dict[str, Any]]:
    return protection.get_rules(lake, repository).to_list()


@router.post(RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def create_rule(repository: str, lake: LakeDep, body: Any = Body(...)) -> Response:
    """Add one rule (409 when the pattern already has one)."""
    protection.add_rule(lake, repository, protection.parse_rule(body))
    return Response(status_code=204)


@router.delete(RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def delete_rule(repository: str, lake: LakeDep, body: Any = Body(...)) -> Response:
    """Remove one rule (404 when the pattern has none)."""
    protection.delete_rule(lake, repository, _pattern(body))
    return Response(status_code=204)


@router.get(
    "/repositories/{repository}/branches/{branch}/objects/stage_allowed",
    status_code=204,
    dependencies=[require(Permission.WRITE_REPO)],
)
async def stage_allowed(
    repository: str, branch: str, lake: LakeDep, path: str = Query("", description="the object's path")
) -> Response:
    """204 when the caller may stage on the branch now; what a write would raise otherwise
    (404 no such branch, 403 ``protected_branch``)."""
    writes.check_writable(lake, repository, branch)
    return Response(status_code=204)


@router.get(RULES + "/set_allowed", status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def set_allowed(repository: str, lake: LakeDep) -> Response:
    """204 when the caller may change the rules (403 before this runs otherwise)."""
    protection.get_rules(lake, repository)  # the repository exists
    return Response(status_code=204)
