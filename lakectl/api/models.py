"""What the API returns: lakeFS's wrapper's records, with its field names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lake's own records: imported by the calls that return them
    from lakectl.core.model import Change as CoreChange
    from lakectl.core.model import Commit as CoreCommit
    from lakectl.core.model import ObjectInfo as CoreObjectInfo


@dataclass(frozen=True)
class RepositoryProperties:
    id: str
    creation_date: int
    default_branch: str
    storage_namespace: str


@dataclass(frozen=True)
class Commit:
    id: str
    parents: list[str]
    committer: str
    message: str
    creation_date: int
    meta_range_id: str
    metadata: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(commit: CoreCommit) -> Commit:
        return Commit(
            commit.id,
            list(commit.parents),
            commit.committer,
            commit.message,
            commit.creation_date,
            commit.meta_range_id,
            dict(commit.metadata),
        )


@dataclass(frozen=True)
class Change:
    """A path that differs: ``type`` is ``added``, ``removed``, ``changed`` or ``conflict``."""

    type: str
    path: str
    path_type: str
    size_bytes: int | None

    @staticmethod
    def of(change: CoreChange) -> Change:
        d = change.to_dict()
        return Change(d["type"], d["path"], d["path_type"], d["size_bytes"])


@dataclass(frozen=True)
class ObjectInfo:
    """An object of a listing, or its ``stat()``."""

    path: str
    physical_address: str
    checksum: str
    mtime: int
    size_bytes: int
    content_type: str = "application/octet-stream"
    metadata: dict[str, str] = field(default_factory=dict)
    path_type: str = "object"

    @staticmethod
    def of(info: CoreObjectInfo) -> ObjectInfo:
        e = info.entry
        assert e is not None
        address = info.address if info.address is not None else e.physical_address
        return ObjectInfo(info.path, address, e.checksum, e.mtime, e.size, e.content_type, dict(e.metadata))


@dataclass(frozen=True)
class CommonPrefix:
    """A ``delimiter`` listing's group of objects under one prefix."""

    path: str
    path_type: str = "common_prefix"
