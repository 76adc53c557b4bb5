"""Keep locator grammar: the Keep documentation's valid and invalid examples, and the API."""

from __future__ import annotations

import dataclasses

import pytest

from lakectl.core.blocks.locator import EMPTY_LOCATOR, Locator, parse_locator
from lakectl.errors import InvalidArgument, InvalidLocator

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"
SIG = "da39a3ee5e6b4b0d3255bfef95601890afd80709"

# From the Keep "locator format" documentation.
DOC_VALID = [
    "d41d8cd98f00b204e9800998ecf8427e+0",
    "d41d8cd98f00b204e9800998ecf8427e+0+Z",
    "d41d8cd98f00b204e9800998ecf8427e+0+Z+Ada39a3ee5e6b4b0d3255bfef95601890afd80709@53bed294",
    "930625b054ce894ac40596c3f5a0d947+33+Rzzzzz-1f27a35dd9af37191d63ad8eb8985624451e7b79@5835c8bc",
]

DOC_INVALID = [
    ("d41d8cd98f00b204e9800998ecf8427e", "missing size hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+Z+0", "before the size hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+0", "more than one size hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+z", "uppercase"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+Zfoo*bar", "invalid character '*'"),
]

MORE_INVALID = [
    ("", "digest"),
    ("+0", "digest"),
    ("D41D8CD98F00B204E9800998ECF8427E+0", "lowercase hex"),
    ("d41d8cd98f00b204e9800998ecf8427+0", "32 lowercase hex"),
    ("d41d8cd98f00b204e9800998ecf8427e0+0", "32 lowercase hex"),
    ("d41d8cd98f00b204e9800998ecf8427g+0", "32 lowercase hex"),
    ("d41d8cd98f00b204e9800998ecf8427e+", "empty size hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+-1", "decimal digits"),
    ("d41d8cd98f00b204e9800998ecf8427e+1.5", "decimal digits"),
    ("d41d8cd98f00b204e9800998ecf8427e+\u0661", "decimal digits"),  # Arabic-Indic one
    ("d41d8cd98f00b204e9800998ecf8427e+007", "leading zeros"),
    ("d41d8cd98f00b204e9800998ecf8427e+99999999999999999999", "too large"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+", "empty hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+0++Z", "empty hint"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+Z x", "invalid character ' '"),
    (" d41d8cd98f00b204e9800998ecf8427e+0", "digest"),
    ("d41d8cd98f00b204e9800998ecf8427e+0\n", "decimal digits"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+Abad", "signature hint"),
    (f"d41d8cd98f00b204e9800998ecf8427e+0+A{SIG}@5835c8b", "signature hint"),
    (f"d41d8cd98f00b204e9800998ecf8427e+0+A{SIG.upper()}@5835c8bc", "signature hint"),
    (f"d41d8cd98f00b204e9800998ecf8427e+0+A{SIG}@5835c8bc+A{SIG}@5835c8bd", "more than one"),
    ("d41d8cd98f00b204e9800998ecf8427e+0+Rzz-1f27", "remote signature hint"),
]


@pytest.mark.parametrize("text", DOC_VALID)
def test_documented_valid_locators_parse_and_round_trip(text: str) -> None:
    loc = parse_locator(text)
    assert str(loc) == text
    assert f"{loc}" == text
    assert parse_locator(str(loc)) == loc


@pytest.mark.parametrize(("text", "why"), DOC_INVALID + MORE_INVALID)
def test_invalid_locators_say_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(InvalidLocator) as info:
        parse_locator(text)
    message = str(info.value)
    assert why in message
    assert "\n" not in message
    assert isinstance(info.value, InvalidArgument)


def test_fields() -> None:
    loc = parse_locator(DOC_VALID[2])
    assert loc.md5 == EMPTY_MD5
    assert loc.size == 0
    assert loc.hints == ("Z", "Ada39a3ee5e6b4b0d3255bfef95601890afd80709@53bed294")
    assert loc.bare == EMPTY_LOCATOR


def test_signature_and_without_signature() -> None:
    loc = parse_locator(DOC_VALID[2])
    assert loc.signature == (SIG, 0x53BED294)
    unsigned = loc.without_signature()
    assert unsigned.signature is None
    assert str(unsigned) == "d41d8cd98f00b204e9800998ecf8427e+0+Z"
    assert unsigned.without_signature() == unsigned
    assert parse_locator(EMPTY_LOCATOR).signature is None


def test_remote_signature_is_not_a_local_signature() -> None:
    loc = parse_locator(DOC_VALID[3])
    assert loc.signature is None
    assert loc.without_signature() == loc


def test_bare_hash_only_when_asked() -> None:
    loc = parse_locator(EMPTY_MD5, require_size=False)
    assert loc == Locator(EMPTY_MD5, None, ())
    assert str(loc) == EMPTY_MD5
    with pytest.raises(InvalidLocator, match="no size hint"):
        _ = loc.bare
    # The other rules still hold without a required size.
    with pytest.raises(InvalidLocator, match="before the size hint"):
        parse_locator(f"{EMPTY_MD5}+Z+0", require_size=False)


def test_locator_is_frozen_and_slotted() -> None:
    loc = parse_locator(EMPTY_LOCATOR)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loc.size = 3  # type: ignore[misc]
    assert not hasattr(loc, "__dict__")
    assert hash(loc) == hash(parse_locator(EMPTY_LOCATOR))


@pytest.mark.parametrize(
    ("md5", "size", "hints"),
    [
        ("xyz", 0, ()),
        (EMPTY_MD5, -1, ()),
        (EMPTY_MD5, 2**63, ()),
        (EMPTY_MD5, None, ("Z",)),
        (EMPTY_MD5, 0, ("z",)),
        (EMPTY_MD5, 0, ("",)),
        (EMPTY_MD5, 0, ("Z+Y",)),
        (EMPTY_MD5, 0, (f"A{SIG}@53bed294", f"A{SIG}@53bed295")),
    ],
)
def test_constructor_validates(md5: str, size: int | None, hints: tuple[str, ...]) -> None:
    with pytest.raises(InvalidLocator):
        Locator(md5, size, hints)


def test_large_size_and_many_hints() -> None:
    text = f"{EMPTY_MD5}+{2**63 - 1}+K@zzzzz+E-_@9+Z"
    assert str(parse_locator(text)) == text
