"""Data-aware table diff over HTTP (lakectl's extension of the refs API):
``GET /repositories/{r}/refs/{left}/diff/{right}/table?path=…&key=a,b`` answers the
:class:`lakectl.core.tablediff.TableDiff` shape: schema changes, row counts, row changes by key
(paged with ``after``/``amount``) and per-partition summaries."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query

from lakectl.core import tablediff
from server.api.deps import AuthFirstRoute, LakeDep, require
from server.api.pagination import After, Amount, page_size
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)


@router.get(
    "/repositories/{repository}/refs/{left_ref}/diff/{right_ref}/table",
    dependencies=[require(Permission.READ_REPO)],
)
def diff_table(
    repository: str,
    left_ref: str,
    right_ref: str,
    lake: LakeDep,
    path: str = Query(..., description="the table: a Parquet or CSV object, or a prefix of Parquet files"),
    key: str = Query("", description="key columns, comma-separated (none: a multiset diff of whole rows)"),
    after: After = "",
    amount: Amount = None,
    type: Literal["three_dot", "two_dot"] = Query(
        "three_dot",
        description="three_dot: since the refs' merge base (as lakeFS's diff); two_dot: tree to tree",
    ),
    declared: bool = Query(
        True,
        description="without key: use the key the repository declares for the table (_lakectl/tables.yaml)",
    ),
) -> dict[str, Any]:
    columns = [c.strip() for c in key.split(",") if c.strip()]
    found = tablediff.diff_table(
        lake,
        repository,
        left_ref,
        right_ref,
        path,
        columns,
        page_size(amount),
        after,
        two_way=type == "two_dot",
        use_declared=declared,
    )
    return found.to_dict()
