"""Users, groups, access keys and login tokens of the server, and what each role may do.

Roles and permissions live in one table, :data:`ROLE_PERMISSIONS`. A user has at most one role,
shown over the API as membership of the role's built-in group (``Admins``, ``Developers``,
``Analysts``), each with one built-in policy (``AdminAccess``, ...) listing the permissions.

Key layout (kept here, apart from the lake's ``lakectl.core.keys``):

    auth/meta         key "setup"              → the first admin's user id (set once, by CAS)
    auth/users        key <user id>            → {"id", "creation_date", "role" (or null),
                                                  "incarnation"}
    auth/credentials  key <access key id>      → {"access_key_id", "user_id", "user_incarnation",
                                                  "creation_date", "secret": Fernet token}

``incarnation`` is random per created user: access keys, login tokens and signed block locators
name it (:attr:`User.signing_token`), so a key, token or signature left over from a deleted user
never works for a later user of the same name.

Secrets are stored encrypted (Fernet: AES-128-CBC + HMAC-SHA256) under a key derived (HKDF-SHA256)
from ``auth.encrypt.secret_key``: they must be recoverable, since S3 signatures are computed from
them, but a copy of the database alone does not reveal them. Secrets are never logged.

Login tokens are stateless JWTs (HS256) under another key derived from the same secret: claims
``sub`` (user id), ``inc`` (its incarnation), ``aud`` ("login"), ``iat`` and ``exp``.
"""

from __future__ import annotations

import base64
import binascii
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
from lakectl.errors import (
    AlreadyExists,
    InvalidArgument,
    KeyNotFound,
    NotFound,
    PredicateFailed,
    StorageError,
    TooManyRetries,
    Unauthenticated,
)

META = "auth/meta"
USERS = "auth/users"
CREDENTIALS = "auth/credentials"
SETUP_KEY = "setup"

SECRET_FILE = "auth-secret"
"""Where the generated encryption secret lives in the data directory when none is configured."""

TOKEN_TTL = 7 * 24 * 3600
"""How long a login token is valid (lakeFS's default ``auth.login_duration`` is 168h)."""
MAX_TOKEN_CHARS = 4096
CAS_ATTEMPTS = 8

_KEY_ALPHABET = string.ascii_uppercase + string.digits


class Permission(enum.Enum):
    """What a route needs; each route declares exactly one (see ``server.api.deps.require``)."""

    CREATE_REPO = "CreateRepo"
    DELETE_REPO = "DeleteRepo"
    READ_REPO = "ReadRepo"
    WRITE_REPO = "WriteRepo"
    MANAGE_AUTH = "ManageAuth"
    """Users, groups, other users' access keys and policies."""


class Role(enum.Enum):
    ADMIN = "Admin"
    DEVELOPER = "Developer"
    ANALYST = "Analyst"

    @property
    def group(self) -> str:
        """The built-in group whose members have this role."""
        return self.value + "s"

    @property
    def policy(self) -> str:
        """The built-in policy of the role's group."""
        return self.value + "Access"


ROLE_PERMISSIONS: Mapping[Role, frozenset[Permission]] = {
    Role.ADMIN: frozenset(Permission),
    # As lakeFS's Developers group (policy FSReadWriteAll): every data operation, but creating
    # and deleting repositories stays with admins (lakeFS: FSFullAccess, Admins and SuperUsers).
    Role.DEVELOPER: frozenset({Permission.READ_REPO, Permission.WRITE_REPO}),
    Role.ANALYST: frozenset({Permission.READ_REPO}),
}
"""The one table of who may do what."""


def role_of_group(group_id: str) -> Role:
    """The role of a built-in group; raise ``NotFound`` for any other group id."""
    for role in Role:
        if role.group == group_id:
            return role
    raise NotFound(f"group {group_id!r} not found (built-in groups: Admins, Developers, Analysts)")


def role_of_policy(policy_id: str) -> Role:
    for role in Role:
        if role.policy == policy_id:
            return role
    raise NotFound(f"policy {policy_id!r} not found")


def group_dict(role: Role) -> dict[str, Any]:
    """lakeFS ``Group``; built in, hence ``creation_date`` 0."""
    actions = ", ".join(sorted(p.value for p in ROLE_PERMISSIONS[role]))
    return {
        "id": role.group,
        "name": role.group,
        "description": f"role {role.value}: {actions}",
        "creation_date": 0,
    }


def policy_dict(role: Role) -> dict[str, Any]:
    """lakeFS ``Policy``: one statement allowing the role's permissions on every resource."""
    actions = sorted(p.value for p in ROLE_PERMISSIONS[role])
    return {
        "id": role.policy,
        "creation_date": 0,
        "statement": [{"effect": "allow", "resource": "*", "action": actions}],
    }


@dataclass(frozen=True, slots=True)
class User:
    id: str
    creation_date: int
    role: Role | None
    incarnation: str = ""

    @property
    def permissions(self) -> frozenset[Permission]:
        return ROLE_PERMISSIONS[self.role] if self.role is not None else frozenset()

    @property
    def signing_token(self) -> str:
        """Whom signed block locators and block challenges are made for: this incarnation of the
        user, so that a user deleted and created again under the same name starts with none
        (docs/decisions/0006). Incarnations are hex: the ``@`` cannot be ambiguous."""
        return f"{self.id}@{self.incarnation}"

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``User``, plus the role (lakectl)."""
        role = self.role.value if self.role is not None else None
        return {"id": self.id, "creation_date": self.creation_date, "role": role}

    def record(self) -> bytes:
        return json.dumps({**self.to_dict(), "incarnation": self.incarnation}).encode()

    @staticmethod
    def parse(raw: bytes) -> User:
        d = json.loads(raw)
        role = Role(d["role"]) if d.get("role") else None
        return User(d["id"], d["creation_date"], role, d.get("incarnation", ""))


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
        user = User(username, int(time.time()), Role.ADMIN, secrets.token_hex(8))
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

    # -- users and groups ------------------------------------------------------------------

    def _user_or_none(self, user_id: str) -> User | None:
        try:
            return User.parse(self.kv.get(USERS, user_id))
        except KeyNotFound:
            return None

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
                yield User.parse(raw)

    def create_user(self, user_id: str, role: Role | None = None) -> User:
        """A new user, without a role unless given; raise ``AlreadyExists`` when the id is taken."""
        _check_user_id(user_id)
        user = User(user_id, int(time.time()), role, secrets.token_hex(8))
        try:
            self.kv.set_if(USERS, user_id, user.record(), None)
        except PredicateFailed:
            raise AlreadyExists(f"user {user_id!r} already exists", user=user_id) from None
        return user

    def delete_user(self, user_id: str) -> None:
        """Delete the user and then its access keys (which stop working with the user already:
        they name its incarnation); raise ``NotFound`` when there is no such user."""
        user = self.get_user(user_id)
        self.kv.delete(USERS, user_id)
        for key_id, raw in self.kv.scan(CREDENTIALS):
            record = json.loads(raw)
            if record["user_id"] == user.id and record.get("user_incarnation", "") == user.incarnation:
                self.kv.delete(CREDENTIALS, key_id)

    def set_role(self, user_id: str, role: Role | None, only_from: Role | None = None) -> User:
        """Give the user ``role`` (None: no role), by compare-and-swap; with ``only_from``, only
        when the user has that role now (else ``NotFound``: not a member of its group)."""
        for _ in range(CAS_ATTEMPTS):
            try:
                raw = self.kv.get(USERS, user_id)
            except KeyNotFound:
                raise NotFound(f"user {user_id!r} not found", user=user_id) from None
            user = User.parse(raw)
            if only_from is not None and user.role is not only_from:
                raise NotFound(f"user {user_id!r} is not a member of group {only_from.group!r}", user=user_id)
            updated = replace(user, role=role)
            try:
                self.kv.set_if(USERS, user_id, updated.record(), raw)
            except PredicateFailed:
                continue
            return updated
        raise TooManyRetries(f"user {user_id!r} kept changing")

    def members(self, role: Role, prefix: str = "", after: str = "") -> Iterator[User]:
        return (u for u in self.list_users(prefix, after) if u.role is role)

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
        claims = {"sub": user.id, "inc": user.incarnation, "aud": "login", "iat": issued, "exp": issued + ttl}
        return LoginToken(_sign_token(self._token_key, claims), issued + ttl)

    def user_of_token(self, token: str, now: float | None = None) -> User:
        """The user a login token was issued to; raise ``Unauthenticated`` when the token is
        malformed, forged, expired, or its user was deleted since."""
        claims = _verify_token(self._token_key, token)
        if claims["exp"] <= (time.time() if now is None else now):
            raise Unauthenticated("the login token has expired: log in again")
        user = self._user_or_none(claims["sub"])
        if user is None or user.incarnation != claims["inc"]:
            raise Unauthenticated("the login token's user no longer exists")
        return user


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
