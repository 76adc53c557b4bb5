"""Keep block locators: ``<md5 hex>+<size>[+hints]``, parsed, validated and formatted."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from lakectl.errors import InvalidLocator

__all__ = [
    "EMPTY_LOCATOR",
    "MAX_SIZE",
    "Locator",
    "parse_locator",
]

#: The locator of the zero-length block (md5 of no bytes).
EMPTY_LOCATOR = "d41d8cd98f00b204e9800998ecf8427e+0"

#: Largest size a locator may carry (sizes are stored as signed 64-bit integers elsewhere).
MAX_SIZE = 2**63 - 1

# Patterns use explicit ASCII classes: `\d` would also accept non-ASCII digits.
_DIGEST = re.compile(r"[0-9a-f]{32}")
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_HINT = re.compile(r"[A-Z][-A-Za-z0-9@_]*")
_SIGN_HINT = re.compile(r"A([0-9a-f]{40})@([0-9a-f]{8})")
_REMOTE_SIGN_HINT = re.compile(r"R[A-Za-z0-9]{5}-[0-9a-f]{40}@[0-9a-f]{8}")
_BAD_HINT_CHAR = re.compile(r"[^-A-Za-z0-9@_]")


def _show(text: str) -> str:
    """Quote user text for a one-line message, cut when long."""
    if len(text) > 80:
        return repr(text[:80]) + "..."
    return repr(text)


def _hint_problem(hint: str) -> str | None:
    """Why ``hint`` (without its leading ``+``) is not a valid hint, or None."""
    if not hint:
        return "empty hint"
    if hint.isascii() and hint.isdigit():
        return f"more than one size hint (+{hint})"
    if not ("A" <= hint[0] <= "Z"):
        return f"hint {_show(hint)} does not start with an uppercase letter"
    bad = _BAD_HINT_CHAR.search(hint)
    if bad is not None:
        return f"hint {_show(hint)} contains invalid character {bad.group(0)!r}"
    if hint[0] == "A" and _SIGN_HINT.fullmatch(hint) is None:
        return f"signature hint {_show(hint)} is not A<40 hex digits>@<8 hex digits>"
    if hint[0] == "R" and _REMOTE_SIGN_HINT.fullmatch(hint) is None:
        return f"remote signature hint {_show(hint)} is not R<5 chars>-<40 hex>@<8 hex>"
    return None


@dataclass(frozen=True, slots=True)
class Locator:
    """A parsed Keep locator; ``str()`` gives its canonical text.

    ``size`` is None only for a bare digest (``parse_locator(text, require_size=False)``),
    which then carries no hints. Construction validates every field and raises
    ``InvalidLocator``, so ``str(locator)`` always parses back to an equal value.
    """

    md5: str
    size: int | None
    hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.md5, str) or _DIGEST.fullmatch(self.md5) is None:
            raise InvalidLocator(
                f"invalid locator digest {_show(str(self.md5))}: expected 32 lowercase hex digits"
            )
        if self.size is None:
            if self.hints:
                raise InvalidLocator(f"invalid locator {self.md5}: hints without a size hint")
        elif isinstance(self.size, bool) or not isinstance(self.size, int):
            raise InvalidLocator(f"invalid locator {self.md5}: size must be an int")
        elif not 0 <= self.size <= MAX_SIZE:
            raise InvalidLocator(f"invalid locator {self.md5}: size {self.size} out of range")
        signatures = 0
        for hint in self.hints:
            problem = _hint_problem(hint) if isinstance(hint, str) else "hint must be a str"
            if problem is not None:
                raise InvalidLocator(f"invalid locator {self.md5}: {problem}")
            signatures += hint[0] == "A"
        if signatures > 1:
            raise InvalidLocator(f"invalid locator {self.md5}: more than one signature hint")

    def __str__(self) -> str:
        parts = [self.md5]
        if self.size is not None:
            parts.append(str(self.size))
        parts.extend(self.hints)
        return "+".join(parts)

    @property
    def bare(self) -> str:
        """``<md5>+<size>`` without hints: the block's name in a block adapter."""
        if self.size is None:
            raise InvalidLocator(f"locator {self.md5} has no size hint")
        return f"{self.md5}+{self.size}"

    @property
    def signature(self) -> tuple[str, int] | None:
        """``(hmac hex, expiry)`` from the ``+A<hmac>@<expiry hex>`` hint, or None if unsigned."""
        for hint in self.hints:
            match = _SIGN_HINT.fullmatch(hint)
            if match is not None:
                return match.group(1), int(match.group(2), 16)
        return None

    def without_signature(self) -> Locator:
        """The same locator with its ``+A`` signature hint removed (other hints kept)."""
        return dataclasses.replace(self, hints=tuple(h for h in self.hints if h[0] != "A"))


def parse_locator(text: str, *, require_size: bool = True) -> Locator:
    """Parse ``<md5>+<size>[+hints]``; raise ``InvalidLocator`` saying what is wrong.

    With ``require_size=False`` a bare 32-digit digest is also accepted (size None), as
    Keep servers accept a bare hash on GET; every other rule stays in force.
    """
    if not isinstance(text, str):
        raise InvalidLocator(f"invalid locator: expected text, got {type(text).__name__}")
    parts = text.split("+")
    digest = parts[0]
    if _DIGEST.fullmatch(digest) is None:
        raise InvalidLocator(f"invalid locator {_show(text)}: digest must be 32 lowercase hex digits")
    if len(parts) == 1:
        if require_size:
            raise InvalidLocator(f"invalid locator {_show(text)}: missing size hint")
        return Locator(digest, None, ())
    size_text = parts[1]
    if _SIZE.fullmatch(size_text) is None:
        if not size_text:
            problem = "empty size hint"
        elif _HINT.fullmatch(size_text) is not None:
            problem = f"hint +{size_text} before the size hint"
        elif size_text.isascii() and size_text.isdigit():
            problem = "size hint has leading zeros or is too large"
        else:
            problem = "size hint must be decimal digits"
        raise InvalidLocator(f"invalid locator {_show(text)}: {problem}")
    size = int(size_text)
    if size > MAX_SIZE:
        raise InvalidLocator(f"invalid locator {_show(text)}: size hint too large")
    hints = tuple(parts[2:])
    for hint in hints:
        hint_problem = _hint_problem(hint)
        if hint_problem is not None:
            raise InvalidLocator(f"invalid locator {_show(text)}: {hint_problem}")
    if sum(h[0] == "A" for h in hints) > 1:
        raise InvalidLocator(f"invalid locator {_show(text)}: more than one signature hint")
    return Locator(digest, size, hints)
