"""Garbage collection of a repository's blocks: its retention rules (lakeFS's ``gc_rules``).

The rules say how long commits are kept from collection: a branch's head always, and its ancestors
for ``retention_days`` (the branch's own, else the repository's default). The collector that
applies them follows docs/decisions/0008.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.core import keys, porcelain
from lakectl.core.graph.refs import check_branch_name
from lakectl.core.model import BranchId
from lakectl.errors import InvalidArgument, KeyNotFound, NotFound

MAX_DAYS = 100 * 365


@dataclass(frozen=True, slots=True)
class BranchRetention:
    branch_id: BranchId
    retention_days: int


@dataclass(frozen=True, slots=True)
class GCRules:
    default_retention_days: int
    branches: tuple[BranchRetention, ...] = ()

    def retention_days(self, branch: str) -> int:
        """How many days commits reachable from ``branch`` are retained."""
        for rule in self.branches:
            if rule.branch_id == branch:
                return rule.retention_days
        return self.default_retention_days

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``GarbageCollectionRules``."""
        return {
            "default_retention_days": self.default_retention_days,
            "branches": [
                {"branch_id": b.branch_id, "retention_days": b.retention_days} for b in self.branches
            ],
        }

    @staticmethod
    def from_dict(data: object) -> GCRules:
        """Rules from their JSON form; anything else (unknown keys, negative or fractional days,
        invalid or repeated branch names) is an ``InvalidArgument`` naming the problem."""
        if not isinstance(data, Mapping):
            raise InvalidArgument("gc rules must be a JSON object")
        _only(data, {"default_retention_days", "branches"}, "gc rules")
        if "default_retention_days" not in data:
            raise InvalidArgument("gc rules need default_retention_days")
        default = _days(data["default_retention_days"], "default_retention_days")
        rows = data.get("branches", [])
        if not isinstance(rows, list):
            raise InvalidArgument("gc rules: branches must be a list")
        branches: list[BranchRetention] = []
        for row in rows:
            if not isinstance(row, Mapping) or "branch_id" not in row or "retention_days" not in row:
                raise InvalidArgument("gc rules: each branch rule is {branch_id, retention_days}")
            _only(row, {"branch_id", "retention_days"}, "a branch rule")
            if not isinstance(row["branch_id"], str):
                raise InvalidArgument("gc rules: branch_id must be a string")
            branch = check_branch_name(row["branch_id"])
            if any(b.branch_id == branch for b in branches):
                raise InvalidArgument(f"gc rules: branch {branch!r} has two rules")
            branches.append(
                BranchRetention(branch, _days(row["retention_days"], f"{branch}'s retention_days"))
            )
        return GCRules(default, tuple(branches))


def _only(data: Mapping[Any, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise InvalidArgument(f"{what}: unknown field {unknown[0]!r} (expected {', '.join(sorted(allowed))})")


def _days(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DAYS:
        raise InvalidArgument(f"gc rules: {what} must be a whole number of days from 0 to {MAX_DAYS}")
    return value


def set_rules(lake: porcelain.Lake, repo: str, rules: GCRules) -> None:
    partition = keys.repo_partition(porcelain.get_repo(lake, repo).name)
    lake.kv.set(partition, keys.GC_RULES, json.dumps(rules.to_dict(), sort_keys=True).encode())


def get_rules(lake: porcelain.Lake, repo: str) -> GCRules:
    """The repository's rules; ``NotFound`` when none were set (nothing is collected then)."""
    partition = keys.repo_partition(porcelain.get_repo(lake, repo).name)
    try:
        raw = lake.kv.get(partition, keys.GC_RULES)
    except KeyNotFound:
        raise NotFound(
            f"repository {repo!r} has no garbage-collection rules: set them with gc set-config"
        ) from None
    return GCRules.from_dict(json.loads(raw))


def delete_rules(lake: porcelain.Lake, repo: str) -> None:
    """Forget the rules (idempotent)."""
    partition = keys.repo_partition(porcelain.get_repo(lake, repo).name)
    lake.kv.delete(partition, keys.GC_RULES)
