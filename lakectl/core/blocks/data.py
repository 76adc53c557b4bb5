"""Object data as md5-addressed blocks: split or packed, deduplicated, ETag, ranged reads."""

from __future__ import annotations

import hashlib
import io
import itertools
import mmap
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, Protocol, cast, runtime_checkable

from lakectl.core.blocks import BlockAdapter, has_maps, has_parts
from lakectl.core.model import BLOCK_SIZE
from lakectl.errors import BlockNotFound, InvalidArgument, InvalidLocator, MissingData

EMPTY_LOCATOR: Final = "d41d8cd98f00b204e9800998ecf8427e+0"

# Blocks handed to workers at once. With the block being read by the caller's thread that makes
# three blocks in memory, and keeps both cores busy: md5 and file writes release the GIL.
_IN_FLIGHT: Final = 2

_LOCATOR: Final = re.compile(r"[0-9a-f]{32}\+([0-9]{1,20})")
# An object's data is a list of segment tokens: a whole block (``<md5>+<size>``) or a part of
# one (``<md5>+<size>:<offset>:<length>``), as Keep manifests address files inside blocks.
_MD5: Final = re.compile(r"[0-9a-f]{32}")
_SEGMENT: Final = re.compile(r"([0-9a-f]{32}\+([0-9]{1,20}))(?::([0-9]{1,20}):([0-9]{1,20}))?")

PACK_MIN: Final = 512 * 1024
PACK_MAX: Final = 1024 * 1024
"""Packs of small objects are cut after an object whose md5 starts with a byte that is 0 mod 8
once they hold PACK_MIN bytes, and always by PACK_MAX: cuts depend on the objects alone, so
uploading the same files again makes the same packs (deduplicated), and a changed file changes
only its own pack. A packed object read whole is read alone and checked against its own md5
(:func:`get_checked`); a range of it reads and verifies its whole pack, which small packs keep
cheap."""
SMALL_OBJECT: Final = 64 * 1024
"""Objects up to this size are packed by :class:`Packer`; larger ones get blocks of their own."""


@dataclass(frozen=True, slots=True)
class WrittenObject:
    """What ``write_object`` stored: the object's size, S3-style ETag and ordered block locators."""

    size: int
    checksum: str
    locators: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Stored:
    digest: bytes
    locator: str
    size: int


def block_locator(data: bytes | memoryview) -> str:
    """The bare locator ``<md5 hex>+<size>`` of a block's bytes."""
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


def write_bytes(
    adapter: BlockAdapter, data: bytes | memoryview, block_size: int = BLOCK_SIZE, md5: str | None = None
) -> WrittenObject:
    """Store an in-memory object block by block in the calling thread (no pool, no sync).
    ``md5``: the hex md5 of ``data`` (one block at most), which the caller computed from these
    very bytes as they arrived: the block is stored without a second pass over them (every
    read verifies it anyway)."""
    _check_block_size(block_size)
    if md5 is not None and len(data) <= block_size:
        locator = f"{md5}+{len(data)}"
        adapter.put(locator, data)  # deduplicated (and checked, healed if rotten) by the adapter
        return _written([_Stored(bytes.fromhex(md5), locator, len(data))])
    if len(data) <= block_size:
        return _written([_store(adapter, data)])
    return _written([_store(adapter, data[i : i + block_size]) for i in range(0, len(data), block_size)])


def write_object(
    adapter: BlockAdapter,
    source: BinaryIO,
    block_size: int = BLOCK_SIZE,
    pool: Executor | None = None,
) -> WrittenObject:
    """Store ``source`` (read to its end) as blocks of ``block_size``, skipping existing ones.

    Reading, hashing and writing of consecutive blocks overlap on two worker threads, with at
    most three blocks in memory: three buffers, read into (``readinto``, where the source has
    it) and reused, since fresh pages cost more than the copy (docs/decisions/0015). ``pool``
    (default: two threads of our own) must not be one whose workers themselves wait in
    ``write_object``, or they may wait for each other forever. Nothing is made durable here:
    the caller calls ``adapter.sync()`` once per batch, before publishing metadata that names
    these blocks.
    """
    _check_block_size(block_size)
    if isinstance(source, ReadsAt) and pool is None:
        return _write_at(adapter, source, block_size)
    fill = _filler(source)
    buffers = _Buffers(block_size)
    first = buffers.take()
    n = fill(first)
    if n < block_size:  # the whole object fits in one block: no threads needed
        return _written([_store(adapter, first[:n])])
    if pool is not None:
        return _pipeline(adapter, fill, buffers, pool, first)
    with ThreadPoolExecutor(_IN_FLIGHT, thread_name_prefix="lakectl-blocks") as own:
        return _pipeline(adapter, fill, buffers, own, first)


@runtime_checkable
class ReadsAt(Protocol):
    """A source whose bytes can be read at any offset, from several threads at once (a local
    file: :class:`~lakectl.core.blocks.directio.SourceFile`)."""

    def tell(self) -> int: ...

    def seek(self, offset: int, whence: int = 0) -> int: ...

    def read_at(self, buffer: memoryview, offset: int) -> int: ...


_READERS: Final = 3
"""Blocks of a :class:`ReadsAt` source in flight at once, each read, hashed and written by a
worker of its own: three reads can wait on the device side by side while two blocks hash."""


def _write_at(adapter: BlockAdapter, source: ReadsAt, block_size: int) -> WrittenObject:
    """:func:`write_object` of a source read at offsets: each worker reads its block (at most
    ``_READERS`` blocks, and buffers, at once), hashes it and stores it, so that reads wait on
    the device side by side rather than one after another in the caller's thread. The blocks
    are the ones a stream read in order makes: the object ends at the first short block (a
    file that grew while it was read is stored as it was then). A source of one block is read
    and stored by the caller's thread alone, as :func:`write_object` stores any."""
    start = source.tell()
    buffers = _Buffers(block_size)
    first = buffers.take()
    n = source.read_at(first, start)
    if n < block_size:
        source.seek(start + n)
        return _written([_store(adapter, first[:n])])
    stored: list[_Stored] = []
    with ThreadPoolExecutor(_READERS, thread_name_prefix="lakectl-blocks") as pool:
        pending: deque[tuple[Future[_Stored | None], memoryview]] = deque()
        pending.append((pool.submit(_store, adapter, first), first))
        try:
            number, end = 1, start
            while True:
                while len(pending) < _READERS:
                    buffer, at = buffers.take(), start + number * block_size
                    pending.append((pool.submit(_read_store, adapter, source, buffer, at), buffer))
                    number += 1
                future, buffer = pending.popleft()
                block = future.result()
                buffers.give_back(buffer)
                if block is not None:
                    stored.append(block)
                    end += block.size
                if block is None or block.size < block_size:
                    break
        finally:
            # The end, or a failure: blocks past the end are read for nothing (and stored only
            # if the file grew meanwhile).
            _settle(pending)
    source.seek(end)
    return _written(stored)


def _read_store(adapter: BlockAdapter, source: ReadsAt, buffer: memoryview, offset: int) -> _Stored | None:
    """The block at ``offset`` read into ``buffer`` and stored; None past the end."""
    n = source.read_at(buffer, offset)
    return _store(adapter, buffer[:n]) if n else None


def parse_segment(token: str) -> tuple[str, int, int, int]:
    """``(bare locator, block size, offset, length)`` of a segment token; InvalidLocator if bad."""
    match = _SEGMENT.fullmatch(token) if isinstance(token, str) else None
    if match is None:
        raise InvalidLocator(f"not a block locator or segment: {token!r}", locator=repr(token))
    locator, size = match.group(1), int(match.group(2))
    if match.group(3) is None:
        return locator, size, 0, size
    offset, length = int(match.group(3)), int(match.group(4))
    if offset + length > size:
        raise InvalidLocator(f"segment {token!r} runs past the end of its block")
    return locator, size, offset, length


def segment_token(locator: str, offset: int, length: int) -> str:
    """The token of ``length`` bytes at ``offset`` of a block (the bare locator when whole)."""
    size = _size_of(locator)
    return locator if offset == 0 and length == size else f"{locator}:{offset}:{length}"


def read_object(
    adapter: BlockAdapter,
    locators: Sequence[str],
    offset: int = 0,
    length: int | None = None,
    ahead: int = 0,
    checksum: str = "",
    mapped: bool = False,
) -> Iterator[bytes]:
    """Yield the object's bytes, or those of ``[offset, offset + length)``, one segment at a time.

    ``locators`` are segment tokens (whole blocks or parts of blocks). Arguments are checked
    here, before the first block is read; a range past the end is cut at the end of the object.
    ``ahead``: read and verify up to that many of the next segments on threads of their own
    while the caller consumes one (md5 releases the GIL: the cores verify blocks side by side
    while the caller writes); for a whole-object consumer such as a download. Each yielded
    segment is still verified before it is yielded, and the first failure is raised in order.
    ``checksum``: the object's (its md5 when it is one part of a block: a packed small object),
    with which such an object read whole is read alone and checked (:func:`get_checked`).
    ``mapped``: for a consumer that writes each segment out (a download): whole blocks of a
    store of files come as checked mappings of them (:class:`~lakectl.core.blocks.HasMaps`),
    bytes-like but not ``bytes``, valid as long as the consumer holds them.
    """
    if offset < 0 or (length is not None and length < 0):
        raise InvalidArgument(f"bad range offset={offset} length={length}")
    segments = [parse_segment(token) for token in locators]
    total = sum(seg[3] for seg in segments)
    end = total if length is None else min(total, offset + length)
    reads = list(_reads(segments, offset, end))
    if len(reads) == 1 and reads[0][2] == total and _MD5.fullmatch(checksum):
        return (_get(adapter, *reads[0], checksum) for _ in (1,))  # one part, read whole
    if ahead > 0 and len(reads) > 1:
        return _read_ahead(adapter, reads, ahead, mapped)
    return (_get(adapter, *read, mapped=mapped) for read in reads)


def read_small_objects(adapter: BlockAdapter, objects: Sequence[Sequence[str]]) -> list[bytes]:
    """The bytes of many objects, each given by its segment tokens: those that are one part of
    a block (packed small objects) read a block at a time, the block read once and verified
    whole, instead of one read of the block per object; any other object as
    :func:`read_object` reads it."""
    segments = [[parse_segment(token) for token in tokens] for tokens in objects]
    by_block: dict[str, list[int]] = {}
    for i, segs in enumerate(segments):
        if len(segs) == 1:
            by_block.setdefault(segs[0][0], []).append(i)
    out: list[bytes] = [b""] * len(objects)
    for locator, indexes in by_block.items():
        if len(indexes) == 1:
            continue
        block = _get(adapter, locator, 0, None)
        for i in indexes:
            _, _, offset, length = segments[i][0]
            out[i] = block[offset : offset + length]
    for i, tokens in enumerate(objects):
        if not (len(segments[i]) == 1 and len(by_block[segments[i][0][0]]) > 1):
            out[i] = b"".join(read_object(adapter, tokens))
    return out


def _reads(
    segments: list[tuple[str, int, int, int]], offset: int, end: int
) -> Iterator[tuple[str, int, int | None]]:
    """``(locator, offset, length or None for the whole block)`` of each block read."""
    position = 0
    for locator, size, seg_offset, seg_length in segments:
        seg_start, position = position, position + seg_length
        if seg_length == 0 or position <= offset:
            continue  # an empty segment needs no read: its content is known
        if seg_start >= end:
            return
        start = max(offset - seg_start, 0)
        stop = min(end, position) - seg_start
        if seg_offset == 0 and start == 0 and stop == size:
            yield locator, 0, None
        else:
            yield locator, seg_offset + start, stop - start


def _read_ahead(
    adapter: BlockAdapter,
    reads: list[tuple[str, int, int | None]],
    ahead: int,
    mapped: bool,
) -> Iterator[bytes]:
    """The reads' bytes in order, ``ahead`` of them in flight on a pool of their own: at most
    ``ahead`` + 1 segments in memory, the one the caller holds included."""
    with ThreadPoolExecutor(ahead, thread_name_prefix="lakectl-read") as pool:
        pending: deque[Future[bytes]] = deque()
        following = iter(reads)
        try:
            for read in itertools.islice(following, ahead):
                pending.append(pool.submit(_get, adapter, *read, mapped=mapped))
            while pending:
                data = pending.popleft().result()
                after = next(following, None)
                if after is not None:
                    pending.append(pool.submit(_get, adapter, *after, mapped=mapped))
                yield data
                del data
        finally:
            # A failure, or a caller that stopped early: reads not started are dropped, those
            # running finish (the pool's exit waits for them) and are discarded.
            for future in pending:
                future.cancel()


def _get(
    adapter: BlockAdapter, locator: str, offset: int, length: int | None, md5: str = "", mapped: bool = False
) -> bytes:
    """A block an object refers to: its absence is lost data (``MissingData``, a storage
    failure), not the ``BlockNotFound`` of a block a caller named that was never stored.
    ``md5``: the part's own (:func:`get_checked`). ``mapped``: a whole block of a store of
    files as a checked mapping of it (``HasMaps``): bytes-like, typed as the ``bytes`` it stands
    for (only a ``mapped`` reader of :func:`read_object` gets one)."""
    try:
        if md5:
            return get_checked(adapter, locator, offset, length, md5)
        if mapped and length is None and has_maps(adapter):
            mapping = adapter.get_mapped(locator)
            if mapping is not None:
                return cast(bytes, mapping)
        return adapter.get(locator, offset, length)
    except BlockNotFound as exc:
        message = f"block {locator} of the object is missing from storage: its data is lost"
        raise MissingData(message, locator=locator) from exc


def get_checked(adapter: BlockAdapter, locator: str, offset: int, length: int | None, md5: str) -> bytes:
    """A part of a block whose own md5 the caller knows (a packed object's checksum): read
    alone where the store can (:class:`~lakectl.core.blocks.HasParts`) and checked against
    ``md5``, instead of reading and hashing the whole block. Bytes that do not match are read
    again with the whole block, verified as every read is: a rotten block is ``CorruptBlock``;
    an intact one gives its part (a checksum that is no md5 of the part's bytes costs the read
    of the block, as before)."""
    if length is not None and has_parts(adapter):
        data = adapter.get_part(locator, offset, length)
        if len(data) == length and hashlib.md5(data).hexdigest() == md5:
            return data
    return adapter.get(locator, offset, length)


class PackSink(Protocol):
    """Where a :class:`Packer` puts its packs: a block store (:class:`AdapterPacks`), or a remote
    client that sends each pack with its segments' lengths for the server to receipt each one."""

    def put_pack(self, locator: str, data: bytes, lengths: list[int]) -> None:
        """Store (or send) one pack: its bare locator, its bytes, and the lengths of the
        consecutive segments it holds. Raises what storing it raises (``StorageError``)."""


class AdapterPacks:
    """A block adapter as a :class:`PackSink`: a pack is one more block (deduplicated, checked
    and healed by the adapter); its segments are the entries' business, not the store's."""

    def __init__(self, adapter: BlockAdapter) -> None:
        self.adapter = adapter

    def put_pack(self, locator: str, data: bytes, lengths: list[int]) -> None:
        self.adapter.put(locator, data)


class Packer:
    """Packs many small objects into shared blocks (Keep-style), deduplicating equal contents.

    ``add(key, data)`` in a stable order (sorted paths give reproducible packs); ``close()``
    returns each key's WrittenObject (one segment token, the md5 of the object as ETag), also
    kept in ``results``. Each pack goes to ``sink`` with the lengths of its segments. Nothing is
    made durable here, as for ``write_object``. ``take_cut()`` hands out, before the end, the
    objects whose packs are already cut (a remote client links them while it packs the next
    ones).

    ``pool``: an executor whose thread hashes and stores each full pack while the caller reads
    and hashes the next objects (an md5 of a whole pack releases the GIL for its duration,
    unlike the many short calls of small objects, so the two cores work side by side without
    fighting over it). At most ``_IN_FLIGHT`` packs wait there; ``close()`` waits for them and
    raises the first failure. A caller that stops early (an error of its own) leaves the pool's
    exit to wait for what runs, as for ``write_object``. Without a pool, packs are hashed and
    given to the sink in the caller's thread, in the order they are cut.
    """

    def __init__(self, sink: PackSink, pool: Executor | None = None) -> None:
        self.sink = sink
        self.results: dict[str, WrittenObject] = {}
        self._pool = pool
        self._parts: list[bytes] = []
        self._size = 0
        self._keys: deque[tuple[str, str]] = deque()  # (key, md5 hex) of objects not handed out
        # md5 hex -> (pack number, offset, length): where the first copy of each content went
        # (pack -1: the empty object, in no pack).
        self._placed: dict[str, tuple[int, int, int]] = {}
        self._written: dict[str, WrittenObject] = {}
        self._packs: list[Future[_Stored]] = []

    def add(self, key: str, data: bytes) -> None:
        hexdigest = hashlib.md5(data).hexdigest()
        self._keys.append((key, hexdigest))
        if hexdigest in self._placed:
            return  # stored once: the key gets the first copy's segment
        if not data:
            self._placed[hexdigest] = (-1, 0, 0)
            return
        self._placed[hexdigest] = (len(self._packs), self._size, len(data))
        self._parts.append(data)
        self._size += len(data)
        # The cut rule of PACK_MIN: the first byte of the md5 is 0 mod 8 when its second hex
        # digit is 0 or 8.
        if self._size >= PACK_MAX or (self._size >= PACK_MIN and hexdigest[1] in "08"):
            self._flush()

    @property
    def waiting(self) -> int:
        """Objects added and not yet handed out."""
        return len(self._keys)

    def take_cut(self) -> dict[str, WrittenObject]:
        """The objects added whose packs are cut, each handed out once (also kept in
        ``results``); waits for those packs to be stored, and raises a failure to store one."""
        taken: dict[str, WrittenObject] = {}
        cut = len(self._packs)
        while self._keys and self._placed[self._keys[0][1]][0] < cut:
            key, hexdigest = self._keys.popleft()
            taken[key] = self.results[key] = self._written_of(hexdigest)
        return taken

    def cut(self) -> None:
        """Cut the open pack (no more objects follow) and wait for every pack to be stored."""
        if self._parts:
            self._flush()
        for pack in self._packs:
            pack.result()

    def close(self) -> dict[str, WrittenObject]:
        self.cut()
        self.take_cut()
        return self.results

    def _written_of(self, hexdigest: str) -> WrittenObject:
        written = self._written.get(hexdigest)
        if written is None:
            number, offset, length = self._placed[hexdigest]
            if number < 0:
                token = EMPTY_LOCATOR
            else:
                pack = self._packs[number].result()
                whole = offset == 0 and length == pack.size
                token = pack.locator if whole else f"{pack.locator}:{offset}:{length}"
            written = self._written[hexdigest] = WrittenObject(length, hexdigest, (token,))
        return written

    def _flush(self) -> None:
        lengths = [len(part) for part in self._parts]
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        if self._pool is None:
            done: Future[_Stored] = Future()
            done.set_result(_store_pack(self.sink, data, lengths))
            self._packs.append(done)
            return
        if len(self._packs) >= _IN_FLIGHT:
            self._packs[-_IN_FLIGHT].result()  # bounded memory: the pool keeps up, or we wait
        self._packs.append(self._pool.submit(_store_pack, self.sink, data, lengths))


def _store_pack(sink: PackSink, data: bytes, lengths: list[int]) -> _Stored:
    digest = hashlib.md5(data).digest()
    locator = f"{digest.hex()}+{len(data)}"
    sink.put_pack(locator, data, lengths)
    return _Stored(digest, locator, len(data))


@dataclass(frozen=True, slots=True)
class Unpacked:
    """A file :func:`pack_files` does not pack (larger than ``SMALL_OBJECT``), left unread: the
    caller stores it in blocks of its own before it asks for the next step."""

    path: str
    local: str


def pack_files(
    files: Iterable[tuple[str, str]],
    sink: PackSink,
    pool: Executor | None = None,
    hand_out: int | None = None,
    progress: Callable[[int], None] | None = None,
    every: int = 1,
) -> Iterator[Unpacked | dict[str, WrittenObject]]:
    """The one read-and-pack loop of uploads of many files ``(key, local file)``, embedded and
    remote: each file read and hashed in the given order by the caller's thread, one ``open``/
    ``read``/``close`` each (:func:`read_small`), the small ones packed into ``sink`` by a
    :class:`Packer` (its ``pool``: see there).

    Yields each large file as :class:`Unpacked`, and the packed objects whose packs are stored,
    as ``{key: WrittenObject}``: all of them at the end, and, with ``hand_out``, those cut
    whenever that many objects wait (a remote client links them while the next files are
    read). Each packed object is handed out once.

    ``progress``: told the number of files read, in groups of ``every`` (a progress bar's update
    costs more than the read of a small file), and at once after a large file, once the caller
    has stored it."""
    packer = Packer(sink, pool)
    unreported = 0
    for key, local in files:
        data = read_small(local, SMALL_OBJECT)
        if data is None:
            yield Unpacked(key, local)
        else:
            packer.add(key, data)
            if hand_out is not None and packer.waiting >= hand_out:
                taken = packer.take_cut()
                if taken:
                    yield taken
        unreported += 1
        if progress is not None and (data is None or unreported == every):
            progress(unreported)
            unreported = 0
    packer.cut()
    rest = packer.take_cut()
    if progress is not None and unreported:
        progress(unreported)
    if rest:
        yield rest


def _pipeline(
    adapter: BlockAdapter,
    fill: Callable[[memoryview], int],
    buffers: _Buffers,
    pool: Executor,
    block: memoryview,
) -> WrittenObject:
    """``block`` is full; the rest follows from ``fill``. A buffer is read into again only once
    the put of what it held has returned (puts keep no reference to their data)."""
    stored: list[_Stored] = []
    pending: deque[tuple[Future[_Stored], memoryview]] = deque()
    n = len(block)
    try:
        while n:
            if len(pending) >= _IN_FLIGHT:
                done, buffer = pending.popleft()
                stored.append(done.result())
                buffers.give_back(buffer)
            pending.append((pool.submit(_store, adapter, block[:n]), block))
            if n < len(block):
                break
            block = buffers.take()
            n = fill(block)
        while pending:
            stored.append(pending.popleft()[0].result())
    finally:
        _settle(pending)
    return _written(stored)


def _settle(pending: Iterable[tuple[Future[Any], memoryview]]) -> None:
    """Workers' puts not yet started are dropped, those running are waited for (a failure, or
    blocks past the end): nothing keeps writing into the adapter, or reading a buffer, behind
    the caller's back once it returns."""
    for future, _ in pending:
        future.cancel()
    for future, _ in pending:
        if not future.cancelled():
            future.exception()


class _Buffers:
    """The pipeline's block buffers: page-aligned anonymous memory (which lets a local block
    store write them around the page cache), made as needed and reused."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._free: list[memoryview] = []

    def take(self) -> memoryview:
        return self._free.pop() if self._free else memoryview(mmap.mmap(-1, self._size))

    def give_back(self, buffer: memoryview) -> None:
        self._free.append(buffer)


def _store(adapter: BlockAdapter, data: bytes | memoryview) -> _Stored:
    digest = hashlib.md5(data).digest()
    locator = f"{digest.hex()}+{len(data)}"
    adapter.put(locator, data)  # deduplicated (and checked, healed if rotten) by the adapter
    return _Stored(digest, locator, len(data))


def _written(stored: list[_Stored]) -> WrittenObject:
    return WrittenObject(
        size=sum(s.size for s in stored),
        checksum=object_checksum([s.digest for s in stored]),
        locators=tuple(s.locator for s in stored),
    )


def object_checksum(digests: Sequence[bytes]) -> str:
    """An object's checksum from the md5 digests of its blocks (of ``BLOCK_SIZE`` bytes, the
    last shorter): the md5 hex of a one-block object, else the S3 multipart ETag (md5 of the
    concatenated digests, ``-`` their count)."""
    if len(digests) <= 1:
        return digests[0].hex() if digests else hashlib.md5(b"").hexdigest()
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def segments_checksum(adapter: BlockAdapter, tokens: Sequence[str]) -> str:
    """The checksum of an object made of these segment tokens, each one part (an appended
    object's: :func:`object_checksum` over its segments, empty ones left out). A whole block's
    md5 is its locator's; a part of a block (a packed file) is read and hashed. It is a plain
    upload's checksum of the same bytes whenever they are one block."""
    digests: list[bytes] = []
    for token in tokens:
        bare, size, offset, length = parse_segment(token)
        if not length:
            continue
        whole = length == size
        digests.append(
            bytes.fromhex(bare[:32]) if whole else hashlib.md5(_get(adapter, bare, offset, length)).digest()
        )
    return object_checksum(digests)


class Checksummer:
    """The checksum an object of the bytes fed to :meth:`update` gets when it is uploaded
    (:func:`object_checksum` over blocks of ``BLOCK_SIZE``), without keeping the bytes."""

    def __init__(self, block_size: int = BLOCK_SIZE) -> None:
        self._block_size = block_size
        self._digests: list[bytes] = []
        self._md5 = hashlib.md5()
        self._in_block = 0

    def update(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while len(view):
            take = min(len(view), self._block_size - self._in_block)
            self._md5.update(view[:take])
            self._in_block += take
            view = view[take:]
            if self._in_block == self._block_size:
                self._digests.append(self._md5.digest())
                self._md5, self._in_block = hashlib.md5(), 0

    def hexdigest(self) -> str:
        tail = [self._md5.digest()] if self._in_block or not self._digests else []
        return object_checksum(self._digests + tail)


def file_checksum(path: str, block_size: int = BLOCK_SIZE) -> str:
    """The checksum the local file's bytes get as an object (equal content, equal checksum)."""
    summer = Checksummer(block_size)
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(8 * 1024 * 1024):
            summer.update(chunk)
    return summer.hexdigest()


def _filler(source: BinaryIO) -> Callable[[memoryview], int]:
    """A function that fills a buffer from ``source`` and returns how many bytes it put there:
    all of the buffer, fewer only at the end of the stream. Block boundaries must not depend
    on how the stream happens to chunk its reads, or equal data would not dedup.

    It reads with ``readinto`` (no copy, no fresh memory), or with ``read`` where the stream
    has no working ``readinto`` (a raw stream that implements only ``read``)."""
    readinto: Callable[[memoryview], int | None] | None = getattr(source, "readinto", None)

    def fill(buffer: memoryview) -> int:
        nonlocal readinto
        got = 0
        while got < len(buffer):
            if readinto is not None:
                try:
                    n = readinto(buffer[got:]) or 0
                except (NotImplementedError, io.UnsupportedOperation):
                    readinto = None
                    continue
            else:
                data = source.read(len(buffer) - got)
                n = len(data)
                buffer[got : got + n] = data
            if not n:
                break
            got += n
        return got

    return fill


def _size_of(locator: str) -> int:
    match = _LOCATOR.fullmatch(locator) if isinstance(locator, str) else None
    if match is None:
        raise InvalidLocator(f"not a bare block locator: {locator!r}", locator=repr(locator))
    return int(match.group(1))


def _check_block_size(block_size: int) -> None:
    if block_size <= 0:
        raise InvalidArgument(f"block size must be positive, got {block_size}")


def read_small(local: str, limit: int) -> bytes | None:
    """The bytes of a local file of at most ``limit`` bytes; None for a larger one. One
    ``open``, ``read`` and ``close`` (no file object, whose buffered reader, ``fstat`` and
    ``isatty`` cost as much as the read of a small file), reading on until the end, so a short
    read loses nothing. An error names the file, as ``open()``'s would."""
    fd = os.open(local, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, limit + 1)
        while data and len(data) <= limit:
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:  # EISDIR, EIO: os.read does not say which file
        raise OSError(exc.errno, exc.strerror, local) from exc
    finally:
        os.close(fd)
    return data if len(data) <= limit else None
