"""The block pipeline of :class:`~lakectl.client.remote.RemoteBackend`: uploads cut into blocks
(and small files into packs, as the embedded lake packs them), the blocks the server lacks sent
and the others proven (docs/decisions/0006), objects linked to their signed locators; downloads
fetched block by block, each md5-checked before any of its bytes is handed out."""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import mmap
import os
import queue
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO, cast
from urllib.parse import quote

import httpx

from lakectl.client import blockio, wire
from lakectl.client.protocol import PARALLELISM, NewBlocks, Progress
from lakectl.core.blocks import directio
from lakectl.core.model import BLOCK_SIZE
from lakectl.errors import BlockNotFound, IntegrityError, InvalidArgument, MissingData, StorageError

if TYPE_CHECKING:
    from lakectl.core.blocks.data import WrittenObject
    from lakectl.core.model import ObjectInfo

UPLOAD_THREADS = 4
"""Small requests in flight at once (linking objects, packs of small files)."""
PACKS_PER_REQUEST = 8
"""Packs of small files sent by one request at most (``POST /blocks/batch``), their segments'
lengths in one header of at most ``MAX_LAYOUT`` bytes."""
PACKS_IN_FLIGHT = 3 * PACKS_PER_REQUEST
"""Packs of small files (up to 1 MiB each) cut and not yet sent, at most: the server takes in
one group while the next are cut."""
LINK_BATCH = 2000
"""Small files linked by one request (``objects/links``; the server takes at most 10,000)."""
LINKS_IN_FLIGHT = 2
"""Link requests at once: the server stages one batch while the next is on its way, and the
last batches of an upload do not wait for each other."""
PROGRESS_EVERY = 64
"""Small files told to a progress callback in groups of this many, as the embedded lake's
(``lakectl.core.lake.PROGRESS_EVERY``, not imported: it would load the lake into the client)."""
LINK_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
"""A batch of links reads its packs and stages thousands of rows: more than a small request."""
MAX_LAYOUT = 8192
"""Characters of a pack's segment lengths sent in a header, at most (more: no receipts)."""
SEGMENTS_HEADER = "X-Lakectl-Segments"
"""The header of a pack's segment lengths, comma-separated (the server receipts each one)."""
SentPack = tuple[str, dict[int, str]]
"""A pack's signed locator and the server's receipts for its segments, by offset."""
Pack = tuple[str, bytes, list[int]]
"""A pack to send: its locator, its bytes and its segments' lengths."""
PACK_BYTES = 1024 * 1024
"""The largest pack of small objects (the core's ``PACK_MAX``, not imported into the client)."""
BLOCKS_IN_FLIGHT = 3
WHOLE_BATCH_BYTES = 64 * 1024 * 1024
"""Bytes of files of one block each read, asked about and linked together."""
PUT_BATCH_BYTES = 16 * 1024 * 1024
PUT_BATCH_BLOCKS = 128
"""Blocks sent by one ``POST /blocks/batch`` at most (its header names each in ~45 bytes)."""
BATCH_HEADER = "X-Lakectl-Blocks"
"""Large blocks being hashed and sent, or fetched, at once. Three keep the network and the
hashing on both sides busy. More contend for the CPUs and hold more 64 MiB buffers: 1 GiB over
loopback on 2 cores went from ~255 MB/s with 4 to ~285 MB/s with 2 or 3."""


_LIMIT = threading.local()
"""The gate of the transfer a thread works for (:func:`limited`), None outside one."""


class _Gate:
    """At most ``size`` requests at once, from every thread of one transfer."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._turns = threading.BoundedSemaphore(size)

    def __enter__(self) -> None:
        self._turns.acquire()

    def __exit__(self, *exc: object) -> None:
        self._turns.release()


@contextlib.contextmanager
def limited(parallelism: int) -> Iterator[None]:
    """Within: the requests of this thread and of the pools it makes (:func:`_pool`), at most
    ``parallelism`` at once (each waits for its turn in :func:`turn`)."""
    if parallelism < 1:
        raise InvalidArgument(f"parallelism must be at least 1, got {parallelism}")
    before = getattr(_LIMIT, "gate", None)
    _LIMIT.gate = _Gate(parallelism)
    try:
        yield
    finally:
        _LIMIT.gate = before


def turn() -> contextlib.AbstractContextManager[None]:
    """Held around one request: the turn of the transfer this thread works for, if any."""
    gate: _Gate | None = getattr(_LIMIT, "gate", None)
    return gate if gate is not None else contextlib.nullcontext()


def _join(gate: _Gate | None) -> None:
    _LIMIT.gate = gate


def _pool(workers: int, name: str = "lakectl-client") -> ThreadPoolExecutor:
    """Threads working for the caller's transfer: no more of them than its gate lets send at
    once, and their requests wait on the same gate."""
    gate: _Gate | None = getattr(_LIMIT, "gate", None)
    if gate is not None:
        workers = max(1, min(workers, gate.size))
    return ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=_join, initargs=(gate,))


_MD5 = re.compile(r"[0-9a-f]{32}")
PART_MD5_HEADER = "X-Lakectl-Part-MD5"
"""A ranged block GET's expected md5 of the range: the server checks the range alone."""


def _q(part: str) -> str:
    try:
        return quote(part, safe="")
    except UnicodeEncodeError as e:  # a lone surrogate: non-UTF-8 bytes from the command line
        raise InvalidArgument(f"{part!r} is not UTF-8 text") from e


class BlocksOverHttp:
    """Mixed into the remote backend, which supplies the transport."""

    if TYPE_CHECKING:
        endpoint: str
        _http: httpx.Client
        _packs: Packs

        # An attribute, not a method: the backend's _call takes keyword options of its own, which
        # a ``**kw`` method here would make an incompatible override.
        _call: Callable[..., httpx.Response]

        def _json(self, method: str, path: str, **kw: Any) -> Any: ...

        def _repo(self, repo: str) -> str: ...

    def store_block(self, block: bytes | memoryview) -> str:
        """The signed locator of one block: sent if the server lacks it, else proven."""
        return self._send_one(block)

    def get_block(self, signed: str, offset: int = 0, length: int | None = None, md5: str = "") -> bytes:
        """Bytes of a block by signed locator (``GET /blocks``, with Range for part of it); a
        whole block is checked against its md5, a part against ``md5`` when given (its own:
        the server then reads and checks the part alone, ``X-Lakectl-Part-MD5``)."""
        size = int(signed.split("+")[1])
        end = size if length is None else offset + length
        whole = offset == 0 and end == size
        headers = None if whole else {"Range": f"bytes={offset}-{end - 1}"}
        if md5 and headers is not None:
            headers[PART_MD5_HEADER] = md5
        data = self._call("GET", f"/blocks/{signed}", headers=headers).content
        expected = signed.split("+")[0] if whole else md5
        if expected and hashlib.md5(data).hexdigest() != expected:
            raise StorageError(f"block {signed.split('+A')[0]} arrived corrupted")
        return data

    def _fetch(self, segments: list[str], checksum: str = "") -> Iterator[bytes]:
        """The bytes of these signed segments, in order. An object that is one part of a block
        (a packed small object) whose ``checksum`` is an md5 is fetched alone and checked
        against it (:meth:`_fetch_part`). Otherwise each block is fetched whole, even for a
        part of it, so that its md5 is checked before any of its bytes are handed out, and once
        for consecutive segments of the same block. A few blocks are fetched at once; only
        those in flight are held in memory."""
        if len(segments) == 1 and segments[0].count(":") == 2 and _MD5.fullmatch(checksum):
            yield self._fetch_packed(segments[0], checksum)
            return
        runs: list[tuple[str, list[tuple[int, int] | None]]] = []  # a block, and its parts read
        for segment in segments:
            signed, _, rng = segment.partition(":")
            offset, _, length = rng.partition(":")
            part = (int(offset), int(length)) if rng else None
            if runs and blockio.bare(runs[-1][0]) == blockio.bare(signed):
                runs[-1][1].append(part)
            else:
                runs.append((signed, [part]))
        with _pool(BLOCKS_IN_FLIGHT) as pool:
            pending = deque(pool.submit(self._object_block, signed) for signed, _ in runs[:BLOCKS_IN_FLIGHT])
            for i, (_, parts) in enumerate(runs):
                block = pending.popleft().result()
                if i + BLOCKS_IN_FLIGHT < len(runs):
                    pending.append(pool.submit(self._object_block, runs[i + BLOCKS_IN_FLIGHT][0]))
                for part in parts:
                    yield block if part is None else block[part[0] : part[0] + part[1]]

    def _fetch_packed(self, segment: str, md5: str) -> bytes:
        """A packed object's bytes: alone (:meth:`_fetch_part`), unless it is the second object
        of its pack read lately (a download of a directory reads a pack's objects one after the
        other): then the whole pack, verified, is fetched once and kept for the next ones (a pack
        that fails its check is not kept: each object of it is then checked on its own)."""
        signed, offset, length = segment.split(":")
        bare = blockio.bare(signed)
        pack = self._packs.held(bare)
        if pack is None and int(bare.split("+")[1]) <= PACK_BYTES and self._packs.again(bare):
            try:
                pack = self._object_block(signed)
                self._packs.keep(bare, pack)
            except IntegrityError:  # rotten elsewhere, perhaps: this object's bytes decide
                pack = None
        if pack is None:
            return self._fetch_part(segment, md5)
        return pack[int(offset) : int(offset) + int(length)]

    def _fetch_part(self, segment: str, md5: str) -> bytes:
        """A packed object's bytes alone, checked against its own md5 (the server reads and
        checks them alone too); bytes that do not match are fetched again with their whole
        block, whose md5 decides (as :meth:`_fetch` reads every other object)."""
        signed, offset, length = segment.split(":")
        try:
            return self._object_block(signed, int(offset), int(length), md5)
        except MissingData:
            raise
        except (StorageError, IntegrityError):
            block = self._object_block(signed)
            return block[int(offset) : int(offset) + int(length)]

    def _object_block(self, signed: str, offset: int = 0, length: int | None = None, md5: str = "") -> bytes:
        """A block an object refers to (or a part with its own ``md5``: :meth:`get_block`),
        md5-checked; gone is lost data, not "not found"."""
        try:
            return self.get_block(signed, offset, length, md5)
        except BlockNotFound as exc:
            bare = blockio.bare(signed)
            raise MissingData(f"block {bare} of the object is missing from storage", locator=bare) from exc

    def upload(
        self,
        repo: str,
        branch: str,
        path: str,
        source: BinaryIO | bytes,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        new_blocks: NewBlocks | None = None,
    ) -> ObjectInfo:
        """The type guessed here, when none is given: the server records what it is sent."""
        from lakectl.core.contenttypes import guess_content_type

        content_type = guess_content_type(path) if content_type is None else content_type
        _check_object(path, content_type, metadata)  # before any block is sent
        self._stage_allowed(repo, branch)
        stream = io.BytesIO(source) if isinstance(source, bytes) else source
        segments = self._send_blocks(stream, new_blocks)
        return self._link(repo, branch, path, segments, content_type, metadata)

    def append(self, repo: str, branch: str, path: str, source: BinaryIO | bytes) -> ObjectInfo:
        """The bytes sent as blocks, as an upload sends them (streamed, memory bounded, each
        block retried: blocks are content-addressed), then one request links them to the end of
        the object (``objects/link`` with lakectl's ``append=true``; the server appends them
        under the object's lease). That request is sent once: an append is not idempotent, so
        a failure once it may have arrived is not retried."""
        _check_object(path, None, None)
        self._stage_allowed(repo, branch)
        segments = self._send_blocks(io.BytesIO(source) if isinstance(source, bytes) else source)
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/link"
        body = {"path": path, "segments": segments}
        reply = self._json("POST", url, params={"append": "true"}, json=body, idempotent=False)
        return wire.object_info(reply)

    def upload_files(
        self,
        repo: str,
        branch: str,
        files: Sequence[tuple[str, str]],
        content_type: str | None = None,
        progress: Progress | None = None,
        new_blocks: NewBlocks | None = None,
        parallelism: int = PARALLELISM,
    ) -> list[ObjectInfo]:
        """Small files are packed here exactly as the embedded lake packs them (same blocks, so
        dedup works across both), each pack sent as soon as it is cut with its segments'
        lengths, for which the server returns receipts; the files of sent packs are linked
        ``LINK_BATCH`` per request (each batch one staged change) while the next files are read,
        each with its md5, receipt and content type (guessed here from its path when
        ``content_type`` is None), so the server stages them without reading the packs again.
        Large files are uploaded block by block, once the small ones are linked. ``progress``
        hears of small files as they are read and packed (as the embedded lake's), of a large
        one once it is uploaded. At most ``parallelism`` requests are in flight at once
        (:func:`limited`); the pipeline keeps fewer than the default on its own."""
        with limited(parallelism):
            return self._upload_files(repo, branch, sorted(files), content_type, progress, new_blocks)

    def _upload_files(
        self,
        repo: str,
        branch: str,
        ordered: list[tuple[str, str]],
        content_type: str | None,
        progress: Progress | None,
        new_blocks: NewBlocks | None,
    ) -> list[ObjectInfo]:
        from lakectl.core.blocks.data import Unpacked, pack_files
        from lakectl.core.contenttypes import guess_content_type

        for path, _ in ordered:
            _check_object(path, content_type, None)
        self._stage_allowed(repo, branch)
        large: list[tuple[str, str]] = []
        infos: dict[str, ObjectInfo] = {}
        with _PackSender(self, new_blocks) as packs, _pool(LINKS_IN_FLIGHT) as linker:
            ready: list[tuple[str, WrittenObject]] = []
            linked: list[Future[list[ObjectInfo]]] = []
            passed = [0]  # large files read past, not yet told: they are uploaded last

            def read(n: int) -> None:
                if progress is not None and n > passed[0]:
                    progress(n - passed[0])
                passed[0] = 0

            def link_ready(final: bool) -> None:
                while len(ready) >= LINK_BATCH or (final and ready):
                    batch, ready[:] = ready[:LINK_BATCH], ready[LINK_BATCH:]
                    linked.append(linker.submit(self._link_packed, repo, branch, batch, packs, content_type))

            for step in pack_files(ordered, packs, hand_out=LINK_BATCH, progress=read, every=PROGRESS_EVERY):
                if isinstance(step, Unpacked):
                    large.append((step.path, step.local))  # uploaded once the small files are linked
                    passed[0] += 1
                else:
                    ready.extend(step.items())
                    link_ready(final=False)
            link_ready(final=True)
            for future in linked:
                infos.update((i.path, i) for i in future.result())

        whole = [item for item in large if os.path.getsize(item[1]) <= BLOCK_SIZE]
        infos.update(self._upload_whole_blocks(repo, branch, whole, content_type, progress, new_blocks))

        def upload_large(item: tuple[str, str]) -> ObjectInfo:
            path, local = item
            with directio.SourceFile(local) as f:
                segments = self._send_blocks(cast(BinaryIO, f), new_blocks)
            own = guess_content_type(path) if content_type is None else content_type
            info = self._link(repo, branch, path, segments, own, None)
            if progress is not None:
                progress(1)
            return info

        done = set(infos)
        infos.update((i.path, i) for i in map(upload_large, (i for i in large if i[0] not in done)))
        return [infos[path] for path, _ in ordered]

    def _upload_whole_blocks(
        self,
        repo: str,
        branch: str,
        files: Sequence[tuple[str, str]],
        content_type: str | None,
        progress: Progress | None,
        new_blocks: NewBlocks | None,
    ) -> dict[str, ObjectInfo]:
        """Files of one block each (larger than a pack takes, at most a block), in batches of
        at most ``WHOLE_BATCH_BYTES`` or ``LINK_BATCH`` files: a batch is read and hashed, one
        question asks which of its blocks the server lacks, those are put ``UPLOAD_THREADS`` at
        once (the others proven), and one request links the batch (a whole block's md5 is its
        locator's: the server reads nothing); one batch is sent while the next is read."""
        infos: dict[str, ObjectInfo] = {}

        def done(sent: Future[list[ObjectInfo]]) -> None:
            got = sent.result()
            infos.update((i.path, i) for i in got)
            if progress is not None:
                progress(len(got))

        with _pool(1) as sender:
            pending: Future[list[ObjectInfo]] | None = None
            for batch in _whole_batches(files):
                if pending is not None:
                    done(pending)
                pending = sender.submit(self._send_whole, repo, branch, batch, content_type, new_blocks)
            if pending is not None:
                done(pending)
        return infos

    def _send_whole(
        self,
        repo: str,
        branch: str,
        batch: list[tuple[str, memoryview]],
        content_type: str | None,
        new_blocks: NewBlocks | None,
    ) -> list[ObjectInfo]:
        """One batch of :meth:`_upload_whole_blocks`, each file with ``content_type`` or, when
        None, its own, guessed from its path."""
        from lakectl.core.contenttypes import guess_content_type

        signed = self._send_batched([data for _, data in batch], new_blocks)
        objects = [
            {
                "path": path,
                "segments": [locator],
                "content_type": guess_content_type(path) if content_type is None else content_type,
            }
            for (path, _), locator in zip(batch, signed, strict=True)
        ]
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/links"
        answer = self._json("POST", url, json={"objects": objects}, idempotent=True, timeout=LINK_TIMEOUT)
        return [wire.object_info(item) for item in answer["results"]]

    def _link_packed(
        self,
        repo: str,
        branch: str,
        batch: list[tuple[str, WrittenObject]],
        packs: _PackSender,
        content_type: str | None,
    ) -> list[ObjectInfo]:
        """Link packed files in one request, each with its md5 and the server's receipt for it
        when the server gave one (else the server reads the segment to hash it), and its content
        type: ``content_type``, or when None its own, guessed from its path."""
        from lakectl.core.blocks.data import parse_segment
        from lakectl.core.contenttypes import guess_content_type

        objects = []
        for path, written in batch:
            own = guess_content_type(path) if content_type is None else content_type
            item: dict[str, Any] = {"path": path, "segments": [], "content_type": own}
            bare, _, offset, length = parse_segment(written.locators[0])
            if length:
                signed, receipts = packs.result(bare)
                whole = written.locators[0] == bare
                item["segments"] = [signed if whole else f"{signed}:{offset}:{length}"]
                receipt = receipts.get(offset)
                if receipt is not None:
                    item["checksum"], item["receipt"] = written.checksum, receipt
            objects.append(item)
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/links"
        answer = self._json("POST", url, json={"objects": objects}, idempotent=True, timeout=LINK_TIMEOUT)
        return [wire.object_info(item) for item in answer["results"]]

    def _stage_allowed(self, repo: str, branch: str) -> None:
        """Raise what staging on the branch would (no such branch, a protected one) before any
        block is sent: a refused upload stores nothing on the server."""
        self._call("GET", f"{self._repo(repo)}/branches/{_q(branch)}/objects/stage_allowed")

    def _send_blocks(self, stream: BinaryIO, new_blocks: NewBlocks | None = None) -> list[str]:
        """Signed locators of the stream's blocks, as a pipeline: while this thread reads the
        next block, up to ``BLOCKS_IN_FLIGHT`` earlier ones are hashed, asked about and sent (or
        proven), so the network and the server are busy from the first block on. Blocks are
        read into ``BLOCKS_IN_FLIGHT + 1`` buffers used over and over: memory stays bounded and
        no block pays for fresh pages. The buffers are page-aligned (anonymous mappings), so a
        :class:`~lakectl.core.blocks.directio.SourceFile` reads into them around the page cache.
        ``new_blocks`` is told each block the server lacked."""
        buffer = mmap.mmap(-1, BLOCK_SIZE)
        block = memoryview(buffer)[: blockio.read_into(stream, buffer)]
        if len(block) < BLOCK_SIZE:
            return [self._send_one(block, new_blocks=new_blocks)]
        free: queue.Queue[mmap.mmap] = queue.Queue()
        allocated = 1
        pending: list[Future[str]] = []
        with _pool(BLOCKS_IN_FLIGHT) as pool:
            while block:
                future = pool.submit(self._send_one, block, None, new_blocks)
                future.add_done_callback(lambda _, b=buffer: free.put(b))  # type: ignore[misc]
                pending.append(future)
                if len(block) < BLOCK_SIZE or any(f.done() and f.exception() for f in pending):
                    break  # the end, or a block failed (its error is raised below)
                if free.empty() and allocated <= BLOCKS_IN_FLIGHT:
                    buffer, allocated = mmap.mmap(-1, BLOCK_SIZE), allocated + 1
                else:
                    buffer = free.get()
                block = memoryview(buffer)[: blockio.read_into(stream, buffer)]
            return [f.result() for f in pending]

    def _send_one(
        self, block: bytes | memoryview, bare: str | None = None, new_blocks: NewBlocks | None = None
    ) -> str:
        """The signed locator of one block (see :meth:`_send`); ``bare`` is its locator when
        the caller hashed it already."""
        bare = bare or f"{hashlib.md5(block).hexdigest()}+{len(block)}"
        answer = self._json("POST", "/blocks/missing", json={"locators": [bare]}, idempotent=True)
        missing = set(answer["missing"])
        return self._put_or_prove(bare, block, missing, answer.get("challenges", {}), new_blocks)

    def _send(self, blocks: list[bytes], new_blocks: NewBlocks | None = None) -> list[str]:
        """Signed locators of these blocks: uploaded when the server lacks them, proven
        otherwise (nothing the server has crosses the network again); in parallel, after one
        question for all of them (for many small blocks, such as packs of small files)."""
        if not blocks:
            return []
        bares = [f"{hashlib.md5(b).hexdigest()}+{len(b)}" for b in blocks]
        answer = self._json("POST", "/blocks/missing", json={"locators": bares}, idempotent=True)
        missing = set(answer["missing"])
        challenges: dict[str, str] = answer.get("challenges", {})

        def send(i: int) -> str:
            return self._put_or_prove(bares[i], blocks[i], missing, challenges, new_blocks)

        with _pool(UPLOAD_THREADS) as pool:
            return list(pool.map(send, range(len(blocks))))

    def _send_batched(
        self, blocks: Sequence[bytes | memoryview], new_blocks: NewBlocks | None = None
    ) -> list[str]:
        """Signed locators of these blocks (files of one block each), as :meth:`_send` gives
        them, after one question for all: the ones the server lacks sent a batch per request
        (``POST /blocks/batch``, at most ``PUT_BATCH_BYTES`` or ``PUT_BATCH_BLOCKS`` each, made
        durable together), the others proven, ``UPLOAD_THREADS`` requests at once."""
        bares = [f"{hashlib.md5(b).hexdigest()}+{len(b)}" for b in blocks]
        answer = self._json("POST", "/blocks/missing", json={"locators": bares}, idempotent=True)
        missing = set(answer["missing"])
        challenges: dict[str, str] = answer.get("challenges", {})
        data = dict(zip(bares, blocks, strict=True))
        groups: list[list[str]] = []
        size = 0
        for bare in (b for b in data if b in missing):  # each block once
            if not groups or len(groups[-1]) >= PUT_BATCH_BLOCKS or size + len(data[bare]) > PUT_BATCH_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(bare)
            size += len(data[bare])

        def put(group: list[str]) -> list[str]:
            body = b"".join(data[bare] for bare in group)
            r = self._call("POST", "/blocks/batch", content=body, headers={BATCH_HEADER: ",".join(group)})
            if new_blocks is not None:
                for bare in group:
                    new_blocks(bare, len(data[bare]))
            return [str(locator) for locator in r.json()["locators"]]

        def prove(bare: str) -> str:
            return self._put_or_prove(bare, data[bare], set(), challenges, new_blocks)

        signed: dict[str, str] = {}
        with _pool(UPLOAD_THREADS) as pool:
            sent = [(group, pool.submit(put, group)) for group in groups]
            proven = [(bare, pool.submit(prove, bare)) for bare in data if bare not in missing]
            for group, future in sent:
                signed.update(zip(group, future.result(), strict=True))
            signed.update((bare, future.result()) for bare, future in proven)
        return [signed[bare] for bare in bares]

    def _put_or_prove(
        self,
        bare: str,
        data: bytes | memoryview,
        missing: set[str],
        challenges: Mapping[str, str],
        new_blocks: NewBlocks | None = None,
    ) -> str:
        if bare in missing:
            signed = self._put(bare, data)
            if new_blocks is not None:
                new_blocks(bare, len(data))
            return signed
        nonce = challenges[bare]
        body = {"locator": bare, "nonce": nonce, "answer": _answer(nonce, data)}
        try:
            return str(self._json("POST", "/blocks/prove", json=body, idempotent=True)["locator"])
        except (IntegrityError, BlockNotFound):
            # "missing" answers by size; checking the proof reads the block, which found it
            # rotten (or gone since): sending our bytes stores a good copy over it.
            return self._put(bare, data)

    def _put(self, bare: str, data: bytes | memoryview) -> str:
        md5 = bare.split("+")[0]
        return str(self._call("PUT", f"/blocks/{md5}", content=data).text.strip())

    def _send_pack(
        self,
        data: bytes | memoryview,
        bare: str,
        lengths: list[int] | None,
        new_blocks: NewBlocks | None = None,
    ) -> SentPack:
        """A pack's signed locator and the server's receipts for its segments, by offset (none
        when its lengths are too many to send, or the server gives none)."""
        layout = ",".join(map(str, lengths or ()))
        if not layout or len(layout) > MAX_LAYOUT:
            return self._send_one(data, bare, new_blocks), {}
        answer = self._json("POST", "/blocks/missing", json={"locators": [bare]}, idempotent=True)
        if bare in answer["missing"]:
            md5 = bare.split("+")[0]
            r = self._call("PUT", f"/blocks/{md5}", content=data, headers={SEGMENTS_HEADER: layout})
            if new_blocks is not None:
                new_blocks(bare, len(data))
            if not r.headers.get("content-type", "").startswith("application/json"):
                return r.text.strip(), {}  # a server that does not receipt
            got = r.json()
        else:
            nonce = answer["challenges"][bare]
            body = {"locator": bare, "nonce": nonce, "answer": _answer(nonce, data), "segments": lengths}
            try:
                got = self._json("POST", "/blocks/prove", json=body, idempotent=True)
            except (IntegrityError, BlockNotFound):
                return self._put(bare, data), {}  # as _put_or_prove: a good copy over a rotten one
        offsets = itertools.accumulate([0, *(lengths or ())])
        return str(got["locator"]), dict(zip(offsets, got.get("receipts", []), strict=False))

    def _send_packs(self, group: list[Pack], new_blocks: NewBlocks | None = None) -> dict[str, SentPack]:
        """Packs sent together (see :class:`_PackSender`), by locator: one question for all,
        the ones the server lacks in one ``POST /blocks/batch`` with their segments' lengths
        (a receipt back for each segment, all made durable by one sync), the others proven."""
        packs = {bare: (data, lengths) for bare, data, lengths in group}  # each pack once
        answer = self._json("POST", "/blocks/missing", json={"locators": list(packs)}, idempotent=True)
        lacking = [bare for bare in packs if bare in set(answer["missing"])]
        out: dict[str, SentPack] = {}
        if lacking:
            headers = {
                BATCH_HEADER: ",".join(lacking),
                SEGMENTS_HEADER: ";".join(",".join(map(str, packs[bare][1])) for bare in lacking),
            }
            body = b"".join(packs[bare][0] for bare in lacking)
            got = self._call("POST", "/blocks/batch", content=body, headers=headers).json()
            for bare, signed, receipts in zip(lacking, got["locators"], got["receipts"], strict=True):
                offsets = itertools.accumulate([0, *packs[bare][1]])
                out[bare] = str(signed), dict(zip(offsets, receipts, strict=False))
                if new_blocks is not None:
                    new_blocks(bare, len(packs[bare][0]))
        for bare in packs:
            if bare not in out:
                out[bare] = self._send_pack(packs[bare][0], bare, packs[bare][1], new_blocks)
        return out

    def _link(
        self,
        repo: str,
        branch: str,
        path: str,
        segments: list[str],
        content_type: str | None,
        metadata: Mapping[str, str] | None,
    ) -> ObjectInfo:
        body = {
            "path": path,
            "segments": segments,
            "content_type": content_type,
            "metadata": dict(metadata or {}),
        }
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/link"
        return wire.object_info(self._json("POST", url, json=body, idempotent=True))


class Packs:
    """Packs of small objects a client read lately (:meth:`BlocksOverHttp._fetch_packed`): which
    it has seen an object of, and the last few it fetched whole (verified), by bare locator."""

    KEPT = 8
    """Packs kept (1 MiB each at most)."""
    SEEN = 64
    """Packs remembered as seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._kept: OrderedDict[str, bytes] = OrderedDict()

    def held(self, bare: str) -> bytes | None:
        with self._lock:
            return self._kept.get(bare)

    def again(self, bare: str) -> bool:
        """Whether an object of this pack was read lately (and now one more is)."""
        with self._lock:
            seen = bare in self._seen
            self._seen[bare] = None
            self._seen.move_to_end(bare)
            while len(self._seen) > self.SEEN:
                self._seen.popitem(last=False)
            return seen

    def keep(self, bare: str, pack: bytes) -> None:
        with self._lock:
            self._kept[bare] = pack
            while len(self._kept) > self.KEPT:
                self._kept.popitem(last=False)


def _layout(lengths: list[int]) -> int:
    """Characters a pack's segment lengths take in ``SEGMENTS_HEADER``."""
    return sum(len(str(n)) + 1 for n in lengths)


class _PackSender:
    """Where a client-side :class:`~lakectl.core.blocks.data.Packer` puts its packs (a
    ``PackSink``): they are sent in groups of up to ``PACKS_PER_REQUEST`` (asked about together,
    the missing ones uploaded in one request with their segments' lengths to be receipted, the
    others proven) by ``UPLOAD_THREADS`` threads while the caller reads and packs the next files;
    at most ``PACKS_IN_FLIGHT`` packs wait. ``result(bare)`` waits for one pack (sending its group
    now if it is still being gathered) and gives its signed locator and its receipts by offset.
    Leaving the ``with`` sends the last group, waits for every pack and raises the first failure.
    ``new_blocks`` is told each pack the server lacked."""

    def __init__(self, backend: BlocksOverHttp, new_blocks: NewBlocks | None = None) -> None:
        self._backend = backend
        self._new_blocks = new_blocks
        self._pool = _pool(UPLOAD_THREADS, "lakectl-packs")
        self._pending: deque[Future[dict[str, SentPack]]] = deque()
        self._sent: dict[str, Future[dict[str, SentPack]]] = {}
        self._group: list[Pack] = []
        self._layout = 0
        self._lock = threading.Lock()

    def __enter__(self) -> _PackSender:
        return self

    def put_pack(self, locator: str, data: bytes, lengths: list[int]) -> None:
        layout = _layout(lengths)
        while len(self._pending) * PACKS_PER_REQUEST >= PACKS_IN_FLIGHT:
            self._pending.popleft().result()
        with self._lock:
            if self._group and (len(self._group) >= PACKS_PER_REQUEST or self._layout + layout > MAX_LAYOUT):
                self._send_group()
            self._group.append((locator, data, lengths))
            self._layout += layout
            if layout > MAX_LAYOUT:  # too many segments to receipt: alone, as a plain block
                self._send_group()

    def _send_group(self) -> None:
        """Send the packs gathered so far (the caller holds the lock)."""
        group, self._group, self._layout = self._group, [], 0
        if not group:
            return
        if len(group) == 1 and _layout(group[0][2]) > MAX_LAYOUT:
            bare, data, lengths = group[0]
            send, told = self._backend._send_pack, self._new_blocks
            future: Future[dict[str, SentPack]] = self._pool.submit(
                lambda: {bare: send(data, bare, lengths, told)}
            )
        else:
            future = self._pool.submit(self._backend._send_packs, group, self._new_blocks)
        for bare, _, _ in group:
            self._sent[bare] = future
        self._pending.append(future)

    def result(self, bare: str) -> SentPack:
        with self._lock:
            if bare not in self._sent:
                self._send_group()
            future = self._sent[bare]
        return future.result()[bare]

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                with self._lock:
                    self._send_group()
                while self._pending:
                    self._pending.popleft().result()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)


def _whole_batches(files: Sequence[tuple[str, str]]) -> Iterator[list[tuple[str, memoryview]]]:
    """The files read, in batches of at most ``WHOLE_BATCH_BYTES`` (one file at least) or
    ``LINK_BATCH`` files. Each is read into page-aligned memory of its own (a mapping of a
    block's size, of which only what the file fills is ever touched), so that what the page
    cache lacks of it is read around the cache (:class:`~lakectl.core.blocks.directio.SourceFile`)."""
    batch: list[tuple[str, memoryview]] = []
    size = 0
    for path, local in files:
        with directio.SourceFile(local) as f:
            memory = mmap.mmap(-1, BLOCK_SIZE)
            data = memoryview(memory)[: blockio.read_into(cast(BinaryIO, f), memory)]
            if f.read(1):  # more than the block it had when it was listed: read it again
                raise StorageError(f"{local} grew past {BLOCK_SIZE} bytes while it was uploaded")
        if batch and (size + len(data) > WHOLE_BATCH_BYTES or len(batch) >= LINK_BATCH):
            yield batch
            batch, size = [], 0
        batch.append((path, data))
        size += len(data)
    if batch:
        yield batch


def _answer(nonce: str, data: bytes | memoryview) -> str:
    """The proof of holding a block's bytes, for a challenge (``blockaccess.prove_answer``)."""
    proof = hashlib.md5(nonce.encode())
    proof.update(data)
    return proof.hexdigest()


def _check_object(path: str, content_type: str | None, metadata: Mapping[str, str] | None) -> None:
    """What the server would refuse about an object to link, refused before its blocks are sent
    (the same core checks): a refused upload leaves nothing behind on the server."""
    from lakectl.core.limits import check_content_type, check_metadata
    from lakectl.core.uri import check_new_path

    check_new_path(path)
    check_content_type(content_type)
    check_metadata(metadata or {})
