"""History: the log of any ref a page at a time, and a commit's page with the changes it made."""

from __future__ import annotations

from itertools import islice
from typing import Any

from fastapi import Request, Response

from lakectl.core import changes, provenance
from lakectl.core import porcelain as p
from lakectl.core.graph.inputs import inputs_of
from lakectl.core.lake import Lake
from lakectl.core.model import Commit
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.diff import _rows
from server.ui.refs import branch_of, ref_names
from server.ui.render import page, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
PAGE = 50
READ = can(Permission.READ_REPO)


@router.get("/repos/{repo}/refs/{ref}/log", dependencies=[READ])
def log(request: Request, repo: str, ref: str, lake: LakeDep, after: str = "") -> Response:
    """Commits reachable from ``ref``, newest first; ``after``: the last commit of the page before."""
    r = p.get_repo(lake, repo)
    commits = list(islice(changes.log(lake, repo, ref, after=after), PAGE + 1))
    return page(
        request,
        "log.html",
        repo=r,
        ref=ref,
        branch=branch_of(lake, repo, ref),
        commits=commits[:PAGE],
        next_after=commits[PAGE - 1].id if len(commits) > PAGE else "",
        ref_names=ref_names(lake, repo),
        switch_action=url("repos", repo, "goto"),
        switch_keep=[("to", "log")],
        area="commits",
    )


@router.get("/repos/{repo}/commits/{commit_id}", dependencies=[READ])
def commit(request: Request, repo: str, commit_id: str, lake: LakeDep, user: SignedIn) -> Response:
    """A commit, with what it was made from and what was made from it (the inputs commits
    record), linked where the user may read them."""
    r = p.get_repo(lake, repo)
    c = p.get_commit(lake, repo, commit_id)

    def readable(name: str) -> bool:
        return user.allows(Permission.READ_REPO, name)

    return page(
        request,
        "commit.html",
        repo=r,
        commit=c,
        ref=c.id,
        branch_names=[b.name for b in p.list_branches(lake, repo)],
        inputs=[(i, readable(i.repository)) for i in inputs_of(c)],
        outputs=provenance.downstream(lake, repo, c.id, readable=readable),
        area="commits",
        **commit_changes(lake, repo, c),
    )


def commit_changes(lake: Lake, repo: str, c: Commit) -> dict[str, Any]:
    """What commit ``c`` changed, for a page's change table: the first page of the two-dot diff
    from its first parent (a merge commit's: what the merge brought), as the compare page lists
    it; nothing for a first commit. ``changes_from`` is that parent."""
    if not c.parents:
        return {"changes": [], "more_changes": False, "table_sides": None, "changes_from": "", "after": ""}
    parent = c.parents[0]
    rows, more = _rows(changes.diff_refs(lake, repo, parent, c.id, two_way=True), "", parent, c.id)
    return {
        "changes": rows,
        "more_changes": bool(more),
        "table_sides": (parent, c.id),
        "changes_from": parent,
        "after": "",
    }
