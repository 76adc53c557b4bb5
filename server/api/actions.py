"""Action runs over HTTP, as lakeFS's ActionsApi: ``/repositories/{r}/actions/runs`` (newest
first, by branch or commit), a run, its hook runs and a hook run's output."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from lakectl.core.workflow import actionruns
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.api.pagination import After, Amount, page, page_size
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
RUNS = "/repositories/{repository}/actions/runs"


@router.get(RUNS, dependencies=[require(Permission.READ_REPO)])
def list_runs(
    repository: str,
    lake: LakeDep,
    after: After = "",
    amount: Amount = None,
    branch: str = Query("", description="only the runs of this branch"),
    commit: str = Query("", description="only the runs of this commit"),
) -> dict[str, Any]:
    runs = actionruns.list_runs(lake, repository, branch, commit, after, page_size(amount) + 1)
    return page(runs, amount, lambda r: r.run_id, actionruns.ActionRun.to_dict)


@router.get(RUNS + "/{run_id}", dependencies=[require(Permission.READ_REPO)])
def get_run(repository: str, run_id: str, lake: LakeDep) -> dict[str, Any]:
    return actionruns.get_run(lake, repository, run_id).to_dict()


@router.get(RUNS + "/{run_id}/hooks", dependencies=[require(Permission.READ_REPO)])
def list_run_hooks(
    repository: str, run_id: str, lake: LakeDep, after: After = "", amount: Amount = None
) -> dict[str, Any]:
    found = actionruns.list_hooks(lake, repository, run_id, after, page_size(amount) + 1)
    return page(found, amount, lambda h: h.hook_run_id, actionruns.HookRun.to_dict)


@router.get(RUNS + "/{run_id}/hooks/{hook_run_id}/output", dependencies=[require(Permission.READ_REPO)])
def get_run_hook_output(repository: str, run_id: str, hook_run_id: str, lake: LakeDep) -> Response:
    data = actionruns.hook_output(lake, repository, run_id, hook_run_id)
    return Response(data, media_type="application/octet-stream")
