"""Branches and tags: the lists with each head commit; create and delete them, discard a branch's
uncommitted changes, revert a commit onto a branch."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import Form, Request, Response

from lakectl.core import merging
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.core.model import Branch, Commit, ResetKind, Tag
from lakectl.errors import InvalidArgument
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.render import page, redirect, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
PAGE = 100
SUGGESTED = 200
READ, WRITE = can(Permission.READ_REPO), can(Permission.WRITE_REPO)


def ref_names(lake: Lake, repo: str) -> list[str]:
    """Branch and tag names (the first :data:`SUGGESTED` of each), for the forms' suggestions."""
    branches = p.list_branches(lake, repo, amount=SUGGESTED)
    return [b.name for b in branches] + [t.name for t in p.list_tags(lake, repo, amount=SUGGESTED)]


def branch_of(lake: Lake, repo: str, ref: str) -> str:
    """``ref`` when it names a branch (the pages of a branch offer its writes), else ""."""
    resolved = p.resolve(lake, repo, ref)
    return ref if resolved.branch is not None and resolved.branch.name == ref else ""


def _with_heads(lake: Lake, repo: str, refs: list[Branch] | list[Tag]) -> list[tuple[object, Commit]]:
    return [(r, p.get_commit(lake, repo, r.commit_id)) for r in refs]


@router.get("/repos/{repo}/branches", dependencies=[READ])
def branches(request: Request, repo: str, lake: LakeDep, after: str = "", tags_after: str = "") -> Response:
    r = p.get_repo(lake, repo)
    listed = list(islice(p.list_branches(lake, repo, after), PAGE + 1))
    tags = list(islice(p.list_tags(lake, repo, tags_after), PAGE + 1))
    return page(
        request,
        "branches.html",
        repo=r,
        branches=_with_heads(lake, repo, listed[:PAGE]),
        next_branch=listed[PAGE - 1].name if len(listed) > PAGE else "",
        tags=_with_heads(lake, repo, tags[:PAGE]),
        next_tag=tags[PAGE - 1].name if len(tags) > PAGE else "",
        ref_names=ref_names(lake, repo),
        area="branches",
    )


@router.get("/repos/{repo}/goto", dependencies=[READ])
def goto(repo: str, ref: str, to: str = "objects", prefix: str = "") -> Response:
    """Where a page's ref switcher leads: the same area at another ref."""
    if to == "log":
        return redirect(url("repos", repo, "refs", ref.strip(), "log"))
    return redirect(url("repos", repo, "refs", ref.strip(), "objects", prefix=prefix))


@router.post("/repos/{repo}/branches", dependencies=[WRITE])
def create_branch(
    repo: str, lake: LakeDep, name: Annotated[str, Form()], source: Annotated[str, Form()]
) -> Response:
    p.create_branch(lake, repo, name.strip(), source.strip())
    return redirect(url("repos", repo, "branches"))


@router.post("/repos/{repo}/branches/{branch}/delete", dependencies=[WRITE])
def delete_branch(repo: str, branch: str, lake: LakeDep) -> Response:
    p.delete_branch(lake, repo, branch)
    return redirect(url("repos", repo, "branches"))


@router.post("/repos/{repo}/branches/{branch}/reset", dependencies=[WRITE])
def reset_branch(repo: str, branch: str, lake: LakeDep) -> Response:
    """Discard every uncommitted change of the branch."""
    merging.reset(lake, repo, branch, ResetKind.ALL)
    return redirect(url("repos", repo, "branches", branch, "changes"))


@router.post("/repos/{repo}/revert", dependencies=[WRITE])
def revert(
    repo: str,
    lake: LakeDep,
    user: SignedIn,
    branch: Annotated[str, Form()],
    commit: Annotated[str, Form()],
    parent_number: Annotated[int, Form()] = 0,
) -> Response:
    """A new commit on ``branch`` undoing ``commit`` (of a merge: relative to its parent
    ``parent_number``); the committer is the signed-in user, as in the API."""
    if parent_number < 0:
        raise InvalidArgument("parent_number must not be negative")
    done = merging.revert(lake, repo, branch, commit, parent_number, committer=user.id)
    return redirect(url("repos", repo, "commits", done.id))


@router.post("/repos/{repo}/tags", dependencies=[WRITE])
def create_tag(
    repo: str, lake: LakeDep, name: Annotated[str, Form()], ref: Annotated[str, Form()]
) -> Response:
    p.create_tag(lake, repo, name.strip(), ref.strip())
    return redirect(url("repos", repo, "branches") + "#tags")


@router.post("/repos/{repo}/tags/{tag}/delete", dependencies=[WRITE])
def delete_tag(repo: str, tag: str, lake: LakeDep) -> Response:
    p.delete_tag(lake, repo, tag)
    return redirect(url("repos", repo, "branches") + "#tags")
