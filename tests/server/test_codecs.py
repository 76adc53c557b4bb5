"""The two parsers of request input: multipart/form-data bodies and Range headers."""

from __future__ import annotations

import io

import pytest

from lakectl.errors import InvalidArgument
from server.api.ranges import Unsatisfiable, parse_range
from server.multipart import FormFieldReader, boundary_of

BOUNDARY = b"----lakectl-boundary-7MA4YWxkTrZu0gW"


def form(*parts: tuple[str, bytes, str | None], preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    out = preamble
    for name, data, ctype in parts:
        out += b"--" + BOUNDARY + b"\r\n"
        out += f'Content-Disposition: form-data; name="{name}"; filename="f"\r\n'.encode()
        if ctype:
            out += f"Content-Type: {ctype}\r\n".encode()
        out += b"\r\n" + data + b"\r\n"
    return out + b"--" + BOUNDARY + b"--\r\n" + epilogue


def read(body: bytes, chunk: int) -> tuple[bytes, str | None]:
    sink = io.BytesIO()
    reader = FormFieldReader(BOUNDARY, "content", sink)
    for i in range(0, len(body), chunk):
        reader.feed(body[i : i + chunk])
    reader.close()
    return sink.getvalue(), reader.content_type


PAYLOAD = b"line one\r\n--not the boundary\r\n" + bytes(range(256)) * 3 + b"\r\n-"


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_the_content_field_survives_any_chunking(chunk: int) -> None:
    body = form(("other", b"x" * 100, None), ("content", PAYLOAD, "text/csv"), preamble=b"ignored\r\n")
    assert read(body, chunk) == (PAYLOAD, "text/csv")


def test_empty_content_and_no_content_type() -> None:
    assert read(form(("content", b"", None)), 5) == (b"", None)


@pytest.mark.parametrize(
    "body,needle",
    [
        (form(("content", PAYLOAD, None))[:-20], "truncated"),
        (form(("content", PAYLOAD, None))[:30], "truncated"),
        (form(("file", PAYLOAD, None)), "without a 'content' field"),
        (b"", "truncated"),
        (b"--" + BOUNDARY + b"\r\n" + b"X-Big: " + b"a" * 20000, "too large"),
        (b"--" + BOUNDARY + b"garbage\r\n\r\n", "malformed"),
    ],
)
def test_bad_bodies_raise_invalid_argument(body: bytes, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        read(body, 4096)


def test_boundary_parameter() -> None:
    assert boundary_of('multipart/form-data; boundary="abc"') == b"abc"
    for bad in ("multipart/form-data", "multipart/form-data; boundary=" + "x" * 71):
        with pytest.raises(InvalidArgument):
            boundary_of(bad)


@pytest.mark.parametrize(
    "header,size,expected",
    [
        ("bytes=0-0", 10, (0, 1)),
        ("bytes=2-4", 10, (2, 5)),
        ("bytes=2-", 10, (2, 10)),
        ("bytes=5-100", 10, (5, 10)),
        ("bytes=-3", 10, (7, 10)),
        ("bytes=-30", 10, (0, 10)),
    ],
)
def test_ranges(header: str, size: int, expected: tuple[int, int]) -> None:
    assert parse_range(header, size) == expected


@pytest.mark.parametrize(
    "header,size",
    [
        ("bytes=10-", 10),
        ("bytes=5-2", 10),
        ("bytes=-0", 10),
        ("bytes=0-", 0),
        ("bytes=-", 10),
        ("items=0-1", 10),
        ("bytes=0-1,3-4", 10),
        ("bytes=" + "9" * 30 + "-", 10),
        ("bytes=a-b", 10),
    ],
)
def test_unsatisfiable_ranges(header: str, size: int) -> None:
    with pytest.raises(Unsatisfiable):
        parse_range(header, size)
