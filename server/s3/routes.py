"""Which S3 operation a request is, and the permission it needs: the gateway's one routing table."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.responses import Response

from lakectl.errors import InvalidArgument
from server.policies import Permission
from server.s3 import buckets, multipart, objects

Handler = Callable[..., Awaitable[Response]]

READ, WRITE = Permission.READ_REPO, Permission.WRITE_REPO


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    """The S3 action (``GetObject``), as errors name it."""
    permission: Permission
    handler: Handler


def _op(name: str, permission: Permission, handler: Handler) -> Operation:
    return Operation(name, permission, handler)


def route(
    method: str, bucket: str, key: str, query: Mapping[str, str], headers: Mapping[str, str]
) -> Operation:
    """The operation of a request; one S3 does not have (or lakectl does not serve) is a
    ``MethodNotAllowed``-style InvalidArgument naming it."""
    if not bucket:
        if method == "GET":
            return _op("ListBuckets", READ, buckets.list_buckets)
        raise InvalidArgument(f"{method} / is not an S3 operation this gateway serves")
    if not key:
        return _bucket_route(method, bucket, query)
    copy = "x-amz-copy-source" in headers
    if method == "GET":
        if "uploadId" in query:
            return _op("ListParts", READ, multipart.list_parts)
        return _op("GetObject", READ, objects.get_object)
    if method == "HEAD":
        return _op("HeadObject", READ, objects.head_object)
    if method == "PUT":
        if "uploadId" in query or "partNumber" in query:
            if copy:
                return _op("UploadPartCopy", WRITE, multipart.upload_part_copy)
            return _op("UploadPart", WRITE, multipart.upload_part)
        if copy:
            return _op("CopyObject", WRITE, objects.copy_object)
        return _op("PutObject", WRITE, objects.put_object)
    if method == "DELETE":
        if "uploadId" in query:
            return _op("AbortMultipartUpload", WRITE, multipart.abort)
        return _op("DeleteObject", WRITE, objects.delete_object)
    if method == "POST":
        if "uploads" in query:
            return _op("CreateMultipartUpload", WRITE, multipart.create)
        if "uploadId" in query:
            return _op("CompleteMultipartUpload", WRITE, multipart.complete)
    raise InvalidArgument(f"{method} on an object with this query is not an S3 operation this gateway serves")


def _bucket_route(method: str, bucket: str, query: Mapping[str, str]) -> Operation:
    if method == "GET":
        if "location" in query:
            return _op("GetBucketLocation", READ, buckets.location)
        if "uploads" in query:
            return _op("ListMultipartUploads", READ, multipart.list_uploads)
        if "versioning" in query:
            return _op("GetBucketVersioning", READ, buckets.versioning)
        if query.get("list-type") == "2":
            return _op("ListObjectsV2", READ, buckets.list_objects_v2)
        return _op("ListObjects", READ, buckets.list_objects_v1)
    if method == "HEAD":
        return _op("HeadBucket", READ, buckets.head_bucket)
    if method == "POST" and "delete" in query:
        return _op("DeleteObjects", WRITE, objects.delete_objects)
    if method in ("PUT", "DELETE"):
        raise InvalidArgument(
            f"{method} of a bucket is not served: buckets are repositories, created and deleted with "
            "lakectl repo create/delete or the REST API"
        )
    raise InvalidArgument(f"{method} on a bucket is not an S3 operation this gateway serves")
