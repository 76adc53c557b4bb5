"""Verifying the lake's blocks (``POST /fsck`` lake-wide, ``POST /repositories/{r}/fsck``), a
lakectl extension: the report of :func:`lakectl.core.upkeep.fsck.check`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from lakectl.core.lake import Lake
from lakectl.core.upkeep import fsck
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)

# A check reads every block of the lake and may rewrite copies (repair): admins only, as
# garbage collection (DeleteRepo is the permission only admins hold among the data ones).
_ADMINS = [require(Permission.DELETE_REPO)]


@router.post("/fsck", dependencies=_ADMINS)
def check_lake(
    lake: LakeDep,
    repair: bool = Query(False),
    spark_master: str | None = Query(None, min_length=1),
) -> dict[str, Any]:
    """Every repository, and the orphaned blocks and temporary files of the whole lake; in the
    thread pool (it reads every block). With ``spark_master``, as a Spark job on that master."""
    return _check(lake, None, repair, spark_master)


@router.post("/repositories/{repository}/fsck", dependencies=_ADMINS)
def check_repository(
    repository: str,
    lake: LakeDep,
    repair: bool = Query(False),
    spark_master: str | None = Query(None, min_length=1),
) -> dict[str, Any]:
    """The blocks one repository references."""
    return _check(lake, repository, repair, spark_master)


def _check(lake: Lake, repo: str | None, repair: bool, spark_master: str | None) -> dict[str, Any]:
    if spark_master is not None:
        from lakectl.sparkjobs import fsck as spark_fsck

        return spark_fsck.check(lake, repo, repair, master=spark_master).to_dict()
    return fsck.check(lake, repo, repair).to_dict()
