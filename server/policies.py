"""Policies as lakeFS writes them (statements of effect, actions and resources), the built-in
policies and groups lakeFS ships, and the one decision: may these statements do this action here.

A route needs one :class:`Permission`; each permission stands for a lakeFS action
(:data:`PERMISSION_ACTIONS`) on a resource: the repository's ARN when the request names a
repository (REST path or S3 bucket), else ``*``. A user may when some statement of its effective
policies (attached to it or to one of its groups) allows the action on the resource and none
denies it: lakeFS's rule, deny wins. Actions and resources match with lakeFS's wildcards
(``*`` any run of characters, ``?`` one character); ``${user}`` in a resource is the caller's id.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lakectl.errors import InvalidArgument

BUILTIN = "builtin"
"""The incarnation of built-in groups and policies: they are never deleted or recreated."""

MAX_STATEMENTS = 100
MAX_FIELD_CHARS = 1024


class Permission(enum.Enum):
    """What a route needs; each route declares exactly one (see ``server.api.deps.require``)."""

    CREATE_REPO = "CreateRepo"
    DELETE_REPO = "DeleteRepo"
    READ_REPO = "ReadRepo"
    WRITE_REPO = "WriteRepo"
    UPDATE_REPO = "UpdateRepo"
    """The repository's own settings that lakeFS gates with ``fs:UpdateRepository`` (its metadata)."""
    MANAGE_AUTH = "ManageAuth"
    """Users, groups, other users' access keys and policies."""
    IMPORT = "Import"
    """Importing from object storage, which the server reads with its own credentials (lakeFS's
    ``fs:Import``: in FSFullAccess, not in the Developers' FSReadWriteAll)."""


PERMISSION_ACTIONS: Mapping[Permission, tuple[str, ...]] = {
    Permission.CREATE_REPO: ("fs:CreateRepository",),
    Permission.DELETE_REPO: ("fs:DeleteRepository",),
    Permission.READ_REPO: ("fs:ReadObject",),
    Permission.WRITE_REPO: ("fs:WriteObject",),
    Permission.UPDATE_REPO: ("fs:UpdateRepository",),
    Permission.IMPORT: ("fs:Import",),
    # Managing users, groups and policies is all of lakeFS's auth actions that change them:
    # granting only some of them would let a holder grant itself the rest.
    Permission.MANAGE_AUTH: (
        "auth:CreateUser",
        "auth:DeleteUser",
        "auth:CreateGroup",
        "auth:DeleteGroup",
        "auth:AddGroupMember",
        "auth:RemoveGroupMember",
        "auth:CreatePolicy",
        "auth:UpdatePolicy",
        "auth:DeletePolicy",
        "auth:AttachPolicy",
        "auth:DetachPolicy",
    ),
}
"""The lakeFS actions each permission stands for; all of them must be allowed."""

ALL = "*"


def repository_arn(repository: str) -> str:
    return f"arn:lakefs:fs:::repository/{repository}"


class Effect(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class Statement:
    effect: Effect
    resources: tuple[str, ...]
    actions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``Statement``: several resources travel as a JSON array in one string."""
        resource = self.resources[0] if len(self.resources) == 1 else json.dumps(list(self.resources))
        return {"effect": self.effect.value, "resource": resource, "action": list(self.actions)}


def parse_statement(raw: object) -> Statement:
    """A statement from lakeFS's JSON; ``InvalidArgument`` naming what is wrong."""
    if not isinstance(raw, Mapping):
        raise InvalidArgument("a policy statement is an object with effect, resource and action")
    unknown = set(raw) - {"effect", "resource", "action", "condition"}
    if unknown:
        raise InvalidArgument(f"unknown field {sorted(unknown)[0]!r} in a policy statement")
    if raw.get("condition"):
        raise InvalidArgument("policy conditions are not supported by this server")
    effect = raw.get("effect")
    if not isinstance(effect, str) or effect.lower() not in ("allow", "deny"):
        raise InvalidArgument(f"a statement's effect is 'allow' or 'deny', not {effect!r}")
    resource, actions = raw.get("resource"), raw.get("action")
    resources: object = resource
    if isinstance(resource, str) and resource.startswith("["):
        try:
            resources = json.loads(resource)
        except ValueError:
            raise InvalidArgument(f"a statement's resource list is not JSON: {resource!r}") from None
    elif isinstance(resource, str):
        resources = [resource]
    if isinstance(actions, str):
        actions = [actions]
    for name, values in (("resource", resources), ("action", actions)):
        if (
            not isinstance(values, list)
            or not values
            or not all(
                isinstance(v, str) and v and v.isprintable() and len(v) <= MAX_FIELD_CHARS for v in values
            )
        ):
            raise InvalidArgument(f"a statement's {name} is a non-empty string or list of strings")
    assert isinstance(resources, list) and isinstance(actions, list)
    for action in actions:
        if action != ALL and ":" not in action:
            raise InvalidArgument(f"invalid action {action!r}: service:Action, as fs:ReadObject or fs:*")
    return Statement(Effect(effect.lower()), tuple(resources), tuple(actions))


def parse_statements(raw: object) -> tuple[Statement, ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidArgument("a policy has a non-empty list of statements")
    if len(raw) > MAX_STATEMENTS:
        raise InvalidArgument(f"a policy has at most {MAX_STATEMENTS} statements")
    return tuple(parse_statement(s) for s in raw)


@lru_cache(maxsize=4096)
def _pattern(wildcard: str) -> re.Pattern[str]:
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in wildcard), re.S
    )


def matches(wildcard: str, value: str) -> bool:
    """lakeFS's wildcard match: ``*`` any run of characters, ``?`` exactly one."""
    return _pattern(wildcard).fullmatch(value) is not None


_ANY = "\x00"
"""Stands for "any name" in probes: a stored pattern is printable, so only a wildcard matches it."""


def _may_match_under(pattern: str, prefix: str) -> bool:
    """Whether ``pattern`` matches some resource that starts with ``prefix`` (conservatively
    yes when its literal start and ``prefix`` agree and a wildcard follows)."""
    cut = min((i for i, c in enumerate(pattern) if c in "*?"), default=len(pattern))
    literal = pattern[:cut]
    return literal.startswith(prefix) or (cut < len(pattern) and prefix.startswith(literal))


def _covers(pattern: str, resource: str | None, repository: bool) -> bool:
    if resource is None:
        return True
    if matches(pattern, resource):
        return True
    # A repository-wide request: "everything under it" counts as the repository, as lakeFS
    # policies grant objects and branches (repository/r/*, repository/r/object/*).
    return repository and any(
        matches(pattern, f"{resource}/{under}") for under in (_ANY, f"object/{_ANY}", f"branch/{_ANY}")
    )


def decide(
    statements: Iterable[Statement], action: str, resource: str | None, user_id: str, repository: bool = False
) -> bool:
    """Whether ``statements`` allow ``action`` on ``resource`` for ``user_id``: some statement
    allows it and none denies it (deny wins).

    ``resource`` None is "on some resource": an allow on any resource counts, a deny only when
    it names every resource. With ``repository``, ``resource`` is a repository's ARN and the
    request may touch anything in it: an allow must cover the whole repository (its ARN, or all
    under it), and a deny of any part of it refuses the request, since this server decides per
    repository, not per object or branch."""
    allowed = False
    for s in statements:
        if not any(matches(a, action) for a in s.actions):
            continue
        resources = [r.replace("${user}", user_id) for r in s.resources]
        if s.effect is Effect.DENY:
            if resource is None:
                applies = ALL in resources
            else:
                applies = any(
                    matches(r, resource) or (repository and _may_match_under(r, resource + "/"))
                    for r in resources
                )
            if applies:
                return False
        elif any(_covers(r, resource, repository) for r in resources):
            allowed = True
    return allowed


DATA_PLANE = frozenset({Permission.READ_REPO, Permission.WRITE_REPO})


def allows(
    statements: Iterable[Statement], permission: Permission, user_id: str, repository: str | None
) -> bool:
    """Whether ``statements`` grant ``permission`` on ``repository``. A request that names no
    repository (the block API, listing repositories, the configuration) needs the data
    permissions on some repository (a block is only ever reachable through a signed locator a
    read or write of a repository handed out), and the others on every resource."""
    resource: str | None = repository_arn(repository) if repository is not None else ALL
    if repository is None and permission in DATA_PLANE:
        resource = None
    stmts = tuple(statements)
    return all(
        decide(stmts, action, resource, user_id, repository is not None)
        for action in PERMISSION_ACTIONS[permission]
    )


EVERY_REPOSITORY = repository_arn(_ANY)
"""A probe for "any repository": only a statement whose resource is a wildcard over repository
names covers it."""


def allows_everywhere(statements: Iterable[Statement], permission: Permission, user_id: str) -> bool:
    """Whether ``statements`` grant ``permission`` on every repository, none denying any of its
    actions anywhere (the others: on every resource): what a role stands for. A policy scoped
    to some repositories grants no role, though :func:`allows` lets it reach the block API."""
    stmts = tuple(statements)
    if permission not in DATA_PLANE:
        return allows(stmts, permission, user_id, None)
    actions = PERMISSION_ACTIONS[permission]
    denied = any(
        s.effect is Effect.DENY and any(matches(p, a) for p in s.actions for a in actions) for s in stmts
    )
    return not denied and all(decide(stmts, a, EVERY_REPOSITORY, user_id, True) for a in actions)


# -- what lakeFS ships --------------------------------------------------------------------------


def _allow(*actions: str, resource: str = ALL) -> tuple[Statement, ...]:
    return (Statement(Effect.ALLOW, (resource,), actions),)


BUILTIN_POLICIES: Mapping[str, tuple[Statement, ...]] = {
    "AdminAccess": _allow("fs:*", "auth:*", "ci:*", "retention:*", "branches:*"),
    "FSFullAccess": _allow("fs:*"),
    "FSReadWriteAll": _allow(
        "fs:Read*",
        "fs:List*",
        "fs:WriteObject",
        "fs:DeleteObject",
        "fs:RevertBranch",
        "fs:CreateBranch",
        "fs:CreateTag",
        "fs:DeleteBranch",
        "fs:DeleteTag",
        "fs:CreateCommit",
        "fs:CreateMetaRange",
    ),
    "FSReadAll": _allow("fs:List*", "fs:Read*"),
    "RepoManagementFullAccess": _allow("ci:*", "retention:*", "branches:*", "fs:ReadConfig"),
    "RepoManagementReadAll": _allow("ci:Read*", "retention:Get*", "branches:Get*", "fs:ReadConfig"),
    "AuthFullAccess": _allow("auth:*"),
    "AuthManageOwnCredentials": _allow(
        "auth:CreateCredentials",
        "auth:DeleteCredentials",
        "auth:ListCredentials",
        "auth:ReadCredentials",
        resource="arn:lakefs:auth:::user/${user}",
    ),
}
"""lakeFS's RBAC base policies (and ``AdminAccess``, its all-actions policy), by id."""

BUILTIN_GROUPS: Mapping[str, tuple[str, ...]] = {
    "Admins": ("AuthFullAccess", "FSFullAccess", "RepoManagementFullAccess"),
    "SuperUsers": ("AuthManageOwnCredentials", "FSFullAccess", "RepoManagementReadAll"),
    "Developers": ("AuthManageOwnCredentials", "FSReadWriteAll", "RepoManagementReadAll"),
    "Viewers": ("AuthManageOwnCredentials", "FSReadAll"),
}
"""lakeFS's RBAC base groups, each with the policies lakeFS attaches to it."""
