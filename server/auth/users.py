"""Users and access keys as values: the three roles, a user with its grants, and its credentials.

What a user may do is what its effective policies allow (:mod:`server.policies`): those attached
to it and those of its groups (:mod:`server.groups`), as lakeFS decides it. The three roles of
earlier servers (:class:`Role`) are memberships of lakeFS's built-in groups. How these values are
stored and changed is :mod:`server.auth.store`'s.
"""

from __future__ import annotations

import base64
import enum
import json
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.errors import InvalidArgument
from server.groups import Links, links
from server.policies import (
    BUILTIN,
    BUILTIN_GROUPS,
    BUILTIN_POLICIES,
    Permission,
    Statement,
    allows,
    allows_everywhere,
)

_KEY_ALPHABET = string.ascii_uppercase + string.digits


class Role(enum.Enum):
    """The three roles of earlier lakectl servers, each now membership of a built-in group."""

    ADMIN = "Admin"
    DEVELOPER = "Developer"
    ANALYST = "Analyst"

    @property
    def group(self) -> str:
        """The built-in (lakeFS) group whose members have this role."""
        return _ROLE_GROUPS[self]


_ROLE_GROUPS = {Role.ADMIN: "Admins", Role.DEVELOPER: "Developers", Role.ANALYST: "Viewers"}


def _group_permissions(group_id: str) -> frozenset[Permission]:
    statements = [s for policy in BUILTIN_GROUPS[group_id] for s in BUILTIN_POLICIES[policy]]
    return frozenset(p for p in Permission if allows(statements, p, "", None))


ROLE_PERMISSIONS: Mapping[Role, frozenset[Permission]] = {
    role: _group_permissions(role.group) for role in Role
}
"""What each role may do: what its group's built-in policies allow (Developers, as lakeFS's,
read and write every repository but do not create or delete repositories)."""


@dataclass(frozen=True, slots=True)
class User:
    id: str
    creation_date: int
    incarnation: str = ""
    groups: Links = ()
    """The groups it was added to, with their incarnations (some may be gone since)."""
    policies: Links = ()
    """The policies attached to it directly, with their incarnations."""
    statements: tuple[Statement, ...] = ()
    """The statements of its effective policies (direct and through its groups), as loaded by
    :class:`~server.auth.store.Auth`: a user is loaded at each request, so changes apply from the
    next one."""
    effective: tuple[str, ...] = ()
    """The ids of its effective policies (direct and through its groups), as loaded by
    :class:`~server.auth.store.Auth`."""
    epoch: str = ""
    """Its grant epoch: replaced whenever its grants or access keys change ("": none since
    records had epochs)."""

    def allows(self, permission: Permission, repository: str | None = None) -> bool:
        """Whether the user may do what ``permission`` stands for (on ``repository``)."""
        return allows(self.statements, permission, self.id, repository)

    @property
    def permissions(self) -> frozenset[Permission]:
        """What it may do on every repository (a policy scoped to some repositories adds nothing
        here: see :attr:`effective` for what applies)."""
        return frozenset(p for p in Permission if allows_everywhere(self.statements, p, self.id))

    @property
    def role(self) -> Role | None:
        """The strongest role whose permissions it has on every repository (lakectl's summary of
        its policies; a user confined to some repositories has none)."""
        held = self.permissions
        return next((r for r in Role if ROLE_PERMISSIONS[r] <= held), None)

    @property
    def signing_token(self) -> str:
        """Whom signed block locators and block challenges are made for: this incarnation of the
        user, so that a user deleted and created again under the same name starts with none
        (docs/decisions/0006). Incarnations are hex: the ``@`` cannot be ambiguous."""
        return f"{self.id}@{self.incarnation}"

    @property
    def grant_token(self) -> str:
        """Whom block signatures (locators, receipts, challenges) are made for: this incarnation
        under its grants of now (:attr:`epoch`), so that a signature obtained while a grant held
        claims or reads nothing once it is revoked (docs/decisions/0006)."""
        return f"{self.signing_token}@{self.epoch}" if self.epoch else self.signing_token

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``User``, plus the role and the ids of the policies that apply (lakectl)."""
        role = self.role
        return {
            "id": self.id,
            "creation_date": self.creation_date,
            "role": role.value if role else None,
            "policies": list(self.effective),
        }

    def record(self) -> bytes:
        return json.dumps(
            {
                "id": self.id,
                "creation_date": self.creation_date,
                "incarnation": self.incarnation,
                "epoch": self.epoch,
                "groups": dict(self.groups),
                "policies": dict(self.policies),
            }
        ).encode()

    @staticmethod
    def parse(raw: bytes) -> User:
        """A stored user, its statements not loaded. A record of an earlier server has a
        ``role`` instead of groups: the role's built-in group."""
        d = json.loads(raw)
        groups = links(d.get("groups"))
        if "groups" not in d and d.get("role"):
            groups = ((Role(d["role"]).group, BUILTIN),)
        incarnation, policies = d.get("incarnation", ""), links(d.get("policies"))
        return User(d["id"], d["creation_date"], incarnation, groups, policies, epoch=d.get("epoch", ""))


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key without its secret."""

    access_key_id: str
    user_id: str
    creation_date: int

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``Credentials``."""
        return {"access_key_id": self.access_key_id, "creation_date": self.creation_date}


@dataclass(frozen=True, slots=True)
class NewCredentials:
    """An access key with its secret in clear: returned once, when created."""

    access_key_id: str
    secret_access_key: str
    creation_date: int
    user: User

    def __repr__(self) -> str:  # keeps the secret out of logs and tracebacks
        return f"NewCredentials(access_key_id={self.access_key_id!r}, user={self.user.id!r})"

    def to_dict(self) -> dict[str, object]:
        """lakeFS ``CredentialsWithSecret``, plus the user it belongs to."""
        return {
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "creation_date": self.creation_date,
            "user": self.user.to_dict(),
        }


def new_access_key_id() -> str:
    return "AKIAL" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(15))


def new_epoch() -> str:
    """A fresh grant epoch (hex: the ``@`` before it in :attr:`User.grant_token` is unambiguous)."""
    return secrets.token_hex(8)


def new_secret() -> str:
    return base64.b64encode(secrets.token_bytes(30)).decode()  # 40 characters, as AWS's


def check_user_id(user_id: str) -> None:
    if not user_id or len(user_id) > 256 or not user_id.isprintable() or "/" in user_id:
        raise InvalidArgument(f"invalid user name {user_id!r}: 1-256 printable characters, no '/'")
