"""One-time sign-in links (``/ui/login?token=...``), as ``lakectl ui`` prints them: each signs its
user in once, within :data:`LINK_TTL` seconds.

Key layout (the UI's own partition, apart from the lake's ``lakectl.core.keys``):

    ui/links   key <sha256 hex of the link's token>  → {"user", "inc", "expires"}

Only the token's hash is stored, so a copy of the database yields no usable link. A link is
spent by compare-and-swap of its record to :data:`SPENT` (of two uses at once, exactly one wins),
then removed; expired records are swept whenever a link is issued.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time

from lakectl.errors import KeyNotFound, NotFound, PredicateFailed, Unauthenticated
from server.auth.store import Auth
from server.auth.users import User

LINKS = "ui/links"
LINK_TTL = 600
SPENT = b"spent"
INVALID = "this sign-in link is invalid, expired or already used: start `lakectl ui` again for a new one"


def _key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(auth: Auth, user: User, ttl: int = LINK_TTL, now: float | None = None) -> str:
    """A new one-time sign-in token for ``user``."""
    moment = time.time() if now is None else now
    token = secrets.token_urlsafe(32)
    record = {"user": user.id, "inc": user.incarnation, "expires": int(moment + ttl)}
    auth.kv.set_if(LINKS, _key(token), json.dumps(record).encode(), None)
    for key, raw in list(auth.kv.scan(LINKS)):
        if raw != SPENT and json.loads(raw)["expires"] <= moment:
            auth.kv.delete(LINKS, key)
    return token


def consume(auth: Auth, token: str, now: float | None = None) -> User:
    """The user a link was issued to, the link spent; ``Unauthenticated`` when it is unknown,
    expired, already used, or its user was deleted since."""
    if not token or len(token) > 128:
        raise Unauthenticated(INVALID)
    key = _key(token)
    try:
        raw = auth.kv.get(LINKS, key)
        if raw == SPENT:
            raise Unauthenticated(INVALID)
        auth.kv.set_if(LINKS, key, SPENT, raw)
    except (KeyNotFound, PredicateFailed):
        raise Unauthenticated(INVALID) from None
    auth.kv.delete(LINKS, key)
    record = json.loads(raw)
    if record["expires"] <= (time.time() if now is None else now):
        raise Unauthenticated(INVALID)
    try:
        user = auth.get_user(record["user"])
    except NotFound:
        raise Unauthenticated(INVALID) from None
    if user.incarnation != record["inc"]:
        raise Unauthenticated(INVALID)
    return user
