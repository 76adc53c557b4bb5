"""Objects: read (with Range), head, stat, list, upload (raw or multipart form), delete, delete
batch, copy, user metadata rewrite, underlying properties."""

from __future__ import annotations

from email.utils import formatdate
from tempfile import SpooledTemporaryFile
from typing import Any, BinaryIO, cast

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from lakectl.core import appended, listing, objectprops, writes
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.core.limits import check_metadata
from lakectl.core.model import Entry, ObjectInfo, PathType
from lakectl.core.presign import MAX_EXPIRY as MAX_PRESIGN_EXPIRY
from lakectl.core.uri import check_new_path, check_path
from lakectl.errors import InvalidArgument, LakectlError, ObjectNotFound, PreconditionFailed
from server import presigned
from server.api import shapes
from server.api.bodies import ObjectCopyCreation, PathList, UserMetadataUpdate
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, page, page_size
from server.api.ranges import byte_span
from server.headers import sent_text
from server.multipart import read_form_file
from server.policies import Permission
from server.reads import etag_matches, object_body
from server.served import served_headers

router = APIRouter(route_class=AuthFirstRoute)
REF_OBJECTS = "/repositories/{repository}/refs/{ref}/objects"
BRANCH_OBJECTS = "/repositories/{repository}/branches/{branch}/objects"
META_PREFIX = "x-lakefs-meta-"
SPOOL_BYTES = 8 * 1024 * 1024
"""Uploads up to this size are buffered in memory, larger ones in a temporary file."""
MAX_DELETE = 1000

PathQuery = Query(..., description="the object's path")


# -- reading --------------------------------------------------------------------------------


def _headers(path: str, entry: Entry) -> dict[str, str]:
    return {
        "ETag": f'"{entry.checksum}"',
        "Last-Modified": formatdate(entry.mtime, usegmt=True),
        "Accept-Ranges": "bytes",
        **served_headers(path, entry.content_type),  # as stored (no charset added), never active
    }


async def _serve(
    lake: Lake,
    repository: str,
    ref: str,
    path: str,
    range_: str | None,
    if_none_match: str | None,
    body: bool,
    inline_reads: bool = False,
) -> Response:
    """Headers from the stat, on the event loop; the bytes in the same response when they are
    small and on local disk (``inline_reads``), else streamed from the thread pool."""
    found = p.open_object(lake, repository, ref, path)
    entry = found.entry
    headers = _headers(found.path, entry)
    if if_none_match and etag_matches(if_none_match, entry.checksum):
        return Response(status_code=304, headers=headers)
    span = byte_span(entry.size, range_, headers)
    if not isinstance(span, tuple):  # the 416 answer
        return span
    start, end, status = span
    if not body:
        return Response(status_code=status, headers=headers)
    return await object_body(lake, found, start, end, status, headers, inline_reads)


PresignExpiry = Query(
    None, ge=1, le=MAX_PRESIGN_EXPIRY, description="lakectl extension: seconds a presigned URL stays valid"
)


SinceQuery = Query(
    None,
    description="lakectl extension: only the bytes the commits after this ref's commit up to "
    "the ref's appended to the object (all written since a delete or overwrite among them); "
    "an ancestor of the ref",
)


@router.get(REF_OBJECTS, dependencies=[require(Permission.READ_REPO)])
async def get_object(
    request: Request,
    repository: str,
    ref: str,
    lake: LakeDep,
    user: UserDep,
    path: str = PathQuery,
    presign: bool = Query(False),
    presign_expiry: int | None = PresignExpiry,
    since: str | None = SinceQuery,
    range_: str | None = Header(None, alias="Range"),
    if_none_match: str | None = Header(None),
) -> Response:
    """The object's bytes; with ``Range: bytes=a-b`` a part of them (206). With ``presign``, a
    redirect (302) to a presigned URL of them, as lakeFS. With ``since`` (a lakectl extension),
    the bytes appended after that ref (:mod:`lakectl.core.appended`)."""
    if since is not None:
        if presign or range_ is not None:
            raise InvalidArgument("since reads what was appended: not with presign or a Range")
        return await _serve_since(request, lake, repository, ref, path, since)
    if presign:
        url, _ = presigned.url_for(request, lake, user, repository, ref, path, presign_expiry)
        return Response(status_code=302, headers={"Location": url})
    inline = request.app.state.inline_reads
    return await _serve(lake, repository, ref, path, range_, if_none_match, body=True, inline_reads=inline)


async def _serve_since(
    request: Request, lake: Lake, repository: str, ref: str, path: str, since: str
) -> Response:
    """The bytes appended to the object after ``since`` up to ``ref``: only their blocks read.
    No ETag: the body is no version of the object."""
    found, offset = await run_in_threadpool(appended.open_since, lake, repository, since, ref, path)
    headers = served_headers(found.path, found.entry.content_type)
    end = found.entry.size
    return await object_body(lake, found, offset, end, 200, headers, request.app.state.inline_reads)


@router.head(REF_OBJECTS, dependencies=[require(Permission.READ_REPO)])
async def head_object(
    repository: str,
    ref: str,
    lake: LakeDep,
    path: str = PathQuery,
    range_: str | None = Header(None, alias="Range"),
) -> Response:
    try:
        return await _serve(lake, repository, ref, path, range_, None, body=False)
    except LakectlError as e:
        return Response(status_code=e.http_status)  # HEAD answers carry no body


@router.get(REF_OBJECTS + "/stat", dependencies=[require(Permission.READ_REPO)])
async def stat_object(
    request: Request,
    repository: str,
    ref: str,
    lake: LakeDep,
    user: UserDep,
    path: str = PathQuery,
    user_metadata: bool = Query(True),
    presign: bool = Query(False),
    presign_expiry: int | None = PresignExpiry,
) -> dict[str, Any]:
    """lakeFS ``ObjectStats``; with ``presign``, ``physical_address`` is a presigned URL that any
    HTTP client may GET until ``physical_address_expiry``."""
    stats = shapes.object_stats(p.stat(lake, repository, ref, path), user_metadata)
    if presign:
        url, expiry = presigned.url_for(request, lake, user, repository, ref, path, presign_expiry)
        stats.update(physical_address=url, physical_address_expiry=expiry)
    return stats


@router.get(REF_OBJECTS + "/ls", dependencies=[require(Permission.READ_REPO)])
def list_objects(
    repository: str,
    ref: str,
    lake: LakeDep,
    prefix: Prefix = "",
    delimiter: str = Query("", description="group common prefixes up to this string"),
    after: After = "",
    amount: Amount = None,
    user_metadata: bool = Query(True),
    presign: bool = Query(False),
) -> dict[str, Any]:
    """Objects under ``prefix`` in path order; with a delimiter, common prefixes too."""
    items = listing.list_objects(lake, repository, ref, prefix, delimiter, after, page_size(amount) + 1)
    return page(items, amount, lambda o: o.path, lambda o: shapes.object_stats(o, user_metadata))


# -- writing --------------------------------------------------------------------------------


def check_preconditions(
    lake: Lake,
    repository: str,
    branch: str,
    path: str,
    if_none_match: str | None,
    if_match: str | None,
) -> None:
    """The branch exists and takes writes (no protection rule covers it), the path is valid,
    and ``If-None-Match: *`` (must not exist) and ``If-Match: <etag>`` hold. Checked before the
    body is read and again before staging; not atomic with the staging write itself."""
    check_new_path(path)
    p.get_branch(lake, repository, branch)  # a tag is no branch: 404, as lakeFS
    writes.check_writable(lake, repository, branch)  # a protected branch: 403
    if if_none_match is None and if_match is None:
        return
    if if_none_match is not None and if_none_match.strip() != "*":
        raise InvalidArgument("If-None-Match on upload supports only '*'")
    try:
        current: Entry | None = p.stat(lake, repository, branch, path).entry
    except ObjectNotFound:
        current = None
    if if_none_match is not None and current is not None:
        raise PreconditionFailed(f"object {path!r} already exists", path=path)
    if if_match is not None and (current is None or not etag_matches(if_match, current.checksum)):
        raise PreconditionFailed(f"object {path!r} does not match If-Match {if_match!r}", path=path)


def _user_metadata(request: Request) -> dict[str, str]:
    """The ``x-lakefs-meta-<key>`` headers as UTF-8 text, within the limits of user metadata
    (checked before the body is read)."""
    metadata = {
        name[len(META_PREFIX) :]: sent_text(name, value)
        for name, value in request.headers.items()
        if name.startswith(META_PREFIX) and len(name) > len(META_PREFIX)
    }
    return check_metadata(metadata)


AppendQuery = Query(
    False,
    description="lakectl extension (lakeFS has no append): add the body to the end of the object, "
    "as new blocks (created if missing; its content type and metadata stay)",
)


@router.post(BRANCH_OBJECTS, status_code=201, dependencies=[require(Permission.WRITE_REPO)])
async def upload_object(
    request: Request,
    repository: str,
    branch: str,
    lake: LakeDep,
    path: str = PathQuery,
    storage_class: str | None = Query(None, alias="storageClass"),
    force: bool = Query(False),
    append: bool = AppendQuery,
    if_none_match: str | None = Header(None),
    if_match: str | None = Header(None),
) -> dict[str, Any]:
    """Stage the request body (raw, or the ``content`` field of a multipart form) at ``path``;
    ``x-lakefs-meta-<key>`` headers become user metadata. Nothing is staged unless the whole
    body arrived. With ``append`` (a lakectl extension), the body is added to the end of the
    object instead (``writes.append``), which keeps its content type and metadata."""
    check = (lake, repository, branch, path, if_none_match, if_match)
    check_preconditions(*check)
    content_type = request.headers.get("content-type")
    content_type = sent_text("content-type", content_type) if content_type else None
    metadata = _user_metadata(request)
    if append and metadata:
        raise InvalidArgument("an append keeps the object's user metadata: send no x-lakefs-meta- headers")
    # the form's content type (its boundary) when the body is a multipart form, else None
    form = content_type if content_type and content_type.lower().startswith("multipart/form-data") else None
    writes.entry_for(0, "", (), None if form else content_type, metadata)  # refused before the body is read
    with SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        field_type = await _receive(request, form, spool)
        content_type = field_type if form is not None else content_type
        spool.seek(0)
        source = cast(BinaryIO, spool)  # a file object; typeshed's SpooledTemporaryFile is no BinaryIO

        def stage() -> ObjectInfo:
            check_preconditions(*check)
            if append:
                return writes.append(lake, repository, branch, path, source)
            return writes.upload(lake, repository, branch, path, source, content_type, metadata)

        info = await run_in_threadpool(stage)
    return shapes.object_stats(info)


async def _receive(request: Request, form: str | None, spool: Any) -> str | None:
    """Write the request body (raw, or the ``content`` field of the multipart ``form``) into
    ``spool``; return the form field's content type (None for a raw body)."""
    try:
        if form is not None:
            return await read_form_file(request.stream(), form, "content", spool)
        async for chunk in request.stream():
            spool.write(chunk)
    except ClientDisconnect:
        raise InvalidArgument("upload interrupted: the request body did not arrive whole") from None
    return None


@router.delete(BRANCH_OBJECTS, status_code=204, dependencies=[require(Permission.WRITE_REPO)])
async def delete_object(
    repository: str,
    branch: str,
    lake: LakeDep,
    path: str = PathQuery,
    force: bool = Query(False),
    no_tombstone: bool = Query(False),
) -> Response:
    writes.delete_objects(lake, repository, branch, [path])
    return Response(status_code=204)


@router.post(BRANCH_OBJECTS + "/delete", dependencies=[require(Permission.WRITE_REPO)])
def delete_objects(
    repository: str,
    branch: str,
    body: PathList,
    lake: LakeDep,
    force: bool = Query(False),
    no_tombstone: bool = Query(False),
) -> dict[str, Any]:
    """Delete many paths at once; paths that do not exist are not errors (as S3 and lakeFS)."""
    if len(body.paths) > MAX_DELETE:
        raise InvalidArgument(f"at most {MAX_DELETE} paths per request, got {len(body.paths)}")
    errors: list[dict[str, Any]] = []
    valid: list[str] = []
    for path in dict.fromkeys(body.paths):
        try:
            valid.append(check_path(path))
        except InvalidArgument as e:
            errors.append({"status_code": 400, "message": e.message, "path": path})
    writes.delete_existing(lake, repository, branch, valid)
    return {"errors": errors}


@router.post(BRANCH_OBJECTS + "/copy", status_code=201, dependencies=[require(Permission.WRITE_REPO)])
async def copy_object(
    repository: str,
    branch: str,
    body: ObjectCopyCreation,
    lake: LakeDep,
    dest_path: str = Query(..., description="where the copy goes on the branch"),
) -> dict[str, Any]:
    """Copy an object (from any ref of the repository) onto the branch: the copy shares the
    source's blocks, no data is written."""
    entry = writes.copy_from(lake, repository, branch, dest_path, body.src_ref or branch, body.src_path)
    return shapes.object_stats(ObjectInfo(dest_path, PathType.OBJECT, entry))


@router.put(
    BRANCH_OBJECTS + "/stat/user_metadata", status_code=201, dependencies=[require(Permission.WRITE_REPO)]
)
def update_object_user_metadata(
    repository: str, branch: str, body: UserMetadataUpdate, lake: LakeDep, path: str = PathQuery
) -> Response:
    """Replace all of the object's user metadata with ``set``; its data stays."""
    objectprops.replace_user_metadata(lake, repository, branch, path, body.set)
    return Response(status_code=201)


@router.get(REF_OBJECTS + "/underlyingProperties", dependencies=[require(Permission.READ_REPO)])
def get_underlying_properties(
    repository: str, ref: str, lake: LakeDep, path: str = PathQuery
) -> dict[str, Any]:
    """The storage class of the object's data (none for a local block store)."""
    return {"storage_class": objectprops.storage_class(lake, repository, ref, path)}
