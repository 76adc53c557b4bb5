"""Object operations of the S3 gateway: Get, Head, Put, Copy, Delete and DeleteObjects.

Reads take any ref (branch, tag, commit id, ``main~2``); writes only branches (a write to any
other ref is ``MethodNotAllowed``). A copy reuses the source's block locators: no data moves,
within a repository or across repositories of the lake.
"""

from __future__ import annotations

import dataclasses
from email.utils import formatdate, parsedate_to_datetime
from urllib.parse import unquote

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from lakectl.core import porcelain as p
from lakectl.core import writes
from lakectl.core.limits import check_metadata
from lakectl.core.model import Entry
from lakectl.core.uri import check_new_path
from lakectl.errors import Forbidden, InvalidArgument, InvalidRange, LakectlError, PreconditionFailed
from server.api.ranges import Unsatisfiable, parse_range
from server.headers import as_header, is_token, mime_encoded, sent_text
from server.policies import Permission
from server.reads import etag_matches, object_body
from server.s3 import body, xml
from server.s3.call import Call
from server.served import served_headers

META = "x-amz-meta-"
MAX_DELETE = 1000
MAX_USER_METADATA = 2048
"""S3's limit on an object's user metadata: the UTF-8 bytes of its keys and values together."""
_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}
"""Query parameters of a (presigned) GET that set headers of the answer."""


# -- reading --------------------------------------------------------------------------------


def object_headers(entry: Entry) -> dict[str, str]:
    """The object's headers. User metadata that is not printable ASCII is sent RFC 2047-encoded,
    as S3 does; keys that cannot be header names (set through the REST API) are left out and
    counted in ``x-amz-missing-meta``, as S3 does for metadata its REST API cannot show."""
    headers = {
        "ETag": f'"{entry.checksum}"',
        "Last-Modified": formatdate(entry.mtime, usegmt=True),
        "Accept-Ranges": "bytes",
        "Content-Type": as_header(entry.content_type),
    }
    missing = 0
    for name, value in entry.metadata.items():
        if is_token(name):
            headers[META + name] = mime_encoded(value)
        else:
            missing += 1
    if missing:
        headers["x-amz-missing-meta"] = str(missing)
    return headers


def _date(header: str) -> float | None:
    """An HTTP date as a timestamp; an unparseable one is ignored, as S3 and RFC 7232 do."""
    try:
        return parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def check_conditions(
    entry: Entry,
    if_match: str | None,
    if_none_match: str | None,
    if_modified_since: str | None,
    if_unmodified_since: str | None,
) -> bool:
    """RFC 7232 order, as S3: a failed If-Match or If-Unmodified-Since raises
    ``PreconditionFailed``; a failed If-None-Match or If-Modified-Since returns False (304)."""
    if if_match is not None:
        if not etag_matches(if_match, entry.checksum):
            raise PreconditionFailed(
                "At least one of the pre-conditions you specified did not hold (If-Match)"
            )
    elif if_unmodified_since is not None:
        when = _date(if_unmodified_since)
        if when is not None and entry.mtime > when:
            raise PreconditionFailed("the object was modified since If-Unmodified-Since")
    if if_none_match is not None:
        return not etag_matches(if_none_match, entry.checksum)
    if if_modified_since is not None:
        when = _date(if_modified_since)
        if when is not None and entry.mtime <= when:
            return False
    return True


async def _serve(call: Call, with_body: bool) -> Response:
    ref, path = call.split_key()
    found = p.open_object(call.lake, call.bucket, ref, path)
    entry = found.entry
    h = call.headers
    headers = object_headers(entry)
    fresh = check_conditions(
        entry,
        h.get("if-match"),
        h.get("if-none-match"),
        h.get("if-modified-since"),
        h.get("if-unmodified-since"),
    )
    if not fresh:
        headers.pop("Content-Type")
        return Response(status_code=304, headers=headers)
    for param, header in _OVERRIDES.items():
        if param in call.query:
            headers[header] = as_header(call.query[param])
    # The type sent (as stored, or as a presigned URL's response-content-type asked) is never
    # active content: this port is the API's site, and a browser sends it the UI's cookies.
    disposition = headers.pop("Content-Disposition", None)
    headers.update(served_headers(path, headers["Content-Type"], disposition))
    start, end, status = 0, entry.size, 200
    range_ = h.get("range")
    if range_ and entry.size > 0:  # S3 answers a range of an empty object with the whole (empty) object
        try:
            start, end = parse_range(range_, entry.size)
        except Unsatisfiable as exc:
            raise InvalidRange(f"The requested range is not satisfiable: {exc}", size=entry.size) from None
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{entry.size}"
    headers["Content-Length"] = str(end - start)
    if not with_body:
        return Response(status_code=status, headers=headers)
    media_type = headers.pop("Content-Type")
    return await object_body(call.lake, found, start, end, status, headers, call.inline_reads, media_type)


async def get_object(call: Call) -> Response:
    try:
        return await _serve(call, with_body=True)
    except InvalidRange as exc:
        response = xml.error_response(exc, f"/{call.bucket}/{call.key}")
        response.headers["Content-Range"] = f"bytes */{exc.details.get('size', 0)}"
        return response


async def head_object(call: Call) -> Response:
    return await _serve(call, with_body=False)


# -- writing --------------------------------------------------------------------------------


def content_type(call: Call) -> str | None:
    """The ``Content-Type`` header as UTF-8 text, None when absent or empty."""
    value = call.headers.get("content-type")
    return sent_text("content-type", value) if value else None


def user_metadata(call: Call) -> dict[str, str]:
    """The ``x-amz-meta-<key>`` headers as UTF-8 text: at most 2 KB together
    (``MetadataTooLarge``, as S3), and within lakectl's limits of user metadata."""
    metadata = {
        name[len(META) :]: sent_text(name, value)
        for name, value in call.headers.items()
        if name.startswith(META)
    }
    size = sum(len(key.encode()) + len(value.encode()) for key, value in metadata.items())
    if size > MAX_USER_METADATA:
        raise InvalidArgument(
            f"Your metadata headers exceed the maximum allowed metadata size: {size} bytes, at most "
            f"{MAX_USER_METADATA}",
            s3_code="MetadataTooLarge",
        )
    return check_metadata(metadata)


async def put_object(call: Call) -> Response:
    if call.key.endswith("/") and call.key.count("/") == 1:
        return await _branch_marker(call)
    ref, path = call.split_key()
    writes.check_writable(call.lake, call.bucket, ref)
    mime, metadata = content_type(call), user_metadata(call)
    writes.entry_for(0, "", (), mime, metadata)  # checked before the body is read
    async with body.payload(call) as (received, source):
        await run_in_threadpool(
            writes.upload, call.lake, call.bucket, ref, path, source, mime, metadata, received.md5
        )
    headers = {"ETag": f'"{received.md5}"'}
    if received.checksum is not None:
        headers[received.checksum[0]] = received.checksum[1]
    return Response(status_code=200, headers=headers)


async def _branch_marker(call: Call) -> Response:
    """An empty "directory marker" for a branch's root (``main/``), as pyarrow and Hadoop write
    before a dataset: the branch is that directory, so nothing is stored."""
    writes.check_writable(call.lake, call.bucket, call.key[:-1])
    received = await body.receive(call, lambda piece: None, limit=0)
    return Response(status_code=200, headers={"ETag": f'"{received.md5}"'})


async def delete_object(call: Call) -> Response:
    """204 whether or not the object existed, as S3."""
    ref, path = call.split_key()
    writes.delete_existing(call.lake, call.bucket, ref, [path])
    return Response(status_code=204)


def copy_source(call: Call) -> tuple[str, str, str]:
    """``(repository, ref, path)`` of ``x-amz-copy-source`` (``[/]bucket/ref/path``, URL-encoded)."""
    raw = call.headers["x-amz-copy-source"]
    source, _, version = raw.partition("?")
    if version and not version.startswith("versionId="):
        raise InvalidArgument(f"invalid x-amz-copy-source {raw!r}")
    try:
        decoded = unquote(sent_text("x-amz-copy-source", source), errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgument("x-amz-copy-source is not UTF-8 once percent-decoded") from None
    bucket, _, key = decoded.lstrip("/").partition("/")
    ref, _, path = key.partition("/")
    if not bucket or not ref or not path:
        raise InvalidArgument(f"x-amz-copy-source {raw!r} names no object: expected <bucket>/<ref>/<path>")
    return bucket, ref, path


def source_entry(call: Call) -> Entry:
    """The copy source's entry, after its ``x-amz-copy-source-if-*`` conditions. A copy reads its
    source: the caller must be allowed to read the source's bucket too (the gateway checked the
    destination's only), or writing one repository would read any other."""
    bucket, ref, path = copy_source(call)
    if not call.user.allows(Permission.READ_REPO, bucket):
        raise Forbidden(
            f"user {call.user.id!r} may not read the copy source in bucket {bucket!r}: its policies do not "
            "allow it"
        )
    info = p.stat(call.lake, bucket, ref, path)
    assert info.entry is not None
    h = call.headers
    fresh = check_conditions(
        info.entry,
        h.get("x-amz-copy-source-if-match"),
        h.get("x-amz-copy-source-if-none-match"),
        h.get("x-amz-copy-source-if-modified-since"),
        h.get("x-amz-copy-source-if-unmodified-since"),
    )
    if not fresh:
        raise PreconditionFailed(
            "the copy source does not meet x-amz-copy-source-if-none-match/modified-since"
        )
    return info.entry


async def copy_object(call: Call) -> Response:
    """Stage the source's locators at the destination: no byte is copied."""
    ref, path = call.split_key()
    check_new_path(path)
    writes.check_writable(call.lake, call.bucket, ref)
    source = source_entry(call)
    directive = call.headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise InvalidArgument(f"x-amz-metadata-directive must be COPY or REPLACE, not {directive!r}")
    entry = source
    if directive == "REPLACE":
        entry = writes.entry_for(
            source.size, source.checksum, source.locators, content_type(call), user_metadata(call)
        )
        entry = dataclasses.replace(entry, external=source.external)  # an imported object stays one
    entry = writes.copy_object(call.lake, call.bucket, ref, path, entry)
    root = xml.element("CopyObjectResult", ETag=f'"{entry.checksum}"', LastModified=xml.iso(entry.mtime))
    return xml.document(root)


async def delete_objects(call: Call) -> Response:
    """``POST ?delete``: each key deleted or reported, by branch; missing keys count as deleted."""
    payload = bytearray()
    await body.receive(call, payload.extend, limit=2 * 1024 * 1024)
    root = xml.parse(bytes(payload), "Delete")
    quiet = (xml.child_text(root, "Quiet") or "").strip().lower() == "true"
    keys = [xml.child_text(o, "Key") or "" for o in xml.children(root, "Object")]
    if len(keys) > MAX_DELETE:
        raise InvalidArgument(f"at most {MAX_DELETE} keys per DeleteObjects request, got {len(keys)}")
    result = xml.element("DeleteResult")
    by_ref: dict[str, list[str]] = {}
    for key in keys:
        ref, sep, path = key.partition("/")
        if not ref or not sep or not path:
            xml.add(result, "Error", Key=key, Code="InvalidArgument", Message="a key is <ref>/<path>")
            continue
        by_ref.setdefault(ref, []).append(path)

    def delete_all() -> list[tuple[str, LakectlError | None]]:
        outcome: list[tuple[str, LakectlError | None]] = []
        for ref, paths in by_ref.items():
            try:
                writes.delete_existing(call.lake, call.bucket, ref, paths)
                outcome.extend((f"{ref}/{path}", None) for path in paths)
            except LakectlError as exc:
                outcome.extend((f"{ref}/{path}", exc) for path in paths)
        return outcome

    for key, error in await run_in_threadpool(delete_all):
        if error is None:
            if not quiet:
                xml.add(result, "Deleted", Key=key)
        else:
            code, _ = xml.s3_code(error)
            xml.add(result, "Error", Key=key, Code=code, Message=error.message)
    return xml.document(result)
