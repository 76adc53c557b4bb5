"""Refs dump and restore (lakeFS's ``/repositories/{r}/dump`` and ``/restore`` tasks, and the older
``PUT /repositories/{r}/refs/dump|restore``), all through :mod:`lakectl.core.upkeep.refsdump`.

The work runs in the submitting request (a dump reads only KV records), so a task is done when
its id is returned; the status routes report it as lakeFS does, and refusals (a repository that
is not bare, a manifest naming no dump) come back as the submit's error, with their own status.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from lakectl.core.upkeep import refsdump
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
DUMP = "/repositories/{repository}/dump"
RESTORE = "/repositories/{repository}/restore"
TaskId = Query(..., min_length=1, max_length=200)


@router.post(DUMP, status_code=202, dependencies=[require(Permission.WRITE_REPO)])
def dump_submit(repository: str, lake: LakeDep) -> dict[str, Any]:
    """lakeFS ``TaskInfo`` of a finished dump."""
    refs = refsdump.dump(lake, repository)
    return {"id": refsdump.record_task(lake, repository, "dump", refs)["id"]}


@router.get(DUMP, dependencies=[require(Permission.READ_REPO)])
def dump_status(repository: str, lake: LakeDep, task_id: str = TaskId) -> dict[str, Any]:
    """lakeFS ``RepositoryDumpStatus``."""
    return refsdump.get_task(lake, repository, "dump", task_id)


# Admins only (DeleteRepo), as a commit record (server.api.internal): the manifest names dump
# files, and a dump file any block of the lake, so a writer could restore trees it wrote itself,
# naming other repositories' blocks or objects of the server's own buckets, and read them through
# this repository. lakeFS's restore is an administrator's task too.
@router.post(RESTORE, status_code=202, dependencies=[require(Permission.DELETE_REPO)])
def restore_submit(repository: str, lake: LakeDep, body: Any = Body(...)) -> dict[str, Any]:
    """Body: lakeFS ``RefsRestore``; answer: ``TaskInfo`` of a finished restore."""
    refsdump.restore(lake, repository, refsdump.RefsManifest.from_dict(body))
    return {"id": refsdump.record_task(lake, repository, "restore")["id"]}


@router.get(RESTORE, dependencies=[require(Permission.READ_REPO)])
def restore_status(repository: str, lake: LakeDep, task_id: str = TaskId) -> dict[str, Any]:
    """lakeFS ``RepositoryRestoreStatus``."""
    return refsdump.get_task(lake, repository, "restore", task_id)


@router.put(
    "/repositories/{repository}/refs/dump", status_code=201, dependencies=[require(Permission.WRITE_REPO)]
)
def dump_refs(repository: str, lake: LakeDep) -> dict[str, str]:
    """The older synchronous form: lakeFS ``RefsDump``."""
    return refsdump.dump(lake, repository).to_dict()


@router.put("/repositories/{repository}/refs/restore", dependencies=[require(Permission.DELETE_REPO)])
def restore_refs(repository: str, lake: LakeDep, body: Any = Body(...)) -> Response:
    """The older synchronous form; body: lakeFS ``RefsRestore``."""
    refsdump.restore(lake, repository, refsdump.RefsManifest.from_dict(body))
    return Response(status_code=200)
