"""Groups and policies of the server: the built-in ones lakeFS ships and the ones admins create.

Key layout (beside :mod:`server.auth`'s):

    auth/groups    key <group id>   → {"id", "creation_date", "description", "incarnation",
                                       "policies": {<policy id>: <its incarnation>}}
    auth/policies  key <policy id>  → {"id", "creation_date", "incarnation", "statement": [...]}

Built-in groups and policies (:data:`server.policies.BUILTIN_GROUPS`, ``BUILTIN_POLICIES``) are
not stored: every server has them, unchangeable, with creation date 0. Memberships and
attachments name the incarnation of what they point at, so a membership or attachment left over
from a deleted group or policy never applies to a later one of the same name.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from lakectl.core.kv import KVStore
from lakectl.core.kv.retry import AGAIN, PRINCIPAL, Again, retry
from lakectl.errors import (
    AlreadyExists,
    InvalidArgument,
    KeyNotFound,
    NotFound,
    PredicateFailed,
)
from server.policies import BUILTIN, BUILTIN_GROUPS, BUILTIN_POLICIES, Statement, parse_statements

GROUPS = "auth/groups"
POLICIES = "auth/policies"
MAX_DESCRIPTION = 1024

Links = tuple[tuple[str, str], ...]
"""(id, incarnation) pairs, sorted by id: the groups or policies a record points at."""

Changed = Callable[[frozenset[str], frozenset[str]], None]
"""Told the ids of groups and of policies whose grants just changed (``server.auth.store`` renews the
grant epoch of the users they apply to)."""


def check_id(kind: str, value: str) -> None:
    if not value or len(value) > 256 or not value.isprintable() or "/" in value:
        raise InvalidArgument(f"invalid {kind} id {value!r}: 1-256 printable characters, no '/'")


@dataclass(frozen=True, slots=True)
class Group:
    id: str
    creation_date: int
    description: str
    incarnation: str
    policies: Links = ()

    @property
    def builtin(self) -> bool:
        return self.incarnation == BUILTIN

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``Group``."""
        return {
            "id": self.id,
            "name": self.id,
            "description": self.description,
            "creation_date": self.creation_date,
        }

    def record(self) -> bytes:
        return json.dumps(
            {**self.to_dict(), "incarnation": self.incarnation, "policies": dict(self.policies)}
        ).encode()

    @staticmethod
    def parse(raw: bytes) -> Group:
        d = json.loads(raw)
        return Group(
            d["id"], d["creation_date"], d.get("description", ""), d["incarnation"], links(d.get("policies"))
        )


@dataclass(frozen=True, slots=True)
class Policy:
    id: str
    creation_date: int
    incarnation: str
    statements: tuple[Statement, ...]

    @property
    def builtin(self) -> bool:
        return self.incarnation == BUILTIN

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``Policy``."""
        return {
            "id": self.id,
            "creation_date": self.creation_date,
            "statement": [s.to_dict() for s in self.statements],
        }

    def record(self) -> bytes:
        return json.dumps({**self.to_dict(), "incarnation": self.incarnation}).encode()

    @staticmethod
    def parse(raw: bytes) -> Policy:
        d = json.loads(raw)
        return Policy(d["id"], d["creation_date"], d["incarnation"], parse_statements(d["statement"]))


def links(raw: object) -> Links:
    return tuple(sorted(raw.items())) if isinstance(raw, dict) else ()


def _builtin_group(group_id: str) -> Group:
    policies = tuple((p, BUILTIN) for p in sorted(BUILTIN_GROUPS[group_id]))
    return Group(group_id, 0, f"built-in: {', '.join(BUILTIN_GROUPS[group_id])}", BUILTIN, policies)


def _builtin_policy(policy_id: str) -> Policy:
    return Policy(policy_id, 0, BUILTIN, BUILTIN_POLICIES[policy_id])


def _merged(builtin: list[str], stored: Iterator[tuple[str, bytes]]) -> Iterator[tuple[str, bytes | None]]:
    """Built-in ids (None) and stored records, in id order (the KV scans in byte order)."""
    pending = sorted(builtin, reverse=True)
    for key, raw in stored:
        while pending and pending[-1] < key:
            yield pending.pop(), None
        yield key, raw
    while pending:
        yield pending.pop(), None


class Directory:
    """The groups and policies of one server (shared by every server process on the same KV)."""

    def __init__(self, kv: KVStore, changed: Changed | None = None) -> None:
        self.kv = kv
        self._changed = changed or (lambda groups, policies: None)

    # -- groups ----------------------------------------------------------------------------

    def group_or_none(self, group_id: str) -> Group | None:
        if group_id in BUILTIN_GROUPS:
            return _builtin_group(group_id)
        try:
            return Group.parse(self.kv.get(GROUPS, group_id))
        except KeyNotFound:
            return None

    def get_group(self, group_id: str) -> Group:
        group = self.group_or_none(group_id)
        if group is None:
            raise NotFound(f"group {group_id!r} not found", group=group_id)
        return group

    def list_groups(self, prefix: str = "", after: str = "") -> Iterator[Group]:
        for key, raw in _merged(list(BUILTIN_GROUPS), self.kv.scan(GROUPS)):
            if key.startswith(prefix) and key > after:
                yield _builtin_group(key) if raw is None else Group.parse(raw)

    def create_group(self, group_id: str, description: str = "") -> Group:
        check_id("group", group_id)
        if len(description) > MAX_DESCRIPTION or not description.isprintable():
            raise InvalidArgument(f"a group's description is up to {MAX_DESCRIPTION} printable characters")
        if group_id in BUILTIN_GROUPS:
            raise AlreadyExists(f"group {group_id!r} already exists (built in)", group=group_id)
        group = Group(group_id, int(time.time()), description, secrets.token_hex(8))
        try:
            self.kv.set_if(GROUPS, group_id, group.record(), None)
        except PredicateFailed:
            raise AlreadyExists(f"group {group_id!r} already exists", group=group_id) from None
        return group

    def delete_group(self, group_id: str) -> None:
        """Delete a group; its memberships stop applying at once (they name its incarnation)."""
        group = self.get_group(group_id)
        if group.builtin:
            raise InvalidArgument(f"group {group_id!r} is built in and cannot be deleted")
        self.kv.delete(GROUPS, group_id)
        self._changed(frozenset({group_id}), frozenset())

    def _update_group(self, group_id: str, change: Any) -> Group:
        def attempt() -> Group | Again:
            if group_id in BUILTIN_GROUPS:
                raise InvalidArgument(
                    f"group {group_id!r} is built in: its policies are fixed (create a group of your own)"
                )
            try:
                raw = self.kv.get(GROUPS, group_id)
            except KeyNotFound:
                raise NotFound(f"group {group_id!r} not found", group=group_id) from None
            updated = change(Group.parse(raw))
            try:
                self.kv.set_if(GROUPS, group_id, updated.record(), raw)
            except PredicateFailed:
                return AGAIN
            return updated  # type: ignore[no-any-return]

        return retry(PRINCIPAL, attempt, f"group {group_id!r} kept changing")

    def attach_to_group(self, group_id: str, policy_id: str) -> None:
        policy = self.get_policy(policy_id)
        self._update_group(
            group_id,
            lambda g: replace(g, policies=links({**dict(g.policies), policy.id: policy.incarnation})),
        )
        self._changed(frozenset({group_id}), frozenset())

    def detach_from_group(self, group_id: str, policy_id: str) -> None:
        def change(g: Group) -> Group:
            attached = dict(g.policies)
            if attached.pop(policy_id, None) is None:
                raise NotFound(f"policy {policy_id!r} is not attached to group {group_id!r}")
            return replace(g, policies=links(attached))

        self._update_group(group_id, change)
        self._changed(frozenset({group_id}), frozenset())

    # -- policies --------------------------------------------------------------------------

    def policy_or_none(self, policy_id: str) -> Policy | None:
        if policy_id in BUILTIN_POLICIES:
            return _builtin_policy(policy_id)
        try:
            return Policy.parse(self.kv.get(POLICIES, policy_id))
        except KeyNotFound:
            return None

    def get_policy(self, policy_id: str) -> Policy:
        policy = self.policy_or_none(policy_id)
        if policy is None:
            raise NotFound(f"policy {policy_id!r} not found", policy=policy_id)
        return policy

    def list_policies(self, prefix: str = "", after: str = "") -> Iterator[Policy]:
        for key, raw in _merged(list(BUILTIN_POLICIES), self.kv.scan(POLICIES)):
            if key.startswith(prefix) and key > after:
                yield _builtin_policy(key) if raw is None else Policy.parse(raw)

    def create_policy(self, policy_id: str, statement: object) -> Policy:
        """A new policy from lakeFS's statement list; ``InvalidArgument`` for a bad one."""
        check_id("policy", policy_id)
        policy = Policy(policy_id, int(time.time()), secrets.token_hex(8), parse_statements(statement))
        if policy_id in BUILTIN_POLICIES:
            raise AlreadyExists(f"policy {policy_id!r} already exists (built in)", policy=policy_id)
        try:
            self.kv.set_if(POLICIES, policy_id, policy.record(), None)
        except PredicateFailed:
            raise AlreadyExists(f"policy {policy_id!r} already exists", policy=policy_id) from None
        return policy

    def update_policy(self, policy_id: str, statement: object) -> Policy:
        """New statements for a policy; every attachment sees them at once."""
        statements = parse_statements(statement)

        def attempt() -> Policy | Again:
            if policy_id in BUILTIN_POLICIES:
                raise InvalidArgument(f"policy {policy_id!r} is built in and cannot change")
            try:
                raw = self.kv.get(POLICIES, policy_id)
            except KeyNotFound:
                raise NotFound(f"policy {policy_id!r} not found", policy=policy_id) from None
            updated = replace(Policy.parse(raw), statements=statements)
            try:
                self.kv.set_if(POLICIES, policy_id, updated.record(), raw)
            except PredicateFailed:
                return AGAIN
            self._changed(frozenset(), frozenset({policy_id}))
            return updated

        return retry(PRINCIPAL, attempt, f"policy {policy_id!r} kept changing")

    def delete_policy(self, policy_id: str) -> None:
        """Delete a policy; its attachments stop applying at once (they name its incarnation)."""
        if self.get_policy(policy_id).builtin:
            raise InvalidArgument(f"policy {policy_id!r} is built in and cannot be deleted")
        self.kv.delete(POLICIES, policy_id)
        self._changed(frozenset(), frozenset({policy_id}))

    def live_policies(self, attached: Links) -> list[Policy]:
        """The policies of ``attached`` that still exist as the incarnation attached."""
        found = (self.policy_or_none(pid) for pid, _ in attached)
        incarnations = dict(attached)
        return [p for p in found if p is not None and incarnations[p.id] == p.incarnation]

    def live_groups(self, memberships: Links) -> list[Group]:
        found = (self.group_or_none(gid) for gid, _ in memberships)
        incarnations = dict(memberships)
        return [g for g in found if g is not None and incarnations[g.id] == g.incarnation]
