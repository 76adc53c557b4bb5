"""The headers every answer of an object's bytes carries (REST, presigned URLs, the S3 gateway,
the UI's download), so that a browser never runs a stored object as active content on this
server's origin or site.

An object's content type is whatever its uploader said, so an uploaded ``text/html`` page or
``image/svg+xml`` drawing would otherwise run its scripts as whoever opens its link, with that
user's session on the UI. Every answer says ``X-Content-Type-Options: nosniff`` (a browser takes
the type as sent, never sniffs HTML out of the bytes) and ``Content-Security-Policy: sandbox``
(a page that renders anyway runs in an opaque origin, without scripts, cookies or storage). A
type not on the short list of passive ones (:data:`PASSIVE`: images other than SVG, plain
text, CSV, JSON, Parquet, octet streams) is sent as ``Content-Disposition: attachment``: a file
to save, never a page. Anything unusual in the stored type (case, parameters, spaces, a comma
that a browser would split into two types) cannot make it passive: only an exact match of the
list is. An object stored without a type is sent as ``application/octet-stream``.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from server.headers import as_header

NOSNIFF: Final = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
DEFAULT_TYPE: Final = "application/octet-stream"
PASSIVE: Final = frozenset(
    {
        "application/octet-stream",
        "binary/octet-stream",  # S3 clients' default
        "text/plain",
        "text/csv",
        "application/csv",
        "text/tab-separated-values",
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
        "application/x-jsonlines",
        "application/parquet",
        "application/vnd.apache.parquet",
        "application/x-parquet",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "image/bmp",
    }
)
"""Media types a browser shows without running anything (or saves): sent inline."""


def media_type(content_type: str) -> str:
    """The type without its parameters, lowercased (``Text/HTML; charset=x`` -> ``text/html``)."""
    return content_type.split(";", 1)[0].strip().lower()


def is_passive(content_type: str) -> bool:
    """Whether a browser shows an answer of ``content_type`` without running script in it:
    exactly one type of :data:`PASSIVE` (a list of types, ``text/plain,text/html``, is read by
    browsers as its last one, so a comma anywhere is not passive)."""
    return "," not in content_type and media_type(content_type) in PASSIVE


def attachment(path: str) -> str:
    """``Content-Disposition`` of a file to save under the last segment of ``path``."""
    name = quote(path.rstrip("/").rsplit("/", 1)[-1], safe="")
    return f"attachment; filename*=UTF-8''{name}" if name else "attachment"


def served_headers(path: str, content_type: str, disposition: str | None = None) -> dict[str, str]:
    """``Content-Type`` (as stored, or :data:`DEFAULT_TYPE` when empty), :data:`NOSNIFF`, and
    ``Content-Disposition``: ``attachment`` for a type that is not passive, whatever
    ``disposition`` asked (an S3 ``response-content-disposition``, say); else ``disposition``
    when given."""
    sent = as_header(content_type).strip() or DEFAULT_TYPE
    headers = {"Content-Type": sent, **NOSNIFF}
    if not is_passive(sent):
        headers["Content-Disposition"] = attachment(path)
    elif disposition is not None:
        headers["Content-Disposition"] = disposition
    return headers
