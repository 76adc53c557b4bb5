"""Users, access keys and login tokens of the server, and the groups and policies users are in.

What a user may do is what its effective policies allow (:mod:`server.policies`): those attached
to it and those of its groups (:mod:`server.groups`), as lakeFS decides it. The three roles of
earlier servers (:class:`Role`) are memberships of lakeFS's built-in groups.

Key layout (kept here, in :mod:`server.groups` and :mod:`server.external_principals`, apart from
the lake's ``lakectl.core.keys``):

    auth/meta         key "setup"              → the first admin's user id (set once, by CAS)
    auth/users        key <user id>            → {"id", "creation_date", "incarnation", "epoch",
                                                  "groups": {<group id>: <its incarnation>},
                                                  "policies": {<policy id>: <its incarnation>}}
    auth/credentials  key <access key id>      → {"access_key_id", "user_id", "user_incarnation",
                                                  "creation_date", "secret": Fernet token}
    auth/revoked      key sha256 hex of a token → its expiry (Unix seconds, text): signed out

``incarnation`` is random per created user: access keys, login tokens and signed block locators
name it (:attr:`User.signing_token`), so a key, token or signature left over from a deleted user
never works for a later user of the same name.

``epoch`` is the user's grant epoch: random, replaced (by compare-and-swap on the user's record)
whenever what the user may do or how it signs in changes: its groups, its policies, its access
keys and AWS identities (external principals), and the policies of its groups (a policy edited,
deleted, attached to or detached from a group it is in, or the group deleted). Signed block
locators, receipts and block challenges name it (:attr:`User.grant_token`): a signature made
under grants since changed claims nothing. It lives in the record a request loads anyway, so
checking it costs no read.

Secrets are stored encrypted (Fernet: AES-128-CBC + HMAC-SHA256) under a key derived (HKDF-SHA256)
from ``auth.encrypt.secret_key``: they must be recoverable, since S3 signatures are computed from
them, but a copy of the database alone does not reveal them. Secrets are never logged.

Login tokens are stateless JWTs (HS256) under another key derived from the same secret: claims
``sub`` (user id), ``inc`` (its incarnation), ``aud`` ("login"), ``iat``, ``exp`` and ``jti`` (random,
so that each token is unique). A token is revoked (:meth:`Auth.revoke_token`: a UI sign-out) by a
record kept until it would have expired, which every use of a token reads.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import hashlib
import hmac
import json
import os
import secrets
import string
import time
from collections.abc import Callable, Iterator, Mapping
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
    StorageError,
    Unauthenticated,
)
from server.external_principals import ExternalPrincipals
from server.groups import Directory, Group, Links, Policy, links
from server.policies import BUILTIN, BUILTIN_GROUPS, BUILTIN_POLICIES, Statement, allows, allows_everywhere
from server.policies import Permission as Permission  # routes declare it from here

META = "auth/meta"
USERS = "auth/users"
CREDENTIALS = "auth/credentials"
REVOKED = "auth/revoked"
SETUP_KEY = "setup"

SECRET_FILE = "auth-secret"
"""Where the generated encryption secret lives in the data directory when none is configured."""

TOKEN_TTL = 7 * 24 * 3600
"""How long a login token is valid (lakeFS's default ``auth.login_duration`` is 168h)."""
MAX_TOKEN_CHARS = 4096

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
    :class:`Auth`: a user is loaded at each request, so changes apply from the next one."""
    effective: tuple[str, ...] = ()
    """The ids of its effective policies (direct and through its groups), as loaded by :class:`Auth`."""
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


@dataclass(frozen=True, slots=True)
class LoginToken:
    token: str
    expiration: int

    def __repr__(self) -> str:
        return f"LoginToken(expiration={self.expiration})"

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``AuthenticationToken``."""
        return {"token": self.token, "token_expiration": self.expiration}


def new_access_key_id() -> str:
    return "AKIAL" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(15))


def new_epoch() -> str:
    """A fresh grant epoch (hex: the ``@`` before it in :attr:`User.grant_token` is unambiguous)."""
    return secrets.token_hex(8)


def new_secret() -> str:
    return base64.b64encode(secrets.token_bytes(30)).decode()  # 40 characters, as AWS's


def _derive(secret_key: str, purpose: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(hashes.SHA256(), 32, salt=None, info=purpose).derive(secret_key.encode())


class Auth:
    """Users and credentials of one server (shared by every server process on the same KV)."""

    def __init__(self, kv: KVStore, secret_key: str) -> None:
        if not secret_key:
            raise InvalidArgument("auth.encrypt.secret_key must not be empty")
        from cryptography.fernet import Fernet

        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(secret_key, b"lakectl auth secrets v1")))
        self._token_key = _derive(secret_key, b"lakectl login tokens v1")
        self.kv = kv
        self.directory = Directory(kv, self._grants_changed)
        self.principals = ExternalPrincipals(kv, self._is_live, self.renew_epoch)

    # -- set-up ----------------------------------------------------------------------------

    def is_set_up(self) -> bool:
        try:
            self.kv.get(META, SETUP_KEY)
        except KeyNotFound:
            return False
        return True

    def setup(
        self, username: str, access_key_id: str | None = None, secret_access_key: str | None = None
    ) -> NewCredentials:
        """Create the first user (an Admin) and its access key, once per installation; raise
        ``AlreadyExists`` when the installation is already set up. The set-up marker is written
        last and by compare-and-swap, so of two concurrent set-ups exactly one wins and the
        loser's user and key are removed again."""
        _check_user_id(username)
        if self.is_set_up():
            raise AlreadyExists("this lakectl server is already set up")
        admins = ((Role.ADMIN.group, BUILTIN),)
        user = self._resolve(
            User(username, int(time.time()), secrets.token_hex(8), admins, epoch=new_epoch())
        )
        # An earlier set-up that died before its marker may have left this user: replace it.
        self.kv.set(USERS, user.id, user.record())
        creds = self.create_credentials(user, access_key_id, secret_access_key)
        try:
            self.kv.set_if(META, SETUP_KEY, user.id.encode(), None)
        except PredicateFailed:
            self.kv.delete(CREDENTIALS, creds.access_key_id)
            if self.kv.get(META, SETUP_KEY).decode() != user.id:
                self.kv.delete(USERS, user.id)
            raise AlreadyExists("this lakectl server is already set up") from None
        return creds

    # -- users ---------------------------------------------------------------------------

    def _resolve(self, user: User) -> User:
        """The user with the statements of its live policies, direct and through live groups."""
        policies = {p.id: p for p in self.directory.live_policies(user.policies)}
        for group in self.directory.live_groups(user.groups):
            policies.update((p.id, p) for p in self.directory.live_policies(group.policies))
        statements = tuple(s for p in policies.values() for s in p.statements)
        return replace(user, statements=statements, effective=tuple(sorted(policies)))

    def _user_or_none(self, user_id: str) -> User | None:
        try:
            return self._resolve(User.parse(self.kv.get(USERS, user_id)))
        except KeyNotFound:
            return None

    def _is_live(self, user_id: str, incarnation: str) -> bool:
        try:
            return User.parse(self.kv.get(USERS, user_id)).incarnation == incarnation
        except KeyNotFound:
            return False

    def get_user(self, user_id: str) -> User:
        """The user; raise ``NotFound`` when there is none."""
        user = self._user_or_none(user_id)
        if user is None:
            raise NotFound(f"user {user_id!r} not found", user=user_id)
        return user

    def list_users(self, prefix: str = "", after: str = "") -> Iterator[User]:
        """Users whose id starts with ``prefix`` and comes after ``after``, in id order."""
        for key, raw in self.kv.scan(USERS, max(prefix, after)):
            if not key.startswith(prefix):
                return
            if key > after:
                yield self._resolve(User.parse(raw))

    def create_user(self, user_id: str, role: Role | None = None) -> User:
        """A new user, in no group unless ``role`` names its group; raise ``AlreadyExists`` when
        the id is taken."""
        _check_user_id(user_id)
        groups = ((role.group, BUILTIN),) if role is not None else ()
        user = User(user_id, int(time.time()), secrets.token_hex(8), groups, epoch=new_epoch())
        try:
            self.kv.set_if(USERS, user_id, user.record(), None)
        except PredicateFailed:
            raise AlreadyExists(f"user {user_id!r} already exists", user=user_id) from None
        return self._resolve(user)

    def delete_user(self, user_id: str, by: str | None = None) -> None:
        """Delete the user and then its access keys and external principals (which stop working
        with the user already: they name its incarnation); raise ``NotFound`` when there is no
        such user. ``by``: the user asking, who may not delete itself (an admin would lock
        itself, perhaps everyone, out)."""
        if by is not None and user_id == by:
            raise InvalidArgument("you cannot delete your own user: ask another admin")
        user = self.get_user(user_id)
        self.kv.delete(USERS, user_id)
        for key_id, raw in self.kv.scan(CREDENTIALS):
            record = json.loads(raw)
            if record["user_id"] == user.id and record.get("user_incarnation", "") == user.incarnation:
                self.kv.delete(CREDENTIALS, key_id)
        self.principals.unbind_all(user.id, user.incarnation)

    def _update_user(self, user_id: str, change: Callable[[User], User]) -> User:
        def attempt() -> User | Again:
            try:
                raw = self.kv.get(USERS, user_id)
            except KeyNotFound:
                raise NotFound(f"user {user_id!r} not found", user=user_id) from None
            updated = replace(change(User.parse(raw)), epoch=new_epoch())
            try:
                self.kv.set_if(USERS, user_id, updated.record(), raw)
            except PredicateFailed:
                return AGAIN
            return self._resolve(updated)

        return retry(PRINCIPAL, attempt, f"user {user_id!r} kept changing")

    def renew_epoch(self, user_id: str) -> None:
        """Replace the user's grant epoch: every block signature made for it stops working. One
        compare-and-swap is enough: when it fails, the record was written since it was read, and
        every write of a user's record renews its epoch (so no renewal is lost to retries)."""
        try:
            raw = self.kv.get(USERS, user_id)
        except KeyNotFound:
            return  # deleted: nothing left to sign for
        with contextlib.suppress(PredicateFailed):
            self.kv.set_if(USERS, user_id, replace(User.parse(raw), epoch=new_epoch()).record(), raw)

    def _grants_changed(self, groups: frozenset[str], policies: frozenset[str]) -> None:
        """After a change to ``groups`` or ``policies`` (:class:`Directory`): a new grant epoch for
        every user in one of those groups, holding one of those policies, or in a group that
        holds one. Called once the change is stored, so a signature made after the new epoch is
        made under the new grants; a user joining a group meanwhile gets a new epoch by joining."""
        if policies:
            groups |= {g.id for g in self.directory.list_groups() if policies & dict(g.policies).keys()}
        for key, raw in self.kv.scan(USERS):
            user = User.parse(raw)
            if groups & dict(user.groups).keys() or policies & dict(user.policies).keys():
                self.renew_epoch(key)

    def set_role(self, user_id: str, role: Role | None, by: str | None = None) -> User:
        """Make the user a member of ``role``'s group and of no other role's (None: of none).
        ``by``: the user asking, who may not take itself out of the Admins group."""
        role_groups = {r.group for r in Role}

        def change(user: User) -> User:
            if role is not Role.ADMIN and Role.ADMIN.group in dict(user.groups):
                _check_not_leaving_admins(Role.ADMIN.group, user_id, by)
            kept = {g: inc for g, inc in user.groups if g not in role_groups}
            if role is not None:
                kept[role.group] = BUILTIN
            return replace(user, groups=links(kept))

        return self._update_user(user_id, change)

    # -- groups and policies of users ------------------------------------------------------

    def add_member(self, group_id: str, user_id: str) -> User:
        group = self.directory.get_group(group_id)
        return self._update_user(
            user_id, lambda u: replace(u, groups=links({**dict(u.groups), group.id: group.incarnation}))
        )

    def remove_member(self, group_id: str, user_id: str, by: str | None = None) -> User:
        """Take the user out of the group; ``NotFound`` when it is not a member. ``by``: the user
        asking, who may not take itself out of the Admins group."""
        _check_not_leaving_admins(group_id, user_id, by)
        group = self.directory.get_group(group_id)

        def change(user: User) -> User:
            groups = dict(user.groups)
            if groups.pop(group_id, None) != group.incarnation:
                raise NotFound(f"user {user_id!r} is not a member of group {group_id!r}", user=user_id)
            return replace(user, groups=links(groups))

        return self._update_user(user_id, change)

    def members(self, group_id: str, prefix: str = "", after: str = "") -> Iterator[User]:
        group = self.directory.get_group(group_id)
        return (
            u for u in self.list_users(prefix, after) if dict(u.groups).get(group.id) == group.incarnation
        )

    def groups_of(self, user_id: str) -> list[Group]:
        return self.directory.live_groups(self.get_user(user_id).groups)

    def attach_policy(self, user_id: str, policy_id: str) -> User:
        policy = self.directory.get_policy(policy_id)
        return self._update_user(
            user_id, lambda u: replace(u, policies=links({**dict(u.policies), policy.id: policy.incarnation}))
        )

    def detach_policy(self, user_id: str, policy_id: str) -> User:
        def change(user: User) -> User:
            attached = dict(user.policies)
            if attached.pop(policy_id, None) is None:
                raise NotFound(f"policy {policy_id!r} is not attached to user {user_id!r}", user=user_id)
            return replace(user, policies=links(attached))

        return self._update_user(user_id, change)

    def policies_of(self, user_id: str, effective: bool = False) -> list[Policy]:
        """The policies attached to the user, or with ``effective`` also those of its groups
        (each once), in id order."""
        user = self.get_user(user_id)
        policies = {p.id: p for p in self.directory.live_policies(user.policies)}
        if effective:
            for group in self.directory.live_groups(user.groups):
                policies.update((p.id, p) for p in self.directory.live_policies(group.policies))
        return [policies[k] for k in sorted(policies)]

    # -- credentials -----------------------------------------------------------------------

    def create_credentials(
        self, user: User, access_key_id: str | None = None, secret_access_key: str | None = None
    ) -> NewCredentials:
        """A new access key for ``user`` (random unless given); raise ``AlreadyExists`` when a
        given access key id is taken."""
        key_id = access_key_id or new_access_key_id()
        secret = secret_access_key or new_secret()
        if not key_id.isprintable() or ":" in key_id or "/" in key_id or len(key_id) > 128:
            raise InvalidArgument("an access key id is up to 128 printable characters, without ':' or '/'")
        if not secret.isprintable() or len(secret) > 256:
            raise InvalidArgument("a secret access key is up to 256 printable characters")
        now = int(time.time())
        record = {
            "access_key_id": key_id,
            "user_id": user.id,
            "user_incarnation": user.incarnation,
            "creation_date": now,
            "secret": self._fernet.encrypt(secret.encode()).decode(),
        }
        try:
            self.kv.set_if(CREDENTIALS, key_id, json.dumps(record).encode(), None)
        except PredicateFailed:
            raise AlreadyExists(f"access key {key_id!r} already exists") from None
        self.renew_epoch(user.id)
        return NewCredentials(key_id, secret, now, user)

    def _credentials(self, user: User) -> Iterator[tuple[Credentials, dict[str, Any]]]:
        for key_id, raw in self.kv.scan(CREDENTIALS):
            record = json.loads(raw)
            if record["user_id"] == user.id and record.get("user_incarnation", "") == user.incarnation:
                yield Credentials(key_id, user.id, record["creation_date"]), record

    def list_credentials(self, user: User, prefix: str = "", after: str = "") -> Iterator[Credentials]:
        """The user's access keys (never their secrets), in access key id order."""
        for creds, _ in self._credentials(user):
            if creds.access_key_id.startswith(prefix) and creds.access_key_id > after:
                yield creds

    def get_credentials(self, user: User, access_key_id: str) -> Credentials:
        """One access key of the user; raise ``NotFound`` when the user has no such key."""
        try:
            record = json.loads(self.kv.get(CREDENTIALS, access_key_id))
        except KeyNotFound:
            record = None
        if (
            record is None
            or record["user_id"] != user.id
            or record.get("user_incarnation", "") != user.incarnation
        ):
            raise NotFound(f"access key {access_key_id!r} of user {user.id!r} not found")
        return Credentials(access_key_id, user.id, record["creation_date"])

    def delete_credentials(self, user: User, access_key_id: str) -> None:
        self.get_credentials(user, access_key_id)
        self.kv.delete(CREDENTIALS, access_key_id)
        self.renew_epoch(user.id)

    def _decrypt(self, record: dict[str, Any]) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(record["secret"].encode()).decode()
        except InvalidToken:
            raise StorageError(
                "cannot decrypt stored credentials: auth.encrypt.secret_key differs from the one "
                "they were stored with"
            ) from None

    def secret_of(self, access_key_id: str) -> tuple[User, str] | None:
        """``(user, secret)`` of an access key, or None when there is no such key or its user is
        gone."""
        try:
            record = json.loads(self.kv.get(CREDENTIALS, access_key_id))
        except KeyNotFound:
            return None
        secret = self._decrypt(record)
        user = self._user_or_none(record["user_id"])
        if user is None or user.incarnation != record.get("user_incarnation", ""):
            return None
        return user, secret

    def authenticate(self, access_key_id: str, secret_access_key: str) -> User:
        """The user owning the access key; raise ``Unauthenticated`` for any mismatch."""
        found = self.secret_of(access_key_id) if access_key_id else None
        expected = found[1] if found is not None else new_secret()  # compare anyway: same timing
        if not hmac.compare_digest(expected.encode(), secret_access_key.encode()) or found is None:
            raise Unauthenticated("invalid access key id or secret access key")
        return found[0]

    # -- login tokens ----------------------------------------------------------------------

    def issue_token(self, user: User, ttl: int = TOKEN_TTL, now: float | None = None) -> LoginToken:
        """A login token for ``user``, valid for ``ttl`` seconds from ``now``."""
        issued = int(time.time() if now is None else now)
        claims = {
            "sub": user.id,
            "inc": user.incarnation,
            "aud": "login",
            "iat": issued,
            "exp": issued + ttl,
            "jti": secrets.token_hex(8),
        }
        return LoginToken(_sign_token(self._token_key, claims), issued + ttl)

    def user_of_token(self, token: str, now: float | None = None) -> User:
        """The user a login token was issued to; raise ``Unauthenticated`` when the token is
        malformed, forged, expired, revoked, or its user was deleted since."""
        claims = _verify_token(self._token_key, token)
        if claims["exp"] <= (time.time() if now is None else now):
            raise Unauthenticated("the login token has expired: log in again")
        try:
            self.kv.get(REVOKED, _revoked_key(token))
        except KeyNotFound:
            pass
        else:
            raise Unauthenticated("the login token was revoked (signed out): log in again")
        user = self._user_or_none(claims["sub"])
        if user is None or user.incarnation != claims["inc"]:
            raise Unauthenticated("the login token's user no longer exists")
        return user

    def revoke_token(self, token: str, now: float | None = None) -> None:
        """Refuse ``token`` from now on (a sign-out), on every server sharing this database. Only
        a valid token is recorded, until it would expire; records of expired ones are swept."""
        moment = int(time.time() if now is None else now)
        try:
            self.user_of_token(token, moment)
        except Unauthenticated:
            return  # forged, expired or revoked already: nothing it could open
        expiry = _verify_token(self._token_key, token)["exp"]
        self.kv.set(REVOKED, _revoked_key(token), str(expiry).encode())
        for key, raw in list(self.kv.scan(REVOKED)):
            if int(raw) <= moment:
                self.kv.delete(REVOKED, key)


def _revoked_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- token codec (JWT, HS256) ------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _json_b64(value: object) -> str:
    return _b64(json.dumps(value, separators=(",", ":"), sort_keys=True).encode())


_TOKEN_HEADER = _json_b64({"alg": "HS256", "typ": "JWT"})
_CLAIM_TYPES: Mapping[str, Callable[[object], bool]] = {
    "sub": lambda v: isinstance(v, str),
    "inc": lambda v: isinstance(v, str),
    "aud": lambda v: v == "login",
    "iat": lambda v: isinstance(v, int),
    "exp": lambda v: isinstance(v, int),
}


def _mac(key: bytes, signing_input: str) -> str:
    return _b64(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())


def _sign_token(key: bytes, claims: Mapping[str, object]) -> str:
    signing_input = f"{_TOKEN_HEADER}.{_json_b64(dict(claims))}"
    return f"{signing_input}.{_mac(key, signing_input)}"


def _verify_token(key: bytes, token: str) -> dict[str, Any]:
    """The claims of a token this server signed; ``Unauthenticated`` for anything else. Only
    the header this server writes is accepted (no algorithm negotiation)."""
    invalid = Unauthenticated("invalid login token")
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise invalid
    header, dot, rest = token.partition(".")
    payload, dot2, signature = rest.partition(".")
    if not (dot and dot2) or header != _TOKEN_HEADER:
        raise invalid
    if not hmac.compare_digest(_mac(key, f"{header}.{payload}").encode(), signature.encode()):
        raise invalid
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):
        raise invalid from None
    if not isinstance(claims, dict) or not all(
        k in claims and ok(claims[k]) for k, ok in _CLAIM_TYPES.items()
    ):
        raise invalid
    return claims


def _check_not_leaving_admins(group_id: str, user_id: str, by: str | None) -> None:
    """An admin leaving the Admins group itself could leave the server without one."""
    if by is not None and user_id == by and group_id == Role.ADMIN.group:
        raise InvalidArgument("you cannot leave the Admins group yourself: ask another admin")


def _check_user_id(user_id: str) -> None:
    if not user_id or len(user_id) > 256 or not user_id.isprintable() or "/" in user_id:
        raise InvalidArgument(f"invalid user name {user_id!r}: 1-256 printable characters, no '/'")


def load_secret_key(configured: str, data_dir: str) -> str:
    """``auth.encrypt.secret_key`` when configured; else a random key generated once into
    ``<data dir>/auth-secret`` (mode 0600). Several servers sharing one database must share it."""
    if configured:
        return configured
    path = os.path.join(data_dir, SECRET_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e.strerror or e}") from e
    else:
        if not key:
            raise StorageError(f"{path} is empty: remove it, or set auth.encrypt.secret_key")
        return key
    # Written aside, then linked into place: readers never see a partial file, and of two
    # processes generating a key at once the first link wins and both use its key.
    key = secrets.token_urlsafe(32)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        os.makedirs(data_dir, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(key + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return load_secret_key("", data_dir)
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise StorageError(f"cannot create {path}: {e.strerror or e}") from e
    return key
