"""Request bodies of the S3 gateway: decoded (plain or aws-chunked) and verified as they arrive.

Whatever the payload mode, a body is accepted only whole and only if every claim about it holds:
the signed sha256 (``x-amz-content-sha256``), per-chunk signatures, ``Content-MD5``, and an
``x-amz-checksum-<algorithm>`` header or trailer. The caller writes what it receives somewhere
private (a spool file) and stores nothing visible unless :func:`receive` returns.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from tempfile import SpooledTemporaryFile
from typing import BinaryIO, cast

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from lakectl.core.model import BLOCK_SIZE
from lakectl.errors import BadDigest, InvalidArgument
from server.s3 import chunked, sigv4
from server.s3.call import Call

MAX_PUT = 5 * 1024**3
"""The largest single PutObject or UploadPart, as S3."""
SPOOL_BYTES = 8 * 1024 * 1024
"""Bodies larger than a block are spooled: in memory up to this size, then in a temporary file."""

Sink = Callable[[bytes | memoryview], object]


@dataclass(frozen=True, slots=True)
class Received:
    size: int
    md5: str
    """Hex md5 of the decoded body: the object's ETag for a single upload."""
    checksum: tuple[str, str] | None
    """The verified ``(header name, base64 value)`` of an ``x-amz-checksum-*`` claim, to echo."""


async def receive(
    call: Call,
    sink: Sink,
    limit: int = MAX_PUT,
    object_checksums: bool = True,
    whole: memoryview | None = None,
) -> Received:
    """Read the whole body into ``sink``, verifying every claim about it; raise ``BadDigest``
    (or a signature or framing error) otherwise, and ``InvalidArgument`` if it is cut short.
    ``object_checksums=False`` for a request whose ``x-amz-checksum-*`` headers describe the
    object being assembled, not this body (CompleteMultipartUpload). ``whole``: the buffer
    ``sink`` fills with the entire body; its digests are then computed once it has arrived, in
    parallel in the thread pool, rather than piece by piece on the event loop."""
    headers, verified = call.headers, call.verified
    md5 = hashlib.md5()
    claim = chunked.checksum_header(headers) if object_checksums else None
    trailer_names = [n.strip().lower() for n in headers.get("x-amz-trailer", "").split(",") if n.strip()]
    algorithm = claim[0] if claim else _trailer_algorithm(trailer_names) if object_checksums else None
    checksum = chunked.Checksum.of(algorithm) if algorithm else None
    sha256 = hashlib.sha256() if verified.payload is sigv4.PayloadMode.SIGNED else None
    decoder = _decoder(call, verified, trailer_names)
    size = 0

    def take(piece: bytes | memoryview) -> None:
        nonlocal size
        size += len(piece)
        if size > limit:
            raise InvalidArgument(f"the body is larger than {limit} bytes, the most one request may carry")
        if whole is None:
            md5.update(piece)
            if checksum is not None:
                checksum.update(piece)
        sink(piece)

    try:
        async for chunk in call.request.stream():
            if decoder is None:
                if sha256 is not None and whole is None:
                    sha256.update(chunk)
                take(chunk)
            else:
                for piece in decoder.feed(chunk):
                    take(piece)
    except ClientDisconnect:
        raise InvalidArgument("the upload was interrupted: the body did not arrive whole") from None
    trailers = decoder.finish() if decoder is not None else {}
    if whole is not None:
        # A plain body is its bytes as sent, so the signed sha256 covers the buffer too.
        digests = [d for d in (md5, sha256 if decoder is None else None, checksum) if d is not None]
        data = whole[:size]
        await asyncio.gather(*(run_in_threadpool(d.update, data) for d in digests))
    if sha256 is not None and sha256.hexdigest() != verified.expected_sha256:
        raise BadDigest("the body's sha256 does not match x-amz-content-sha256 (XAmzContentSHA256Mismatch)")
    _check_content_md5(headers.get("content-md5"), md5.digest())
    verified_checksum = None
    if checksum is not None and algorithm is not None:
        name = f"x-amz-checksum-{algorithm}"
        expected = claim[1] if claim else trailers.get(name)
        if expected is None:
            raise InvalidArgument(f"the trailer {name} was announced but not sent")
        if checksum.b64digest() != expected:
            raise BadDigest(f"the {algorithm.upper()} you specified did not match the calculated checksum")
        verified_checksum = (name, expected)
    return Received(size, md5.hexdigest(), verified_checksum)


@contextlib.asynccontextmanager
async def payload(call: Call) -> AsyncIterator[tuple[Received, memoryview | BinaryIO]]:
    """The verified body, and where it is: a body that fits one block (known length) in one
    buffer (a pooled one above 1 MiB), whose md5 computed on arrival names the block, so it is
    never hashed again; a larger one, or one of unknown length, in a spool file."""
    size = _length(call)
    if size is not None and size <= BLOCK_SIZE:
        async with call.buffers.lease(size) as view:
            filled = 0

            def fill(piece: bytes | memoryview) -> None:
                nonlocal filled
                view[filled : filled + len(piece)] = piece
                filled += len(piece)

            received = await receive(call, fill, limit=size, whole=view)
            if received.size != size:
                raise InvalidArgument(f"the body ended after {received.size} of its {size} bytes")
            yield received, view
        return
    with SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        received = await receive(call, spool.write)
        spool.seek(0)
        yield received, cast(BinaryIO, spool)


def _length(call: Call) -> int | None:
    """The decoded body's announced length: ``x-amz-decoded-content-length`` for aws-chunked
    bodies, else ``Content-Length``; None when neither is a number."""
    text = call.headers.get("x-amz-decoded-content-length") or call.headers.get("content-length")
    return int(text) if text is not None and text.isdigit() and len(text) <= 20 else None


def _decoder(
    call: Call, verified: sigv4.Verified, trailer_names: list[str]
) -> chunked.AwsChunkedDecoder | None:
    streaming = verified.payload in (
        sigv4.PayloadMode.STREAMING_SIGNED,
        sigv4.PayloadMode.STREAMING_SIGNED_TRAILER,
        sigv4.PayloadMode.STREAMING_UNSIGNED_TRAILER,
    )
    if not streaming:
        return None
    declared = call.headers.get("x-amz-decoded-content-length")
    if declared is not None and not declared.isdigit():
        raise InvalidArgument(f"x-amz-decoded-content-length must be a whole number, not {declared!r}")
    return chunked.AwsChunkedDecoder(
        signer=verified.chunk_signer,
        decoded_length=int(declared) if declared is not None else None,
        trailer_names=trailer_names,
    )


def _trailer_algorithm(trailer_names: list[str]) -> str | None:
    for name in trailer_names:
        if name.startswith("x-amz-checksum-"):
            return name.removeprefix("x-amz-checksum-")
    return None


def _check_content_md5(header: str | None, digest: bytes) -> None:
    if header is None:
        return
    try:
        claimed = base64.b64decode(header.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"Content-MD5 {header!r} is not base64 (InvalidDigest)") from None
    if len(claimed) != 16:
        raise InvalidArgument(f"Content-MD5 {header!r} is not an md5 digest (InvalidDigest)")
    if claimed != digest:
        raise BadDigest("the Content-MD5 you specified did not match what was received")
