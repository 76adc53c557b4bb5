"""Writing objects onto a branch: uploads (one object, or many files packed), copies and rows
staged without their data, deletes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import BinaryIO, cast

from lakectl.core import keys, leases
from lakectl.core.blocks import BlockAdapter, directio
from lakectl.core.blocks.data import (
    EMPTY_LOCATOR,
    AdapterPacks,
    Unpacked,
    WrittenObject,
    pack_files,
    parse_segment,
    segments_checksum,
    write_bytes,
    write_object,
)
from lakectl.core.contenttypes import guess_content_type
from lakectl.core.events import Verb
from lakectl.core.graph.tree import Update
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.lake import PROGRESS_EVERY, Lake, NewBlocks, Progress, now, write_target
from lakectl.core.limits import check_content_type, check_metadata
from lakectl.core.listing import list_objects
from lakectl.core.model import BranchId, Entry, ObjectInfo, PathType, RepositoryId, Row
from lakectl.core.porcelain import lookup, stage_updates, stat
from lakectl.core.protection import Move
from lakectl.core.uri import check_new_path, check_new_paths, check_path
from lakectl.errors import BlockNotFound, InvalidArgument, ObjectNotFound, PredicateFailed


def entry_for(
    size: int,
    checksum: str,
    locators: tuple[str, ...],
    content_type: str | None,
    metadata: Mapping[str, str] | None,
) -> Entry:
    """A new object entry stamped now, with its content type and metadata checked."""
    return Entry(
        size=size,
        checksum=checksum,
        locators=locators,
        mtime=now(),
        content_type=check_content_type(content_type),
        metadata=check_metadata(metadata or {}),
    )


def upload(
    lake: Lake,
    repo: str,
    branch: str,
    path: str,
    source: BinaryIO | bytes | memoryview,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    etag: str | None = None,
    new_blocks: NewBlocks | None = None,
) -> ObjectInfo:
    """Store the bytes as blocks (deduplicated), make them durable, then stage the object.
    ``etag`` is the md5 of the whole body, computed by the caller as it received it (the S3
    gateway): recorded as the object's checksum, and used as the block's hash when the body
    is one block. ``content_type`` None records ``application/octet-stream``: a REST or S3
    upload that says no type gets none guessed. ``new_blocks``: told each block the store did
    not hold before (:class:`Telling`)."""
    path = check_new_path(path)
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    content_type = check_content_type(content_type)  # refused before any block is written
    metadata = check_metadata(metadata or {})
    blocks = lake.blocks if new_blocks is None else Telling(lake.blocks, new_blocks)
    if isinstance(source, bytes | memoryview):
        written = write_bytes(blocks, source, md5=etag)
    else:
        written = write_object(blocks, source)
    entry = entry_for(written.size, etag or written.checksum, written.locators, content_type, metadata)
    lake.blocks.sync()
    stage_updates(lake, rid, bid, [(path, entry.to_row())])
    return ObjectInfo(path, PathType.OBJECT, entry)


def append(
    lake: Lake, repo: str, branch: str, path: str, source: BinaryIO | bytes | memoryview
) -> ObjectInfo:
    """Add the bytes to the end of the object at ``path`` on the branch, as blocks of their own
    after its blocks (none of them is rewritten); an object that is not there is created. The
    object keeps its content type and user metadata (:func:`appended`).

    The blocks are stored and made durable first; then, under the object's append lease
    (:mod:`~lakectl.core.leases`: appenders to one object take turns, for milliseconds, across
    processes and servers), its row is read and the longer row staged (:func:`_stage_append`).
    Two concurrent appends so both land, each whole, in some order. An imported object, whose
    bytes are not in the block store, is refused (``InvalidArgument``) before any byte is read."""
    path = check_new_path(path)
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    check_appendable(lookup(lake, rid, bid, path), path)  # before the source is read
    written = (
        write_bytes(lake.blocks, source)
        if isinstance(source, bytes | memoryview)
        else write_object(lake.blocks, source)
    )
    return _append_stored(lake, rid, bid, path, written.locators)


def append_blocks(lake: Lake, repo: str, branch: str, path: str, segments: Sequence[str]) -> ObjectInfo:
    """:func:`append` of bytes stored already, as the blocks (segment tokens) ``segments``: a
    remote client's, sent first by the block API."""
    path = check_new_path(path)
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    return _append_stored(lake, rid, bid, path, segments)


def _append_stored(
    lake: Lake, rid: RepositoryId, bid: BranchId, path: str, segments: Sequence[str]
) -> ObjectInfo:
    """Add the stored blocks ``segments`` to the object, made durable before the object names
    them, under the object's append lease."""
    lake.blocks.sync()
    lease = keys.append_lease_key(rid, bid, path)
    with leases.held(lake.kv, keys.LEASES, lease, f"could not append to {path!r} on {bid!r}"):
        entry = _stage_append(lake, rid, bid, path, segments)
    return ObjectInfo(path, PathType.OBJECT, entry)


def _stage_append(lake: Lake, rid: RepositoryId, bid: BranchId, path: str, locators: Sequence[str]) -> Entry:
    """Read the object as the branch is, and stage it with ``locators`` added, over exactly
    what was read: a compare-and-swap on the path's value in the branch's token
    (:class:`~lakectl.core.graph.staging.Expect`). An upload of the object that lands between
    the read and the write (appenders hold the lease; uploaders do not) makes it read again;
    one that lands after a commit's seal made the write go again is left over it."""

    def attempt() -> Entry | Again:
        branch = lake.refs.get_branch(rid, bid)
        expect = lake.staging.expect(rid, branch, path)
        base = check_appendable(lake.staging.lookup(rid, branch, path), path)
        if lake.refs.get_branch(rid, bid) != branch:
            return AGAIN  # a commit moved staged rows into its tree between the looks
        entry = appended(lake.blocks, base, locators)
        if entry is base:
            return entry
        try:
            stage_updates(lake, rid, bid, [(path, entry.to_row())], expect=expect)
        except PredicateFailed:
            return AGAIN  # another write of the object landed after the read
        return entry

    return retry(STAGING_TOKEN, attempt, f"could not append to {path!r} on branch {bid!r}: it kept changing")


def appended(blocks: BlockAdapter, base: Entry | None, locators: Sequence[str]) -> Entry:
    """The entry of object ``base`` (None: none yet) with the blocks ``locators`` added at its end,
    stamped now: its content type and metadata kept, its checksum its blocks' composite ETag
    (:func:`segments_checksum`). Empty blocks are left out: an empty append returns ``base``
    itself, and creates an empty object where there was none."""
    added = tuple(token for token in locators if parse_segment(token)[3])
    if base is not None and not added:
        return base
    old = base if base is not None else Entry(size=0, checksum="", locators=(), mtime=0)
    tokens = old.locators + added if added else (EMPTY_LOCATOR,)
    size = old.size + sum(parse_segment(token)[3] for token in added)
    checksum = segments_checksum(blocks, tokens)
    return dataclasses.replace(old, size=size, checksum=checksum, locators=tokens, mtime=now())


def check_appendable(row: Row | None, path: str) -> Entry | None:
    """The entry of ``row`` (None for no object), if blocks can be added to it: else, for an
    imported object, whose bytes stay at their source, ``InvalidArgument``."""
    if row is None:
        return None
    entry = Entry.from_row(row)
    if entry.external is not None:
        raise InvalidArgument(
            f"cannot append to {path!r}: it is an imported object, whose bytes stay at "
            f"{entry.external.address} (an append adds blocks to an object stored in the lake)"
        )
    return entry


def upload_files(
    lake: Lake,
    repo: str,
    branch: str,
    files: Sequence[tuple[str, str]],
    content_type: str | None = None,
    progress: Progress | None = None,
    new_blocks: NewBlocks | None = None,
) -> list[ObjectInfo]:
    """Upload many local files ``(path in the lake, local file)``: blocks first, one durability
    barrier, then one staging batch, so a crash never leaves staged objects without data.
    ``content_type`` is every file's; None: each file's own, guessed from its path
    (:func:`~lakectl.core.contenttypes.guess_content_type`). ``new_blocks``: told each block
    the store did not hold before (:class:`Telling`).

    Small files are read and hashed in path order by this thread, one ``open``/``read``/
    ``close`` each; a second thread hashes and writes the packs they fill (see
    :func:`pack_files`), then syncs. More reader threads only slow this down: each 4 KiB read and
    md5 gives the GIL up and must win it back, so threads queue for it instead of working. Large
    files are streamed into blocks of their own as they come."""
    from concurrent.futures import ThreadPoolExecutor

    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    one_type = None if content_type is None else check_content_type(content_type)
    ordered = sorted(files)
    check_new_paths([path for path, _ in ordered])
    written: dict[str, WrittenObject] = {}
    blocks = lake.blocks if new_blocks is None else Telling(lake.blocks, new_blocks)
    with ThreadPoolExecutor(1, thread_name_prefix="lakectl-packs") as pool:
        packs = AdapterPacks(blocks)
        for step in pack_files(ordered, packs, pool, progress=progress, every=PROGRESS_EVERY):
            if isinstance(step, Unpacked):
                with directio.SourceFile(step.local) as f:
                    written[step.path] = write_object(blocks, cast(BinaryIO, f))
            else:
                written.update(step)
        # The durability barrier waits on the disk, not the GIL: it runs on the pack thread
        # while this one builds the rows, and nothing is staged before it has returned.
        synced = pool.submit(lake.blocks.sync)
        mtime = now()
        infos: list[ObjectInfo] = []
        updates: list[Update] = []
        for path, _ in ordered:
            w = written[path]
            # Built directly: a content type given is checked above, a guessed one is safe, and
            # there is no metadata.
            entry = Entry(
                size=w.size,
                checksum=w.checksum,
                locators=w.locators,
                mtime=mtime,
                content_type=guess_content_type(path) if one_type is None else one_type,
            )
            infos.append(ObjectInfo(path, PathType.OBJECT, entry))
            updates.append((path, entry.to_row()))
        synced.result()
    stage_updates(lake, rid, bid, updates)
    return infos


class Telling:
    """A block store whose puts tell ``new_blocks`` of each block it did not hold before, for an
    upload to say how many of its bytes were new after deduplication. It costs an ``exists``
    per block put (a ``stat`` on local disk, for a pack of up to a MiB or a block of 64 MiB)."""

    def __init__(self, adapter: BlockAdapter, new_blocks: NewBlocks) -> None:
        self._adapter, self._tell = adapter, new_blocks

    def put(self, locator: str, data: bytes | memoryview) -> None:
        new = not self._adapter.exists(locator)
        self._adapter.put(locator, data)
        if new:
            self._tell(locator, len(data))

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        return self._adapter.get(locator, offset, length)

    def exists(self, locator: str) -> bool:
        return self._adapter.exists(locator)

    def touch(self, locator: str) -> bool:
        return self._adapter.touch(locator)

    def modified(self, locator: str) -> float:
        return self._adapter.modified(locator)

    def delete(self, locator: str) -> None:
        self._adapter.delete(locator)

    def list(self) -> Iterator[str]:
        return self._adapter.list()

    def sync(self) -> None:
        self._adapter.sync()


def touch_blocks(lake: Lake, entry: Entry) -> None:
    """Touch every block of an entry that is about to be staged again without its data being
    written (a copy, a link): a garbage collection running meanwhile then spares them
    (docs/decisions/0008). ``BlockNotFound`` if one is gone, and the caller stages nothing."""
    for token in entry.locators:
        bare, _, _, length = parse_segment(token)
        if length and not lake.blocks.touch(bare):
            raise BlockNotFound(f"block {bare} is no longer stored", locator=bare)


def copy_object(lake: Lake, repo: str, branch: str, path: str, source: Entry) -> Entry:
    """Stage ``source`` (an entry of any ref, of any repository of the lake) at ``path`` on the
    branch, stamped now: the copy shares the source's blocks, no byte is written. Returns the
    staged entry. The REST API's and the S3 gateway's copies both come here."""
    path = check_new_path(path)
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    entry = dataclasses.replace(source, mtime=now())
    touch_blocks(lake, entry)
    stage_updates(lake, rid, bid, [(path, entry.to_row())])
    return entry


def copy_from(lake: Lake, repo: str, branch: str, path: str, source_ref: str, source_path: str) -> Entry:
    """lakeFS's copyObject: stage a copy of the object at ``source_path`` of ``source_ref`` (any
    ref of the repository) at ``path`` on the branch (:func:`copy_object`: no byte written)."""
    source = stat(lake, repo, source_ref, source_path)
    assert source.entry is not None
    return copy_object(lake, repo, branch, path, source.entry)


def stage_rows(lake: Lake, repo: str, branch: str, updates: Sequence[Update]) -> None:
    """Stage prepared rows (library fast path for bulk staging: no data is written)."""
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    stage_updates(lake, rid, bid, updates)


def check_writable(lake: Lake, repo: str, branch: str) -> None:
    """Raise what a write to ``branch`` would: no repository, no such branch, a ref that exists
    but is no branch (InvalidRef), a protected branch -- before a caller reads a body it would
    then refuse."""
    write_target(lake, repo, branch, Move.STAGE)


def delete_existing(lake: Lake, repo: str, branch: str, paths: Sequence[str]) -> list[str]:
    """Delete those of ``paths`` that exist on the branch (S3 and lakeFS batch deletes: a missing
    path is no error); return them. A path deleted concurrently gets a second tombstone: the
    same change."""
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    present = sorted({p for p in paths if lookup(lake, repo, branch, check_path(p)) is not None})
    if present:
        stage_updates(lake, rid, bid, [(p, None) for p in present], Verb.DELETE_OBJECTS)
    return present


def delete_objects(lake: Lake, repo: str, branch: str, paths: Sequence[str]) -> None:
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    missing = [p for p in paths if lookup(lake, repo, branch, check_path(p)) is None]
    if missing:
        raise ObjectNotFound(f"object {missing[0]!r} not found on branch {branch!r}")
    stage_updates(lake, rid, bid, [(p, None) for p in sorted(paths)], Verb.DELETE_OBJECTS)


def delete_prefix(lake: Lake, repo: str, branch: str, prefix: str) -> list[str]:
    """Delete every object under ``prefix`` on the branch; returns the deleted paths."""
    check_path(prefix, allow_empty=True)
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    paths = [o.path for o in list_objects(lake, repo, branch, prefix)]
    if paths:
        stage_updates(lake, rid, bid, [(p, None) for p in paths], Verb.DELETE_OBJECTS)
    return paths
