"""Signed locators: Keep-style ``+A<hmac-sha1>@<expiry>`` permission hints, issued and checked."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from lakectl.core.blocks.locator import Locator, parse_locator
from lakectl.errors import InvalidArgument, InvalidLocator, SignatureError

__all__ = ["MAX_EXPIRY", "new_secret", "sign", "verify"]

#: The largest expiry an 8-hex-digit timestamp holds (2106-02-07).
MAX_EXPIRY = 0xFFFFFFFF


def new_secret() -> bytes:
    """A fresh random signing key (32 bytes)."""
    return secrets.token_bytes(32)


def _mac(key: bytes, bare: str, token: str, expiry_hex: str) -> str:
    # Keep signs "<md5>@<token>@<expiry hex>"; we sign "<md5>+<size>@<token>@<expiry hex>"
    # so the size is covered too: the bare locator is the block's name in the adapters.
    # The token sits between two fixed-format fields, so an "@" inside it is unambiguous.
    message = f"{bare}@{token}@{expiry_hex}".encode("utf-8", "surrogatepass")
    return hmac.new(key, message, hashlib.sha1).hexdigest()


def sign(locator: str, key: bytes, token: str, expiry: int) -> str:
    """Return ``locator`` (any old ``+A`` hint dropped) with ``+A<hmac>@<expiry hex>`` appended.

    Raises ``InvalidLocator`` for a malformed locator or one without a size, and
    ``InvalidArgument`` for an empty key or an expiry outside 0..MAX_EXPIRY.
    """
    if not key:
        raise InvalidArgument("signing key must not be empty")
    if isinstance(expiry, bool) or not isinstance(expiry, int) or not 0 <= expiry <= MAX_EXPIRY:
        raise InvalidArgument(f"signature expiry {expiry!r} does not fit 8 hex digits")
    parsed = parse_locator(locator).without_signature()
    expiry_hex = f"{expiry:08x}"
    hint = f"A{_mac(key, parsed.bare, token, expiry_hex)}@{expiry_hex}"
    return str(Locator(parsed.md5, parsed.size, (*parsed.hints, hint)))


def verify(signed: str, key: bytes, token: str, now: int | None = None) -> Locator:
    """Check a signed locator for ``token`` under ``key``; return it parsed (signature kept).

    Raises ``SignatureError`` (only) when the text is not a valid signed locator, the
    signature was made with another key or token or for another md5/size/expiry, or the
    expiry is not after ``now`` (default: the current time).
    """
    try:
        parsed = parse_locator(signed)
    except InvalidLocator as exc:
        raise SignatureError(f"not a valid signed locator: {exc.message}") from exc
    signature = parsed.signature
    if signature is None:
        raise SignatureError(f"locator {parsed.bare} carries no +A signature")
    mac, expiry = signature
    # An empty key is refused by sign(), so nothing valid can have been signed with it.
    expected = _mac(key, parsed.bare, token, f"{expiry:08x}") if key else ""
    if not hmac.compare_digest(expected, mac):
        raise SignatureError(f"invalid signature on locator {parsed.bare}")
    if now is None:
        now = int(time.time())
    if expiry <= now:
        raise SignatureError(f"signature on locator {parsed.bare} expired at {expiry}")
    return parsed
