"""Records of the lake as the lakeFS API's JSON objects (field names as lakeFS sends them)."""

from __future__ import annotations

from typing import Any

from lakectl.core.model import Branch, Change, Commit, ObjectInfo, PathType, Repository, Tag


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


def prefix_changed(path: str) -> dict[str, Any]:
    """A common prefix of a diff listed with a delimiter."""
    return {"type": "prefix_changed", "path": path, "path_type": PathType.COMMON_PREFIX.value}
