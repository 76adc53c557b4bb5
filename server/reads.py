"""Answering an object's bytes, for the REST API and the S3 gateway alike.

Small objects on local disk are read on the event loop and sent in one response; anything else
is streamed, its blocks read in the thread pool (docs/decisions/0007).

A streamed answer reads and verifies its first block before the status line goes out, so
damage there (or a lost block) is a proper error response (503). Damage found in a later block,
after the 200 was sent, can no longer change the status: the stream raises, and the server
closes the connection short of the declared ``Content-Length``, which every HTTP client reports
as a failed read, never as a complete short body.
"""

from __future__ import annotations

from collections.abc import Iterator

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from lakectl.core import porcelain as p
from lakectl.core import reads
from lakectl.core.blocks.data import parse_segment
from lakectl.core.lake import Lake

INLINE_READ = 1024 * 1024
"""Objects whose blocks total at most this are read on the event loop, in one response."""


def etag_matches(header: str, checksum: str) -> bool:
    """Whether an ``If-Match`` / ``If-None-Match`` list names the checksum (or is ``*``)."""
    tags = [t.strip().removeprefix("W/").strip('"') for t in header.split(",")]
    return "*" in tags or checksum in tags


async def object_body(
    lake: Lake,
    found: reads.ObjectRead,
    start: int,
    end: int,
    status: int,
    headers: dict[str, str],
    inline_reads: bool,
    media_type: str | None = None,
) -> Response:
    """Bytes ``[start, end)`` of the entry. Inline when every block it touches (each read whole,
    to verify its md5) totals at most :data:`INLINE_READ` and blocks are local; else streamed,
    once its first block read back intact (an error raised here becomes the error response).
    An audited read is recorded first, in the thread pool (a journal write), never per block."""
    entry = found.entry
    external = entry.external is not None  # an imported object: its source is read off the loop
    if reads.audited(lake) or external:
        chunks = await run_in_threadpool(p.read_opened, lake, found, start, end - start)
    else:
        chunks = p.read_opened(lake, found, start, end - start)
    touched = sum(size for _, size, _, _ in map(parse_segment, entry.locators))
    if inline_reads and not external and touched <= INLINE_READ:
        return Response(b"".join(chunks), status_code=status, headers=headers, media_type=media_type)
    first = await run_in_threadpool(next, chunks, b"")
    return StreamingResponse(
        _after(first, chunks), status_code=status, headers=headers, media_type=media_type
    )


def _after(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest
