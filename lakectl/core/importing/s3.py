"""S3 import sources (boto3): list a prefix, read an object with ``IfMatch`` on its recorded ETag.

With the block adapter (:mod:`lakectl.core.blocks.s3`), the only module that imports boto3;
botocore's exceptions become ours here. Credentials: a lake whose block store is on S3 reads
with its adapter's client (``blockstore.s3.*``, passed along as ``blocks``); otherwise boto3's
usual chain (environment, profile, instance role), endpoint from ``AWS_ENDPOINT_URL`` as boto3
honours it.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import botocore.session
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.s3 import S3Adapter, client_config
from lakectl.core.importing.protocol import CHUNK, Listed, changed
from lakectl.core.model import External
from lakectl.errors import InvalidURI, NotFound, StorageError, Unauthenticated

_lock = threading.Lock()
_chain: dict[tuple[str, ...], Any] = {}
"""Clients of boto3's usual chain, by the environment that configures them (a client resolves
its endpoint and credentials once; a changed environment gets a new one)."""
_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)


def client(blocks: BlockAdapter | None = None) -> Any:
    """The client for S3 sources of a lake whose blocks are ``blocks``: the block store's own
    (``blockstore.s3.*``: its endpoint and credentials) when it is on S3, else boto3's chain."""
    if isinstance(blocks, S3Adapter):
        return blocks.client
    env = tuple(os.environ.get(k, "") for k in _ENV)
    with _lock:
        if env not in _chain:
            # A session of its own: boto3's default session caches the credentials it found first.
            try:
                _chain[env] = _session().client("s3", config=client_config())
            except (BotoCoreError, ValueError) as exc:
                raise StorageError(f"cannot create an S3 client: {exc}") from exc
        return _chain[env]


def _session() -> Any:
    """A boto3 session whose clients keep timestamps as the text S3 sent. botocore parses each
    with dateutil, about 100 us an object: most of the client's time in a listing of 1,000
    objects. The listing reads the one timestamp it needs itself (:func:`_seconds`)."""
    core = botocore.session.get_session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
    return boto3.session.Session(botocore_session=core)


def _seconds(stamp: Any) -> int:
    """Seconds since the epoch of a listing's ``LastModified``: ISO 8601 text (as S3 sends it,
    ``2026-11-25T18:44:00.000Z``) or the datetime of a client that parses timestamps."""
    if isinstance(stamp, str):
        return int(datetime.fromisoformat(stamp).timestamp())
    return int(stamp.timestamp())


def split(uri: str) -> tuple[str, str]:
    rest = uri[len("s3://") :]
    bucket, _, key = rest.partition("/")
    return bucket, key


@dataclass(frozen=True, slots=True)
class S3Source:
    uri: str
    bucket: str
    prefix: str
    blocks: BlockAdapter | None = field(default=None, compare=False, repr=False)
    """The lake's block store, whose client reads the source when it is on S3."""

    def list(self) -> Iterator[Listed]:
        # S3 lists keys in UTF-8 byte order, which is code-point order: the lake's path order.
        for page in _prefetched(self._pages()):
            for item in page.get("Contents", ()):
                key = item["Key"]
                if key.endswith("/") and item["Size"] == 0:
                    continue  # a "directory marker", no object
                etag = str(item["ETag"]).strip('"')
                ext = External(f"s3://{self.bucket}/{key}", etag)
                yield key[len(self.prefix) :], int(item["Size"]), ext, _seconds(item["LastModified"])

    def _pages(self) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix, "MaxKeys": 1000}
            if token:
                kwargs["ContinuationToken"] = token
            page = _call(self.uri, client(self.blocks).list_objects_v2, kwargs)
            yield page
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")


PREFETCH = 2
"""Listing pages fetched ahead of the one being imported: the server lists the next page while
this process builds the rows of the last one."""


def _prefetched(pages: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``pages``, fetched by a thread of their own up to :data:`PREFETCH` pages ahead; what the
    fetch raised is raised here, in order. Stopping early (the import cancelled) stops the
    fetching within a page."""
    ahead: queue.Queue[tuple[str, Any]] = queue.Queue(PREFETCH)
    stop = threading.Event()

    def offer(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def fetch() -> None:
        try:
            for page in pages:
                if not offer(("page", page)):
                    return
            offer(("end", None))
        except BaseException as exc:  # handed to the consumer, in order
            offer(("error", exc))

    thread = threading.Thread(target=fetch, name="s3-listing", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = ahead.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def parse(uri: str, blocks: BlockAdapter | None = None) -> S3Source:
    bucket, prefix = split(uri)
    if not bucket or any(ord(c) < 0x20 for c in uri):
        raise InvalidURI(f"invalid import source {uri!r}: expected s3://bucket/prefix")
    return S3Source(uri, bucket, prefix, blocks)


def _call(uri: str, fn: Any, kwargs: dict[str, Any]) -> Any:
    try:
        return fn(**kwargs)
    except NoCredentialsError as exc:
        raise Unauthenticated(f"no AWS credentials to read {uri}: set them as the AWS CLI expects") from exc
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchBucket", "404", "NotFound"):
            raise NotFound(f"import source {uri!r}: no such bucket") from exc
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
            raise Unauthenticated(f"cannot list {uri}: {code}") from exc
        raise StorageError(f"cannot list {uri}: {exc}") from exc
    except (BotoCoreError, OSError) as exc:
        raise StorageError(f"cannot list {uri}: {exc}") from exc


def read(
    ext: External, size: int, offset: int, end: int, blocks: BlockAdapter | None = None
) -> Iterator[bytes]:
    """The bytes ``[offset, end)`` of the object, only while its ETag is the recorded one."""
    bucket, key = split(ext.address)
    if end <= offset:
        _get(ext, bucket, key, None, size, size, blocks).close()  # still checks the version exists
        return iter(())
    body = _get(ext, bucket, key, f"bytes={offset}-{end - 1}", end - offset, size, blocks)
    return _stream(ext, body)


def _get(
    ext: External, bucket: str, key: str, rng: str | None, want: int, size: int, blocks: BlockAdapter | None
) -> Any:
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "IfMatch": f'"{ext.etag}"'}
    if rng is not None:
        kwargs["Range"] = rng
    try:
        response = client(blocks).get_object(**kwargs)
    except NoCredentialsError as exc:
        raise Unauthenticated(f"no AWS credentials to read {ext.address}") from exc
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("PreconditionFailed", "412"):
            raise changed(ext, "its ETag is no longer the imported one") from exc
        if code in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
            raise changed(ext, "no such object") from exc
        raise StorageError(f"cannot read imported object at {ext.address}: {exc}") from exc
    except (BotoCoreError, OSError) as exc:
        raise StorageError(f"cannot read imported object at {ext.address}: {exc}") from exc
    body = response["Body"]
    total = _total(response)
    if response.get("ContentLength") != want or (total is not None and total != size):
        body.close()
        raise changed(ext, "its size is no longer the imported one")
    return body


def _total(response: dict[str, Any]) -> int | None:
    rng = response.get("ContentRange")
    if rng and "/" in rng:
        tail = rng.rsplit("/", 1)[1]
        return int(tail) if tail.isdigit() else None
    return None


def _stream(ext: External, body: Any) -> Iterator[bytes]:
    try:
        while True:
            try:
                data = body.read(CHUNK)
            except (BotoCoreError, OSError) as exc:
                raise StorageError(f"cannot read imported object at {ext.address}: {exc}") from exc
            if not data:
                return
            yield data
    finally:
        body.close()
