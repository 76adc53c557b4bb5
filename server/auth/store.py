"""The users and access keys of one server in the KV store: set-up, users and their grants, secrets.

Users (:class:`~server.auth.users.User`) are in groups and hold policies (:mod:`server.groups`);
every change of what a user may do or how it signs in renews its grant epoch here. Access key
secrets are stored encrypted (Fernet: AES-128-CBC + HMAC-SHA256) under a key derived from the
server's secret (:mod:`server.auth.secret`): they must be recoverable, since S3 signatures are
computed from them, but a copy of the database alone does not reveal them. Secrets are never
logged. Login tokens are :attr:`Auth.tokens` (:mod:`server.auth.tokens`). The key layout of all
of them is drawn in :mod:`server.auth`.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lakectl.core.journal import records
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
from server.auth.secret import derive_key, journal_seal
from server.auth.tokens import LoginTokens
from server.auth.users import (
    Credentials,
    NewCredentials,
    Role,
    User,
    check_user_id,
    new_access_key_id,
    new_epoch,
    new_secret,
)
from server.external_principals import ExternalPrincipals
from server.groups import Directory, Group, Policy, links
from server.policies import BUILTIN

if TYPE_CHECKING:
    from lakectl.core.lake import Lake

META = "auth/meta"
USERS = "auth/users"
CREDENTIALS = "auth/credentials"
SETUP_KEY = "setup"


class Auth:
    """Users and credentials of one server, and its login tokens (:attr:`tokens`); shared by every
    server process on the same KV."""

    def __init__(self, kv: KVStore, secret_key: str) -> None:
        if not secret_key:
            raise InvalidArgument("auth.encrypt.secret_key must not be empty")
        from cryptography.fernet import Fernet

        self._fernet = Fernet(base64.urlsafe_b64encode(derive_key(secret_key, b"lakectl auth secrets v1")))
        self.kv = kv
        self.tokens = LoginTokens(kv, derive_key(secret_key, b"lakectl login tokens v1"), self._user_or_none)
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
        check_user_id(username)
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
        check_user_id(user_id)
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


def lake_auth(lake: Lake, secret_key: str) -> Auth:
    """The users of ``lake``, their records written through the lake's events: with the lake's
    journal on, each change is journalled as stored (secrets as encrypted), and a lake rebuilt
    from its journal has them back (:mod:`lakectl.core.journal.records`)."""
    return Auth(records.Journaled(lake.kv, lambda: lake.events, journal_seal(secret_key)), secret_key)


def _check_not_leaving_admins(group_id: str, user_id: str, by: str | None) -> None:
    """An admin leaving the Admins group itself could leave the server without one."""
    if by is not None and user_id == by and group_id == Role.ADMIN.group:
        raise InvalidArgument("you cannot leave the Admins group yourself: ask another admin")
