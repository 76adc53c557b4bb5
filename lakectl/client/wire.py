"""The lakeFS JSON shapes a server answers, decoded into the records of :mod:`lakectl.core.model`
(the remote backend's side of the wire; the server's is ``server/api/shapes.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakectl.core.model import Branch, Change, Commit, FeedChange, ObjectInfo, Repository, Tag


def repository(d: Mapping[str, Any]) -> Repository:
    from lakectl.core.model import BranchId, Repository, RepositoryId

    return Repository(
        name=RepositoryId(d["id"]),
        default_branch=BranchId(d["default_branch"]),
        creation_date=int(d["creation_date"]),
        storage_namespace=d.get("storage_namespace", ""),
    )


def branch(d: Mapping[str, Any]) -> Branch:
    from lakectl.core.model import Branch, BranchId, CommitId, StagingToken

    return Branch(BranchId(d["id"]), CommitId(d["commit_id"]), StagingToken(""))


def tag(d: Mapping[str, Any]) -> Tag:
    from lakectl.core.model import CommitId, Tag, TagId

    return Tag(TagId(d["id"]), CommitId(d["commit_id"]))


def commit(d: Mapping[str, Any]) -> Commit:
    from lakectl.core.model import Commit, CommitId, MetaRangeId

    return Commit(
        id=CommitId(d["id"]),
        parents=tuple(CommitId(p) for p in d["parents"]),
        committer=d["committer"],
        message=d["message"],
        creation_date=int(d["creation_date"]),
        meta_range_id=MetaRangeId(d.get("meta_range_id", "")),
        metadata=dict(d.get("metadata") or {}),
        generation=int(d.get("generation", 0)),
    )


def object_info(d: Mapping[str, Any]) -> ObjectInfo:
    from lakectl.core.model import Entry, ObjectInfo, PathType

    if d.get("path_type") == "common_prefix":
        return ObjectInfo(d["path"], PathType.COMMON_PREFIX)
    entry = Entry(
        size=int(d.get("size_bytes") or 0),
        checksum=d.get("checksum", ""),
        locators=(),
        mtime=int(d.get("mtime") or 0),
        content_type=d.get("content_type") or "application/octet-stream",
        metadata=dict(d.get("metadata") or {}),
    )
    return ObjectInfo(d["path"], PathType.OBJECT, entry, d.get("physical_address"))


def change(d: Mapping[str, Any]) -> Change:
    from lakectl.core.model import Change, DiffType

    kind = DiffType(d["type"])
    row = (int(d.get("size_bytes") or 0), "", "", 0, "", "")
    if kind is DiffType.REMOVED:
        return Change(d["path"], kind, None, row)
    return Change(d["path"], kind, row, row if kind is DiffType.CHANGED else None)


def feed_change(d: Mapping[str, Any]) -> FeedChange:
    from lakectl.core.model import CommitId, Entry, FeedChange, FeedKind

    entry = Entry(
        size=int(d["size_bytes"]),
        checksum=d.get("checksum", ""),
        locators=tuple(d["locators"]),
        mtime=int(d.get("mtime") or 0),
        content_type=d.get("content_type") or "application/octet-stream",
    )
    return FeedChange(d["path"], FeedKind(d["type"]), CommitId(d["commit_id"]), entry, int(d["offset"]))
