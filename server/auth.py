"""Users and access keys in the KV store, secrets encrypted at rest, and checking HTTP basic credentials.

Key layout (kept here, apart from the lake's ``lakectl.core.keys``):

    auth/meta         key "setup"              → the first admin's user id (set once, by CAS)
    auth/users        key <user id>            → {"id", "creation_date", "role"}
    auth/credentials  key <access key id>      → {"access_key_id", "user_id", "creation_date",
                                                  "secret": Fernet token of the secret}

Secrets are stored encrypted (Fernet: AES-128-CBC + HMAC-SHA256) under a key derived (HKDF-SHA256)
from ``auth.encrypt.secret_key``: they must be recoverable, since S3 signatures are computed from
them, but a copy of the database alone does not reveal them. Secrets are never logged.
"""

from __future__ import annotations

import base64
import enum
import hmac
import json
import os
import secrets
import string
import time
from dataclasses import dataclass

from lakectl.core.kv import KVStore
from lakectl.errors import (
    AlreadyExists,
    InvalidArgument,
    KeyNotFound,
    PredicateFailed,
    StorageError,
    Unauthenticated,
)

META = "auth/meta"
USERS = "auth/users"
CREDENTIALS = "auth/credentials"
SETUP_KEY = "setup"

SECRET_FILE = "auth-secret"
"""Where the generated encryption secret lives in the data directory when none is configured."""

_KEY_ALPHABET = string.ascii_uppercase + string.digits


class Role(enum.Enum):
    ADMIN = "Admin"
    DEVELOPER = "Developer"
    ANALYST = "Analyst"


@dataclass(frozen=True, slots=True)
class User:
    id: str
    creation_date: int
    role: Role

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "creation_date": self.creation_date, "role": self.role.value}


@dataclass(frozen=True, slots=True)
class NewCredentials:
    """An access key with its secret in clear: returned once, when created."""

    access_key_id: str
    secret_access_key: str
    creation_date: int
    user: User

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


def new_secret() -> str:
    return base64.b64encode(secrets.token_bytes(30)).decode()  # 40 characters, as AWS's


class Auth:
    """Users and credentials of one server (shared by every server process on the same KV)."""

    def __init__(self, kv: KVStore, secret_key: str) -> None:
        if not secret_key:
            raise InvalidArgument("auth.encrypt.secret_key must not be empty")
        from cryptography.fernet import Fernet
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        derived = HKDF(hashes.SHA256(), 32, salt=None, info=b"lakectl auth secrets v1").derive(
            secret_key.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))
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
        user = User(username, int(time.time()), Role.ADMIN)
        # An earlier set-up that died before its marker may have left this user: replace it.
        self.kv.set(USERS, user.id, json.dumps(user.to_dict()).encode())
        creds = self.create_credentials(user, access_key_id, secret_access_key)
        try:
            self.kv.set_if(META, SETUP_KEY, user.id.encode(), None)
        except PredicateFailed:
            self.kv.delete(CREDENTIALS, creds.access_key_id)
            if self.kv.get(META, SETUP_KEY).decode() != user.id:
                self.kv.delete(USERS, user.id)
            raise AlreadyExists("this lakectl server is already set up") from None
        return creds

    # -- users and credentials -------------------------------------------------------------

    def get_user(self, user_id: str) -> User:
        try:
            raw = self.kv.get(USERS, user_id)
        except KeyNotFound:
            raise Unauthenticated(f"user {user_id!r} no longer exists") from None
        d = json.loads(raw)
        return User(d["id"], d["creation_date"], Role(d["role"]))

    def create_credentials(
        self, user: User, access_key_id: str | None = None, secret_access_key: str | None = None
    ) -> NewCredentials:
        """A new access key for ``user`` (random unless given); raise ``AlreadyExists`` when a
        given access key id is taken."""
        key_id = access_key_id or new_access_key_id()
        secret = secret_access_key or new_secret()
        if not key_id.isprintable() or ":" in key_id or len(key_id) > 128:
            raise InvalidArgument("an access key id is up to 128 printable characters, without ':'")
        if not secret.isprintable() or len(secret) > 256:
            raise InvalidArgument("a secret access key is up to 256 printable characters")
        now = int(time.time())
        record = {
            "access_key_id": key_id,
            "user_id": user.id,
            "creation_date": now,
            "secret": self._fernet.encrypt(secret.encode()).decode(),
        }
        try:
            self.kv.set_if(CREDENTIALS, key_id, json.dumps(record).encode(), None)
        except PredicateFailed:
            raise AlreadyExists(f"access key {key_id!r} already exists") from None
        return NewCredentials(key_id, secret, now, user)

    def secret_of(self, access_key_id: str) -> tuple[str, str] | None:
        """``(user id, secret)`` of an access key, or None when there is no such key."""
        from cryptography.fernet import InvalidToken

        try:
            record = json.loads(self.kv.get(CREDENTIALS, access_key_id))
        except KeyNotFound:
            return None
        try:
            secret = self._fernet.decrypt(record["secret"].encode()).decode()
        except InvalidToken:
            raise StorageError(
                "cannot decrypt stored credentials: auth.encrypt.secret_key differs from the one "
                "they were stored with"
            ) from None
        return record["user_id"], secret

    def authenticate(self, access_key_id: str, secret_access_key: str) -> User:
        """The user owning the access key; raise ``Unauthenticated`` for any mismatch."""
        found = self.secret_of(access_key_id) if access_key_id else None
        expected = found[1] if found is not None else new_secret()  # compare anyway: same timing
        if not hmac.compare_digest(expected.encode(), secret_access_key.encode()) or found is None:
            raise Unauthenticated("invalid access key id or secret access key")
        return self.get_user(found[0])


def _check_user_id(user_id: str) -> None:
    if not user_id or len(user_id) > 256 or not user_id.isprintable():
        raise InvalidArgument(f"invalid user name {user_id!r}: 1-256 printable characters")


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
