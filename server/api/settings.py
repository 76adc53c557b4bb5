"""Garbage collection: a repository's retention rules (``/repositories/{r}/settings/gc_rules``, as
lakeFS, and under lakeFS's older internal path ``/repositories/{r}/gc/rules``, with its preflight)
and running a collection (``POST /repositories/{r}/gc/run``, a lakectl extension)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from lakectl.core import porcelain as p
from lakectl.core.upkeep import gc, retention
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
RULES = "/repositories/{repository}/settings/gc_rules"
INTERNAL_RULES = "/repositories/{repository}/gc/rules"
"""lakeFS's deprecated internal path of the same rules (``InternalApi``): POST sets them."""


# Each route answers under both paths: lakeFS's and its older internal one (where POST sets).
@router.get(RULES, dependencies=[require(Permission.READ_REPO)])
@router.get(INTERNAL_RULES, dependencies=[require(Permission.READ_REPO)])
async def get_gc_rules(repository: str, lake: LakeDep) -> dict[str, Any]:
    """lakeFS ``GarbageCollectionRules``; 404 when none are set."""
    return retention.get_rules(lake, repository).to_dict()


# Rules decide what a collection deletes for good: admins only (DeleteRepo), as lakeFS keeps its
# retention actions out of the developers' policy.
@router.put(RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
@router.post(INTERNAL_RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def set_gc_rules(repository: str, lake: LakeDep, body: Any = Body(...)) -> Response:
    retention.set_rules(lake, repository, retention.GCRules.from_dict(body))
    return Response(status_code=204)


@router.delete(RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
@router.delete(INTERNAL_RULES, status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def delete_gc_rules(repository: str, lake: LakeDep) -> Response:
    retention.delete_rules(lake, repository)
    return Response(status_code=204)


@router.get(INTERNAL_RULES + "/set_allowed", status_code=204, dependencies=[require(Permission.DELETE_REPO)])
async def set_gc_rules_preflight(repository: str, lake: LakeDep) -> Response:
    """204 when the caller may set the repository's rules (its permission is checked first)."""
    p.get_repo(lake, repository)
    return Response(status_code=204)


@router.post("/repositories/{repository}/gc/run", dependencies=[require(Permission.DELETE_REPO)])
def run_gc(
    repository: str,
    lake: LakeDep,
    dry_run: bool = Query(False),
    grace_seconds: float = Query(gc.GRACE_SECONDS, ge=0),
    spark_master: str | None = Query(None, min_length=1),
    allow_preexisting_blocks: bool = Query(False),
) -> dict[str, Any]:
    """Mark and sweep, in the thread pool (it reads every retained tree); admins only. With
    ``spark_master``, as a Spark job on that master, driven from this server process.
    ``allow_preexisting_blocks``: see :func:`lakectl.core.upkeep.gc.check_preexisting`."""
    allow = allow_preexisting_blocks
    if spark_master is not None:
        from lakectl.sparkjobs import gc as spark_gc

        return spark_gc.run(
            lake, repository, dry_run, grace_seconds, master=spark_master, allow_preexisting_blocks=allow
        ).to_dict()
    return gc.run(lake, repository, dry_run, grace_seconds, allow_preexisting_blocks=allow).to_dict()
