"""Multipart uploads over S3: Create, UploadPart, UploadPartCopy, Complete, Abort, ListParts and
ListMultipartUploads, on :mod:`lakectl.core.multipart`."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from lakectl.core import multipart as mp
from lakectl.errors import InvalidArgument, InvalidRange, UploadNotFound
from server.api.ranges import Unsatisfiable, parse_range
from server.s3 import body, xml
from server.s3.call import Call
from server.s3.objects import content_type, source_entry, user_metadata

MAX_PARTS_LISTED = 1000


def _upload(call: Call) -> mp.Upload:
    """The upload of ``?uploadId``, which must be for the request's key."""
    upload = mp.get(call.lake, call.bucket, call.query.get("uploadId", ""))
    if f"{upload.branch}/{upload.path}" != call.key:
        raise UploadNotFound(f"upload {upload.id} is not for key {call.key!r}", upload_id=upload.id)
    return upload


def _part_number(call: Call) -> int:
    text = call.query.get("partNumber", "")
    if not text.isdigit() or len(text) > 5:
        raise InvalidArgument(
            f"partNumber must be a whole number from 1 to {mp.MAX_PART_NUMBER}, not {text!r}"
        )
    return int(text)


async def create(call: Call) -> Response:
    ref, path = call.split_key()
    upload = mp.create(call.lake, call.bucket, ref, path, content_type(call), user_metadata(call))
    root = xml.element("InitiateMultipartUploadResult", Bucket=call.bucket, Key=call.key, UploadId=upload.id)
    return xml.document(root)


async def upload_part(call: Call) -> Response:
    upload, number = _upload(call), _part_number(call)
    async with body.payload(call) as (received, source):
        await run_in_threadpool(mp.put_part, call.lake, call.bucket, upload.id, number, source, received.md5)
    headers = {"ETag": f'"{received.md5}"'}
    if received.checksum is not None:
        headers[received.checksum[0]] = received.checksum[1]
    return Response(status_code=200, headers=headers)


async def upload_part_copy(call: Call) -> Response:
    upload, number = _upload(call), _part_number(call)
    source = source_entry(call)
    start, end = 0, source.size
    range_ = call.headers.get("x-amz-copy-source-range")
    if range_:
        try:
            start, end = parse_range(range_, source.size)
        except Unsatisfiable as exc:
            raise InvalidRange(f"x-amz-copy-source-range is not satisfiable: {exc}") from None
    part = await run_in_threadpool(
        mp.copy_part, call.lake, call.bucket, upload.id, number, source, start, end
    )
    root = xml.element("CopyPartResult", ETag=f'"{part.etag}"', LastModified=xml.iso(part.last_modified))
    return xml.document(root)


async def complete(call: Call) -> Response:
    upload = _upload(call)
    payload = bytearray()
    await body.receive(call, payload.extend, limit=2 * 1024 * 1024, object_checksums=False)
    root = xml.parse(bytes(payload), "CompleteMultipartUpload")
    chosen = []
    for part in xml.children(root, "Part"):
        number, etag = xml.child_text(part, "PartNumber"), xml.child_text(part, "ETag")
        if number is None or not number.strip().isdigit() or etag is None:
            raise InvalidArgument("each <Part> needs a <PartNumber> and an <ETag>")
        chosen.append((int(number), etag))
    info = await run_in_threadpool(mp.complete, call.lake, call.bucket, upload.id, chosen)
    assert info.entry is not None
    result = xml.element(
        "CompleteMultipartUploadResult",
        Location=f"/{call.bucket}/{call.key}",
        Bucket=call.bucket,
        Key=call.key,
        ETag=f'"{info.entry.checksum}"',
    )
    return xml.document(result)


async def abort(call: Call) -> Response:
    upload = _upload(call)
    mp.abort(call.lake, call.bucket, upload.id)
    return Response(status_code=204)


def _whole(text: str, name: str, default: int) -> int:
    if not text:
        return default
    if not text.isdigit() or len(text) > 9:
        raise InvalidArgument(f"{name} must be a whole number, not {text!r}")
    return int(text)


async def list_parts(call: Call) -> Response:
    upload = _upload(call)
    marker = _whole(call.query.get("part-number-marker", ""), "part-number-marker", 0)
    most = min(_whole(call.query.get("max-parts", ""), "max-parts", MAX_PARTS_LISTED), MAX_PARTS_LISTED)
    parts = [part for part in mp.list_parts(call.lake, call.bucket, upload.id) if part.number > marker]
    shown, truncated = parts[:most], len(parts) > most
    root = xml.element(
        "ListPartsResult",
        Bucket=call.bucket,
        Key=call.key,
        UploadId=upload.id,
        PartNumberMarker=marker,
        NextPartNumberMarker=shown[-1].number if shown else marker,
        MaxParts=most,
        IsTruncated=truncated,
    )
    for part in shown:
        xml.add(
            root,
            "Part",
            PartNumber=part.number,
            LastModified=xml.iso(part.last_modified),
            ETag=f'"{part.etag}"',
            Size=part.size,
        )
    return xml.document(root)


async def list_uploads(call: Call) -> Response:
    prefix = call.query.get("prefix", "")
    most = min(_whole(call.query.get("max-uploads", ""), "max-uploads", 1000), 1000)
    key_marker, id_marker = call.query.get("key-marker", ""), call.query.get("upload-id-marker", "")
    uploads = sorted(
        (f"{u.branch}/{u.path}", u.id, u)
        for u in mp.list_uploads(call.lake, call.bucket)
        if f"{u.branch}/{u.path}".startswith(prefix)
    )
    # After the marker key; with an upload id marker, also the marker key's later uploads.
    uploads = [
        u for u in uploads if u[0] > key_marker or (id_marker and u[0] == key_marker and u[1] > id_marker)
    ]
    shown, truncated = uploads[:most], len(uploads) > most
    root = xml.element(
        "ListMultipartUploadsResult",
        Bucket=call.bucket,
        KeyMarker=key_marker,
        UploadIdMarker=id_marker,
        NextKeyMarker=shown[-1][0] if truncated else None,
        NextUploadIdMarker=shown[-1][1] if truncated else None,
        Prefix=prefix,
        MaxUploads=most,
        IsTruncated=truncated,
    )
    for key, upload_id, upload in shown:
        xml.add(
            root,
            "Upload",
            Key=key,
            UploadId=upload_id,
            Initiated=xml.iso(upload.initiated),
            StorageClass="STANDARD",
        )
    return xml.document(root)
