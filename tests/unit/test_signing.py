"""Signed locators: sign, verify, and every way a signature must be refused."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from lakectl.core.blocks.locator import parse_locator
from lakectl.core.blocks.signing import MAX_EXPIRY, new_secret, sign, verify
from lakectl.errors import InvalidArgument, InvalidLocator, SignatureError

LOCATOR = "acbd18db4cc2f85cedef654fccc4a4d8+3"  # md5("foo")
KEY = b"k" * 32
TOKEN = "hocfupkn2pjhrpgp2vxv8rsku7tvtx49arbc9s4bvu7p7wxqvk"
NOW = 1_700_000_000
EXPIRY = NOW + 3600


def test_sign_format_and_message() -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    expiry_hex = f"{EXPIRY:08x}"
    mac = hmac.new(KEY, f"{LOCATOR}@{TOKEN}@{expiry_hex}".encode(), hashlib.sha1).hexdigest()
    assert signed == f"{LOCATOR}+A{mac}@{expiry_hex}"
    assert parse_locator(signed).signature == (mac, EXPIRY)


def test_expiry_is_eight_lowercase_hex_digits() -> None:
    assert sign(LOCATOR, KEY, TOKEN, 0x1F).endswith("@0000001f")
    assert sign(LOCATOR, KEY, TOKEN, MAX_EXPIRY).endswith("@ffffffff")


def test_verify_round_trip_returns_the_parsed_locator() -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    loc = verify(signed, KEY, TOKEN, now=NOW)
    assert loc.bare == LOCATOR
    assert str(loc) == signed


def test_sign_replaces_an_existing_signature_and_keeps_other_hints() -> None:
    first = sign(f"{LOCATOR}+K@zzzzz", KEY, TOKEN, EXPIRY)
    second = sign(first, KEY, "other-token", EXPIRY + 1)
    assert second.count("+A") == 1
    assert second.startswith(f"{LOCATOR}+K@zzzzz+A")
    verify(second, KEY, "other-token", now=NOW)
    with pytest.raises(SignatureError):
        verify(second, KEY, TOKEN, now=NOW)


def test_verify_uses_the_clock_by_default() -> None:
    verify(sign(LOCATOR, KEY, TOKEN, MAX_EXPIRY), KEY, TOKEN)
    with pytest.raises(SignatureError, match="expired"):
        verify(sign(LOCATOR, KEY, TOKEN, 1000), KEY, TOKEN)


def test_missing_signature() -> None:
    with pytest.raises(SignatureError, match="no \\+A signature"):
        verify(LOCATOR, KEY, TOKEN, now=NOW)


def test_wrong_key() -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    with pytest.raises(SignatureError, match="invalid signature"):
        verify(signed, b"x" * 32, TOKEN, now=NOW)
    with pytest.raises(SignatureError):
        verify(signed, b"", TOKEN, now=NOW)


def test_wrong_token() -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    with pytest.raises(SignatureError, match="invalid signature"):
        verify(signed, KEY, TOKEN + "x", now=NOW)


def _flip(text: str, index: int) -> str:
    """Change one hex digit."""
    return text[:index] + ("0" if text[index] != "0" else "1") + text[index + 1 :]


SIGNED = sign(LOCATOR, KEY, TOKEN, EXPIRY)
MAC_AT = SIGNED.index("+A") + 2

TAMPERED = {
    "md5": _flip(SIGNED, 0),
    "size": SIGNED.replace("+3+", "+4+"),
    "signature": _flip(SIGNED, MAC_AT + 7),
    "expiry": _flip(SIGNED, len(SIGNED) - 1),
    "extended expiry": SIGNED[:-8] + "ffffffff",
    "truncated signature": SIGNED[:-9],
    "signature as another hint": SIGNED.replace("+A", "+Z"),
    "signature of another block": SIGNED.replace(LOCATOR, "37b51d194a7513e45b56f6524f2d51f2+3"),
}


@pytest.mark.parametrize("what", sorted(TAMPERED))
def test_tampering_is_detected(what: str) -> None:
    changed = TAMPERED[what]
    assert changed != SIGNED
    with pytest.raises(SignatureError):
        verify(changed, KEY, TOKEN, now=NOW)


def test_every_single_character_change_is_detected() -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    for i, ch in enumerate(signed):
        for other in "0af+@AZ":
            if other == ch:
                continue
            with pytest.raises(SignatureError):
                verify(signed[:i] + other + signed[i + 1 :], KEY, TOKEN, now=NOW)


@pytest.mark.parametrize("now", [EXPIRY, EXPIRY + 1])
def test_expired_at_or_after_expiry(now: int) -> None:
    signed = sign(LOCATOR, KEY, TOKEN, EXPIRY)
    with pytest.raises(SignatureError, match="expired"):
        verify(signed, KEY, TOKEN, now=now)
    verify(signed, KEY, TOKEN, now=EXPIRY - 1)


def test_garbage_is_a_signature_error() -> None:
    for text in ["", "not a locator", f"{LOCATOR}+Axyz@1", "\x00"]:
        with pytest.raises(SignatureError):
            verify(text, KEY, TOKEN, now=NOW)


def test_sign_refuses_bad_input() -> None:
    with pytest.raises(InvalidLocator):
        sign("acbd18db4cc2f85cedef654fccc4a4d8", KEY, TOKEN, EXPIRY)
    with pytest.raises(InvalidLocator):
        sign("nope", KEY, TOKEN, EXPIRY)
    with pytest.raises(InvalidArgument):
        sign(LOCATOR, b"", TOKEN, EXPIRY)
    for expiry in (-1, MAX_EXPIRY + 1):
        with pytest.raises(InvalidArgument):
            sign(LOCATOR, KEY, TOKEN, expiry)


def test_tokens_with_at_signs_and_unicode() -> None:
    for token in ["", "a@b", "ünï@@", "\ud800"]:
        signed = sign(LOCATOR, KEY, token, EXPIRY)
        verify(signed, KEY, token, now=NOW)
    with pytest.raises(SignatureError):
        verify(sign(LOCATOR, KEY, "a@b", EXPIRY), KEY, "a", now=NOW)


def test_new_secret() -> None:
    a, b = new_secret(), new_secret()
    assert isinstance(a, bytes)
    assert len(a) == 32
    assert a != b
