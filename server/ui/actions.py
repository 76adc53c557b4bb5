"""Actions: a repository's action runs, newest first (by branch or commit), a run with its hooks
and each hook's output, and a hook's whole output as text. Each reads what the REST API's
``server/api/actions.py`` reads, through the same verbs of
:mod:`lakectl.core.workflow.actionruns`, with its permission (reading the repository)."""

from __future__ import annotations

from fastapi import Request, Response

from lakectl.core import porcelain as p
from lakectl.core.workflow import actionruns
from server.api.deps import LakeDep
from server.policies import Permission
from server.served import attachment, served_headers
from server.ui.refs import ref_names
from server.ui.render import page
from server.ui.session import can, ui_router

router = ui_router()
PAGE = 50
READ = can(Permission.READ_REPO)
SHOWN_OUTPUT = 64 * 1024
"""Bytes of a hook's output its run's page shows (the rest: its whole output, linked)."""


@router.get("/repos/{repo}/actions", dependencies=[READ])
def runs(
    request: Request, repo: str, lake: LakeDep, branch: str = "", commit: str = "", after: str = ""
) -> Response:
    """The runs, newest first, a page at a time (``after``: the last run id of the page before);
    only a branch's, or a commit's (any ref naming it), as the API filters them."""
    r = p.get_repo(lake, repo)
    found = actionruns.list_runs(lake, repo, branch.strip(), commit.strip(), after, PAGE + 1)
    return page(
        request,
        "actions.html",
        repo=r,
        runs=found[:PAGE],
        by_branch=branch.strip(),
        by_commit=commit.strip(),
        after=after,
        next_after=found[PAGE - 1].run_id if len(found) > PAGE else "",
        ref_names=ref_names(lake, repo),
        area="actions",
    )


@router.get("/repos/{repo}/actions/{run_id}", dependencies=[READ])
def run(request: Request, repo: str, run_id: str, lake: LakeDep) -> Response:
    """A run: its event, branch, commit, times and status, and each hook with its output."""
    r = p.get_repo(lake, repo)
    found = actionruns.get_run(lake, repo, run_id)
    hooks = []
    for hook in actionruns.list_hooks(lake, repo, run_id):
        data = actionruns.hook_output(lake, repo, run_id, hook.hook_run_id)
        text = data[:SHOWN_OUTPUT].decode("utf-8", "replace")  # a character cut in two: one U+FFFD
        hooks.append({"hook": hook, "output": text, "cut": len(data) > SHOWN_OUTPUT})
    return page(
        request,
        "action_run.html",
        repo=r,
        run=found,
        hooks=hooks,
        area="actions",
    )


@router.get("/repos/{repo}/actions/{run_id}/hooks/{hook_run_id}/output", dependencies=[READ])
def output(repo: str, run_id: str, hook_run_id: str, lake: LakeDep) -> Response:
    """A hook's whole output as plain text (a webhook's answer may be any bytes: never a page)."""
    data = actionruns.hook_output(lake, repo, run_id, hook_run_id)
    name = f"{run_id}-{hook_run_id}.txt"
    inline = attachment(name).replace("attachment", "inline", 1)  # shown as text in a tab
    headers = served_headers(name, "text/plain; charset=utf-8", inline)
    return Response(data, headers=headers)
