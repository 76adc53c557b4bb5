"""aws-chunked decoding (AWS's vectors, botocore's encoder, random splits, tampering) and S3 checksums."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import io
import itertools
import re
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from botocore.httpchecksum import (
    AwsChunkedWrapper,
    Crc32Checksum,
    CrtCrc32cChecksum,
    CrtCrc64NvmeChecksum,
    Sha1Checksum,
    Sha256Checksum,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.errors import BadDigest, InvalidArgument, LakectlError, SignatureMismatch
from server.s3.chunked import AwsChunkedDecoder, Checksum, checksum_header
from server.s3.sigv4 import EMPTY_SHA256, ChunkSigner, Request, authenticate

BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DATE, SCOPE = "20260101T000000Z", "20260101/us-east-1/s3/aws4_request"


def signing_key(secret: str = "secret", date: str = DATE[:8], region: str = "us-east-1") -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


def signer(trailer: bool = False, seed: str = "5" * 64) -> ChunkSigner:
    return ChunkSigner(signing_key(), DATE, SCOPE, seed, signs_trailer=trailer)


def encode(
    payload: bytes, sizes: Sequence[int], *, signed: bool = False, trailers: dict[str, str] | None = None
) -> bytes:
    """An aws-chunked body, signed as documented by AWS (independently of ChunkSigner) if ``signed``."""
    previous, key, out, pieces, start = "5" * 64, signing_key(), [], [], 0
    for size in sizes:
        if start < len(payload):
            pieces.append(payload[start : start + size])
            start += size
    for piece in [*pieces, payload[start:], b""] if start < len(payload) else [*pieces, b""]:
        line = b"%x" % len(piece)
        if signed:
            text = f"AWS4-HMAC-SHA256-PAYLOAD\n{DATE}\n{SCOPE}\n{previous}\n{EMPTY_SHA256}\n"
            previous = hmac.digest(key, (text + hashlib.sha256(piece).hexdigest()).encode(), "sha256").hex()
            line += f";chunk-signature={previous}".encode()
        out.append(line + b"\r\n" + piece + (b"\r\n" if piece else b""))
    canonical = "".join(f"{k}:{v}\n" for k, v in sorted((trailers or {}).items()))
    out.append(canonical.replace("\n", "\r\n").encode())
    if signed and trailers is not None:
        text = f"AWS4-HMAC-SHA256-TRAILER\n{DATE}\n{SCOPE}\n{previous}\n"
        text += hashlib.sha256(canonical.encode()).hexdigest()
        out.append(f"x-amz-trailer-signature:{hmac.digest(key, text.encode(), 'sha256').hex()}\r\n".encode())
    return b"".join(out) + b"\r\n"


def split(body: bytes, cuts: Sequence[int] | int) -> list[bytes]:
    if isinstance(cuts, int):
        return [body[i : i + cuts] for i in range(0, len(body), cuts)]
    points = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    return [body[a:b] for a, b in itertools.pairwise(points)]


def decode(pieces: list[bytes], **options: Any) -> tuple[bytes, dict[str, str]]:
    options.setdefault("signer", None)
    options.setdefault("decoded_length", None)
    decoder = AwsChunkedDecoder(**options)
    out = b"".join(bytes(p) for piece in pieces for p in decoder.feed(piece))
    return out, decoder.finish()


# ---------------------------------------------------------------------------------- AWS's examples

DOC_HEADERS = {
    "host": "s3.amazonaws.com", "x-amz-date": "20130524T000000Z", "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "content-encoding": "aws-chunked", "x-amz-decoded-content-length": "66560",
}  # fmt: skip
DOC_AUTH = (
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders="
)
DOC_SECRETS = {"AKIAIOSFODNN7EXAMPLE": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}.get
DOC_NOW = 1369353600  # 2013-05-24T00:00:00Z


def doc_signer(trailer: bool) -> ChunkSigner:
    mode, signed = (
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "content-encoding;content-length;host;x-amz-content-sha256;",
    )
    seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    extra = {"content-length": "66824"}
    if trailer:
        mode, signed = mode + "-TRAILER", "content-encoding;host;x-amz-content-sha256;"
        seed = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
        extra = {"x-amz-trailer": "x-amz-checksum-crc32c"}
    signed += "x-amz-date;x-amz-decoded-content-length;x-amz-storage-class" + (
        ";x-amz-trailer" if trailer else ""
    )
    headers = {**DOC_HEADERS, **extra, "x-amz-content-sha256": mode}
    headers["authorization"] = f"{DOC_AUTH}{signed},Signature={seed}"
    request = Request("PUT", "/examplebucket/chunkObject.txt", "", headers)
    verified = authenticate(request, DOC_SECRETS, region="us-east-1", now=DOC_NOW)  # the seed signature
    assert verified.payload.value == mode and verified.chunk_signer is not None
    assert verified.chunk_signer.signs_trailer is trailer
    return verified.chunk_signer


def doc_body(signatures: Sequence[str], tail: bytes) -> bytes:
    sizes = (65536, 1024, 0)
    chunks = [
        b"%x;chunk-signature=%s\r\n" % (n, s.encode()) + b"a" * n + b"\r\n" * bool(n)
        for n, s in zip(sizes, signatures, strict=True)
    ]
    return b"".join(chunks) + tail


DOC_STREAM = doc_body(
    ["ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
     "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
     "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"], b"\r\n")  # fmt: skip
DOC_TRAILER_CHUNKS = [
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
]
DOC_TRAILER = (
    b"x-amz-checksum-crc32c:sOO8/Q==\r\n"
    b"x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n"
)


@pytest.mark.parametrize("cuts", [1, 7, 8192, 65536 + 100, 10**9])
def test_aws_streaming_example_decodes_in_any_split(cuts: int) -> None:
    data, trailers = decode(split(DOC_STREAM, cuts), signer=doc_signer(False), decoded_length=66560)
    assert data == b"a" * 66560 and trailers == {}


TAILS = {
    "as the Java and Go SDKs send it": DOC_TRAILER + b"\r\n",
    "as drawn by AWS: a blank line after the last chunk": b"\r\n" + DOC_TRAILER + b"\r\n",
    "as minio-go sends it": DOC_TRAILER.replace(b"==\r\n", b"==\n\r\n") + b"\r\n",
}


@pytest.mark.parametrize("tail", TAILS.values(), ids=TAILS)
def test_aws_trailer_example_decodes_and_its_checksum_matches(tail: bytes) -> None:
    body = doc_body(DOC_TRAILER_CHUNKS, tail)
    options = {
        "signer": doc_signer(True),
        "decoded_length": 66560,
        "trailer_names": ["x-amz-checksum-crc32c"],
    }
    data, trailers = decode(split(body, 4093), **options)
    assert data == b"a" * 66560 and trailers == {"x-amz-checksum-crc32c": "sOO8/Q=="}
    checksum = Checksum.of("x-amz-checksum-crc32c")
    checksum.update(data)
    checksum.verify(trailers["x-amz-checksum-crc32c"])
    options["signer"] = doc_signer(True)
    with pytest.raises(SignatureMismatch):
        decode([body.replace(b"sOO8/Q==", b"sOO8/A==")], **options)


def test_aws_example_tampered_chunks_are_signature_mismatches() -> None:
    flipped = DOC_STREAM[:500] + b"b" + DOC_STREAM[501:]
    swapped = DOC_STREAM.replace(b"ad80c730", b"ad80c731")
    for body in (flipped, swapped):
        with pytest.raises(SignatureMismatch):
            decode(split(body, 1000), signer=doc_signer(False), decoded_length=66560)


# ---------------------------------------------------------------------------------- real clients

CAPTURED = {  # bodies from /work/shared/reference/s3-client-requests.txt (botocore over TLS, pyarrow)
    b"b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n": (b"hello world", "crc32", "DUoRhQ=="),
    b"3\r\nvm\n\r\n0\r\nx-amz-checksum-crc32:n7sxBA==\r\n\r\n": (b"vm\n", "crc32", "n7sxBA=="),
}


@pytest.mark.parametrize("body", CAPTURED)
def test_captured_client_bodies(body: bytes) -> None:
    payload, algorithm, value = CAPTURED[body]
    name = f"x-amz-checksum-{algorithm}"
    decoded = decode(split(body, 1), decoded_length=len(payload), trailer_names=[name])
    assert decoded == (payload, {name: value})


@BOUNDED
@given(
    payload=st.binary(max_size=5000),
    chunk=st.integers(1, 3000),
    cuts=st.lists(st.integers(0, 10**6), max_size=8),
    algorithm=st.sampled_from(["crc32", "crc32c", "crc64nvme", "sha1", "sha256", None]),
)
def test_botocore_aws_chunked_bodies_round_trip(
    payload: bytes, chunk: int, cuts: list[int], algorithm: str | None
) -> None:
    classes = {"crc32": Crc32Checksum, "crc32c": CrtCrc32cChecksum, "crc64nvme": CrtCrc64NvmeChecksum,
               "sha1": Sha1Checksum, "sha256": Sha256Checksum}  # fmt: skip
    name = f"x-amz-checksum-{algorithm}"
    wrapper = AwsChunkedWrapper(io.BytesIO(payload), classes.get(algorithm or ""), name, chunk_size=chunk)
    body = b"".join(wrapper)
    names = [name] if algorithm else []
    data, trailers = decode(split(body, cuts), decoded_length=len(payload), trailer_names=names)
    assert data == payload
    if algorithm:
        checksum = Checksum.of(algorithm)
        checksum.update(data)
        checksum.verify(trailers[name])
        assert checksum_header(trailers) == (algorithm, checksum.b64digest())


# ---------------------------------------------------------------------------------- signed round trips


@BOUNDED
@given(
    payload=st.binary(max_size=3000),
    sizes=st.lists(st.integers(1, 700), max_size=6),
    cuts=st.lists(st.integers(0, 10**6), max_size=8),
    trailer=st.booleans(),
)
def test_signed_bodies_round_trip(payload: bytes, sizes: list[int], cuts: list[int], trailer: bool) -> None:
    trailers = {"x-amz-checksum-crc64nvme": base64.b64encode(b"12345678").decode()} if trailer else None
    body = encode(payload, sizes, signed=True, trailers=trailers)
    options = {"decoded_length": len(payload), "trailer_names": list(trailers or ())}
    data, got = decode(split(body, cuts), signer=signer(trailer), **options)
    assert data == payload and got == (trailers or {})
    for at in {len(body) // 3, len(body) // 2, len(body) - 40}:  # a flipped byte anywhere is caught
        tampered = body[:at] + bytes([body[at] ^ 1]) + body[at + 1 :]
        with pytest.raises((SignatureMismatch, InvalidArgument)):
            decode(split(tampered, cuts), signer=signer(trailer), **options)


def test_tampered_signed_bodies_are_signature_mismatches() -> None:
    body = encode(b"x" * 100, [40, 40], signed=True, trailers={"x-amz-checksum-crc32": "AAAAAA=="})
    options = {"decoded_length": 100, "trailer_names": ["x-amz-checksum-crc32"]}
    decode([body], signer=signer(True), **options)
    chunk_lines = [line for line in body.split(b"\r\n") if b"chunk-signature" in line]
    swapped = (
        body.replace(chunk_lines[0], b"!")
        .replace(chunk_lines[1], chunk_lines[0])
        .replace(b"!", chunk_lines[1])
    )
    for tampered in (
        body.replace(b"xxxx", b"xxxy", 1),  # a data byte
        body.replace(b"AAAAAA==", b"AAAAAQ=="),  # the trailer's value
        swapped,  # chunks out of order
        body.replace(chunk_lines[2][-8:], b"00000000"),  # the final chunk's signature
        body[: body.index(b"x-amz-trailer-signature:") + 24] + b"0" * 64 + b"\r\n\r\n",  # trailer signature
    ):
        with pytest.raises(SignatureMismatch):
            decode([tampered], signer=signer(True), **options)
    with pytest.raises(SignatureMismatch):
        decode([body], signer=signer(True, seed="6" * 64), **options)  # another request's seed


# ---------------------------------------------------------------------------------- framing errors

UNSIGNED_OK = b"5\r\nhello\r\n0\r\n\r\n"
SIGNED_TRAILER, ZEROS = encode(b"", [], signed=True, trailers={"a": "1"}), b"0" * 64
WITH_A: dict[str, Any] = {"signer": signer(True), "trailer_names": ["a"]}
FRAMING: dict[str, tuple[bytes, dict[str, Any], str]] = {
    "no final chunk": (b"5\r\nhello\r\n", {}, "final 0-size chunk"),
    "ended inside a chunk": (b"5\r\nhel", {}, "inside chunk 1"),
    "no closing blank line": (b"5\r\nhello\r\n0\r\n", {}, "blank line"),
    "size not hex": (b"5g\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "size 0x-prefixed": (b"0x5\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "size signed": (b"+5\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "size with space": (b" 5\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "size of 17 digits": (b"00000000000000005\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "empty size": (b"\r\nhello\r\n0\r\n\r\n", {}, "not hexadecimal"),
    "bare LF after size": (b"5\nhello\r\n0\r\n\r\n", {}, "CRLF"),
    "no CRLF after data": (b"5\r\nhelloXY0\r\n\r\n", {}, "not followed by CRLF"),
    "short data": (b"6\r\nhello\r\n0\r\n\r\n", {}, "not followed by CRLF"),
    "extension when unsigned": (b"5;chunk-signature=%s\r\nhello\r\n0\r\n\r\n" % ZEROS, {}, "unsigned"),
    "no signature when signed": (UNSIGNED_OK, {"signer": signer()}, "lacks a chunk-signature"),
    "short signature": (b"5;chunk-signature=abc\r\nhello\r\n0\r\n\r\n", {"signer": signer()}, "signature"),
    "chunk over the maximum": (b"6\r\nhello!\r\n0\r\n\r\n", {"max_chunk": 5}, "exceeds 5 bytes"),
    "longer than declared": (UNSIGNED_OK, {"decoded_length": 4}, "longer than the 4 bytes"),
    "shorter than declared": (UNSIGNED_OK, {"decoded_length": 6}, "decodes to 5 bytes"),
    "data after the end": (UNSIGNED_OK + b"x", {}, "goes on after its end"),
    "line too long": (b"5" * 5000, {}, "too long"),
    "undeclared trailer": (b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", {}, "not declared"),
    "missing trailer": (b"0\r\nx-amz-meta-a:1\r\n\r\n", {"trailer_names": ["x-amz-meta-a", "x-amz-meta-b"]},
                        "lacks the trailer 'x-amz-meta-b'"),
    "repeated trailer": (b"0\r\na:1\r\na:2\r\n\r\n", {"trailer_names": ["a"]}, "repeats"),
    "trailer without colon": (b"0\r\na=1\r\n\r\n", {"trailer_names": ["a"]}, "'name:value'"),
    "trailer signature when unsigned": (b"0\r\nx-amz-trailer-signature:%s\r\n\r\n" % ZEROS, {}, "may carry"),
    "no trailer signature": (re.sub(rb"x-amz-trailer-sig\S+\r\n", b"", SIGNED_TRAILER), WITH_A, "lacks its"),
    "ended before trailer signature": (SIGNED_TRAILER.split(b"x-amz-trailer")[0], WITH_A, "-signature"),
    "trailers too long": (b"0\r\n" + b"".join(b"x-%d:%s\r\n" % (i, b"v" * 4000) for i in range(6)),
                          {"trailer_names": [f"x-{i}" for i in range(6)]}, "too long"),
}  # fmt: skip


@pytest.mark.parametrize("cuts", [1, 10**9])
@pytest.mark.parametrize("case", FRAMING)
def test_framing_errors_are_invalid_arguments(case: str, cuts: int) -> None:
    body, options, message = FRAMING[case]
    options = {"signer": None, "decoded_length": None, **options}
    if isinstance(options["signer"], ChunkSigner):  # a fresh signer: they chain
        options["signer"] = signer(options["signer"].signs_trailer)
    decoder = AwsChunkedDecoder(**options)
    with pytest.raises(InvalidArgument, match=message) as raised:
        for piece in split(body, cuts):
            decoder.feed(piece)
        decoder.finish()
    assert type(raised.value) is InvalidArgument
    with pytest.raises(InvalidArgument, match="already rejected"):
        decoder.feed(b"0")


def test_trailers_need_a_trailer_signing_mode() -> None:
    with pytest.raises(InvalidArgument, match="PAYLOAD-TRAILER"):
        AwsChunkedDecoder(signer=signer(False), decoded_length=None, trailer_names=["x-amz-checksum-crc32"])


@BOUNDED
@given(body=st.binary(max_size=300) | st.sampled_from([UNSIGNED_OK, encode(b"abc", [2], signed=True)]),
       flips=st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=3)), max_size=3),
       cuts=st.lists(st.integers(0, 400), max_size=5), signed=st.booleans(),
       names=st.sampled_from([[], ["a"], ["x-amz-checksum-crc32"]]))  # fmt: skip
def test_junk_bodies_raise_only_lakectl_errors(
    body: bytes, flips: list[tuple[int, bytes]], cuts: list[int], signed: bool, names: list[str]
) -> None:
    for at, junk in flips:
        body = body[:at] + junk + body[at + len(junk) :]
    with contextlib.suppress(LakectlError):
        decode(split(body, cuts), signer=signer(bool(names)) if signed else None, trailer_names=names)


def test_decoding_is_zero_copy() -> None:
    # Every payload byte comes out as a view of the buffer it arrived in: nothing is copied, so
    # decoding costs no more than reading the headers (its throughput is a benchmark's figure,
    # bench_gateway.py's streaming uploads, never a wall-clock assertion here).
    piece = bytes(range(256)) * 256
    body = b"".join(b"10000\r\n" + piece + b"\r\n" for _ in range(512)) + b"0\r\n\r\n"
    feeds = split(body, 65536)
    decoder = AwsChunkedDecoder(signer=None, decoded_length=512 * 65536)
    outputs = [(feed, decoder.feed(feed)) for feed in feeds]
    decoder.finish()
    assert all(isinstance(p, memoryview) and p.obj is feed for feed, pieces in outputs for p in pieces)
    assert sum(len(p) for _, pieces in outputs for p in pieces) == 512 * 65536


# ---------------------------------------------------------------------------------- checksums

VECTORS = {
    "crc32": "cbf43926", "crc32c": "e3069283", "crc64nvme": "ae8b14860a799888",
    "sha1": hashlib.sha1(b"123456789").hexdigest(), "sha256": hashlib.sha256(b"123456789").hexdigest(),
}  # fmt: skip
BOTOCORE = {"crc32": Crc32Checksum, "crc32c": CrtCrc32cChecksum, "crc64nvme": CrtCrc64NvmeChecksum,
            "sha1": Sha1Checksum, "sha256": Sha256Checksum}  # fmt: skip


@pytest.mark.parametrize("algorithm", VECTORS)
def test_checksum_vectors(algorithm: str) -> None:
    for name in (
        algorithm,
        algorithm.upper(),
        f"x-amz-checksum-{algorithm}",
        f" X-Amz-Checksum-{algorithm} ",
    ):
        checksum = Checksum.of(name)
        checksum.update(b"123456789")
        assert checksum.algorithm == algorithm
        assert checksum.digest().hex() == VECTORS[algorithm]
        assert checksum.b64digest() == base64.b64encode(bytes.fromhex(VECTORS[algorithm])).decode()
    checksum.verify(checksum.b64digest())
    with pytest.raises(BadDigest, match=algorithm.upper()):
        checksum.verify(Checksum.of(algorithm).b64digest())


@BOUNDED
@given(data=st.binary(max_size=5000), cuts=st.lists(st.integers(0, 5000), max_size=6),
       algorithm=st.sampled_from(list(VECTORS)))  # fmt: skip
def test_incremental_checksums_equal_one_shot_and_botocore(
    data: bytes, cuts: list[int], algorithm: str
) -> None:
    incremental, whole = Checksum.of(algorithm), Checksum.of(algorithm)
    for piece in split(data, cuts):
        incremental.update(memoryview(piece))
    whole.update(data)
    assert incremental.b64digest() == whole.b64digest() == BOTOCORE[algorithm]().handle(data)
    if algorithm == "crc32":
        assert incremental.digest() == zlib.crc32(data).to_bytes(4, "big")


def test_unknown_algorithms_are_invalid_arguments() -> None:
    for name in ("md5", "crc", "x-amz-checksum-xxhash64", ""):
        with pytest.raises(InvalidArgument, match="not one of"):
            Checksum.of(name)


def test_checksum_header() -> None:
    assert checksum_header({"x-amz-checksum-mode": "ENABLED", "x-amz-checksum-algorithm": "CRC32"}) is None
    assert checksum_header({"x-amz-checksum-crc32": "DUoRhQ==", "x-amz-checksum-type": "FULL_OBJECT"}) == (
        "crc32", "DUoRhQ==")  # fmt: skip
    assert checksum_header({"x-amz-checksum-crc64nvme": " XZCK3UugHUQ= "}) == ("crc64nvme", "XZCK3UugHUQ=")
    bad = [
        {"x-amz-checksum-crc32": "DUoRhQ==", "x-amz-checksum-sha1": "2jmj7l5rSw0yVb/vlWAYkK/YBwk="},
        {"x-amz-checksum-md5": "1B2M2Y8AsgTpgAmY7PhCfg=="},
        {"x-amz-checksum-crc32": "DUoRhQ"},
        {"x-amz-checksum-crc32": "XZCK3UugHUQ="},
        {"x-amz-checksum-sha256": "é"},
    ]
    for headers in bad:
        with pytest.raises(InvalidArgument):
            checksum_header(headers)
