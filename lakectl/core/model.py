"""Typed identities and frozen records of the lake: no I/O, no behaviour beyond (de)serialization."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NewType

RepositoryId = NewType("RepositoryId", str)
BranchId = NewType("BranchId", str)
TagId = NewType("TagId", str)
CommitId = NewType("CommitId", str)
StagingToken = NewType("StagingToken", str)
RangeId = NewType("RangeId", str)
"""A range's id is the Keep locator (``md5+size``) of its Parquet file in the block store."""
MetaRangeId = NewType("MetaRangeId", str)
Path = NewType("Path", str)

BLOCK_SIZE = 64 * 1024 * 1024
"""Objects are split into blocks of at most this many bytes."""

DEFAULT_BRANCH = BranchId("main")
INITIAL_COMMIT_MESSAGE = "Repository created"


class PathType(enum.Enum):
    OBJECT = "object"
    COMMON_PREFIX = "common_prefix"


class DiffType(enum.Enum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    CONFLICT = "conflict"


class MergeStrategy(enum.Enum):
    """How a merge resolves a conflicting path."""

    NONE = "none"
    DEST_WINS = "dest-wins"
    SOURCE_WINS = "source-wins"


class ResetKind(enum.Enum):
    ALL = "reset"
    PREFIX = "common_prefix"
    OBJECT = "object"


BLOCK_ADDRESS_SCHEME = "local://"
"""Scheme of an object's ``physical_address``: a block of the lake's own block store."""


@dataclass(frozen=True, slots=True)
class Entry:
    """An object's metadata: where its bytes are (ordered block locators) and what they are."""

    size: int
    checksum: str
    """S3-style ETag: md5 hex of the whole object for single-block objects, else md5-of-md5s-N."""
    locators: tuple[str, ...]
    mtime: int
    content_type: str = "application/octet-stream"
    metadata: Mapping[str, str] = field(default_factory=dict)

    def identity(self) -> tuple[Any, ...]:
        """What makes two entries the same object (mtime excluded: re-uploading equal data is no change)."""
        return (
            self.size,
            self.checksum,
            self.locators,
            self.content_type,
            tuple(sorted(self.metadata.items())),
        )

    def same_as(self, other: Entry | None) -> bool:
        return other is not None and self.identity() == other.identity()

    @property
    def physical_address(self) -> str:
        """lakeFS's ``physical_address``: where the bytes are, as the address of the first block
        in this lake's block store (``local://<md5>+<size>``; an object packed with others
        names its pack)."""
        first = self.locators[0].split(":")[0] if self.locators else ""
        return BLOCK_ADDRESS_SCHEME + first

    def to_row(self) -> Row:
        meta = json.dumps(dict(self.metadata), sort_keys=True) if self.metadata else ""
        return (
            self.size,
            self.checksum,
            " ".join(self.locators),
            self.mtime,
            self.content_type,
            meta,
        )

    @staticmethod
    def from_row(row: Row) -> Entry:
        size, checksum, locs, mtime, content_type, meta = row
        return Entry(
            size=size,
            checksum=checksum,
            locators=tuple(locs.split(" ")) if locs else (),
            mtime=mtime,
            content_type=content_type,
            metadata=json.loads(meta) if meta else {},
        )

    def encode(self) -> bytes:
        return encode_row(self.to_row())

    @staticmethod
    def decode(raw: bytes) -> Entry:
        return Entry.from_row(decode_row(raw))


Row = tuple[int, str, str, int, str, str]
"""An entry as stored in staging and in range files: (size, checksum, locators joined by
spaces, mtime, content_type, metadata as sorted JSON or ""). The hot paths (commit, diff,
merge) move rows and build :class:`Entry` objects only for output."""


_SEP = "\x00"


def encode_row(row: Row) -> bytes:
    """NUL-separated fields: no field can hold a NUL (metadata is JSON, which escapes it; the
    other fields are validated), and splitting is several times faster than JSON on 1M rows."""
    return _SEP.join(map(str, row)).encode()


def decode_row(raw: bytes) -> Row:
    size, checksum, locs, mtime, content_type, meta = raw.decode().split(_SEP)
    return (int(size), checksum, locs, int(mtime), content_type, meta)


def same_row(a: Row | None, b: Row | None) -> bool:
    """Rows are the same object when all but mtime agree (see :meth:`Entry.identity`)."""
    if a is None or b is None:
        return a is b
    return a is b or (a[:3] == b[:3] and a[4:] == b[4:])


TOMBSTONE = b""
"""A staged value meaning "deleted on this branch"."""


@dataclass(frozen=True, slots=True)
class Repository:
    name: RepositoryId
    default_branch: BranchId
    creation_date: int
    storage_namespace: str = "local://"

    def encode(self) -> bytes:
        return json.dumps(
            {
                "name": self.name,
                "default_branch": self.default_branch,
                "creation_date": self.creation_date,
                "storage_namespace": self.storage_namespace,
            }
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> Repository:
        d = json.loads(raw)
        return Repository(
            name=RepositoryId(d["name"]),
            default_branch=BranchId(d["default_branch"]),
            creation_date=d["creation_date"],
            storage_namespace=d.get("storage_namespace", "local://"),
        )


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch record; updated only by compare-and-swap on its encoded bytes."""

    name: BranchId
    commit_id: CommitId
    staging_token: StagingToken
    sealed_tokens: tuple[StagingToken, ...] = ()

    def encode(self) -> bytes:
        return json.dumps(
            {
                "name": self.name,
                "commit_id": self.commit_id,
                "staging_token": self.staging_token,
                "sealed_tokens": list(self.sealed_tokens),
            },
            separators=(",", ":"),
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> Branch:
        d = json.loads(raw)
        return Branch(
            name=BranchId(d["name"]),
            commit_id=CommitId(d["commit_id"]),
            staging_token=StagingToken(d["staging_token"]),
            sealed_tokens=tuple(StagingToken(t) for t in d["sealed_tokens"]),
        )

    @property
    def tokens(self) -> tuple[StagingToken, ...]:
        """Staging tokens, newest first: the order in which readers consult them."""
        return (self.staging_token, *self.sealed_tokens)


@dataclass(frozen=True, slots=True)
class Commit:
    id: CommitId
    parents: tuple[CommitId, ...]
    committer: str
    message: str
    creation_date: int
    meta_range_id: MetaRangeId
    metadata: Mapping[str, str]
    generation: int

    def to_dict(self) -> dict[str, Any]:
        """The lakeFS API's field names."""
        return {
            "id": self.id,
            "parents": list(self.parents),
            "committer": self.committer,
            "message": self.message,
            "creation_date": self.creation_date,
            "meta_range_id": self.meta_range_id,
            "metadata": dict(self.metadata),
            "generation": self.generation,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> Commit:
        d = json.loads(raw)
        return Commit(
            id=CommitId(d["id"]),
            parents=tuple(CommitId(p) for p in d["parents"]),
            committer=d["committer"],
            message=d["message"],
            creation_date=d["creation_date"],
            meta_range_id=MetaRangeId(d["meta_range_id"]),
            metadata=d["metadata"],
            generation=d["generation"],
        )


@dataclass(frozen=True, slots=True)
class Tag:
    name: TagId
    commit_id: CommitId


@dataclass(frozen=True, slots=True)
class RangeInfo:
    """One row of a metarange: a range file and the keys it covers."""

    id: RangeId
    min_key: str
    max_key: str
    count: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object as users see it (lakeFS ObjectStats), or a common prefix when listing."""

    path: str
    path_type: PathType
    entry: Entry | None = None
    address: str | None = None
    """The physical address a server reported (its client holds no locators), else None: the
    entry's own."""

    def to_dict(self) -> dict[str, Any]:
        if self.entry is None:
            return {"path": self.path, "path_type": self.path_type.value}
        e = self.entry
        return {
            "path": self.path,
            "path_type": self.path_type.value,
            "physical_address": self.address if self.address is not None else e.physical_address,
            "checksum": e.checksum,
            "size_bytes": e.size,
            "mtime": e.mtime,
            "content_type": e.content_type,
            "metadata": dict(e.metadata),
        }


@dataclass(frozen=True, slots=True)
class Change:
    """One path that differs between two trees: ``new`` is its row after (None when removed),
    ``old`` its row before (None when added)."""

    path: str
    type: DiffType
    new: Row | None
    old: Row | None = None

    @property
    def entry(self) -> Entry | None:
        return Entry.from_row(self.new) if self.new is not None else None

    def to_dict(self) -> dict[str, Any]:
        row = self.new if self.new is not None else self.old
        return {
            "type": self.type.value,
            "path": self.path,
            "path_type": PathType.OBJECT.value,
            "size_bytes": row[0] if row is not None else 0,
        }
