"""Annotate over HTTP (a lakectl extension; lakeFS's lakectl asks ``log`` once per object): the
entries under a prefix with the last commit that changed each, in one walk of the history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from lakectl.core import annotate as annotating
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.api.pagination import After, Amount, Prefix, page, page_size
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)


@router.get("/repositories/{repository}/refs/{ref}/annotate", dependencies=[require(Permission.READ_REPO)])
def annotate(
    repository: str,
    ref: str,
    lake: LakeDep,
    prefix: Prefix = "",
    recursive: bool = Query(False, description="every object under the prefix, not one level"),
    after: After = "",
    amount: Amount = None,
) -> dict[str, Any]:
    """``{pagination, results}`` of ``{path, path_type, commit}`` (``commit`` null for an
    object only staged), in path order."""
    found = annotating.annotate(lake, repository, ref, prefix, recursive, after, page_size(amount) + 1)
    return page(found, amount, lambda a: a.path, lambda a: a.to_dict())
