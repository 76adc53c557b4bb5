"""Zero-copy import (lakeFS's ``ImportApi``): start, status and cancel of an import task, all through
:mod:`lakectl.core.importing.tasks`.

Start checks the request (branch, sources) and answers 202 with the task's id while a thread of
this server lists the sources and commits; the status route is polled as lakeFS's lakectl does.
A source on object storage also needs ``fs:Import`` (the server reads it with its own
credentials); a local one must lie where the lake's confinement allows
(``blockstore.local.allowed_external_prefixes``), which the core checks.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import Field

from lakectl.core.importing import owning, tasks
from lakectl.errors import Forbidden, NotFound
from server.api.bodies import Body, CommitCreation, unsupported
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, forbidden, require
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
IMPORT = "/repositories/{repository}/branches/{branch}/import"
ImportId = Query(..., min_length=1, max_length=64)


class ImportLocation(Body):
    type: str
    path: str
    destination: str


class ImportCreation(Body):
    paths: list[ImportLocation] = Field(min_length=1, max_length=1000)
    commit: CommitCreation
    force: bool = False
    merge: bool = True
    """lakectl's extension: False leaves the import on ``_<branch>_imported`` (lakeFS always merges)."""


@router.post(IMPORT, status_code=202, dependencies=[require(Permission.WRITE_REPO)])
def import_start(
    repository: str, branch: str, body: ImportCreation, lake: LakeDep, user: UserDep
) -> dict[str, Any]:
    """lakeFS ``ImportCreationResponse``: the id of the task now running."""
    if body.commit.date is not None:
        raise unsupported("date")
    if any(p.path.startswith("s3://") for p in body.paths) and not user.allows(Permission.IMPORT, repository):
        refusal = forbidden(user, Permission.IMPORT, repository)
        why = "an import from object storage reads it with the server's own credentials"
        raise Forbidden(f"{refusal.message} ({why})", **refusal.details)
    locations = [tasks.Location.from_dict(p.model_dump()) for p in body.paths]
    try:
        st = tasks.start(
            lake,
            repository,
            branch,
            locations,
            body.commit.message,
            body.commit.metadata,
            committer=user.id,
            merge=body.merge,
        )
    except (NotFound, Forbidden) as exc:
        if "import source" in exc.message:  # a remote user may have meant a path of their own
            exc.message += " (a local source is read on the server, not where the client runs)"
        raise
    return {"id": st.id}


@router.get(IMPORT, dependencies=[require(Permission.READ_REPO)])
def import_status(repository: str, branch: str, lake: LakeDep, id: str = ImportId) -> dict[str, Any]:
    """lakeFS ``ImportStatus`` (and lakectl's fields after it)."""
    return tasks.status(lake, repository, id, branch).to_dict()


@router.delete(IMPORT, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
def import_cancel(repository: str, branch: str, lake: LakeDep, id: str = ImportId) -> Response:
    tasks.cancel(lake, repository, id, branch)
    return Response(status_code=204)


@router.post(IMPORT + "/copy", dependencies=[require(Permission.WRITE_REPO)])
def import_copy(repository: str, branch: str, lake: LakeDep, prefix: str = Query("")) -> dict[str, Any]:
    """lakectl's extension: copy the imported objects under ``prefix`` into the lake's blocks,
    staged on the branch (the source is read here, through its guard)."""
    return {"paths": owning.copy_imported(lake, repository, branch, prefix)}
