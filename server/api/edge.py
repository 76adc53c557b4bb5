"""Checks of a REST request's raw input before any route sees it: its path and query string must
percent-decode to UTF-8, and a JSON body must be of bounded size and hold valid Unicode only.

Starlette decodes the path and query with replacement (``%ff`` becomes U+FFFD), and Python's JSON
parser turns ``"\\udcff"`` into a lone surrogate; either would reach porcelain as text that is not
what the client sent, or that UTF-8 cannot store. Refused here, uniformly, with one
``InvalidArgument`` (400) naming where, after authentication and before anything is stored.
"""

from __future__ import annotations

import email.message
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from lakectl.errors import InvalidArgument

MAX_JSON_BODY = 4 * 1024 * 1024
"""The largest JSON request body, refused unread above it (by ``Content-Length``) or as soon as
the body passes it. The largest legitimate one, a batch delete of 1000 paths of 1024 bytes each
written with ``\\uXXXX`` escapes, is about 3 MiB."""


def check_url(request: Request) -> None:
    """``InvalidArgument`` when the raw path, or a name or value of the raw query string, does
    not percent-decode to UTF-8."""
    raw_path: bytes = request.scope.get("raw_path") or request.scope.get("path", "").encode()
    if not _utf8(raw_path.split(b"?", 1)[0]):
        raise InvalidArgument("invalid request: the path is not UTF-8 once percent-decoded")
    query: bytes = request.scope.get("query_string") or b""
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if not _utf8(name):
            raise InvalidArgument("invalid request: a query parameter name is not UTF-8 once percent-decoded")
        if not _utf8(value):
            shown = unquote_to_bytes(name.replace(b"+", b" ")).decode()
            raise InvalidArgument(
                f"invalid request: query parameter {shown!r} is not UTF-8 once percent-decoded"
            )


async def read_form(request: Request) -> FormData:
    """The form of a web UI ``POST``, refused (``InvalidArgument``) when a field's name or value,
    or a file's name, is not UTF-8: Starlette would decode it with replacement (a URL-encoded
    form) or as latin-1 (a multipart one), and store text the browser never sent. Browsers send
    forms of UTF-8 pages as UTF-8. A multipart body (an upload) still streams to its spool."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "application/x-www-form-urlencoded":
        for pair in (await request.body()).split(b"&"):
            name, _, value = pair.partition(b"=")
            if not (_utf8(name) and _utf8(value)):
                shown = unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "replace")
                raise InvalidArgument(f"invalid form: field {shown!r} is not UTF-8 once percent-decoded")
    elif media == "multipart/form-data":
        try:
            # Starlette's Request keeps the parsed form here; request.form() then returns it.
            request._form = await _Utf8Parts(request.headers, request.stream()).parse()
        except MultiPartException as e:
            raise InvalidArgument(f"invalid form: {e.message}") from None
    return await request.form()


class _Utf8Parts(MultiPartParser):
    """Starlette's multipart parser, refusing names and text fields that are not UTF-8 instead
    of decoding them as latin-1."""

    def on_headers_finished(self) -> None:
        _strict(bytes(self._current_part.content_disposition or b""), "a part's name or file name")
        super().on_headers_finished()

    def on_part_end(self) -> None:
        if self._current_part.file is None:
            _strict(bytes(self._current_part.data), f"field {self._current_part.field_name!r}")
        super().on_part_end()


def _strict(raw: bytes, what: str) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MultiPartException(f"{what} is not UTF-8") from None


def _utf8(raw: bytes) -> bool:
    try:
        unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


async def read_json_body(request: Request, limit: int = MAX_JSON_BODY) -> None:
    """Read the body of a route that takes JSON, at most ``limit`` bytes, and refuse a JSON
    document holding a lone surrogate (in a key or a value). The body (and the parsed document)
    are left on the request, where FastAPI then takes them; a malformed document is left for
    FastAPI to report as it does."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise InvalidArgument(_too_large(limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InvalidArgument(_too_large(limit))
        chunks.append(chunk)
    body = b"".join(chunks)
    # Starlette's Request caches the body and the parsed JSON in these attributes; FastAPI reads
    # them from there, so the body is neither read nor parsed twice.
    request._body = body
    if not body or not _is_json(request.headers.get("content-type")):
        return
    try:
        document = json.loads(body)
    except UnicodeDecodeError:
        raise InvalidArgument("invalid request: the JSON body is not UTF-8") from None
    except (ValueError, RecursionError):
        return
    # A lone surrogate comes from a \u escape or from its bytes (0xED, then 0xA0-0xBF; json
    # decodes bytes with surrogatepass): a body with neither is not walked (linking 10,000
    # objects sends megabytes of JSON).
    suspect = b"\xed" in body or b"\\ud" in body.lower()
    found = lone_surrogate(document) if suspect else None
    if found is not None:
        where, what = found
        raise InvalidArgument(
            f"invalid request: {what} is not valid Unicode (a lone surrogate such as \\udcff): "
            "text must be UTF-8",
            field=where,
        )
    request._json = document


def _too_large(limit: int) -> str:
    return f"invalid request: the JSON body is larger than {limit} bytes, the most a request may send"


def _is_json(content_type: str | None) -> bool:
    """FastAPI's rule: ``application/json`` or ``application/*+json``."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _valid(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def lone_surrogate(document: Any) -> tuple[str, str] | None:
    """Where in a parsed JSON document a string (key or value) is not valid Unicode: the
    location (``metadata.<key>``, ``paths[3]``, ``body`` for the document itself) and what is
    wrong there (``paths[3]``, ``a key of metadata ('k\\udcff')``); None if nowhere."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if not _valid(value):
                return where or "body", where or "the body"
        elif isinstance(value, dict):
            for key, item in value.items():
                if not _valid(key):
                    return where or "body", f"a key of {where or 'the body'} ({key!r})"
                stack.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None
