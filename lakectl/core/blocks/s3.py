"""A block adapter on S3-compatible object storage (boto3): Content-MD5 puts, verified reads.

Blocks are objects ``<prefix><md5[:3]>/<md5>``. This is the only module that imports boto3 or
botocore; their exceptions become ``BlockNotFound``/``StorageError`` here, raised ``from`` them.

Cost of verification: the protocol promises that every read checks the md5 of the whole
block, and S3 cannot check a ranged GET for us. So ``get`` always downloads the whole block,
verifies it, then slices: a 10-byte read of a 64 MiB block moves 64 MiB. Small objects are
packed into blocks of at most 1 MiB (decision 0003) and large readers read whole blocks, so
the overhead lands on rare random access into large blocks.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Iterator
from typing import Any, Final, cast

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lakectl.core.blocks.locator import parse_locator
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    StorageError,
)

__all__ = ["S3Adapter"]

_KEY_TAIL: Final = re.compile(r"([0-9a-f]{3})/([0-9a-f]{32})")
_BUCKET: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")
_NOT_FOUND_CODES: Final = frozenset({"NoSuchKey", "NotFound", "404"})
# S3 answers a wrong Content-MD5 with BadDigest (and a malformed one with InvalidDigest).
_DIGEST_CODES: Final = frozenset({"BadDigest", "InvalidDigest"})

# botocore's errors while sending or streaming, and the socket errors some paths let through.
_TRANSPORT_ERRORS: Final = (BotoCoreError, OSError)


def _split(locator: str) -> tuple[str, int]:
    """Validate a bare locator ``<md5>+<size>`` before any key is built from it."""
    parsed = parse_locator(locator)
    if parsed.hints or parsed.size is None:
        raise InvalidLocator(f"not a bare block locator: {locator!r}", locator=repr(locator))
    return parsed.md5, parsed.size


def _code(exc: Any) -> str:
    """The S3 error code of a botocore ``ClientError`` (HEAD errors carry only the status)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


class S3Adapter:
    """Blocks as objects in one bucket, under an optional key prefix.

    Pass a ready boto3 S3 client, or the connection settings to build one (path-style
    addressing, standard retries, and checksums only when required: the Content-MD5 sent with
    every put already makes S3 verify the bytes against the locator). ``sync`` is a no-op: S3
    acknowledges a put only once it is durable. The bucket must exist.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        profile: str | None = None,
        credentials_file: str | None = None,
        max_attempts: int = 3,
        list_page_size: int = 1000,
    ) -> None:
        if not isinstance(bucket, str) or _BUCKET.fullmatch(bucket) is None:
            raise InvalidArgument(f"invalid bucket name {bucket!r}")
        if not isinstance(prefix, str) or any(ord(c) < 0x20 or c == "\x7f" for c in prefix):
            raise InvalidArgument(f"invalid key prefix {prefix!r}")
        if prefix and not prefix.endswith("/"):
            prefix += "/"  # "blocks" must not also list "blocks2/..."
        if not 1 <= list_page_size <= 1000:
            raise InvalidArgument(f"list_page_size must be 1..1000, got {list_page_size}")
        settings = (
            endpoint_url,
            region,
            access_key_id,
            secret_access_key,
            session_token,
            profile,
            credentials_file,
        )
        if client is not None and any(s is not None for s in settings):
            raise InvalidArgument("pass either a client or connection settings, not both")
        self.bucket = bucket
        self.prefix = prefix
        self.list_page_size = list_page_size
        self._client: Any = client if client is not None else _new_client(*settings, max_attempts)

    @property
    def client(self) -> Any:
        """The boto3 client (zero-copy import reads its sources with the same credentials)."""
        return self._client

    def __repr__(self) -> str:
        return f"S3Adapter({self.bucket!r}, {self.prefix!r})"

    def _key(self, md5: str) -> str:
        return f"{self.prefix}{md5[:3]}/{md5}"

    def put(self, locator: str, data: bytes | memoryview) -> None:
        """Store the block with PutObject (atomic), unless an intact copy is already there.

        An object of the block's key is intact when its size is the locator's and its ETag (the
        md5 S3 computed of the bytes it stored, for a single PutObject) is the locator's md5:
        that costs a HeadObject and, to refresh its LastModified for GC, a server-side copy.
        Any other object under the key (rotten, truncated, or with an ETag that is no md5, as
        with SSE-KMS) is overwritten. Content-MD5 is the locator's md5, so S3 refuses bytes that
        do not match the locator (``CorruptBlock``); the size is checked here before anything
        is sent.
        """
        md5, size = _split(locator)
        if len(data) != size:
            raise InvalidLocator(f"locator {locator} names {size} bytes, got {len(data)}", locator=locator)
        head = self._head(locator)
        if head is not None and _intact(head, md5, size) and self._refresh(locator):
            return
        content_md5 = base64.b64encode(bytes.fromhex(md5)).decode("ascii")
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=self._key(md5), Body=bytes(data), ContentMD5=content_md5
            )
        except ClientError as exc:
            if _code(exc) in _DIGEST_CODES:
                message = f"S3 refused block {locator}: its bytes do not match its md5"
                raise CorruptBlock(message, locator=locator) from exc
            raise self._storage_error("cannot write", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot write", locator, exc) from exc

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        """Return the block (or a slice) after downloading and checking the whole block."""
        md5, size = _split(locator)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidArgument(f"bad range offset={offset} length={length}", locator=locator)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self._key(md5))
            body = response["Body"]
            try:
                stored = response.get("ContentLength")
                if stored is not None and stored != size:  # do not download the wrong object
                    raise CorruptBlock(f"block {locator} has {stored} bytes in S3", locator=locator)
                data = cast(bytes, body.read())
            finally:
                body.close()
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                raise BlockNotFound(f"no block {locator}", locator=locator) from exc
            raise self._storage_error("cannot read", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot read", locator, exc) from exc
        if len(data) != size or hashlib.md5(data).hexdigest() != md5:
            raise CorruptBlock(f"block {locator} does not match its locator", locator=locator)
        if offset == 0 and (length is None or length >= size):
            return data
        end = size if length is None else offset + length
        return data[offset:end]

    def get_part(self, locator: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` by a ranged GetObject, unverified
        (:class:`~lakectl.core.blocks.HasParts`)."""
        md5, _ = _split(locator)
        if length <= 0:
            return b""
        try:
            response = self._client.get_object(
                Bucket=self.bucket, Key=self._key(md5), Range=f"bytes={offset}-{offset + length - 1}"
            )
            body = response["Body"]
            try:
                return cast(bytes, body.read())
            finally:
                body.close()
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                raise BlockNotFound(f"no block {locator}", locator=locator) from exc
            if _code(exc) == "InvalidRange":  # a stored object shorter than the range: rotten
                return b""
            raise self._storage_error("cannot read", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot read", locator, exc) from exc

    def exists(self, locator: str) -> bool:
        """True when an object of the locator's size is stored (HeadObject; content is checked on read)."""
        _, size = _split(locator)
        head = self._head(locator)
        return head is not None and head.get("ContentLength") == size

    def touch(self, locator: str) -> bool:
        """A copy of the object onto itself with new metadata: S3's way to refresh LastModified."""
        return self.exists(locator) and self._refresh(locator)

    def _head(self, locator: str) -> dict[str, Any] | None:
        """HeadObject of the block's key; None when there is no such object."""
        md5, _ = _split(locator)
        try:
            return cast(dict[str, Any], self._client.head_object(Bucket=self.bucket, Key=self._key(md5)))
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                return None
            raise self._storage_error("cannot stat", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot stat", locator, exc) from exc

    def storage_class(self, locator: str) -> str | None:
        """S3 names the class only when it is not ``STANDARD``."""
        head = self._head(locator)
        if head is None:
            raise BlockNotFound(f"no block {locator}", locator=locator)
        return str(head.get("StorageClass") or "STANDARD")

    def _refresh(self, locator: str) -> bool:
        """Copy the block's object onto itself; False when it vanished meanwhile."""
        md5, _ = _split(locator)
        key = self._key(md5)
        try:
            self._client.copy_object(
                Bucket=self.bucket,
                Key=key,
                CopySource={"Bucket": self.bucket, "Key": key},
                MetadataDirective="REPLACE",
                Metadata={"touched": str(time.time())},
            )
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                return False
            raise self._storage_error("cannot touch", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot touch", locator, exc) from exc
        return True

    def modified(self, locator: str) -> float:
        md5, _ = _split(locator)
        try:
            head = self._client.head_object(Bucket=self.bucket, Key=self._key(md5))
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                raise BlockNotFound(f"no block {locator}", locator=locator) from exc
            raise self._storage_error("cannot stat", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot stat", locator, exc) from exc
        return float(head["LastModified"].timestamp())

    def delete(self, locator: str) -> None:
        """Remove the block; absent is not an error (S3 deletes are idempotent)."""
        md5, _ = _split(locator)
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(md5))
        except ClientError as exc:
            if _code(exc) == "NoSuchKey":  # some S3-compatible servers say so; S3 answers 204
                return
            raise self._storage_error("cannot delete", locator, exc) from exc
        except _TRANSPORT_ERRORS as exc:
            raise self._storage_error("cannot delete", locator, exc) from exc

    def list(self) -> Iterator[str]:
        """Yield ``<md5>+<size>`` of every block under the prefix (ListObjectsV2, page by page).

        Keys that are not ``<prefix><md5[:3]>/<md5>`` are not blocks and are skipped.
        """
        start = len(self.prefix)
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket,
                Prefix=self.prefix,
                PaginationConfig={"PageSize": self.list_page_size},
            )
            for page in pages:
                found = []
                for item in page.get("Contents", ()):
                    match = _KEY_TAIL.fullmatch(item["Key"], start)
                    if match is not None and match.group(2).startswith(match.group(1)):
                        found.append(f"{match.group(2)}+{int(item['Size'])}")
                yield from found
        except (ClientError, *_TRANSPORT_ERRORS) as exc:
            raise StorageError(f"cannot list blocks in s3://{self.bucket}/{self.prefix}: {exc}") from exc

    def sync(self) -> None:
        """Nothing to do: S3 acknowledges a put only once the object is durably stored."""

    def _storage_error(self, action: str, locator: str, exc: Exception) -> StorageError:
        where = f"s3://{self.bucket}/{self.prefix}"
        return StorageError(f"{action} block {locator} in {where}: {exc}", locator=locator)


def _intact(head: dict[str, Any], md5: str, size: int) -> bool:
    """Whether a HeadObject answer describes the block: its size, and its md5 as the ETag."""
    etag = str(head.get("ETag", "")).strip('"')
    return head.get("ContentLength") == size and etag == md5


def _new_client(
    endpoint_url: str | None,
    region: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
    session_token: str | None,
    profile: str | None,
    credentials_file: str | None,
    max_attempts: int,
) -> Any:
    config = client_config(max_attempts)
    try:
        if profile is not None or credentials_file is not None:
            return _profile_session(profile, credentials_file).client(
                "s3", endpoint_url=endpoint_url, region_name=region, config=config
            )
        return boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
            config=config,
        )
    except (BotoCoreError, ValueError) as exc:
        raise StorageError(f"cannot create an S3 client for {endpoint_url or 'AWS'}: {exc}") from exc


def client_config(max_attempts: int = 3) -> Config:
    """The botocore settings of every S3 client of lakectl (blocks and import sources)."""
    return Config(
        s3={"addressing_style": "path"},  # works with IP endpoints and every S3-compatible server
        retries={"mode": "standard", "max_attempts": max_attempts},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )


def _profile_session(profile: str | None, credentials_file: str | None) -> Any:
    """A boto3 session reading a named profile (else the default one) from a credentials file
    (else boto3's own, ``~/.aws/credentials``), as lakeFS's ``profile`` and ``credentials_file``."""
    core = botocore.session.get_session()
    if credentials_file is not None:
        core.set_config_variable("credentials_file", credentials_file)
    return boto3.session.Session(botocore_session=core, profile_name=profile)
