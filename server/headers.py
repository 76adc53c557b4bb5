"""HTTP header values as text, both ways: what a client sent (UTF-8) and what any stored text may
be sent as.

Starlette decodes header values as latin-1 and encodes them so again; a client sends UTF-8, so
text (user metadata) is read back from those bytes, and refused when they are not UTF-8. Going
out, a value must be latin-1 and free of line breaks, or the answer cannot be sent at all.
"""

from __future__ import annotations

import base64
import re

from lakectl.core.limits import printable
from lakectl.errors import InvalidArgument

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PLAIN = re.compile(r"[\x20-\x7e]*")


def sent_text(name: str, value: str) -> str:
    """The text a client sent in header ``name`` (as Starlette decoded it); ``InvalidArgument``
    when its bytes are not UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise InvalidArgument(f"header {name} is not UTF-8 text") from None


def is_token(name: str) -> bool:
    """Whether ``name`` may be (part of) an HTTP header name."""
    return _TOKEN.fullmatch(name) is not None


def as_header(text: str) -> str:
    """Stored text as a header value that can be sent: characters that act on a terminal or
    would end the header escaped (``\\n``), then UTF-8 bytes where latin-1 cannot hold it."""
    text = printable(text)
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8").decode("latin-1")
    return text


def mime_encoded(text: str) -> str:
    """``text`` as is when printable ASCII, else one RFC 2047 encoded word
    (``=?UTF-8?B?...?=``), as S3 returns user metadata that is not."""
    if _PLAIN.fullmatch(text):
        return text
    data = text.encode("utf-8", "backslashreplace")
    return "=?UTF-8?B?" + base64.b64encode(data).decode("ascii") + "?="
