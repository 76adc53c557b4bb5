"""The JSON answer of every REST route and error: UTF-8, or ASCII-escaped when some text is not
valid Unicode.

The edge refuses lone surrogates (:mod:`server.api.edge`), but a record stored before those
checks, or by another tool, may hold one. UTF-8 cannot encode it, so rendering such a record as
UTF-8 would fail and make every answer that shows it (a branch's log, say) a 500 for everyone.
Escaped, it reaches the client as ``"\\udcff"``, which JSON allows and every client can read.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from fastapi.responses import JSONResponse


def render_json(content: Any) -> bytes:
    """``content`` as compact JSON: UTF-8 (pydantic's encoder, as FastAPI's own answers), or
    ASCII with ``\\uXXXX`` escapes when UTF-8 cannot encode some text in it."""
    try:
        return pydantic_core.to_json(content)
    except pydantic_core.PydanticSerializationError:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class SafeJSONResponse(JSONResponse):
    """Starlette's JSONResponse with :func:`render_json`: any stored text renders."""

    def render(self, content: Any) -> bytes:
        return render_json(content)
