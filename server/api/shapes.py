"""Records of the lake as the lakeFS API's JSON objects (field names as lakeFS sends them)."""

from __future__ import annotations

from typing import Any

from lakectl.core.model import Branch, Change, Commit, FeedChange, ObjectInfo, PathType, Repository, Tag


def repository(r: Repository) -> dict[str, Any]:
    return {
        "id": r.name,
        "creation_date": r.creation_date,
        "default_branch": r.default_branch,
        "storage_namespace": r.storage_namespace,
        "read_only": False,
    }


def ref(r: Branch | Tag) -> dict[str, Any]:
    return {"id": r.name, "commit_id": r.commit_id}


def commit(c: Commit) -> dict[str, Any]:
    return c.to_dict()


def object_stats(info: ObjectInfo, user_metadata: bool = True) -> dict[str, Any]:
    """lakeFS ``ObjectStats``; a common prefix carries the required fields empty, as lakeFS does."""
    if info.entry is None or info.path_type is PathType.COMMON_PREFIX:
        return {
            "path": info.path,
            "path_type": PathType.COMMON_PREFIX.value,
            "physical_address": "",
            "checksum": "",
            "mtime": 0,
        }
    out = info.to_dict()
    if not user_metadata:
        del out["metadata"]
    return out


def diff(c: Change) -> dict[str, Any]:
    return c.to_dict()


def feed_change(c: FeedChange, locators: list[str] | None = None) -> dict[str, Any]:
    """A change feed's object (lakectl's): ``locators`` its segments (signed ones, given), as
    ``GET .../objects/signed`` names them."""
    e = c.entry
    return {
        "type": c.kind.value,
        "path": c.path,
        "commit_id": c.commit_id,
        "offset": c.offset,
        "size_bytes": e.size,
        "checksum": e.checksum,
        "mtime": e.mtime,
        "content_type": e.content_type,
        "locators": list(e.locators) if locators is None else locators,
    }


def prefix_changed(path: str) -> dict[str, Any]:
    """A common prefix of a diff listed with a delimiter."""
    return {"type": "prefix_changed", "path": path, "path_type": PathType.COMMON_PREFIX.value}
