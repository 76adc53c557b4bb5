"""A streaming reader of ``multipart/form-data`` bodies: copies one file field to a sink, nothing held whole.

The upload route takes the object's bytes from the form field ``content`` (lakeFS's upload form).
Other fields are skipped. A malformed or truncated body, or a body without the field, raises
``InvalidArgument`` — the caller then stages nothing.
"""

from __future__ import annotations

import email.parser
import email.utils
from collections.abc import AsyncIterator
from email.message import Message
from typing import IO

from lakectl.errors import InvalidArgument

MAX_HEADER_BYTES = 16 * 1024
"""Headers of one part larger than this are refused (no unbounded buffering)."""


def boundary_of(content_type: str) -> bytes:
    """The boundary parameter of a ``multipart/form-data`` content type."""
    m = Message()
    m["content-type"] = content_type
    boundary = m.get_param("boundary")
    if not isinstance(boundary, str) or not 1 <= len(boundary) <= 70 or not boundary.isascii():
        raise InvalidArgument("multipart/form-data body without a valid boundary parameter")
    return boundary.encode()


class FormFieldReader:
    """Feed the body in chunks; the bytes of field ``field`` go to ``sink`` as they arrive."""

    def __init__(self, boundary: bytes, field: str, sink: IO[bytes]) -> None:
        self.field = field
        self.sink = sink
        self.found = False
        self.content_type: str | None = None
        self._first = b"--" + boundary
        self._delimiter = b"\r\n--" + boundary
        self._buf = b""
        self._state = "preamble"
        self._writing = False

    def feed(self, data: bytes) -> None:
        self._buf += data
        while self._step():
            pass

    def close(self) -> None:
        if self._state != "end":
            raise InvalidArgument("truncated multipart/form-data body")
        if not self.found:
            raise InvalidArgument(f"multipart/form-data body without a {self.field!r} field")

    def _step(self) -> bool:
        """Advance the state machine as far as the buffer allows; False when it needs more."""
        buf = self._buf
        if self._state == "preamble":
            at = buf.find(self._first)
            if at < 0:
                self._buf = buf[-len(self._first) :]  # the preamble is ignored
                return False
            self._buf, self._state = buf[at + len(self._first) :], "boundary"
            return True
        if self._state == "boundary":
            if len(buf) < 2:
                return False
            if buf.startswith(b"--"):
                self._buf, self._state = b"", "end"
                return False
            end = buf.find(b"\r\n")
            if end < 0:
                if len(buf) > 256:
                    raise InvalidArgument("malformed multipart/form-data boundary line")
                return False
            if buf[:end].strip(b" \t"):
                raise InvalidArgument("malformed multipart/form-data boundary line")
            self._buf, self._state = buf[end + 2 :], "headers"
            return True
        if self._state == "headers":
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    raise InvalidArgument("multipart/form-data part headers are too large")
                return False
            self._start_part(buf[: end + 2])
            self._buf, self._state = buf[end + 4 :], "body"
            return True
        if self._state == "body":
            at = buf.find(self._delimiter)
            if at < 0:
                keep = len(self._delimiter) - 1
                self._emit(buf[: max(0, len(buf) - keep)])
                self._buf = buf[max(0, len(buf) - keep) :]
                return False
            self._emit(buf[:at])
            self._writing = False
            self._buf, self._state = buf[at + len(self._delimiter) :], "boundary"
            return True
        self._buf = b""  # the epilogue is ignored
        return False

    def _start_part(self, raw: bytes) -> None:
        headers = email.parser.BytesHeaderParser().parsebytes(raw)
        name = headers.get_param("name", header="content-disposition")
        if name is not None and not isinstance(name, str):
            name = email.utils.collapse_rfc2231_value(name)
        self._writing = name == self.field and not self.found
        if self._writing:
            self.found = True
            self.content_type = headers.get_content_type() if headers.get("content-type") else None

    def _emit(self, data: bytes) -> None:
        if self._writing and data:
            self.sink.write(data)


async def read_form_file(
    chunks: AsyncIterator[bytes], content_type: str, field: str, sink: IO[bytes]
) -> str | None:
    """Copy field ``field`` of the body into ``sink``; return the part's content type, if any."""
    reader = FormFieldReader(boundary_of(content_type), field, sink)
    async for chunk in chunks:
        reader.feed(chunk)
    reader.close()
    return reader.content_type
