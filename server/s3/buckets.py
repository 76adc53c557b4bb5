"""Bucket operations of the S3 gateway: ListBuckets, HeadBucket, location, and object listings.

A bucket's keys are ``<ref>/<path>``. Within a ref (the prefix names one, up to its first
``/``), a listing is the ref's object listing. Above refs, the branches are the top level:
with delimiter ``/`` they are the common prefixes (``main/``, ``dev/``), as ``aws s3 ls
s3://repo/`` shows them; without one, every object of every matching branch is listed.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from itertools import islice
from xml.etree.ElementTree import Element

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from lakectl.core import listing
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.core.model import ObjectInfo, PathType
from lakectl.errors import InvalidArgument, NotFound, RepositoryNotFound
from server.policies import Permission
from server.s3 import xml
from server.s3.call import Call

MAX_KEYS = 1000
OWNER_ID = "lakectl"

Item = tuple[str, ObjectInfo]
"""A listed key with its object, or a common prefix (``path_type`` says which)."""


async def list_buckets(call: Call) -> Response:
    root = xml.element("ListAllMyBucketsResult")
    xml.add(root, "Owner", ID=OWNER_ID, DisplayName=call.user.id)
    found = xml.add(root, "Buckets")
    for repo in p.list_repos(call.lake):
        if not call.user.allows(Permission.READ_REPO, repo.name):  # only the buckets it may read
            continue
        xml.add(found, "Bucket", Name=repo.name, CreationDate=xml.iso(repo.creation_date))
    return xml.document(root)


async def head_bucket(call: Call) -> Response:
    p.get_repo(call.lake, call.bucket)
    return Response(status_code=200, headers={"x-amz-bucket-region": call.settings.region})


async def location(call: Call) -> Response:
    p.get_repo(call.lake, call.bucket)
    root = xml.element("LocationConstraint")
    # us-east-1 is the empty constraint in S3's answer; other regions are named.
    root.text = "" if call.settings.region == "us-east-1" else call.settings.region
    return xml.document(root)


async def versioning(call: Call) -> Response:
    """Versions are commits, not S3 object versions: S3 versioning is reported as never enabled."""
    p.get_repo(call.lake, call.bucket)
    return xml.document(xml.element("VersioningConfiguration"))


def _max_keys(call: Call) -> int:
    text = call.query.get("max-keys", str(MAX_KEYS))
    if not text.isdigit():
        raise InvalidArgument(f"max-keys must be a whole number, not {text!r}")
    return min(int(text), MAX_KEYS)


def _url(call: Call) -> bool:
    kind = call.query.get("encoding-type", "")
    if kind not in ("", "url"):
        raise InvalidArgument(f"invalid encoding-type {kind!r}: only url is supported")
    return kind == "url"


async def list_objects_v2(call: Call) -> Response:
    prefix, delimiter = call.query.get("prefix", ""), call.query.get("delimiter", "")
    max_keys, url = _max_keys(call), _url(call)
    token = call.query.get("continuation-token")
    start_after = call.query.get("start-after", "")
    after = max(_decode_token(token), start_after) if token is not None else start_after
    items, truncated = await _page(call, prefix, delimiter, after, max_keys)
    root = xml.element("ListBucketResult", Name=call.bucket, Prefix=xml.encode_key(prefix, url))
    if delimiter:
        xml.add_text(root, "Delimiter", xml.encode_key(delimiter, url))
    xml.add_text(root, "MaxKeys", max_keys)
    if url:
        xml.add_text(root, "EncodingType", "url")
    xml.add_text(root, "KeyCount", len(items))
    xml.add_text(root, "IsTruncated", truncated)
    if token is not None:
        xml.add_text(root, "ContinuationToken", token)
    if truncated:
        xml.add_text(root, "NextContinuationToken", _encode_token(items[-1][0]))
    if start_after:
        xml.add_text(root, "StartAfter", xml.encode_key(start_after, url))
    _add_items(root, items, url, owner=call.user.id if call.query.get("fetch-owner") == "true" else None)
    return xml.document(root)


async def list_objects_v1(call: Call) -> Response:
    prefix, delimiter = call.query.get("prefix", ""), call.query.get("delimiter", "")
    max_keys, url = _max_keys(call), _url(call)
    marker = call.query.get("marker", "")
    items, truncated = await _page(call, prefix, delimiter, marker, max_keys)
    root = xml.element(
        "ListBucketResult",
        Name=call.bucket,
        Prefix=xml.encode_key(prefix, url),
        Marker=xml.encode_key(marker, url),
        MaxKeys=max_keys,
    )
    if delimiter:
        xml.add_text(root, "Delimiter", xml.encode_key(delimiter, url))
    if url:
        xml.add_text(root, "EncodingType", "url")
    xml.add_text(root, "IsTruncated", truncated)
    if truncated:
        xml.add_text(root, "NextMarker", xml.encode_key(items[-1][0], url))
    _add_items(root, items, url, owner=call.user.id)
    return xml.document(root)


def _add_items(root: Element, items: list[Item], url: bool, owner: str | None) -> None:
    for key, info in items:
        if info.path_type is PathType.COMMON_PREFIX:
            xml.add(root, "CommonPrefixes", Prefix=xml.encode_key(key, url))
            continue
        entry = info.entry
        assert entry is not None
        contents = xml.add(
            root,
            "Contents",
            Key=xml.encode_key(key, url),
            LastModified=xml.iso(entry.mtime),
            ETag=f'"{entry.checksum}"',
            Size=entry.size,
            StorageClass="STANDARD",
        )
        if owner is not None:
            xml.add(contents, "Owner", ID=OWNER_ID, DisplayName=owner)


def _encode_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidArgument("the continuation token is not one this gateway issued") from None


async def _page(
    call: Call, prefix: str, delimiter: str, after: str, max_keys: int
) -> tuple[list[Item], bool]:
    """Up to ``max_keys`` items after ``after``, and whether more follow (read in the pool)."""
    if max_keys == 0:
        p.get_repo(call.lake, call.bucket)
        return [], False

    def read() -> list[Item]:
        return list(islice(_listing(call, prefix, delimiter, after), max_keys + 1))

    items = await run_in_threadpool(read)
    return items[:max_keys], len(items) > max_keys


def _listing(call: Call, prefix: str, delimiter: str, after: str) -> Iterator[Item]:
    lake, repo = call.lake, call.bucket
    if "/" in prefix:
        ref, _, path_prefix = prefix.partition("/")
        yield from _in_ref(lake, repo, ref, path_prefix, delimiter, after)
        return
    branches = sorted(b.name for b in p.list_branches(lake, repo) if b.name.startswith(prefix))
    if delimiter == "/":
        yield from (
            (f"{b}/", ObjectInfo(f"{b}/", PathType.COMMON_PREFIX)) for b in branches if f"{b}/" > after
        )
        return
    last_common = None
    for branch in branches:
        if f"{branch}/\U0010ffff" <= after:
            continue
        for key, info in _in_ref(lake, repo, branch, "", "", after):
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut < 0:
                yield key, info
                continue
            common = key[: cut + len(delimiter)]
            if common != last_common and common > after:
                yield common, ObjectInfo(common, PathType.COMMON_PREFIX)
            last_common = common


def _in_ref(lake: Lake, repo: str, ref: str, path_prefix: str, delimiter: str, after: str) -> Iterator[Item]:
    """The ref's listing as bucket keys; a ref that does not exist lists nothing (as an empty
    prefix in S3), while a missing bucket stays an error."""
    head = f"{ref}/"
    if after >= head and not after.startswith(head):
        return
    after_path = after[len(head) :] if after.startswith(head) else ""
    try:
        for info in listing.list_objects(lake, repo, ref, path_prefix, delimiter, after_path):
            yield head + info.path, info
    except RepositoryNotFound:
        raise
    except NotFound:
        return
