"""lakeFS's metadata and internal operations a GC or restore client calls: a repository's tree
files by id (``metadata/meta_range``, ``metadata/range``, ``metadata/object``), writing a commit
record as given (``POST /repositories/{r}/commits``), and garbage-collection preparation
(``gc/prepare_commits``, its async form and status, ``gc/prepare_uncommited``).

Each calls one core verb: :mod:`lakectl.core.treefiles`,
:func:`lakectl.core.upkeep.refsdump.create_commit_record`, :mod:`lakectl.core.upkeep.gcprepare`.
Locations a client fetches are URLs of this server: a tree file's is its ``metadata/object`` route
(the caller's credentials), a prepared file's is its block signed for the caller
(``GET /blocks/<signed>``, the caller's credentials, until the signature expires).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field

from lakectl.core import blockaccess, treefiles
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.core.model import BLOCK_ADDRESS_SCHEME
from lakectl.core.upkeep import gcprepare, refsdump
from lakectl.errors import InvalidArgument
from server.api.bodies import Body
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.auth.users import User
from server.policies import Permission
from server.responses import SafeJSONResponse

router = APIRouter(route_class=AuthFirstRoute)
R = "/repositories/{repository}"
GC_ADDRESSES = "_lakefs/retention/gc/addresses/"
"""Under the storage namespace: where lakeFS's Spark job writes the addresses it expires (this
server neither reads nor serves it: ``gc run`` sweeps)."""


class CommitRecordCreation(Body):
    """lakeFS ``CommitRecordCreation``."""

    commit_id: str
    version: int = Field(ge=0, le=1)
    """lakeFS's commit record version: accepted, not kept (records here have one form)."""
    committer: str
    message: str
    metarange_id: str
    creation_date: int
    parents: list[str]
    metadata: dict[str, str] | None = None
    generation: int
    force: bool = False
    """lakeFS's override of a read-only repository: none is read-only here."""


class PrepareGCUncommittedRequest(Body):
    """lakeFS ``PrepareGCUncommittedRequest``."""

    continuation_token: str | None = None


# -- tree files ------------------------------------------------------------------------------


def _storage_uri(request: Request, repository: str, kind: treefiles.TreeFile, object_id: str) -> Response:
    """lakeFS ``StorageURI``, its location also in the Location header (as lakeFS sends it)."""
    location = str(
        request.url_for("get_metadata_object", repository=repository, type=kind.value, object_id=object_id)
    )
    return SafeJSONResponse({"location": location}, headers={"Location": location})


@router.get(R + "/metadata/meta_range/{meta_range}", dependencies=[require(Permission.READ_REPO)])
def get_meta_range(repository: str, meta_range: str, request: Request, lake: LakeDep) -> Response:
    """Where the metarange's file is: this server's ``metadata/object`` URL of it; 404 unless it
    is the tree of one of the repository's commits."""
    bare = treefiles.locate(lake, repository, treefiles.TreeFile.META_RANGE, meta_range)
    return _storage_uri(request, repository, treefiles.TreeFile.META_RANGE, bare)


@router.get(R + "/metadata/range/{range}", dependencies=[require(Permission.READ_REPO)])
def get_range(repository: str, range: str, request: Request, lake: LakeDep) -> Response:
    """Where the range's (or page's) file is; 404 unless a tree of the repository names it."""
    bare = treefiles.locate(lake, repository, treefiles.TreeFile.RANGE, range)
    return _storage_uri(request, repository, treefiles.TreeFile.RANGE, bare)


@router.get(R + "/metadata/object/{type}/{object_id}", dependencies=[require(Permission.READ_REPO)])
def get_metadata_object(
    repository: str,
    type: str,
    object_id: str,
    request: Request,
    lake: LakeDep,
    user: UserDep,
    presign: bool = Query(False),
) -> Response:
    """The file's bytes (our own range file format, not lakeFS's SSTables); with ``presign``, a
    302 to its block signed for the caller."""
    kind = treefiles.TreeFile.parse(type)
    if presign:
        bare = treefiles.locate(lake, repository, kind, object_id)
        return Response(status_code=302, headers={"Location": _block_url(request, lake, user, bare)})
    data = treefiles.read(lake, repository, kind, object_id)
    return Response(data, media_type="application/octet-stream")


# -- commit records --------------------------------------------------------------------------


# Admins only (DeleteRepo): the record is written as given, and its metarange may be any tree
# stored in the lake, another repository's included (blocks are shared by the whole lake), so
# writing one can graft a tree this repository never had. lakeFS's refs restore, its one caller,
# is an admin's task too.
@router.post(R + "/commits", status_code=204, dependencies=[require(Permission.DELETE_REPO)])
def create_commit_record(repository: str, body: CommitRecordCreation, lake: LakeDep) -> Response:
    record = {
        "id": body.commit_id,
        "parents": body.parents,
        "committer": body.committer,
        "message": body.message,
        "creation_date": body.creation_date,
        "meta_range_id": body.metarange_id,
        "metadata": body.metadata or {},
        "generation": body.generation,
    }
    refsdump.create_commit_record(lake, repository, record)
    return Response(status_code=204)


# -- garbage-collection preparation ------------------------------------------------------------
# Admins only (DeleteRepo), as the gc rules and gc run: lakeFS keeps its retention actions out
# of the developers' policy.


def _block_url(request: Request, lake: Lake, user: User, bare: str) -> str:
    signed = blockaccess.sign_locator(lake, bare, user.grant_token)
    return str(request.url_for("get_block", signed=signed))


def _prepared(
    request: Request, lake: Lake, user: User, repository: str, run: gcprepare.PreparedCommits
) -> dict[str, Any]:
    """lakeFS ``GarbageCollectionPrepareResponse``."""
    namespace = p.get_repo(lake, repository).storage_namespace.rstrip("/")
    return {
        "run_id": run.run_id,
        "gc_commits_location": BLOCK_ADDRESS_SCHEME + run.commits,
        "gc_addresses_location": f"{namespace}/{GC_ADDRESSES}",
        "gc_commits_presigned_url": _block_url(request, lake, user, run.commits),
    }


@router.post(R + "/gc/prepare_commits", status_code=201, dependencies=[require(Permission.DELETE_REPO)])
def prepare_gc_commits(repository: str, request: Request, lake: LakeDep, user: UserDep) -> dict[str, Any]:
    return _prepared(request, lake, user, repository, gcprepare.prepare_commits(lake, repository))


@router.post(R + "/gc/prepare_commits/async", status_code=202, dependencies=[require(Permission.DELETE_REPO)])
def prepare_gc_commits_async(repository: str, lake: LakeDep) -> dict[str, Any]:
    """lakeFS ``TaskCreation``: the preparation runs in this request, so the task is complete
    (its result or its error) when its id is returned."""
    return {"id": gcprepare.submit(lake, repository).task_id}


@router.get(R + "/gc/prepare_commits/status", dependencies=[require(Permission.DELETE_REPO)])
def prepare_gc_commits_status(
    repository: str,
    request: Request,
    lake: LakeDep,
    user: UserDep,
    id: str = Query(..., min_length=1, max_length=200),
) -> dict[str, Any]:
    """lakeFS ``PrepareGarbageCollectionCommitsStatus``; the URL in its result is signed for the
    caller. 404 for an id the repository never issued."""
    task = gcprepare.status(lake, repository, id)
    answer: dict[str, Any] = {
        "task_id": task.task_id,
        "completed": task.completed,
        "update_time": datetime.fromtimestamp(task.update_time, UTC).isoformat().replace("+00:00", "Z"),
    }
    if task.result is not None:
        answer["result"] = _prepared(request, lake, user, repository, task.result)
    if task.error is not None:
        answer["error"] = task.error
    return answer


@router.post(R + "/gc/prepare_uncommited", status_code=201, dependencies=[require(Permission.DELETE_REPO)])
def prepare_gc_uncommitted(
    repository: str,
    request: Request,
    lake: LakeDep,
    user: UserDep,
    body: PrepareGCUncommittedRequest | None = None,
) -> dict[str, Any]:
    """lakeFS ``PrepareGCUncommittedResponse``: ``gc_uncommitted_location`` is the URL of the
    Parquet file's block signed for the caller ("" when nothing is uncommitted). Every address
    is in that one file: no continuation token is ever returned, and none is accepted."""
    if body is not None and body.continuation_token:
        raise InvalidArgument(
            "unknown continuation_token: this server prepares every uncommitted address in one call"
        )
    run = gcprepare.prepare_uncommitted(lake, repository)
    location = _block_url(request, lake, user, run.addresses) if run.addresses is not None else ""
    return {"run_id": run.run_id, "gc_uncommitted_location": location, "continuation_token": None}
