"""Changes: a branch's uncommitted changes with the form that commits them, and the diff between
two refs; each path with its change type and size."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Annotated, Any

from fastapi import Form, Request, Response

from lakectl.core import changes as lake_changes
from lakectl.core import merging, tablediff
from lakectl.core import porcelain as p
from lakectl.core.model import Change, DiffType
from lakectl.core.tables import declared
from lakectl.core.tables.deltalog import table_root
from lakectl.core.tables.naming import table_of
from lakectl.errors import InvalidArgument, LakectlError, MergeConflict, NotFound
from server.api.deps import LakeDep
from server.policies import Permission
from server.ui.refs import ref_names
from server.ui.render import page, redirect, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
PAGE = 100
READ, WRITE = can(Permission.READ_REPO), can(Permission.WRITE_REPO)


def _rows(changes: Iterable[Change], after: str, left: str, right: str) -> tuple[list[dict[str, Any]], str]:
    """One page of changes after the path ``after`` as table rows (a removed path links to the
    object at ``left``, any other to ``right``), and the offset of the next page ("" if none)."""
    page_ = list(islice((c for c in changes if c.path > after), PAGE + 1))
    rows: list[dict[str, Any]] = []
    for c in page_[:PAGE]:
        row = c.new if c.new is not None else c.old
        removed = c.type is DiffType.REMOVED
        rows.append(
            {
                "type": c.type.value,
                "path": c.path,
                "size": row[0] if row is not None else None,
                "ref": left if removed else right,
                "table": table_of(c.path),
            }
        )
    logs = tuple(r for shown in rows if (r := table_root(shown["path"])) is not None)
    for shown in rows:  # a Delta table's data files belong to the table whose log changed with them
        shown["table"] = _under(logs, shown["path"]) or shown["table"]
    return rows, page_[PAGE - 1].path if len(page_) > PAGE else ""


MAX_SUMMARIES = 5
"""Tables a page summarizes at most (each summary reads the table's changed objects)."""


def table_summaries(
    lake: LakeDep, repo: str, sides: tuple[str, str], rows: Iterable[dict[str, Any]]
) -> list[dict[str, str]]:
    """The one-line row summary of each table among ``rows`` (changes from :func:`_rows`), at
    most :data:`MAX_SUMMARIES`, as the table diff gives it by the table's declared key (none:
    whole rows); a table that cannot be read says why instead."""
    try:
        known = declared.at_ref(lake, repo, sides[1])
    except LakectlError:  # a declaration file that does not parse: each table's diff says so
        known = {}
    rows = list(rows)
    # A Delta table's data files belong to the table whose log changed with them.
    logs = tuple(r for row in rows if (r := table_root(row["path"])) is not None)
    named = (declared.table_for(known, r["path"]) or _under(logs, r["path"]) or r.get("table") for r in rows)
    tables = list(dict.fromkeys(t for t in named if t))[:MAX_SUMMARIES]
    out = []
    for table in tables:
        try:
            found = tablediff.diff_table(lake, repo, sides[0], sides[1], table, (), 0)
        except LakectlError as e:
            out.append(
                {"table": table, "summary": f"{table}: cannot compare its rows: {e.message}", "key": ""}
            )
            continue
        out.append({"table": table, "summary": found.summary(), "key": ", ".join(found.key)})
    return out


def _under(roots: tuple[str, ...], path: str) -> str:
    return next((r for r in roots if path.startswith(r)), "")


@router.get("/repos/{repo}/tablediff", dependencies=[READ])
def table_diff(
    request: Request,
    repo: str,
    lake: LakeDep,
    left: str,
    right: str,
    path: str,
    key: str = "",
    after: str = "",
) -> Response:
    """What changed inside the table at ``path`` from ``left``'s tree to ``right``'s (the core's
    :func:`lakectl.core.tablediff.diff_table`, as ``lakectl diff --table`` shows it)."""
    r = p.get_repo(lake, repo)
    columns = [c.strip() for c in key.split(",") if c.strip()]
    found = tablediff.diff_table(lake, repo, left, right, path, columns, PAGE, after)
    return page(
        request,
        "tablediff.html",
        repo=r,
        left=left,
        right=right,
        table=path,
        key=key,
        after=after,
        diff=found.to_dict(),
        area="compare",
    )


@router.get("/repos/{repo}/branches/{branch}/changes", dependencies=[READ])
def uncommitted(request: Request, repo: str, branch: str, lake: LakeDep, after: str = "") -> Response:
    r = p.get_repo(lake, repo)
    changes = lake_changes.diff_uncommitted(lake, repo, branch)
    rows, next_after = _rows(changes, after, f"{branch}@", branch)
    return page(
        request,
        "changes.html",
        repo=r,
        branch=branch,
        table_sides=(branch, branch + "$"),
        changes=rows,
        total=len(changes),
        after=after,
        next_after=next_after,
        area="changes",
    )


def _metadata(text: str) -> dict[str, str]:
    """``key=value`` lines (blank lines skipped) as commit metadata."""
    metadata = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"metadata line {line!r} is not key=value")
        metadata[key.strip()] = value.strip()
    return metadata


@router.post("/repos/{repo}/branches/{branch}/commit", dependencies=[WRITE])
def commit(
    repo: str,
    branch: str,
    lake: LakeDep,
    user: SignedIn,
    message: Annotated[str, Form()] = "",
    metadata: Annotated[str, Form()] = "",
) -> Response:
    """Commit the branch's staged changes; the committer is the signed-in user, as in the API."""
    done = p.commit(lake, repo, branch, message.strip(), _metadata(metadata), user.id)
    return redirect(url("repos", repo, "commits", done.id))


@router.get("/repos/{repo}/compare", dependencies=[READ])
def compare(
    request: Request,
    repo: str,
    lake: LakeDep,
    left: str = "",
    right: str = "",
    two_way: bool = False,
    after: str = "",
) -> Response:
    """Changes from ``left`` to ``right``: since their merge base (three-dot, as the API's
    default) or, with ``two_way``, between the two trees."""
    return _compare(request, repo, lake, left, right, two_way, after)


STRATEGIES = ("", "dest-wins", "source-wins", "rows")
"""What a merge form offers on conflicts: stop and list them, one side wins every path, or
the tables the repository declares merge row by row by their keys."""


def strategies(chosen: str) -> list[str]:
    """The merge strategies of a form's choice (``InvalidArgument`` for any other value)."""
    if chosen not in STRATEGIES:
        raise InvalidArgument(f"strategy {chosen!r} is not one of dest-wins, source-wins, rows")
    return [chosen] if chosen else []


@router.post("/repos/{repo}/merge", dependencies=[WRITE])
def merge(
    request: Request,
    repo: str,
    lake: LakeDep,
    user: SignedIn,
    source: Annotated[str, Form()],
    destination: Annotated[str, Form()],
    strategy: Annotated[str, Form()] = "",
    message: Annotated[str, Form()] = "",
) -> Response:
    """Merge ``source`` into the branch ``destination`` (the committer is the signed-in user); a
    conflict shows the comparison again with the conflicting paths, and nothing changed."""
    chosen = strategies(strategy)
    try:
        done = merging.merge(lake, repo, source, destination, chosen, message.strip() or None, user.id)
    except MergeConflict as conflict:
        return _compare(request, repo, lake, destination, source, conflicts=conflict.paths)
    return redirect(url("repos", repo, "commits", done.commit.id))


def _compare(
    request: Request,
    repo: str,
    lake: LakeDep,
    left: str,
    right: str,
    two_way: bool = False,
    after: str = "",
    conflicts: list[str] | None = None,
) -> Response:
    r = p.get_repo(lake, repo)
    compared = bool(left and right)
    rows: list[dict[str, Any]] = []
    next_after = ""
    sides: tuple[str, str] | None = None
    if compared:
        changes = lake_changes.diff_refs(lake, repo, left, right, two_way)
        rows, next_after = _rows(changes, after, left, right)
        sides = (left, right) if two_way else table_sides(lake, repo, left, right)
    return page(
        request,
        "compare.html",
        table_sides=sides,
        repo=r,
        left=left or r.default_branch,
        right=right,
        two_way=two_way,
        compared=compared,
        changes=rows,
        after=after,
        next_after=next_after,
        ref_names=ref_names(lake, repo),
        mergeable_into=_is_branch(lake, repo, left) if compared and not two_way else False,
        conflicts=conflicts or [],
        area="compare",
        status=409 if conflicts else 200,
    )


def table_sides(lake: LakeDep, repo: str, left: str, right: str) -> tuple[str, str]:
    """The refs a table's row diff compares for a three-dot comparison: the merge base (as a
    commit id; ``left`` when there is none) and ``right``."""
    base = lake_changes.find_merge_base(lake, repo, left, right)
    return (base.id if base is not None else left), right


def _is_branch(lake: LakeDep, repo: str, ref: str) -> bool:
    """Whether ``ref`` names a branch (a merge's destination must be one)."""
    try:
        p.get_branch(lake, repo, ref)
    except (NotFound, InvalidArgument):
        return False
    return True
