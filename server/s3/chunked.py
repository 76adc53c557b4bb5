"""Decoding of aws-chunked request bodies (signed or not, with trailers) and the S3 body checksums.

    <hex size>[;chunk-signature=<64 hex>]\\r\\n<data>\\r\\n ... 0[;chunk-signature=<64 hex>]\\r\\n
    [<trailer name>:<value>\\r\\n ...][x-amz-trailer-signature:<64 hex>\\r\\n]\\r\\n

:class:`AwsChunkedDecoder` is fed the body (after any HTTP ``Transfer-Encoding: chunked`` is undone) in
pieces of any size and hands back the payload as zero-copy slices of what it was fed. A chunk's signature
can only be checked once the whole chunk has arrived, so the pieces are provisional until
:meth:`AwsChunkedDecoder.finish` returns: store nothing visible before. Errors: ``InvalidArgument`` for bad
framing or lengths, ``SignatureMismatch`` for a chunk or trailer signature that does not verify.
:class:`Checksum` computes ``x-amz-checksum-*`` values incrementally; ``BadDigest`` on a mismatch.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import zlib
from collections.abc import Callable, Mapping, Sequence

from awscrt import checksums as _crt

from lakectl.errors import BadDigest, InvalidArgument
from server.s3.sigv4 import EMPTY_SHA256, ChunkSigner

__all__ = ["AwsChunkedDecoder", "Checksum", "checksum_header"]

MAX_LINE = 4096
"""The longest chunk header or trailer line accepted, CRLF included."""
MAX_TRAILER_SECTION = 16 * 1024
"""The most bytes accepted after the final 0-size chunk."""
_TRAILER_SIGNATURE = "x-amz-trailer-signature"
_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_SIGNATURE_EXT = re.compile(rb"chunk-signature=([0-9a-f]{64})")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")

# Decoder states.
_HEADER, _DATA, _DATA_CRLF, _TRAILERS, _DONE, _FAILED = range(6)


class AwsChunkedDecoder:
    """Incremental aws-chunked decoder: :meth:`feed` the body as it arrives, then :meth:`finish`."""

    def __init__(
        self,
        *,
        signer: ChunkSigner | None,
        decoded_length: int | None,
        trailer_names: Sequence[str] = (),
        max_chunk: int = 16 * 1024 * 1024,
    ) -> None:
        """``signer`` (from ``Verified.chunk_signer``) makes chunk signatures required, its absence
        forbids them; ``decoded_length`` is x-amz-decoded-content-length; ``trailer_names`` is
        x-amz-trailer split on commas: the trailers that must, and alone may, follow the last chunk."""
        self._signer = signer
        self._decoded_length = decoded_length
        self._trailer_names = frozenset(n.strip().lower() for n in trailer_names if n.strip())
        if signer is not None and self._trailer_names and not signer.signs_trailer:
            raise InvalidArgument("trailers in a signed aws-chunked body need STREAMING-...-PAYLOAD-TRAILER")
        self._max_chunk = max_chunk
        self._state = _HEADER
        self._line = bytearray()
        self._remaining = 0
        self._crlf = 0
        self._chunk_signature = ""
        self._hash = hashlib.sha256()
        self._total = 0
        self._chunks = 0
        self._trailer_bytes = 0
        self._trailers: dict[str, str] = {}
        self._trailer_signature: str | None = None
        self._skipped_leading = False
        self._skipped_middle = False

    def feed(self, data: bytes) -> list[bytes | memoryview]:
        """Decode the next bytes of the body; return the payload pieces they complete or continue."""
        if self._state == _FAILED:
            raise InvalidArgument("the aws-chunked body was already rejected")
        try:
            return self._feed(data if type(data) is bytes else bytes(data))
        except BaseException:
            self._state = _FAILED
            raise

    def finish(self) -> dict[str, str]:
        """Check that the body ended where it should and return its trailers (lower-case names)."""
        state = self._state
        if state == _FAILED:
            raise InvalidArgument("the aws-chunked body was already rejected")
        self._state = _FAILED
        if state in (_DATA, _DATA_CRLF):
            raise InvalidArgument(f"the aws-chunked body ended inside chunk {self._chunks}")
        if state == _HEADER:
            raise InvalidArgument("the aws-chunked body ended before its final 0-size chunk")
        if state == _TRAILERS:
            ended = "the aws-chunked body ended before the blank line closing its trailers"
            raise InvalidArgument(self._trailer_problem() or ended)
        if self._decoded_length is not None and self._total != self._decoded_length:
            raise InvalidArgument(
                f"the aws-chunked body decodes to {self._total} bytes,"
                f" not the {self._decoded_length} of x-amz-decoded-content-length"
            )
        self._state = _DONE
        return dict(self._trailers)

    def _feed(self, data: bytes) -> list[bytes | memoryview]:
        out: list[bytes | memoryview] = []
        view = memoryview(data)
        end = len(data)
        i = 0
        while i < end:
            state = self._state
            if state == _DATA:
                take = min(self._remaining, end - i)
                piece = view[i : i + take]
                if self._signer is not None:
                    self._hash.update(piece)
                out.append(piece)
                i += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = _DATA_CRLF
            elif state == _DATA_CRLF:
                want = b"\r\n"[self._crlf :]
                got = data[i : i + len(want)]
                if not want.startswith(got):
                    raise InvalidArgument(
                        f"chunk {self._chunks} of the aws-chunked body is not followed by CRLF"
                    )
                i += len(got)
                self._crlf += len(got)
                if self._crlf == 2:
                    if self._signer is not None:
                        self._signer.verify_chunk_sha256(self._hash.hexdigest(), self._chunk_signature)
                    self._state = _HEADER
            elif state == _DONE:
                raise InvalidArgument("the aws-chunked body goes on after its end")
            else:
                limit = MAX_LINE - len(self._line)
                newline = data.find(b"\n", i, i + limit)
                if newline < 0:
                    if end - i >= limit:
                        raise InvalidArgument("a line of the aws-chunked body is too long")
                    self._line += view[i:]
                    break
                self._line += view[i:newline]
                i = newline + 1
                line = bytes(self._line)
                self._line.clear()
                if state == _HEADER:
                    self._chunk_header(line)
                else:
                    self._trailer_bytes += len(line) + 1
                    self._trailer_line(line)
        return out

    def _chunk_header(self, line: bytes) -> None:
        self._chunks += 1
        number = self._chunks
        if not line.endswith(b"\r"):
            raise InvalidArgument(
                f"the header of chunk {number} of the aws-chunked body does not end with CRLF"
            )
        size_text, semicolon, extension = line[:-1].partition(b";")
        if not _SIZE.fullmatch(size_text):
            raise InvalidArgument(f"the size of chunk {number} of the aws-chunked body is not hexadecimal")
        size = int(size_text, 16)
        if self._signer is None:
            if semicolon:
                raise InvalidArgument(f"chunk {number} has an extension but the aws-chunked body is unsigned")
        else:
            match = _SIGNATURE_EXT.fullmatch(extension) if semicolon else None
            if match is None:
                raise InvalidArgument(
                    f"chunk {number} of the signed aws-chunked body lacks a chunk-signature"
                )
            self._chunk_signature = match.group(1).decode()
        if size > self._max_chunk:
            raise InvalidArgument(f"chunk {number} of the aws-chunked body exceeds {self._max_chunk} bytes")
        self._total += size
        if self._decoded_length is not None and self._total > self._decoded_length:
            raise InvalidArgument(
                f"the aws-chunked body is longer than the {self._decoded_length} bytes"
                " of x-amz-decoded-content-length"
            )
        if size == 0:
            if self._signer is not None:
                self._signer.verify_chunk_sha256(EMPTY_SHA256, self._chunk_signature)
            self._state = _TRAILERS
        else:
            self._hash = hashlib.sha256()
            self._remaining = size
            self._crlf = 0
            self._state = _DATA

    def _trailer_line(self, line: bytes) -> None:
        if self._trailer_bytes > MAX_TRAILER_SECTION:
            raise InvalidArgument("the trailers of the aws-chunked body are too long")
        # Trailer lines end with CRLF, but minio-go ends the checksum line with a bare LF.
        text = line[:-1] if line.endswith(b"\r") else line
        if not text:
            self._blank_line()
            return
        name, colon, value = text.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip()
        if not colon or not _NAME.fullmatch(name):
            raise InvalidArgument("a trailer of the aws-chunked body is not a 'name:value' line")
        if self._trailer_signature is not None:
            raise InvalidArgument("the aws-chunked body has a trailer after its x-amz-trailer-signature")
        if name == _TRAILER_SIGNATURE:
            if self._signer is None or not self._signer.signs_trailer:
                raise InvalidArgument(
                    "only a STREAMING-...-PAYLOAD-TRAILER body may carry a trailer signature"
                )
            if not _HEX64.fullmatch(value):
                raise InvalidArgument("the x-amz-trailer-signature is not 64 hexadecimal digits")
            self._trailer_signature = value
            return
        if name not in self._trailer_names:
            raise InvalidArgument(
                f"the trailer {name!r} of the aws-chunked body is not declared in x-amz-trailer"
            )
        if name in self._trailers:
            raise InvalidArgument(f"the aws-chunked body repeats the trailer {name!r}")
        self._trailers[name] = value

    def _blank_line(self) -> None:
        signed = self._signer is not None and self._signer.signs_trailer
        # Tolerated: a blank line right after the final chunk when trailers follow (the AWS documentation's
        # example), and one between the trailers and their signature (minio-go).
        if self._trailer_names and not self._trailers and not self._skipped_leading:
            self._skipped_leading = True
            return
        if signed and self._trailers and self._trailer_signature is None and not self._skipped_middle:
            self._skipped_middle = True
            return
        problem = self._trailer_problem()
        if problem:
            raise InvalidArgument(problem)
        if self._signer is not None and self._trailer_signature is not None:
            canonical = "".join(f"{k}:{v}\n" for k, v in sorted(self._trailers.items()))
            self._signer.verify_trailer(canonical.encode("latin-1"), self._trailer_signature)
        self._state = _DONE

    def _trailer_problem(self) -> str:
        missing = sorted(self._trailer_names - self._trailers.keys())
        if missing:
            return f"the aws-chunked body lacks the trailer {missing[0]!r} of x-amz-trailer"
        if self._signer is not None and self._signer.signs_trailer and self._trailer_signature is None:
            return "the signed aws-chunked body lacks its x-amz-trailer-signature"
        return ""


class Checksum:
    """An incremental S3 checksum: crc32, crc32c, crc64nvme, sha1 or sha256."""

    __slots__ = ("_crc", "_crc_fn", "_hash", "_width", "algorithm")

    def __init__(self, algorithm: str) -> None:
        """Prefer :meth:`of`, which also accepts header names and any case."""
        self.algorithm = algorithm
        self._crc = 0
        self._crc_fn: Callable[[bytes | memoryview, int], int] | None = None
        self._hash = None
        self._width = 0
        if algorithm in _CRCS:
            self._crc_fn, self._width = _CRCS[algorithm]
        elif algorithm in ("sha1", "sha256"):
            self._hash = hashlib.new(algorithm)
        else:
            raise InvalidArgument(f"{algorithm!r} is not a checksum algorithm S3 knows")

    @staticmethod
    def of(algorithm: str) -> Checksum:
        """The checksum named ``algorithm`` (``CRC32``, ``crc64nvme``, ``x-amz-checksum-sha256``, ...)."""
        name = algorithm.strip().lower().removeprefix("x-amz-checksum-")
        if name not in _ALGORITHMS:
            raise InvalidArgument(
                f"the checksum algorithm {algorithm[:40]!r} is not one of {', '.join(_ALGORITHMS)}"
            )
        return Checksum(name)

    def update(self, data: bytes | memoryview) -> None:
        if self._crc_fn is not None:
            self._crc = self._crc_fn(data, self._crc)
        else:
            assert self._hash is not None
            self._hash.update(data)

    def digest(self) -> bytes:
        """The big-endian digest so far (the checksum can still be updated)."""
        if self._hash is not None:
            return self._hash.digest()
        return self._crc.to_bytes(self._width, "big")

    def b64digest(self) -> str:
        """The digest in base64, as in ``x-amz-checksum-*`` headers and trailers."""
        return base64.b64encode(self.digest()).decode()

    def verify(self, expected_b64: str) -> None:
        """Raise ``BadDigest`` unless the data so far has the checksum ``expected_b64``."""
        if not hmac.compare_digest(
            self.b64digest().encode(), expected_b64.strip().encode("utf-8", "replace")
        ):
            raise BadDigest(
                f"the {self.algorithm.upper()} checksum of the body is not the one it was sent with"
            )


def checksum_header(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """The ``(algorithm, base64 value)`` of the one ``x-amz-checksum-<algorithm>`` header, if any.

    Raise ``InvalidArgument`` for two of them, an unknown algorithm or a value that is not a digest."""
    found: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name.startswith("x-amz-checksum-"):
            algorithm = name.removeprefix("x-amz-checksum-")
            if algorithm in ("algorithm", "mode", "type"):
                continue
            found.append((Checksum.of(algorithm).algorithm, value.strip()))
    if not found:
        return None
    if len(found) > 1:
        raise InvalidArgument("a request may carry only one x-amz-checksum-<algorithm> header")
    algorithm, value = found[0]
    try:
        size = len(base64.b64decode(value.encode("ascii"), validate=True))
    except (UnicodeEncodeError, binascii.Error):
        size = -1
    if size != len(Checksum(algorithm).digest()):
        raise InvalidArgument(f"x-amz-checksum-{algorithm} is not a base64 {algorithm} digest")
    return algorithm, value


_CRCS: dict[str, tuple[Callable[[bytes | memoryview, int], int], int]] = {
    "crc32": (zlib.crc32, 4),
    "crc32c": (_crt.crc32c, 4),
    "crc64nvme": (_crt.crc64nvme, 8),
}
_ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")
