"""A repository's retention rules (lakeFS's ``gc_rules``): which commits a garbage collection keeps.

The rules say how long commits are kept from collection: a branch's head always, and its ancestors
for ``retention_days`` (the branch's own, else the repository's default). A read explains a block
gone from under a commit past its retention by them (``Gone``); the collector that applies them
(:mod:`lakectl.core.upkeep.gc`) follows docs/decisions/0008.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.core import keys
from lakectl.core.events import Event, Verb, announced
from lakectl.core.graph.refs import check_branch_name, check_repo_name
from lakectl.core.lake import Lake
from lakectl.core.lake import now as current_time
from lakectl.core.model import BranchId, Commit, CommitId, RepositoryId
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


def set_rules(lake: Lake, repo: str, rules: GCRules) -> None:
    rid = lake.refs.get_repo(check_repo_name(repo)).name
    event = Event(Verb.SETTINGS, rid, payload={"key": keys.GC_RULES, "value": rules.to_dict()})
    value = json.dumps(rules.to_dict(), sort_keys=True).encode()
    with announced(lake.events, event):
        lake.kv.set(keys.repo_partition(rid), keys.GC_RULES, value)
    lake.events.after(event)


def get_rules(lake: Lake, repo: str) -> GCRules:
    """The repository's rules; ``NotFound`` when none were set (nothing is collected then)."""
    partition = keys.repo_partition(lake.refs.get_repo(check_repo_name(repo)).name)
    try:
        raw = lake.kv.get(partition, keys.GC_RULES)
    except KeyNotFound:
        raise NotFound(
            f"repository {repo!r} has no garbage-collection rules: set them with gc set-config"
        ) from None
    return GCRules.from_dict(json.loads(raw))


def delete_rules(lake: Lake, repo: str) -> None:
    """Forget the rules (idempotent)."""
    rid = lake.refs.get_repo(check_repo_name(repo)).name
    event = Event(Verb.SETTINGS, rid, payload={"key": keys.GC_RULES, "value": None})
    with announced(lake.events, event):
        lake.kv.delete(keys.repo_partition(rid), keys.GC_RULES)
    lake.events.after(event)


DAY = 86_400


def list_commits(lake: Lake, repo: RepositoryId) -> Iterator[Commit]:
    """Every commit of the repository, reachable or not, in commit id order."""
    partition = keys.repo_partition(repo)
    for key, raw in lake.kv.scan(partition, keys.COMMIT_PREFIX):
        if not key.startswith(keys.COMMIT_PREFIX):
            return
        yield Commit.decode(raw)


def kept_commits(
    lake: Lake, repo: RepositoryId, commits: Mapping[CommitId, Commit], rules: GCRules, now: float
) -> set[CommitId]:
    """Branch heads, their ancestors within the branch's retention, and tagged commits. Every
    ancestor is visited: creation dates need not fall along a history (a merge of an old branch)."""
    keep: set[CommitId] = {t.commit_id for t in lake.refs.list_tags(repo)}
    for branch in lake.refs.list_branches(repo):
        cutoff = now - rules.retention_days(branch.name) * DAY
        keep.add(branch.commit_id)
        stack, seen = [branch.commit_id], {branch.commit_id}
        while stack:
            commit = commits.get(stack.pop())
            if commit is None:
                continue
            if commit.creation_date >= cutoff:
                keep.add(commit.id)
            for parent in commit.parents:
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
    return keep & set(commits)


def retention(lake: Lake, repo: RepositoryId, now: float | None = None) -> list[tuple[Commit, bool]]:
    """Every commit of the repository (in commit id order) and whether a collection keeps it, as
    :func:`roots` decides: all of them when the repository has no rules."""
    commits = {c.id: c for c in list_commits(lake, repo)}
    try:
        rules = get_rules(lake, repo)
    except NotFound:
        return [(c, True) for c in commits.values()]
    keep = kept_commits(lake, repo, commits, rules, current_time() if now is None else now)
    return [(c, c.id in keep) for c in commits.values()]


def is_retained(lake: Lake, repo: RepositoryId, commit: CommitId, now: float | None = None) -> bool:
    """Whether a collection keeps ``commit``'s data (every commit, when the repository has no
    rules). Reads every commit of the repository: for explaining a failed read, not for reads."""
    try:
        rules = get_rules(lake, repo)
    except NotFound:
        return True
    commits = {c.id: c for c in list_commits(lake, repo)}
    return commit in kept_commits(lake, repo, commits, rules, current_time() if now is None else now)
