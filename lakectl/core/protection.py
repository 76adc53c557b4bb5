"""Branch protection rules (lakeFS's): glob patterns of branches that refuse direct writes.

Every verb that moves a branch asks :func:`guard` once, naming how it moves it (a
:class:`Move`), so no surface (REST API, S3 gateway, UI, CLI, embedded or remote) can skip a
rule. A branch matching any rule of its repository refuses staging (uploads, deletes, copies,
links, metadata, manifest, multipart and zero-copy imports), commits, resets of staged changes
and its own deletion; merges, reverts and cherry-picks into it are allowed, as in lakeFS
(changes reach a protected branch as commits made elsewhere). The rules are one KV value next
to the garbage-collection rules, so :func:`guard` on the write path costs a single ``get``.

A rule may also gate pull requests into its branches (the shape lakeFS's upstream proposal
gives approvals): ``required_approvals`` (approvals on the source's current head, by others
than the author) and ``required_checks`` (the destination's own pre-merge actions, read at its
head, pass on the merge). A branch under such a rule takes merges only through a pull request
and refuses reverts and cherry-picks as it refuses a direct merge, so the gate cannot be walked
around.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Protocol

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
    from lakectl.core.events import EventSink
    from lakectl.core.graph.refs import RefStore


class Lake(Protocol):
    """What the rules' verbs use of an opened lake (:class:`lakectl.core.lake.Lake`), named here
    because the lake sits above this module: every verb that moves a branch asks :func:`guard`
    through :func:`lakectl.core.lake.write_target`."""

    kv: KVStore
    refs: RefStore
    events: EventSink


MAX_RULES = 1000
MAX_PATTERN_BYTES = 256
MAX_APPROVALS = 100
FIELDS = frozenset({"pattern", "required_approvals", "required_checks"})


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: the branches it protects, and what a pull request into them needs."""

    pattern: str
    required_approvals: int = 0
    required_checks: bool = False

    @property
    def gates_pulls(self) -> bool:
        return self.required_approvals > 0 or self.required_checks

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``BranchProtectionRule``; the pull-request fields only when set, so a plain
        rule keeps lakeFS's one-field shape."""
        out: dict[str, Any] = {"pattern": self.pattern}
        if self.required_approvals:
            out["required_approvals"] = self.required_approvals
        if self.required_checks:
            out["required_checks"] = True
        return out


@dataclass(frozen=True, slots=True)
class Rules:
    """A repository's protection rules, in the order they were added, and their ETag (what a
    ``PUT`` with ``If-Match`` must name to replace them)."""

    rules: tuple[Rule, ...]
    etag: str

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(r.pattern for r in self.rules)

    def to_list(self) -> list[dict[str, Any]]:
        """lakeFS ``BranchProtectionRule`` list."""
        return [r.to_dict() for r in self.rules]

    def matching(self, branch: str) -> Rule | None:
        """The first rule that protects ``branch``, None when none does."""
        return next((r for r in self.rules if fnmatchcase(branch, r.pattern)), None)


def check_pattern(pattern: object) -> str:
    """A branch name glob (``*``, ``?``, ``[...]``): one line of text, not empty."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument("a branch protection pattern must be non-empty text")
    return check_name(pattern, "branch protection pattern", MAX_PATTERN_BYTES)


def make_rule(pattern: object, required_approvals: object = 0, required_checks: object = False) -> Rule:
    """A checked rule: a pattern, 0 to :data:`MAX_APPROVALS` approvals, checks on or off."""
    if (
        not isinstance(required_approvals, int)
        or isinstance(required_approvals, bool)
        or not 0 <= required_approvals <= MAX_APPROVALS
    ):
        raise InvalidArgument(f"required_approvals is a whole number from 0 to {MAX_APPROVALS}")
    if not isinstance(required_checks, bool):
        raise InvalidArgument("required_checks is true or false")
    return Rule(check_pattern(pattern), required_approvals, required_checks)


def parse_rule(row: object) -> Rule:
    """One rule of lakeFS's JSON: ``{"pattern": <glob>}``, optionally with the pull-request
    fields ``required_approvals`` and ``required_checks``."""
    if not isinstance(row, Mapping) or "pattern" not in row or not set(row) <= FIELDS:
        raise InvalidArgument(
            'each branch protection rule is {"pattern": <glob>} (optionally with '
            "required_approvals and required_checks)"
        )
    return make_rule(row["pattern"], row.get("required_approvals", 0), row.get("required_checks", False))


def parse_rules(body: object) -> tuple[Rule, ...]:
    """The rules of a lakeFS rule list ``[{"pattern": ...}, ...]``; anything else is refused."""
    if not isinstance(body, list):
        raise InvalidArgument("branch protection rules must be a JSON list of {pattern}")
    if len(body) > MAX_RULES:
        raise InvalidArgument(f"at most {MAX_RULES} branch protection rules, got {len(body)}")
    out: list[Rule] = []
    for row in body:
        rule = parse_rule(row)
        if any(r.pattern == rule.pattern for r in out):
            raise InvalidArgument(f"branch protection pattern {rule.pattern!r} is given twice")
        out.append(rule)
    return tuple(out)


def _encode(rules: Sequence[Rule]) -> bytes:
    return json.dumps([r.to_dict() for r in rules]).encode()


def _decode(raw: bytes | None) -> Rules:
    rules = parse_rules(json.loads(raw)) if raw is not None else ()
    return Rules(rules, hashlib.md5(_encode(rules)).hexdigest())


def _raw(kv: KVStore, rid: RepositoryId) -> bytes | None:
    try:
        return kv.get(keys.repo_partition(rid), keys.BRANCH_PROTECTION)
    except KeyNotFound:
        return None


class Move(enum.Enum):
    """How a verb moves a branch: what a protection rule decides on (docs/pulls.md's table)."""

    STAGE = "stage"
    """Staged changes written or dropped: uploads, links, copies, deletes, metadata, imports,
    a reset of staged changes."""
    COMMIT = "commit"
    """The branch's own staged changes (or prepared rows) committed onto its head."""
    MERGE = "merge"
    """A commit made from other commits: a merge, a revert, a cherry-pick."""
    DELETE = "delete"
    """The branch deleted (it could then be created again from anything)."""


_REFUSED = {
    Move.STAGE: "direct writes are refused",
    Move.COMMIT: "direct commits are refused",
    Move.DELETE: "it cannot be deleted",
}


def _first_match(raw: bytes | None, branch: str) -> Rule | None:
    """The first stored rule protecting ``branch``: the stored list was checked when it was set,
    so on the write path of every object it is only read."""
    if raw is None:
        return None
    for row in json.loads(raw):
        if fnmatchcase(branch, row["pattern"]):
            return Rule(row["pattern"], row.get("required_approvals", 0), row.get("required_checks", False))
    return None


def guard(kv: KVStore, rid: RepositoryId, branch: BranchId, move: Move, through_pull: bool = False) -> None:
    """The one check of every verb that moves a branch (one KV get): ``ProtectedBranch`` when a
    rule of ``rid`` refuses ``move`` on ``branch``. A plain rule lets only merges, reverts and
    cherry-picks in; a rule gating pull requests lets in only a merge made ``through_pull`` (by
    :func:`lakectl.core.workflow.pulls.merge_pull`, which checked the gate)."""
    rule = _first_match(_raw(kv, rid), branch)
    if rule is None:
        return
    if move is Move.MERGE:
        if not rule.gates_pulls or through_pull:
            return
        what = "it takes merges only through a pull request"
    else:
        only = "merges through a pull request" if rule.gates_pulls else "merges, reverts and cherry-picks"
        what = f"{_REFUSED[move]}, only {only} may change it"
    raise ProtectedBranch(
        f"branch {branch!r} of {rid!r} is protected (rule {rule.pattern!r}): {what}",
        branch=branch,
        pattern=rule.pattern,
    )


def rule_for(kv: KVStore, rid: RepositoryId, branch: str) -> Rule | None:
    """The first rule of ``rid`` that protects ``branch`` (one KV get)."""
    return _decode(_raw(kv, rid)).matching(branch)


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
    lake.events.after(event.done(payload={"key": keys.BRANCH_PROTECTION, "value": rules.to_list()}))
    return rules


def set_rules(lake: Lake, repo: str, rules: Sequence[Rule | str], if_match: str | None = None) -> Rules:
    """Replace the rules (a bare pattern is a plain rule); with ``if_match``, only while the
    current ETag is that one (``PreconditionFailed`` otherwise), so two admins editing the list
    never lose an edit."""
    wanted = parse_rules([r.to_dict() if isinstance(r, Rule) else {"pattern": r} for r in rules])
    expected = if_match.strip().strip('"') if if_match is not None else None

    def change(current: Rules) -> tuple[Rule, ...]:
        if expected is not None and expected != current.etag:
            raise PreconditionFailed("the branch protection rules changed since they were read (ETag)")
        return wanted

    return _update(lake, repo, change)


def add_rule(lake: Lake, repo: str, rule: Rule | str) -> Rules:
    rule = parse_rule(rule.to_dict() if isinstance(rule, Rule) else {"pattern": rule})

    def change(current: Rules) -> tuple[Rule, ...]:
        if rule.pattern in current.patterns:
            raise AlreadyExists(f"a branch protection rule for {rule.pattern!r} already exists")
        if len(current.rules) >= MAX_RULES:
            raise InvalidArgument(f"at most {MAX_RULES} branch protection rules")
        return (*current.rules, rule)

    return _update(lake, repo, change)


def delete_rule(lake: Lake, repo: str, pattern: str) -> Rules:
    pattern = check_pattern(pattern)

    def change(current: Rules) -> tuple[Rule, ...]:
        if pattern not in current.patterns:
            raise NotFound(f"no branch protection rule for {pattern!r} in {repo!r}", pattern=pattern)
        return tuple(r for r in current.rules if r.pattern != pattern)

    return _update(lake, repo, change)
