"""The Keep-style block API, objects linked from blocks, and Keep manifests over HTTP.

``PUT /blocks/<md5>`` stores a block and answers its signed locator (``POST /blocks/batch`` many
small ones, made durable together); ``GET /blocks/<signed>``
(with Range) serves it after checking the signature; ``POST /blocks/missing`` says which blocks
the lake lacks and hands out challenges for the others, which ``POST /blocks/prove`` turns into
signed locators for a client that proves it holds the bytes. Signatures are bound to the user's
incarnation and its grant epoch (``User.grant_token``): every route here signs and verifies for
that token, so a signature made before the user's grants or access keys changed claims nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from lakectl.core import blockaccess, manifests
from lakectl.core.blocks.data import parse_segment
from lakectl.core.blocks.locator import parse_locator
from lakectl.core.lake import Lake
from lakectl.core.model import BLOCK_SIZE, FeedChange
from lakectl.errors import InvalidArgument
from server.api import shapes
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.api.pagination import After, Amount, Prefix, page
from server.api.ranges import Unsatisfiable, parse_range
from server.errors import error_response
from server.policies import Permission

MAX_BLOCK = BLOCK_SIZE
MAX_LOCATORS = 10_000
MAX_LINKS = 10_000
"""Objects linked by one ``objects/links`` request (and their segments, at most ``MAX_LOCATORS``
each, at most ``MAX_LINKED_SEGMENTS`` in all)."""
MAX_LINKED_SEGMENTS = 100_000
BLOCK_BUFFERS = 8
"""Block bodies received at once (64 MiB each): 512 MiB at most."""

blocks = APIRouter(route_class=AuthFirstRoute)
api = APIRouter(route_class=AuthFirstRoute)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LocatorList(_Strict):
    locators: list[str] = Field(max_length=MAX_LOCATORS)


class Proof(_Strict):
    locator: str
    nonce: str
    answer: str
    segments: list[int] | None = Field(default=None, max_length=blockaccess.MAX_RECEIPTS)
    """The lengths of the block's consecutive segments, to receipt (``put_pack``)."""


class Link(_Strict):
    path: str
    segments: list[str] = Field(max_length=MAX_LOCATORS)
    content_type: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    checksum: str | None = None
    receipt: str | None = None


class Links(_Strict):
    objects: list[Link] = Field(max_length=MAX_LINKS)


class BlockBuffers:
    """As keepstore's buffer pool: block bodies are received into at most ``count`` buffers of
    ``MAX_BLOCK`` bytes, reused by every upload. Memory stays bounded whatever the number of
    uploads in flight (the next one waits for a buffer), and a block never pays for fresh pages,
    which cost more here than the copy into them. The buffers are page-aligned (anonymous
    mappings), so that a local block store writes a block from them around the page cache
    without copying it first (:mod:`lakectl.core.blocks.directio`). Bodies of at most
    ``POOLED_MIN`` bytes get a buffer of their own."""

    POOLED_MIN = 1024 * 1024

    def __init__(self, count: int) -> None:
        self._free: list[mmap.mmap] = []
        self._slots = asyncio.Semaphore(count)

    @contextlib.asynccontextmanager
    async def lease(self, size: int) -> AsyncIterator[memoryview]:
        if size <= self.POOLED_MIN:
            yield memoryview(bytearray(size))
            return
        async with self._slots:
            buffer = self._free.pop() if self._free else mmap.mmap(-1, MAX_BLOCK)
            try:
                yield memoryview(buffer)[:size]
            finally:
                self._free.append(buffer)


def _declared_length(request: Request, limit: int) -> int | None:
    declared = request.headers.get("content-length")
    if declared is None or not declared.isdigit():
        return None
    if int(declared) > limit:
        raise InvalidArgument(f"body of {declared} bytes is larger than a block ({limit} bytes)")
    return int(declared)


async def _receive_into(request: Request, view: memoryview) -> None:
    """Fill ``view`` with the body, whose ``Content-Length`` is its size, as chunks arrive."""
    size = 0
    async for chunk in request.stream():
        end = size + len(chunk)
        if end > len(view):
            raise InvalidArgument(f"body is longer than its Content-Length ({len(view)} bytes)")
        view[size:end] = chunk
        size = end
    if size != len(view):
        raise InvalidArgument(f"body ended after {size} of its {len(view)} bytes")


async def _body(request: Request, limit: int) -> bytes | bytearray:
    """The whole body, at most ``limit`` bytes."""
    declared = _declared_length(request, limit)
    if declared is None:
        return await _chunked_body(request, limit)
    buffer = bytearray(declared)
    await _receive_into(request, memoryview(buffer))
    return buffer


async def _chunked_body(request: Request, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InvalidArgument(f"body is larger than a block ({limit} bytes)")
        parts.append(chunk)
    return b"".join(parts)


@blocks.put("/blocks/{md5}", dependencies=[require(Permission.WRITE_REPO)])
async def put_block(md5: str, request: Request, lake: LakeDep, user: UserDep) -> Response:
    """The block's signed locator, as text; with ``X-Lakectl-Segments`` (the comma-separated
    lengths of the block's consecutive segments, a client's pack) a JSON ``{"locator",
    "receipts"}``: a receipt per segment vouching for its md5 (``blockaccess.put_pack``)."""
    lengths = _segment_lengths(request.headers.get(SEGMENTS_HEADER))
    declared = _declared_length(request, MAX_BLOCK)
    if declared is None:
        data = await _chunked_body(request, MAX_BLOCK)
        stored = await run_in_threadpool(_put, lake, md5, data, user.grant_token, lengths)
    else:
        buffers: BlockBuffers = request.app.state.block_buffers
        async with buffers.lease(declared) as view:
            await _receive_into(request, view)
            stored = await run_in_threadpool(_put, lake, md5, view, user.grant_token, lengths)
    if isinstance(stored, str):
        return Response(stored + "\n", media_type="text/plain")
    return JSONResponse({"locator": stored.locator, "receipts": stored.receipts})


SEGMENTS_HEADER = "x-lakectl-segments"
BATCH_HEADER = "x-lakectl-blocks"
"""``POST /blocks/batch``: the body's blocks, ``<md5>+<size>`` each, comma-separated, in order."""


@blocks.post("/blocks/batch", dependencies=[require(Permission.WRITE_REPO)])
async def put_blocks(request: Request, lake: LakeDep, user: UserDep) -> dict[str, Any]:
    """Blocks sent one after another in one body (at most a block's size in all), named in
    order by ``X-Lakectl-Blocks``: each checked and stored as ``PUT /blocks/<md5>`` stores one,
    made durable together; ``{"locators": [signed, ...]}`` in the same order (lakectl's
    extension, for the many files of a recursive upload). With ``X-Lakectl-Segments`` (each
    block's segment lengths as ``PUT`` takes them, blocks apart by ``;``, empty for none), also
    ``"receipts"``: a list per block, a receipt per segment."""
    named = request.headers.get(BATCH_HEADER)
    if not named:
        raise InvalidArgument(f"{BATCH_HEADER} must name the body's blocks, <md5>+<size> each")
    bares = named.split(",")
    layout = request.headers.get(SEGMENTS_HEADER)
    layouts = None if layout is None else [_segment_lengths(part or None) for part in layout.split(";")]
    declared = _declared_length(request, MAX_BLOCK)
    token = user.grant_token
    if declared is None:
        data = await _chunked_body(request, MAX_BLOCK)
        stored = await run_in_threadpool(blockaccess.put_blocks, lake, bares, data, token, layouts)
    else:
        buffers: BlockBuffers = request.app.state.block_buffers
        async with buffers.lease(declared) as view:
            await _receive_into(request, view)
            stored = await run_in_threadpool(blockaccess.put_blocks, lake, bares, view, token, layouts)
    answer: dict[str, Any] = {"locators": [s.locator for s in stored]}
    if layouts is not None:
        answer["receipts"] = [s.receipts for s in stored]
    return answer


def _segment_lengths(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise InvalidArgument(f"{SEGMENTS_HEADER} must be comma-separated lengths") from None


def _put(
    lake: Any, md5: str, data: bytes | memoryview, token: str, lengths: list[int] | None
) -> str | blockaccess.Receipted:
    if lengths is None:
        return blockaccess.put_block(lake, md5, data, token)
    return blockaccess.put_pack(lake, md5, data, token, lengths)


PART_MD5_HEADER = "X-Lakectl-Part-MD5"
"""A ranged block GET's expected md5 of the range (a packed object's own checksum): the server
reads and checks the range alone instead of hashing the whole block (a lakectl extension)."""


@blocks.get("/blocks/{signed}", dependencies=[require(Permission.READ_REPO)])
def get_block(signed: str, request: Request, lake: LakeDep, user: UserDep) -> Response:
    bare = parse_locator(signed).bare
    size = int(bare.split("+")[1])
    range_ = request.headers.get("range")
    if not range_:
        return Response(
            blockaccess.get_block(lake, signed, user.grant_token), media_type="application/octet-stream"
        )
    try:
        start, end = parse_range(range_, size)
    except Unsatisfiable as e:
        response = error_response(416, "invalid_range", str(e))
        response.headers["Content-Range"] = f"bytes */{size}"
        return response
    md5 = request.headers.get(PART_MD5_HEADER, "")
    data = blockaccess.get_block(lake, signed, user.grant_token, start, end - start, md5)
    return Response(
        data,
        status_code=206,
        media_type="application/octet-stream",
        headers={"Content-Range": f"bytes {start}-{end - 1}/{size}"},
    )


@blocks.post("/blocks/missing", dependencies=[require(Permission.WRITE_REPO)])
def missing_blocks(body: LocatorList, lake: LakeDep, user: UserDep) -> dict[str, Any]:
    bares = [parse_locator(loc).bare for loc in body.locators]
    missing = blockaccess.missing_blocks(lake, bares)
    absent = set(missing)
    challenges = {b: blockaccess.challenge(lake, b, user.grant_token) for b in bares if b not in absent}
    return {"missing": missing, "challenges": challenges}


@blocks.post("/blocks/prove", dependencies=[require(Permission.WRITE_REPO)])
def prove_block(body: Proof, lake: LakeDep, user: UserDep) -> dict[str, Any]:
    """``{"locator"}``; with ``segments``, also ``receipts`` for them (as ``PUT`` gives them)."""
    token = user.grant_token
    if body.segments is None:
        return {"locator": blockaccess.prove(lake, body.locator, body.nonce, body.answer, token)}
    proven = blockaccess.prove_pack(lake, body.locator, body.nonce, body.answer, token, body.segments)
    return {"locator": proven.locator, "receipts": proven.receipts}


@api.post(
    "/repositories/{repository}/branches/{branch}/objects/link",
    status_code=201,
    dependencies=[require(Permission.WRITE_REPO)],
)
def link_object(
    repository: str, branch: str, body: Link, lake: LakeDep, user: UserDep, append: bool = False
) -> dict[str, Any]:
    """Stage an object made of signed blocks; with ``append=true`` (a lakectl extension), add
    them to the end of the object instead, which keeps its content type and metadata."""
    if not append:
        [info] = blockaccess.link_objects(lake, repository, branch, [_link(body)], user.grant_token)
    elif body.content_type is not None or body.metadata or body.checksum or body.receipt:
        raise InvalidArgument("an append keeps the object's content type and metadata: send segments only")
    else:
        segments = body.segments
        info = blockaccess.append_linked(lake, repository, branch, body.path, segments, user.grant_token)
    return shapes.object_stats(info)


@api.post(
    "/repositories/{repository}/branches/{branch}/objects/links",
    dependencies=[require(Permission.WRITE_REPO)],
)
def link_objects(repository: str, branch: str, body: Links, lake: LakeDep, user: UserDep) -> dict[str, Any]:
    """Stage many objects made of signed blocks as one change, each checked as ``objects/link``
    checks one (a client's small files, packed: one request per batch instead of per file)."""
    if sum(len(link.segments) for link in body.objects) > MAX_LINKED_SEGMENTS:
        raise InvalidArgument(f"more than {MAX_LINKED_SEGMENTS} segments in one request")
    links = [_link(link) for link in body.objects]
    infos = blockaccess.link_objects(lake, repository, branch, links, user.grant_token)
    return {"results": [shapes.object_stats(info) for info in infos]}


def _link(link: Link) -> blockaccess.Link:
    return blockaccess.Link(
        link.path, tuple(link.segments), link.content_type, link.metadata, link.checksum, link.receipt
    )


@api.get("/repositories/{repository}/refs/{ref}/objects/signed", dependencies=[require(Permission.READ_REPO)])
def signed_locators(
    repository: str, ref: str, lake: LakeDep, user: UserDep, path: str = Query(...)
) -> dict[str, Any]:
    """The object's stat plus its segments as signed locators, for parallel block downloads.
    Every block is checked to be stored (in the thread pool: one stat, or one HEAD on S3, per
    block), so that a client reading an object whose data is gone hears why (``Gone`` or
    ``MissingData``) instead of a bare missing block. This is the object's read request (its
    blocks' GETs are not): an audited read is recorded here, once."""
    from lakectl.core import porcelain, reads
    from lakectl.core.model import ObjectInfo, PathType

    found = porcelain.open_object(lake, repository, ref, path)
    info = ObjectInfo(found.path, PathType.OBJECT, found.entry)
    if found.entry.external is not None:
        # An imported object has no blocks: the client reads it through GET .../objects, which
        # checks its source's guard (and records an audited read there, once).
        return {**shapes.object_stats(info), "signed_locators": [], "external": True}
    porcelain.check_blocks(lake, repository, ref, info)
    reads.announce(lake, found)
    return {
        **shapes.object_stats(info),
        "signed_locators": _signed(lake, found.entry.locators, user.grant_token),
    }


def _signed(lake: Lake, tokens: Sequence[str], grant_token: str) -> list[str]:
    """An object's segment tokens with their blocks' locators signed for the caller (empty
    segments left out: they name no bytes to fetch)."""
    signed = []
    for token in tokens:
        bare, _, offset, length = parse_segment(token)
        if length == 0:
            continue
        loc = blockaccess.sign_locator(lake, bare, grant_token)
        signed.append(loc if ":" not in token else f"{loc}:{offset}:{length}")
    return signed


@api.get("/repositories/{repository}/refs/{ref}/manifest", dependencies=[require(Permission.READ_REPO)])
def export_manifest(
    repository: str,
    ref: str,
    lake: LakeDep,
    user: UserDep,
    prefix: str = Query(""),
    signed: bool = Query(False),
) -> Response:
    """The manifest of a tree; ``signed=true`` names blocks by locators signed for the caller, who
    may then fetch them with ``GET /blocks/<signed>`` (Spark executors do)."""
    sign = (lambda bare: blockaccess.sign_locator(lake, bare, user.grant_token)) if signed else None
    text = manifests.export_manifest(lake, repository, ref, prefix, sign)
    return Response(text, media_type="text/plain")


@api.get("/repositories/{repository}/refs/{ref}/changes", dependencies=[require(Permission.READ_REPO)])
def change_feed(
    repository: str,
    ref: str,
    lake: LakeDep,
    user: UserDep,
    since: str = Query(..., description="the commit (or ref) the range starts after"),
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
    signed: bool = Query(False),
    by_commit: bool = Query(False),
) -> dict[str, Any]:
    """lakectl's change feed (:func:`lakectl.core.feed.change_feed`), paged by path: each object
    changed under ``prefix`` after ``since`` up to ``ref``, ``insert`` or ``delete``, with the
    commit that changed it and the entry to read from ``offset``; ``signed=true`` names its
    blocks by locators signed for the caller, who may then fetch them (Spark executors do).
    ``by_commit=true``: the feed commit by commit (:func:`lakectl.core.feed.commit_feed`), paged
    by position (give ``ref`` and ``since`` as commit ids for pages of one range)."""
    from lakectl.core import feed

    token = user.grant_token

    def render(c: FeedChange) -> dict[str, Any]:
        return shapes.feed_change(c, _signed(lake, c.entry.locators, token) if signed else None)

    if not by_commit:
        changes = (c for c in feed.change_feed(lake, repository, since, ref, prefix) if c.path > after)
        return page(changes, amount, lambda c: c.path, render)
    if after and not after.isdigit():
        raise InvalidArgument(f"after {after!r}: a feed by commit pages by position (a number)")
    start = int(after) + 1 if after else 0
    numbered = list(enumerate(feed.commit_feed(lake, repository, since, ref, prefix)))[start:]
    return page(numbered, amount, lambda n: str(n[0]), lambda n: render(n[1]))


@api.post(
    "/repositories/{repository}/branches/{branch}/manifest", dependencies=[require(Permission.WRITE_REPO)]
)
async def import_manifest(
    repository: str,
    branch: str,
    request: Request,
    lake: LakeDep,
    user: UserDep,
    prefix: str = Query(""),
    replace: bool = Query(False),
) -> dict[str, Any]:
    """Stage a manifest's files; every locator must be signed for the caller (as ``objects/link``):
    a block is claimed by proof of having it, never by its md5 and size alone."""
    raw = await _body(request, MAX_BLOCK)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidArgument("a manifest must be UTF-8 text") from None
    paths = await run_in_threadpool(
        manifests.import_manifest, lake, repository, branch, prefix, text, replace, user.grant_token
    )
    return {"paths": paths}
