"""The documented limits of what a lake accepts, and the checks of user text against them.

Every surface (CLI, REST API, S3 gateway, Spark) stores through porcelain, which checks here: a
value refused here is refused everywhere with ``InvalidArgument`` (exit 2, HTTP 400), before
anything is stored. docs/concepts.md lists these limits for users.

Text is refused when it is not valid Unicode (a lone surrogate: what Python makes of non-UTF-8
bytes in a command-line argument or a ``\\udcff`` JSON escape), and names are refused when they
hold characters that drive a terminal instead of printing: C0 and C1 control characters (ESC
starts ANSI sequences), DEL, line and paragraph separators, and the bidirectional embeddings,
overrides and isolates that reorder what a terminal shows ("Trojan source"). Multi-line text
(commit messages, metadata values) may hold tabs and line breaks, nothing else of those.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from lakectl.errors import InvalidArgument

MAX_PATH_BYTES: Final = 1024
"""An object path or prefix, in UTF-8 bytes (S3's key limit)."""
MAX_MESSAGE_BYTES: Final = 64 * 1024
"""A commit message, in UTF-8 bytes."""
MAX_METADATA_ENTRIES: Final = 100
"""Pairs of user metadata on one object or commit."""
MAX_METADATA_KEY_BYTES: Final = 256
MAX_METADATA_VALUE_BYTES: Final = 4096
MAX_METADATA_BYTES: Final = 32 * 1024
"""All keys and values of one object's or commit's metadata together."""
MAX_NAME_BYTES: Final = 256
"""A committer, a content type, a user name."""
MAX_PAGE: Final = 1000
"""Items per page of a listing (REST ``amount``)."""
MAX_NAMESPACE_BYTES: Final = 1024
"""A repository's storage namespace (``local://...``, ``s3://bucket/prefix``)."""
NAMESPACE_SCHEMES: Final = ("local", "s3")
"""Storage namespace schemes a repository may record."""

# Characters that act on a terminal or reorder text instead of printing as themselves: C0 and C1
# controls, DEL, the Arabic letter mark, line and paragraph separators, bidi embeddings,
# overrides and isolates; and lone surrogates (not text at all).
_OTHERS: Final = "\\x7f-\\x9f\\u061c\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069\\ud800-\\udfff"
_UNSAFE_NAME: Final = re.compile(f"[\\x00-\\x1f{_OTHERS}]")
_UNSAFE_TEXT: Final = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f{_OTHERS}]")  # tab, LF, CR allowed


_NOT_TEXT: Final = re.compile("[\x00\ud800-\udfff]")


def address_problem(value: str) -> str | None:
    """Why ``value`` cannot even name something stored (a NUL, or bytes that are not UTF-8:
    no store holds those), or None. Names already stored with control characters stay
    addressable, so that they can be read, renamed and deleted."""
    bad = _NOT_TEXT.search(value)
    return None if bad is None else f"contains {_describe(bad.group(0))}"


def _describe(ch: str) -> str:
    if "\ud800" <= ch <= "\udfff":
        return "bytes that are not UTF-8"
    return f"the control character U+{ord(ch):04X}"


def name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a name (path, key, committer), or None."""
    bad = _UNSAFE_NAME.search(value)
    return None if bad is None else f"contains {_describe(bad.group(0))}"


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be multi-line text (a message, a metadata value), or None."""
    bad = _UNSAFE_TEXT.search(value)
    return None if bad is None else f"contains {_describe(bad.group(0))}"


def utf8_size(value: str, what: str) -> int:
    """The UTF-8 size of ``value``; ``InvalidArgument`` when it holds a lone surrogate."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} contains bytes that are not UTF-8") from None


def show(value: str, limit: int = 60) -> str:
    """``value`` quoted for a one-line message: escaped, and cut when long."""
    text = value if len(value) <= limit else value[:limit]
    return repr(text) + ("..." if len(value) > limit else "")


def check_name(value: str, what: str, max_bytes: int = MAX_NAME_BYTES) -> str:
    """``value`` if it is a safe one-line name of at most ``max_bytes``; else ``InvalidArgument``."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text")
    problem = name_problem(value)
    if problem is not None:
        raise InvalidArgument(f"invalid {what} {show(value)}: {problem}")
    size = utf8_size(value, what)
    if size > max_bytes:
        raise InvalidArgument(f"{what} {show(value)} is {size} bytes; at most {max_bytes} are allowed")
    return value


def check_text(value: str, what: str, max_bytes: int) -> str:
    """``value`` if it is safe multi-line text of at most ``max_bytes``; else ``InvalidArgument``."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text")
    problem = text_problem(value)
    if problem is not None:
        raise InvalidArgument(f"invalid {what}: {problem}")
    size = utf8_size(value, what)
    if size > max_bytes:
        raise InvalidArgument(f"{what} is {size} bytes; at most {max_bytes} are allowed")
    return value


def check_storage_namespace(value: str) -> str:
    """``value`` if it is ``<scheme>://<location>`` with a scheme of :data:`NAMESPACE_SCHEMES` and
    a safe name within :data:`MAX_NAMESPACE_BYTES`; else ``InvalidArgument``."""
    check_name(value, "storage namespace", MAX_NAMESPACE_BYTES)
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in NAMESPACE_SCHEMES or not rest:
        schemes = " or ".join(f"{s}://<location>" for s in NAMESPACE_SCHEMES)
        raise InvalidArgument(f"invalid storage namespace {show(value)}: expected {schemes}")
    return value


DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"


def check_content_type(content_type: str | None) -> str:
    """The content type to record: ``content_type`` when it is a safe name, else the default
    when None; ``InvalidArgument`` otherwise."""
    if content_type is None:
        return DEFAULT_CONTENT_TYPE
    return check_name(content_type, "content type", MAX_NAME_BYTES - 1)


def check_metadata(metadata: Mapping[str, str], what: str = "metadata") -> dict[str, str]:
    """User metadata within the limits: keys safe names, values safe text, sizes bounded."""
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise InvalidArgument(
            f"{what} has {len(metadata)} entries; at most {MAX_METADATA_ENTRIES} are allowed"
        )
    total = 0
    for key, value in metadata.items():
        if not key:
            raise InvalidArgument(f"{what} keys must not be empty")
        check_name(key, f"{what} key", MAX_METADATA_KEY_BYTES)
        check_text(value, f"{what} value of {key!r}", MAX_METADATA_VALUE_BYTES)
        total += len(key.encode()) + len(value.encode())
    if total > MAX_METADATA_BYTES:
        raise InvalidArgument(f"{what} totals {total} bytes; at most {MAX_METADATA_BYTES} are allowed")
    return dict(metadata)


def printable(text: str, multiline: bool = False) -> str:
    """``text`` for a terminal: every character that would act on it escaped as Python does
    (``\\x1b``, ``\\u202e``, ``\\udcff``), for values stored before these checks or by other
    tools. With ``multiline``, tabs and line breaks stay."""
    pattern = _UNSAFE_TEXT if multiline else _UNSAFE_NAME
    return pattern.sub(lambda m: repr(m.group(0))[1:-1], text)
