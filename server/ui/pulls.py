"""Pull requests in the browser: the list by status, opening one, and its page (description,
the merge gate with approvals and checks, reviews, comments, the changes it brings) with the
forms that comment, review, merge (with a strategy; conflicts listed path by path), close and
reopen. Every action is a verb of :mod:`lakectl.core.workflow.pulls`, as the REST API calls it."""

from __future__ import annotations

from itertools import islice
from typing import Annotated, Any

from fastapi import Form, Request, Response
from markdown_it import MarkdownIt
from markupsafe import Markup

from lakectl.core import changes as lake_changes
from lakectl.core import porcelain as p
from lakectl.core.workflow import pulls
from lakectl.core.workflow.pulls import PullStatus, StatusFilter, Verdict
from lakectl.errors import InvalidArgument, MergeConflict
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.diff import _rows, strategies, table_sides, table_summaries
from server.ui.history import commit_changes
from server.ui.render import env, page, redirect, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
READ, WRITE = can(Permission.READ_REPO), can(Permission.WRITE_REPO)
PAGE = 50

# Markdown as CommonMark with raw HTML off: a description's <script> is text, and markdown-it's
# link check drops javascript: and data: targets.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False})


def markdown(text: str) -> Markup:
    return Markup(_markdown.render(text))  # raw HTML is off: the text arrives escaped


env.filters["markdown"] = markdown


def _choice(kind: type[Any], value: str, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise InvalidArgument(f"{what} {value!r} is not one of {', '.join(m.value for m in kind)}") from None


@router.get("/repos/{repo}/pulls", dependencies=[READ])
def list_pulls(request: Request, repo: str, lake: LakeDep, status: str = "open", after: str = "") -> Response:
    r = p.get_repo(lake, repo)
    wanted = _choice(StatusFilter, status, "status")
    found = list(islice(pulls.iter_pulls(lake, repo, wanted, "", after), PAGE + 1))
    return page(
        request,
        "pulls.html",
        repo=r,
        pulls=found[:PAGE],
        shown=wanted.value,
        statuses=[s.value for s in StatusFilter],
        next_after=found[PAGE - 1].id if len(found) > PAGE else "",
        area="pulls",
    )


@router.get("/repos/{repo}/pulls/new", dependencies=[WRITE])
def new_pull(request: Request, repo: str, lake: LakeDep, source: str = "", destination: str = "") -> Response:
    r = p.get_repo(lake, repo)
    branches = [b.name for b in p.list_branches(lake, repo, amount=1000)]
    return page(
        request,
        "pull_new.html",
        repo=r,
        branches=branches,
        source=source,
        destination=destination or r.default_branch,
        area="pulls",
    )


@router.post("/repos/{repo}/pulls", dependencies=[WRITE])
def create(
    repo: str,
    lake: LakeDep,
    user: SignedIn,
    source: Annotated[str, Form()],
    destination: Annotated[str, Form()],
    title: Annotated[str, Form()],
    description: Annotated[str, Form()] = "",
) -> Response:
    made = pulls.create_pull(
        lake, repo, title, source, destination, description.replace("\r\n", "\n"), user.id
    )
    return redirect(url("repos", repo, "pulls", made.id))


def _pull_page(
    request: Request,
    repo: str,
    pull_id: str,
    lake: LakeDep,
    status: int = 200,
    conflicts: list[str] | None = None,
) -> Response:
    r = p.get_repo(lake, repo)
    pull = pulls.get_pull(lake, repo, pull_id)
    gate = pulls.gate(lake, repo, pull_id)
    changes: list[dict[str, object]] = []
    more = ""
    sides: tuple[str, str] | None = None
    summaries: list[dict[str, str]] = []
    merged: dict[str, Any] = {}
    if pull.status is PullStatus.OPEN and gate.source_commit_id:
        found = lake_changes.diff_refs(lake, repo, pull.destination_branch, gate.source_commit_id)
        changes, more = _rows(found, "", pull.destination_branch, pull.source_branch)
        sides = table_sides(lake, repo, pull.destination_branch, gate.source_commit_id)
        summaries = table_summaries(lake, repo, sides, changes)
    elif pull.status is PullStatus.MERGED and pull.merged_commit_id:
        merged = _merge_brought(lake, repo, pull)
        changes, sides = merged.get("changes", []), merged.get("table_sides")
        more = "more" if merged.get("more_changes") else ""
        summaries = table_summaries(lake, repo, sides, changes) if sides else []
    return page(
        request,
        "pull.html",
        status=status,
        repo=r,
        pull=pull,
        gate=gate,
        reviews=pulls.list_reviews(lake, repo, pull_id),
        comments=pulls.list_comments(lake, repo, pull_id),
        changes=changes,
        more_changes=bool(more),
        table_sides=sides,
        table_summaries=summaries,
        conflicts=conflicts or [],
        changes_from=merged.get("changes_from", ""),
        is_author=getattr(request.state, "user", None) is not None and request.state.user.id == pull.author,
        after="",
        area="pulls",
    )


def _merge_brought(lake: LakeDep, repo: str, pull: pulls.PullRequest) -> dict[str, Any]:
    """What a merged pull request brought: its merge commit's changes (from the destination's
    head it merged onto); nothing when the destination already had the source, and no merge
    commit was made."""
    made = p.get_commit(lake, repo, pull.merged_commit_id)
    return commit_changes(lake, repo, made) if made.metadata.get("pull_request") == pull.id else {}


@router.get("/repos/{repo}/pulls/{pull_id}", dependencies=[READ])
def show(request: Request, repo: str, pull_id: str, lake: LakeDep) -> Response:
    return _pull_page(request, repo, pull_id, lake)


@router.post("/repos/{repo}/pulls/{pull_id}/comment", dependencies=[WRITE])
def comment(repo: str, pull_id: str, lake: LakeDep, user: SignedIn, body: Annotated[str, Form()]) -> Response:
    pulls.add_comment(lake, repo, pull_id, body.replace("\r\n", "\n"), user.id)
    return redirect(url("repos", repo, "pulls", pull_id) + "#comments")


@router.post("/repos/{repo}/pulls/{pull_id}/review", dependencies=[WRITE])
def review(
    repo: str,
    pull_id: str,
    lake: LakeDep,
    user: SignedIn,
    verdict: Annotated[str, Form()],
    body: Annotated[str, Form()] = "",
) -> Response:
    chosen = _choice(Verdict, verdict, "verdict")
    pulls.review(lake, repo, pull_id, user.id, chosen, body.replace("\r\n", "\n"))
    return redirect(url("repos", repo, "pulls", pull_id))


@router.post("/repos/{repo}/pulls/{pull_id}/merge", dependencies=[WRITE])
def merge(
    request: Request,
    repo: str,
    pull_id: str,
    lake: LakeDep,
    user: SignedIn,
    strategy: Annotated[str, Form()] = "",
    message: Annotated[str, Form()] = "",
) -> Response:
    """Merge; a conflict shows the pull request's page again with the conflicting paths."""
    chosen = strategies(strategy)
    try:
        pulls.merge_pull(lake, repo, pull_id, user.id, chosen, message.strip() or None)
    except MergeConflict as conflict:
        return _pull_page(request, repo, pull_id, lake, 409, conflict.paths)
    return redirect(url("repos", repo, "pulls", pull_id))


@router.post("/repos/{repo}/pulls/{pull_id}/close", dependencies=[WRITE])
def close(repo: str, pull_id: str, lake: LakeDep) -> Response:
    pulls.update_pull(lake, repo, pull_id, status=PullStatus.CLOSED)
    return redirect(url("repos", repo, "pulls", pull_id))


@router.post("/repos/{repo}/pulls/{pull_id}/reopen", dependencies=[WRITE])
def reopen(repo: str, pull_id: str, lake: LakeDep) -> Response:
    pulls.update_pull(lake, repo, pull_id, status=PullStatus.OPEN)
    return redirect(url("repos", repo, "pulls", pull_id))
