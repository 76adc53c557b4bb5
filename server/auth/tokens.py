"""Login tokens: stateless HS256 JWTs (PyJWT) naming one incarnation of a user, and their revocation.

Claims: ``sub`` (user id), ``inc`` (its incarnation), ``aud`` ("login"), ``iat``, ``exp`` and
``jti`` (random, so that each token is unique), signed with HS256 under a key derived from the
server's secret (:mod:`server.auth.secret`). The wire form is the standard JWS compact one:
tokens of servers from before PyJWT (a codec of their own) are, byte for byte, what PyJWT writes
for the same claims, so they stay valid across the upgrade, both ways.

A token is revoked (:meth:`LoginTokens.revoke`: a UI sign-out) by a record in ``auth/revoked``
kept until it would have expired, which every use of a token reads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from lakectl.core.kv import KVStore
from lakectl.errors import KeyNotFound, Unauthenticated
from server.auth.users import User

REVOKED = "auth/revoked"
"""key: sha256 hex of a signed-out token → its expiry (Unix seconds, text)."""

TOKEN_TTL = 7 * 24 * 3600
"""How long a login token is valid (lakeFS's default ``auth.login_duration`` is 168h)."""
MAX_TOKEN_CHARS = 4096

_ALGORITHM = "HS256"  # the only one accepted: no negotiation, so neither "none" nor another key type
_AUDIENCE = "login"
_CLAIM_TYPES: Mapping[str, Callable[[object], bool]] = {
    "sub": lambda v: isinstance(v, str),
    "inc": lambda v: isinstance(v, str),
    "aud": lambda v: v == _AUDIENCE,
    "iat": lambda v: isinstance(v, int),
    "exp": lambda v: isinstance(v, int),
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


class LoginTokens:
    """The login tokens of one server (shared by every server process on the same KV and secret)."""

    def __init__(self, kv: KVStore, key: bytes, load_user: Callable[[str], User | None]) -> None:
        """``key``: the HS256 key; ``load_user``: the user of an id with its grants, None when
        there is none (a token names its user; the user's record says whether it still holds)."""
        self.kv = kv
        self._key = key
        self._load_user = load_user

    def issue(self, user: User, ttl: int = TOKEN_TTL, now: float | None = None) -> LoginToken:
        """A login token for ``user``, valid for ``ttl`` seconds from ``now``."""
        issued = int(time.time() if now is None else now)
        # In key order, as earlier servers wrote them: the same tokens, byte for byte.
        claims = {
            "aud": _AUDIENCE,
            "exp": issued + ttl,
            "iat": issued,
            "inc": user.incarnation,
            "jti": secrets.token_hex(8),
            "sub": user.id,
        }
        return LoginToken(_encode(self._key, claims), issued + ttl)

    def user_of(self, token: str, now: float | None = None) -> User:
        """The user a login token was issued to; raise ``Unauthenticated`` when the token is
        malformed, forged, expired, revoked, or its user was deleted since."""
        claims = _decode(self._key, token)
        if claims["exp"] <= (time.time() if now is None else now):
            raise Unauthenticated("the login token has expired: log in again")
        try:
            self.kv.get(REVOKED, _revoked_key(token))
        except KeyNotFound:
            pass
        else:
            raise Unauthenticated("the login token was revoked (signed out): log in again")
        user = self._load_user(claims["sub"])
        if user is None or user.incarnation != claims["inc"]:
            raise Unauthenticated("the login token's user no longer exists")
        return user

    def revoke(self, token: str, now: float | None = None) -> None:
        """Refuse ``token`` from now on (a sign-out), on every server sharing this database. Only
        a valid token is recorded, until it would expire; records of expired ones are swept."""
        moment = int(time.time() if now is None else now)
        try:
            self.user_of(token, moment)
        except Unauthenticated:
            return  # forged, expired or revoked already: nothing it could open
        expiry = _decode(self._key, token)["exp"]
        self.kv.set(REVOKED, _revoked_key(token), str(expiry).encode())
        for key, raw in list(self.kv.scan(REVOKED)):
            if int(raw) <= moment:
                self.kv.delete(REVOKED, key)


def _revoked_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _encode(key: bytes, claims: Mapping[str, object]) -> str:
    return jwt.encode(dict(claims), key, algorithm=_ALGORITHM)


def _decode(key: bytes, token: str) -> dict[str, Any]:
    """The claims of a token this server signed; ``Unauthenticated`` for anything else (PyJWT's
    errors stay here)."""
    invalid = Unauthenticated("invalid login token")
    if len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise invalid
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[_ALGORITHM],
            audience=_AUDIENCE,
            # The expiry is checked against the caller's clock (``now``), the issue time not at
            # all (a server whose clock is behind the issuer's must accept a fresh token).
            options={"verify_exp": False, "verify_iat": False, "strict_aud": True},
        )
    except jwt.PyJWTError:
        raise invalid from None
    if not all(k in claims and ok(claims[k]) for k, ok in _CLAIM_TYPES.items()):
        raise invalid
    # Base64 decoding forgives padding and a signature's unused trailing bits, so one signature
    # has several spellings, and a revocation is keyed by the spelling: only the one this server
    # writes for these claims is accepted (it holds the header too: exactly this server's).
    if not hmac.compare_digest(_encode(key, claims).encode(), token.encode()):
        raise invalid
    return claims
