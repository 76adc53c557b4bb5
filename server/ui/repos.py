"""Repositories: the list (the UI's home page), create and delete, and a repository's overview."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import Form, Request, Response

from lakectl.core import changes
from lakectl.core import porcelain as p
from lakectl.errors import InvalidArgument, NotFound
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.render import page, redirect, url
from server.ui.session import SignedIn, can, require, ui_router

router = ui_router()
PAGE = 100


@router.get("/")
def repositories(request: Request, lake: LakeDep, user: SignedIn, after: str = "") -> Response:
    """The repositories the user may read, by name, a page at a time (as the API lists them)."""
    require(user, Permission.READ_REPO)
    readable = (r for r in p.list_repos(lake, after) if user.allows(Permission.READ_REPO, r.name))
    repos = list(islice(readable, PAGE + 1))
    next_after = repos[PAGE - 1].name if len(repos) > PAGE else ""
    return page(
        request, "repos.html", repos=repos[:PAGE], after=after, next_after=next_after, area="repositories"
    )


@router.post("/repos")
def create_repository(
    request: Request,
    lake: LakeDep,
    user: SignedIn,
    name: Annotated[str, Form()],
    default_branch: Annotated[str, Form()] = "main",
    storage_namespace: Annotated[str, Form()] = "",
) -> Response:
    require(user, Permission.CREATE_REPO)
    name = name.strip()
    namespace = storage_namespace.strip() or f"local://{name}"  # the CLI's default
    repo = p.create_repo(lake, name, default_branch.strip() or "main", namespace)
    return redirect(url("repos", repo.name))


@router.get("/repos/{repo}", dependencies=[can(Permission.READ_REPO)])
def overview(request: Request, repo: str, lake: LakeDep) -> Response:
    r = p.get_repo(lake, repo)
    try:
        commits = list(changes.log(lake, repo, r.default_branch, 5))
    except NotFound:  # a bare repository (refs restore pending): no branch yet
        commits = []
    branch_count = len(p.list_branches(lake, repo))
    tag_count = len(p.list_tags(lake, repo))
    return page(
        request,
        "repo.html",
        repo=r,
        commits=commits,
        branch_count=branch_count,
        tag_count=tag_count,
        area="overview",
    )


@router.post("/repos/{repo}/delete", dependencies=[can(Permission.DELETE_REPO)])
def delete_repository(
    request: Request, repo: str, lake: LakeDep, confirm: Annotated[str, Form()] = ""
) -> Response:
    """Delete it, once its name was typed to confirm."""
    if confirm.strip() != repo:
        raise InvalidArgument(f"type the repository's name ({repo}) to confirm its deletion")
    p.delete_repo(lake, repo)
    return redirect(url(""))
