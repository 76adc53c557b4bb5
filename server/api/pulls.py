"""Pull requests over HTTP: lakeFS's PullsApi (``/repositories/{r}/pulls``: list, create, get,
update, merge), the approvals of lakeFS's upstream proposal (``…/approvals``: POST to approve,
DELETE to withdraw), and lakectl's extensions: comments, reviews with a verdict, and the merge
gate (``…/status``: approvals, checks and what a merge still needs)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Response

from lakectl.core.workflow import pulls
from lakectl.core.workflow.pulls import PullStatus, StatusFilter, Verdict
from lakectl.errors import InvalidArgument
from server.api.bodies import (
    PullRequestBasic,
    PullRequestComment,
    PullRequestCreation,
    PullRequestMerge,
    PullRequestReview,
)
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, page
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
PULLS = "/repositories/{repository}/pulls"
PULL = PULLS + "/{pull_request}"


def _choice(kind: type[Any], value: str, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise InvalidArgument(f"{what} is one of {allowed}, not {value!r}") from None


@router.get(PULLS, dependencies=[require(Permission.READ_REPO)])
def list_pull_requests(
    repository: str,
    lake: LakeDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
    status: str = Query("all", description="open, closed (closed or merged), merged or all"),
) -> dict[str, Any]:
    wanted = _choice(StatusFilter, status, "status")
    found = pulls.iter_pulls(lake, repository, wanted, prefix, after)
    return page(found, amount, lambda x: x.id, pulls.PullRequest.to_dict)


@router.post(PULLS, status_code=201, dependencies=[require(Permission.WRITE_REPO)])
def create_pull_request(
    repository: str, lake: LakeDep, user: UserDep, body: PullRequestCreation = Body(...)
) -> dict[str, Any]:
    """``{"id": ...}`` of the new pull request; its author is the caller."""
    pull = pulls.create_pull(
        lake, repository, body.title, body.source_branch, body.destination_branch, body.description, user.id
    )
    return {"id": pull.id}


@router.get(PULL, dependencies=[require(Permission.READ_REPO)])
def get_pull_request(repository: str, pull_request: str, lake: LakeDep) -> dict[str, Any]:
    return pulls.get_pull(lake, repository, pull_request).to_dict()


@router.patch(PULL, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def update_pull_request(
    repository: str, pull_request: str, lake: LakeDep, body: PullRequestBasic = Body(...)
) -> Response:
    """Title, description, or status ``open``/``closed`` (close, reopen)."""
    status = _choice(PullStatus, body.status, "status") if body.status is not None else None
    pulls.update_pull(lake, repository, pull_request, body.title, body.description, status)
    return Response(status_code=204)


@router.put(PULL + "/merge", dependencies=[require(Permission.WRITE_REPO)])
def merge_pull_request(
    repository: str,
    pull_request: str,
    lake: LakeDep,
    user: UserDep,
    body: PullRequestMerge | None = Body(None),
) -> dict[str, Any]:
    """``{"reference": <merge commit id>}``; 412 with ``details.reasons`` while approvals or
    checks are missing, 409 with the conflicting paths."""
    body = body or PullRequestMerge()
    strategies = ([body.strategy] if body.strategy else []) + list(body.strategies or [])
    merged = pulls.merge_pull(lake, repository, pull_request, user.id, strategies, body.message or None)
    return {"reference": merged.merged_commit_id}


@router.post(PULL + "/approvals", status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def approve_pull_request(repository: str, pull_request: str, lake: LakeDep, user: UserDep) -> Response:
    """The caller approves the source's current head (403 for the pull request's author)."""
    pulls.review(lake, repository, pull_request, user.id, Verdict.APPROVED)
    return Response(status_code=204)


@router.delete(PULL + "/approvals", status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def withdraw_approval(repository: str, pull_request: str, lake: LakeDep, user: UserDep) -> Response:
    pulls.withdraw_review(lake, repository, pull_request, user.id)
    return Response(status_code=204)


@router.get(PULL + "/reviews", dependencies=[require(Permission.READ_REPO)])
def list_reviews(repository: str, pull_request: str, lake: LakeDep) -> dict[str, Any]:
    found = pulls.list_reviews(lake, repository, pull_request)
    return {"results": [r.to_dict() for r in found]}


@router.post(PULL + "/reviews", status_code=201, dependencies=[require(Permission.WRITE_REPO)])
def review_pull_request(
    repository: str, pull_request: str, lake: LakeDep, user: UserDep, body: PullRequestReview = Body(...)
) -> dict[str, Any]:
    verdict = _choice(Verdict, body.verdict, "verdict")
    return pulls.review(lake, repository, pull_request, user.id, verdict, body.body).to_dict()


@router.get(PULL + "/comments", dependencies=[require(Permission.READ_REPO)])
def list_comments(repository: str, pull_request: str, lake: LakeDep) -> dict[str, Any]:
    return {"results": [c.to_dict() for c in pulls.list_comments(lake, repository, pull_request)]}


@router.post(PULL + "/comments", status_code=201, dependencies=[require(Permission.WRITE_REPO)])
def add_comment(
    repository: str, pull_request: str, lake: LakeDep, user: UserDep, body: PullRequestComment = Body(...)
) -> dict[str, Any]:
    return pulls.add_comment(lake, repository, pull_request, body.body, user.id).to_dict()


@router.get(PULL + "/status", dependencies=[require(Permission.READ_REPO)])
def merge_status(repository: str, pull_request: str, lake: LakeDep) -> dict[str, Any]:
    """What a merge needs and has now: approvals, checks, and the reasons it is refused."""
    return pulls.gate(lake, repository, pull_request).to_dict()
