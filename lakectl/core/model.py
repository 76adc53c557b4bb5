"""Typed identities and frozen records of the lake: no I/O, no behaviour beyond (de)serialization."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, NewType

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

EXTERNAL_MARK = "{"
"""How the locators field of a row says "external": a locator starts with a hex digit, so a
JSON object there can only be an :class:`External` (docs/decisions/0010-import.md)."""


@dataclass(frozen=True, slots=True)
class External:
    """Where an imported object's bytes are, outside the lake, and the version guard a read checks:
    ``s3://bucket/key`` with the source's ETag, or an absolute local path with its mtime in ns."""

    address: str
    etag: str = ""
    mtime_ns: int = 0

    def encode(self) -> str:
        d: dict[str, Any] = {"address": self.address}
        if self.etag:
            d["etag"] = self.etag
        else:
            d["mtime_ns"] = self.mtime_ns
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def decode(text: str) -> External:
        d = json.loads(text)
        return External(str(d["address"]), str(d.get("etag", "")), int(d.get("mtime_ns", 0)))


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
    external: External | None = None
    """Set for an imported object: its bytes stay at the source (``locators`` is empty)."""

    def identity(self) -> tuple[Any, ...]:
        """What makes two entries the same object (mtime excluded: re-uploading equal data is no change)."""
        own = (
            self.size,
            self.checksum,
            self.locators,
            self.content_type,
            tuple(sorted(self.metadata.items())),
        )
        return own if self.external is None else (*own, self.external)

    def same_as(self, other: Entry | None) -> bool:
        return other is not None and self.identity() == other.identity()

    @property
    def physical_address(self) -> str:
        """lakeFS's ``physical_address``: where the bytes are, as the address of the first block
        in this lake's block store (``local://<md5>+<size>``; an object packed with others
        names its pack); an imported object's is its source address."""
        if self.external is not None:
            return self.external.address
        first = self.locators[0].split(":")[0] if self.locators else ""
        return BLOCK_ADDRESS_SCHEME + first

    def to_row(self) -> Row:
        meta = json.dumps(dict(self.metadata), sort_keys=True) if self.metadata else ""
        # An external entry's address and guard take the locators field: every other row keeps
        # its bytes, so no existing commit id changes.
        locs = self.external.encode() if self.external is not None else " ".join(self.locators)
        return (
            self.size,
            self.checksum,
            locs,
            self.mtime,
            self.content_type,
            meta,
        )

    @staticmethod
    def from_row(row: Row) -> Entry:
        size, checksum, locs, mtime, content_type, meta = row
        external = External.decode(locs) if locs.startswith(EXTERNAL_MARK) else None
        return Entry(
            size=size,
            checksum=checksum,
            locators=tuple(locs.split(" ")) if locs and external is None else (),
            mtime=mtime,
            content_type=content_type,
            metadata=json.loads(meta) if meta else {},
            external=external,
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
    size, checksum, locators, mtime, content_type, meta = row
    # One f-string rather than a join of str() of each field: half the time, at 100k rows.
    return f"{size}\0{checksum}\0{locators}\0{mtime}\0{content_type}\0{meta}".encode()


def decode_row(raw: bytes) -> Row:
    size, checksum, locs, mtime, content_type, meta = raw.decode().split(_SEP)
    return (int(size), checksum, locs, int(mtime), content_type, meta)


def same_row(a: Row | None, b: Row | None) -> bool:
    """Rows are the same object when all but mtime agree (see :meth:`Entry.identity`)."""
    if a is None or b is None:
        return a is b
    # Field by field, not a[:3] == b[:3]: a diff compares every row of the ranges it opens,
    # and slicing builds four tuples per comparison.
    return a is b or (a[1] == b[1] and a[2] == b[2] and a[0] == b[0] and a[4] == b[4] and a[5] == b[5])


def is_external(row: Row) -> bool:
    """Whether a row is an imported object's (its bytes are not in the block store)."""
    return row[2].startswith(EXTERNAL_MARK)


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
    hidden: bool = False
    """Kept out of branch lists unless they ask for hidden ones (lakeFS's hidden branches, such
    as its Python wrapper's transaction branches); otherwise an ordinary branch."""

    def encode(self) -> bytes:
        record: dict[str, Any] = {
            "name": self.name,
            "commit_id": self.commit_id,
            "staging_token": self.staging_token,
            "sealed_tokens": list(self.sealed_tokens),
        }
        if self.hidden:  # only then: every other record keeps its bytes
            record["hidden"] = True
        return json.dumps(record, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> Branch:
        d = json.loads(raw)
        return Branch(
            name=BranchId(d["name"]),
            commit_id=CommitId(d["commit_id"]),
            staging_token=StagingToken(d["staging_token"]),
            sealed_tokens=tuple(StagingToken(t) for t in d["sealed_tokens"]),
            hidden=bool(d.get("hidden", False)),
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


class RangeInfo(NamedTuple):
    """One entry of a page or root of a tree: a range (or page) file and the keys it covers.
    A named tuple: a walk over a tree decodes thousands, and a frozen dataclass costs ~5 times
    as much to build."""

    id: RangeId
    min_key: str
    max_key: str
    rows: int
    """Rows under it (for a page: under all its ranges)."""
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


class FeedKind(enum.Enum):
    """What a change feed's rows of an object are (Delta's change data feed names)."""

    INSERT = "insert"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class FeedChange:
    """One object a range of commits changed, as a change feed reads it. ``entry`` is the object
    at the range's end (an insert: added or changed) or at its start (a delete: removed); what
    the range wrote is its bytes from ``offset`` on (past the bytes it had at the start when the
    range only appended to it, else 0). ``commit_id`` is the newest commit of the range that
    changed it (:mod:`lakectl.core.feed`)."""

    path: str
    kind: FeedKind
    commit_id: CommitId
    entry: Entry
    offset: int = 0
