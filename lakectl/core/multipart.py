"""Multipart uploads (S3's protocol): parts stored as durable blocks, completed by linking them.

An upload names its branch and path when it is created. Each part is written as blocks, made
durable, then recorded (a part uploaded again under the same number replaces the earlier one).
Completing checks the client's list of parts against the records (ascending numbers, matching
ETags, every part but the last at least :data:`MIN_PART` bytes), then stages one object whose
locators are the parts' locators in order: no byte is copied. Its ETag is S3's
``md5(part md5s)-N``. Records live under :func:`lakectl.core.keys.multipart_partition`.
Aborting drops the records; the blocks of parts no object links are garbage for GC.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from lakectl.core import keys, porcelain, writes
from lakectl.core.blocks.data import parse_segment, read_object, segment_token, write_bytes, write_object
from lakectl.core.lake import Lake, now
from lakectl.core.model import Entry, ObjectInfo, PathType
from lakectl.core.uri import check_new_path
from lakectl.errors import (
    EntityTooSmall,
    InvalidArgument,
    InvalidPart,
    InvalidPartOrder,
    KeyNotFound,
    UploadNotFound,
)

MIN_PART = 5 * 1024 * 1024
MAX_PART_NUMBER = 10_000


@dataclass(frozen=True, slots=True)
class Upload:
    id: str
    branch: str
    path: str
    initiated: int
    content_type: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        record = {
            "branch": self.branch,
            "path": self.path,
            "initiated": self.initiated,
            "content_type": self.content_type,
            "metadata": dict(self.metadata),
        }
        return json.dumps(record, sort_keys=True).encode()

    @staticmethod
    def decode(upload_id: str, raw: bytes) -> Upload:
        d: dict[str, Any] = json.loads(raw)
        return Upload(upload_id, d["branch"], d["path"], d["initiated"], d["content_type"], d["metadata"])


@dataclass(frozen=True, slots=True)
class Part:
    number: int
    etag: str
    """Hex md5 of the part's bytes."""
    size: int
    locators: tuple[str, ...]
    last_modified: int

    def encode(self) -> bytes:
        record = {
            "etag": self.etag,
            "size": self.size,
            "locators": list(self.locators),
            "last_modified": self.last_modified,
        }
        return json.dumps(record, sort_keys=True).encode()

    @staticmethod
    def decode(number: int, raw: bytes) -> Part:
        d: dict[str, Any] = json.loads(raw)
        return Part(number, d["etag"], d["size"], tuple(d["locators"]), d["last_modified"])


def _partition(lake: Lake, repo: str) -> str:
    return keys.multipart_partition(porcelain.get_repo(lake, repo).name)


def create(
    lake: Lake,
    repo: str,
    branch: str,
    path: str,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Upload:
    """Start an upload to ``path`` on ``branch`` (which must be a branch now and at completion)."""
    path = check_new_path(path)
    writes.check_writable(lake, repo, branch)
    # Checked now, so that a bad content type fails here rather than after every part is sent.
    writes.entry_for(0, "", (), content_type, metadata)
    upload = Upload(secrets.token_hex(16), branch, path, now(), content_type, dict(metadata or {}))
    lake.kv.set_if(_partition(lake, repo), keys.upload_key(upload.id), upload.encode(), None)
    return upload


def get(lake: Lake, repo: str, upload_id: str) -> Upload:
    if not isinstance(upload_id, str) or not upload_id.isalnum() or len(upload_id) > 64:
        raise UploadNotFound(f"no multipart upload {upload_id!r}", upload_id=str(upload_id)[:100])
    try:
        raw = lake.kv.get(_partition(lake, repo), keys.upload_key(upload_id))
    except KeyNotFound:
        raise UploadNotFound(
            f"no multipart upload {upload_id!r}: never created, or completed or aborted since",
            upload_id=upload_id,
        ) from None
    return Upload.decode(upload_id, raw)


def list_uploads(lake: Lake, repo: str) -> Iterator[Upload]:
    """The repository's uploads in flight, by id."""
    for key, raw in lake.kv.scan(_partition(lake, repo), keys.UPLOAD_PREFIX):
        if not key.startswith(keys.UPLOAD_PREFIX):
            return
        yield Upload.decode(key[len(keys.UPLOAD_PREFIX) :], raw)


def _check_number(number: int) -> int:
    if not 1 <= number <= MAX_PART_NUMBER:
        raise InvalidArgument(f"part number {number} is outside 1..{MAX_PART_NUMBER}")
    return number


def _record(lake: Lake, repo: str, upload: Upload, part: Part) -> Part:
    # Blocks first, durable, then the record: a recorded part never points at lost data.
    lake.blocks.sync()
    get(lake, repo, upload.id)  # still in flight (an abort meanwhile wins)
    lake.kv.set(_partition(lake, repo), keys.part_key(upload.id, part.number), part.encode())
    return part


def put_part(
    lake: Lake,
    repo: str,
    upload_id: str,
    number: int,
    source: BinaryIO | bytes | memoryview,
    etag: str,
) -> Part:
    """Store one part, in memory or read from a file; ``etag`` is the hex md5 of its bytes (the
    gateway computed it while receiving them; a part of one block is not hashed again)."""
    upload = get(lake, repo, upload_id)
    _check_number(number)
    if isinstance(source, bytes | memoryview):
        written = write_bytes(lake.blocks, source, md5=etag)
    else:
        written = write_object(lake.blocks, source)
    locators = tuple(t for t in written.locators if parse_segment(t)[3] > 0)
    return _record(lake, repo, upload, Part(number, etag, written.size, locators, now()))


def copy_part(
    lake: Lake, repo: str, upload_id: str, number: int, source: Entry, start: int, end: int
) -> Part:
    """A part made of bytes ``[start, end)`` of an existing object: its locators, cut to the
    range, are reused (the bytes are read once, for the part's md5, never written)."""
    upload = get(lake, repo, upload_id)
    _check_number(number)
    if source.external is not None:
        raise InvalidArgument(
            "an imported object cannot be a part's copy source: its bytes are not in the lake"
        )
    if not 0 <= start <= end <= source.size:
        raise InvalidArgument(f"range {start}-{end} is outside the source object of {source.size} bytes")
    tokens: list[str] = []
    position = 0
    for token in source.locators:
        bare, _, offset, length = parse_segment(token)
        seg_start, position = position, position + length
        lo, hi = max(start, seg_start), min(end, position)
        if lo < hi:
            tokens.append(segment_token(bare, offset + lo - seg_start, hi - lo))
    writes.touch_blocks(lake, source)  # reused, not written: keep them from a concurrent GC
    md5 = hashlib.md5()
    for chunk in read_object(lake.blocks, tokens):
        md5.update(chunk)
    part = Part(number, md5.hexdigest(), end - start, tuple(tokens), now())
    return _record(lake, repo, upload, part)


def list_parts(lake: Lake, repo: str, upload_id: str) -> list[Part]:
    get(lake, repo, upload_id)
    prefix = keys.part_prefix(upload_id)
    parts = []
    for key, raw in lake.kv.scan(_partition(lake, repo), prefix):
        if not key.startswith(prefix):
            break
        parts.append(Part.decode(int(key[len(prefix) :]), raw))
    return parts


def multipart_etag(md5s: Sequence[str]) -> str:
    """S3's ETag of a multipart object: md5 of the parts' binary md5s, ``-`` their count."""
    digest = hashlib.md5(b"".join(bytes.fromhex(m) for m in md5s)).hexdigest()
    return f"{digest}-{len(md5s)}"


def complete(lake: Lake, repo: str, upload_id: str, chosen: Sequence[tuple[int, str]]) -> ObjectInfo:
    """Stage the object made of the ``(part number, etag)`` the client lists, then forget the
    upload. Raise ``InvalidPartOrder``, ``InvalidPart`` or ``EntityTooSmall`` and stage nothing
    when the list does not hold."""
    upload = get(lake, repo, upload_id)
    if not chosen:
        raise InvalidArgument("CompleteMultipartUpload needs at least one part")
    numbers = [n for n, _ in chosen]
    if any(b <= a for a, b in itertools.pairwise(numbers)):
        raise InvalidPartOrder("the list of parts was not in ascending order of part number")
    stored = {part.number: part for part in list_parts(lake, repo, upload_id)}
    parts: list[Part] = []
    for number, etag in chosen:
        part = stored.get(number)
        if part is None or part.etag != etag.strip().strip('"'):
            raise InvalidPart(
                f"part {number} was not uploaded, or its ETag does not match {etag!r}", part_number=number
            )
        parts.append(part)
    for part in parts[:-1]:
        if part.size < MIN_PART:
            raise EntityTooSmall(
                f"part {part.number} is {part.size} bytes: every part but the last must be at least "
                f"{MIN_PART} bytes",
                part_number=part.number,
            )
    locators = tuple(t for part in parts for t in part.locators)
    size = sum(part.size for part in parts)
    entry = writes.entry_for(
        size, multipart_etag([p.etag for p in parts]), locators, upload.content_type, upload.metadata
    )
    writes.stage_rows(lake, repo, upload.branch, [(upload.path, entry.to_row())])
    _forget(lake, repo, upload_id)
    return ObjectInfo(upload.path, PathType.OBJECT, entry)


def abort(lake: Lake, repo: str, upload_id: str) -> None:
    get(lake, repo, upload_id)
    _forget(lake, repo, upload_id)


def _forget(lake: Lake, repo: str, upload_id: str) -> None:
    partition = _partition(lake, repo)
    lake.kv.delete(partition, keys.upload_key(upload_id))
    for part in list(_part_keys(lake, partition, upload_id)):
        lake.kv.delete(partition, part)


def _part_keys(lake: Lake, partition: str, upload_id: str) -> Iterator[str]:
    prefix = keys.part_prefix(upload_id)
    for key, _ in lake.kv.scan(partition, prefix):
        if not key.startswith(prefix):
            return
        yield key
