"""Branch protection rules (lakeFS's): glob patterns of branches that refuse direct writes.

A branch matching any rule of its repository refuses staging (uploads, deletes, copies, links,
manifest and multipart imports), commits and resets; merges, reverts and cherry-picks into it
are allowed, as in lakeFS (changes reach a protected branch as commits made elsewhere). The
rules are one KV value next to the garbage-collection rules, so :func:`check` on the write
path costs a single ``get``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from lakectl.core import keys
from lakectl.core.events import Event, Verb, announced
from lakectl.core.graph.refs import check_repo_name
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import update_with_retries
from lakectl.core.limits import check_name
from lakectl.core.model import BranchId, RepositoryId
from lakectl.errors import (
    AlreadyExists,
    InvalidArgument,
    KeyNotFound,
    NotFound,
    PreconditionFailed,
    ProtectedBranch,
)

if TYPE_CHECKING:
    from lakectl.core.porcelain import Lake

MAX_RULES = 1000
MAX_PATTERN_BYTES = 256


@dataclass(frozen=True, slots=True)
class Rules:
    """A repository's protection rules, in the order they were added, and their ETag (what a
    ``PUT`` with ``If-Match`` must name to replace them)."""

    patterns: tuple[str, ...]
    etag: str

    def to_list(self) -> list[dict[str, Any]]:
        """lakeFS ``BranchProtectionRule`` list."""
        return [{"pattern": p} for p in self.patterns]

    def matching(self, branch: str) -> str | None:
        """The first pattern that protects ``branch``, None when none does."""
        return next((p for p in self.patterns if fnmatchcase(branch, p)), None)


def check_pattern(pattern: object) -> str:
    """A branch name glob (``*``, ``?``, ``[...]``): one line of text, not empty."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument("a branch protection pattern must be non-empty text")
    return check_name(pattern, "branch protection pattern", MAX_PATTERN_BYTES)


def parse_rules(body: object) -> tuple[str, ...]:
    """Patterns of a lakeFS rule list ``[{"pattern": ...}, ...]``; anything else is refused."""
    if not isinstance(body, list):
        raise InvalidArgument("branch protection rules must be a JSON list of {pattern}")
    if len(body) > MAX_RULES:
        raise InvalidArgument(f"at most {MAX_RULES} branch protection rules, got {len(body)}")
    out: list[str] = []
    for row in body:
        if not isinstance(row, Mapping) or set(row) != {"pattern"}:
            raise InvalidArgument('each branch protection rule is {"pattern": <glob>}')
        pattern = check_pattern(row["pattern"])
        if pattern in out:
            raise InvalidArgument(f"branch protection pattern {pattern!r} is given twice")
        out.append(pattern)
    return tuple(out)


def _encode(patterns: Sequence[str]) -> bytes:
    return json.dumps([{"pattern": p} for p in patterns]).encode()


def _decode(raw: bytes | None) -> Rules:
    patterns = parse_rules(json.loads(raw)) if raw is not None else ()
    return Rules(patterns, hashlib.md5(_encode(patterns)).hexdigest())


def _raw(kv: KVStore, rid: RepositoryId) -> bytes | None:
    try:
        return kv.get(keys.repo_partition(rid), keys.BRANCH_PROTECTION)
    except KeyNotFound:
        return None


def check(kv: KVStore, rid: RepositoryId, branch: BranchId) -> None:
    """Raise ``ProtectedBranch`` when a rule of ``rid`` protects ``branch`` (one KV get)."""
    raw = _raw(kv, rid)
    if raw is None:
        return
    # On the write path of every object: the stored list was checked when it was set.
    patterns = [row["pattern"] for row in json.loads(raw)]
    pattern = next((p for p in patterns if fnmatchcase(branch, p)), None)
    if pattern is not None:
        raise ProtectedBranch(
            f"branch {branch!r} of {rid!r} is protected (rule {pattern!r}): only merges may change it",
            branch=branch,
            pattern=pattern,
        )


# -- the verbs ------------------------------------------------------------------------------


def _repo(lake: Lake, repo: str) -> RepositoryId:
    rid = check_repo_name(repo)
    lake.refs.get_repo(rid)  # RepositoryNotFound
    return rid


def get_rules(lake: Lake, repo: str) -> Rules:
    """The repository's rules (none is an empty list, as lakeFS answers)."""
    return _decode(_raw(lake.kv, _repo(lake, repo)))


def _update(lake: Lake, repo: str, change: Any) -> Rules:
    rid = _repo(lake, repo)

    def apply(old: bytes | None) -> bytes:
        return _encode(change(_decode(old)))

    event = Event(Verb.SETTINGS, rid, payload={"key": keys.BRANCH_PROTECTION})
    with announced(lake.events, event):
        rules = _decode(update_with_retries(lake.kv, keys.repo_partition(rid), keys.BRANCH_PROTECTION, apply))
    lake.events.after(event.done(payload={"key": keys.BRANCH_PROTECTION, "value": list(rules.patterns)}))
    return rules


def set_rules(lake: Lake, repo: str, patterns: Sequence[str], if_match: str | None = None) -> Rules:
    """Replace the rules; with ``if_match``, only while the current ETag is that one
    (``PreconditionFailed`` otherwise), so two admins editing the list never lose an edit."""
    wanted = parse_rules([{"pattern": p} for p in patterns])
    expected = if_match.strip().strip('"') if if_match is not None else None

    def change(current: Rules) -> tuple[str, ...]:
        if expected is not None and expected != current.etag:
            raise PreconditionFailed("the branch protection rules changed since they were read (ETag)")
        return wanted

    return _update(lake, repo, change)


def add_rule(lake: Lake, repo: str, pattern: str) -> Rules:
    pattern = check_pattern(pattern)

    def change(current: Rules) -> tuple[str, ...]:
        if pattern in current.patterns:
            raise AlreadyExists(f"a branch protection rule for {pattern!r} already exists")
        if len(current.patterns) >= MAX_RULES:
            raise InvalidArgument(f"at most {MAX_RULES} branch protection rules")
        return (*current.patterns, pattern)

    return _update(lake, repo, change)


def delete_rule(lake: Lake, repo: str, pattern: str) -> Rules:
    pattern = check_pattern(pattern)

    def change(current: Rules) -> tuple[str, ...]:
        if pattern not in current.patterns:
            raise NotFound(f"no branch protection rule for {pattern!r} in {repo!r}", pattern=pattern)
        return tuple(p for p in current.patterns if p != pattern)

    return _update(lake, repo, change)
