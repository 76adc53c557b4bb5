"""A repository's settings: its default branch (shown), branch protection rules (list, add with
the pull-request fields, delete) and garbage-collection rules (show, set, delete). Every reader
sees them; changing them needs ``DELETE_REPO``, as the REST API's ``server/api/protection.py``
and ``server/api/settings.py`` require, and calls the same verbs of
:mod:`lakectl.core.protection` and :mod:`lakectl.core.upkeep.gc`. The page ends with the form
that deletes the repository (for those who may; it posts to :mod:`server.ui.repos`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Form, Request, Response

from lakectl.core import porcelain as p
from lakectl.core import protection
from lakectl.core.upkeep import retention
from lakectl.errors import InvalidArgument, NotFound
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.render import page, redirect, url
from server.ui.session import can, ui_router

router = ui_router()
READ, ADMIN = can(Permission.READ_REPO), can(Permission.DELETE_REPO)


def _whole(value: str, what: str) -> int:
    """A whole number typed in a form (``InvalidArgument`` names the field otherwise)."""
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidArgument(f"{what} must be a whole number, got {value!r}") from None


@router.get("/repos/{repo}/settings", dependencies=[READ])
def settings(request: Request, repo: str, lake: LakeDep) -> Response:
    r = p.get_repo(lake, repo)
    try:
        gc_rules: retention.GCRules | None = retention.get_rules(lake, repo)
    except NotFound:
        gc_rules = None
    return page(
        request,
        "settings.html",
        repo=r,
        rules=protection.get_rules(lake, repo).rules,
        gc_rules=gc_rules,
        max_approvals=protection.MAX_APPROVALS,
        max_days=retention.MAX_DAYS,
        area="settings",
    )


@router.post("/repos/{repo}/settings/protection", dependencies=[ADMIN])
def add_rule(
    repo: str,
    lake: LakeDep,
    pattern: Annotated[str, Form()],
    required_approvals: Annotated[str, Form()] = "0",
    required_checks: Annotated[str, Form()] = "",
) -> Response:
    """A rule for ``pattern`` (409 when it has one already)."""
    approvals = _whole(required_approvals or "0", "required approvals")
    rule = protection.make_rule(pattern.strip(), approvals, bool(required_checks))
    protection.add_rule(lake, repo, rule)
    return redirect(url("repos", repo, "settings") + "#protection")


@router.post("/repos/{repo}/settings/protection/delete", dependencies=[ADMIN])
def delete_rule(repo: str, lake: LakeDep, pattern: Annotated[str, Form()]) -> Response:
    protection.delete_rule(lake, repo, pattern)
    return redirect(url("repos", repo, "settings") + "#protection")


@router.post("/repos/{repo}/settings/gc", dependencies=[ADMIN])
def set_gc_rules(
    repo: str,
    lake: LakeDep,
    default_retention_days: Annotated[str, Form()],
    branch: Annotated[list[str] | None, Form()] = None,
    days: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Replace the rules with the form's (a row without a branch is dropped), as the API's
    ``PUT``: the whole set in one write, so no read-modify-write races another admin's edit."""
    branches, day_values = branch or [], days or []
    if len(branches) != len(day_values):
        raise InvalidArgument("each branch rule needs a branch and its retention days")
    rows = [
        {"branch_id": b.strip(), "retention_days": _whole(d, f"{b.strip()}'s retention days")}
        for b, d in zip(branches, day_values, strict=True)
        if b.strip()
    ]
    body = {
        "default_retention_days": _whole(default_retention_days, "default retention days"),
        "branches": rows,
    }
    retention.set_rules(lake, repo, retention.GCRules.from_dict(body))
    return redirect(url("repos", repo, "settings") + "#gc")


@router.post("/repos/{repo}/settings/gc/delete", dependencies=[ADMIN])
def delete_gc_rules(repo: str, lake: LakeDep) -> Response:
    retention.delete_rules(lake, repo)
    return redirect(url("repos", repo, "settings") + "#gc")
