"""The HTTP ``Range`` header of object reads: one byte range, as lakeFS and S3 accept it."""

from __future__ import annotations

import re

from starlette.responses import Response

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class Unsatisfiable(Exception):
    """The range is malformed or outside the object (answered 416, as lakeFS does)."""


def parse_range(header: str, size: int) -> tuple[int, int]:
    """``(start, end)`` (end exclusive) of ``bytes=a-b``, ``bytes=a-`` or ``bytes=-n``."""
    match = _RANGE.fullmatch(header.strip())
    if match is None or match.group(1) == match.group(2) == "":
        raise Unsatisfiable(f"unsupported Range header {header[:100]!r}: expected bytes=<start>-<end>")
    first, last = match.group(1), match.group(2)
    if len(first) > 20 or len(last) > 20:
        raise Unsatisfiable("range out of bounds")
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise Unsatisfiable(f"range {header!r} is empty or the object is empty")
        return max(0, size - suffix), size
    start = int(first)
    end = size if last == "" else min(size, int(last) + 1)
    if start >= size or end <= start:
        raise Unsatisfiable(f"range {header!r} is outside the object of {size} bytes")
    return start, end


def byte_span(size: int, range_: str | None, headers: dict[str, str]) -> tuple[int, int, int] | Response:
    """``(start, end, status)`` of a read of ``size`` bytes with an optional ``Range`` header,
    its ``Content-Range`` and ``Content-Length`` set in ``headers``; or the 416 response to send."""
    from server.errors import error_response

    start, end, status = 0, size, 200
    if range_:
        try:
            start, end = parse_range(range_, size)
        except Unsatisfiable as e:
            response = error_response(416, "invalid_range", str(e))
            response.headers["Content-Range"] = f"bytes */{size}"
            return response
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    headers["Content-Length"] = str(end - start)
    return start, end, status
