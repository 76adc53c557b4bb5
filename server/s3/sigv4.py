"""Authentication of S3 requests (SigV4 header, presigned and chunk signatures; SigV2), framework-free.

:func:`authenticate` takes a :class:`Request` exactly as it arrived (raw percent-encoded path and query,
lower-case header names with values decoded as latin-1) and returns :class:`Verified`, or raises:

    InvalidArgument     malformed Authorization header, credential, date or query parameters
    Unauthenticated     no signature at all (anonymous request)
    ├── InvalidAccessKey    the access key id is unknown
    ├── SignatureMismatch   the signature does not verify (or a chunk or trailer signature)
    └── RequestExpired      a presigned URL past its expiry, or a clock more than 15 minutes off
    BadDigest           (from :meth:`Verified.verify_payload`) the body does not hash to its claim

The canonical URI is the path as sent (S3 does not normalise or double-encode it). Clients that send a
path or query not percent-encoded the AWS way are matched too: the signature is also tried over the
decoded-then-AWS-encoded form, which denotes the same request (path decoded with ``unquote``, query with
``unquote_plus``, the way the gateway reads them).
"""

from __future__ import annotations

import base64
import calendar
import enum
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache
from urllib.parse import quote, unquote, unquote_plus

from lakectl.errors import (
    BadDigest,
    InvalidAccessKey,
    InvalidArgument,
    RequestExpired,
    SignatureMismatch,
    Unauthenticated,
)

__all__ = [
    "EMPTY_SHA256", "MAX_CLOCK_SKEW", "MAX_PRESIGNED_EXPIRES", "ChunkSigner", "PayloadMode", "Request",
    "Verified", "authenticate",
]  # fmt: skip

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_CLOCK_SKEW = 15 * 60
"""Seconds a header-signed request's date may differ from the server clock."""
MAX_PRESIGNED_EXPIRES = 7 * 24 * 3600
"""The longest ``X-Amz-Expires`` a presigned URL may ask for (seven days, as S3)."""

_V4 = "AWS4-HMAC-SHA256"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_DIGITS = re.compile(r"[0-9]{1,12}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")
_VISIBLE = re.compile(r"[\x21-\x7e]+")
_URI = re.compile(r"[\x21-\x7e]*")
# The query parameters in a SigV2 canonical resource (botocore's list, a superset of AWS's).
_SUB = frozenset(
    {
        "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory", "lifecycle",
        "location", "logging", "metrics", "notification", "object-lock", "partNumber", "policy",
        "replication", "requestPayment", "restore", "select", "select-type", "storageClass", "tagging",
        "torrent", "uploadId", "uploads", "versionId", "versioning", "versions", "website",
        "response-cache-control", "response-content-disposition", "response-content-encoding",
        "response-content-language", "response-content-type", "response-expires",
    }
)  # fmt: skip
_V4_QUERY_AUTH = (
    "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)  # fmt: skip


class PayloadMode(enum.Enum):
    """What ``x-amz-content-sha256`` claims about the body, hence what the gateway must verify."""

    SIGNED = "signed"
    """The claim is the hex sha256 of the body: check it with :meth:`Verified.verify_payload`."""
    UNSIGNED = "UNSIGNED-PAYLOAD"
    STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    NONE = "none"
    """SigV2 or a presigned URL: no claim about the body."""


_STREAMING_SIGNED = (PayloadMode.STREAMING_SIGNED, PayloadMode.STREAMING_SIGNED_TRAILER)
_Pair = tuple[str, "str | None", str, str]
"""A query parameter: raw name, raw value (None without '='), decoded name, decoded value."""


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of an HTTP request a signature covers, exactly as received."""

    method: str
    raw_path: str
    """Percent-encoded, as on the request line, without the query (``/bucket/main/a%20b.txt``)."""
    raw_query: str
    """As on the request line, without ``?``."""
    headers: Mapping[str, str]
    """Lower-case names; values decoded as latin-1; repeated headers joined with ``,``."""


class ChunkSigner:
    """Verifies the chained signatures of a signed aws-chunked body, chunk after chunk, then its trailer."""

    __slots__ = ("_key", "_payload_head", "_previous", "_trailer_head", "signs_trailer")

    def __init__(
        self, signing_key: bytes, amz_date: str, scope: str, seed_signature: str, *, signs_trailer: bool
    ) -> None:
        self._key = signing_key
        self._payload_head = f"AWS4-HMAC-SHA256-PAYLOAD\n{amz_date}\n{scope}\n"
        self._trailer_head = f"AWS4-HMAC-SHA256-TRAILER\n{amz_date}\n{scope}\n"
        self._previous = seed_signature
        self.signs_trailer = signs_trailer
        """Whether the body ends with ``x-amz-trailer-signature`` (STREAMING-...-PAYLOAD-TRAILER)."""

    def verify_chunk(self, data: bytes | memoryview, signature: str) -> None:
        """Check the next chunk's signature (raise ``SignatureMismatch``) and chain on from it."""
        self.verify_chunk_sha256(hashlib.sha256(data).hexdigest(), signature)

    def verify_chunk_sha256(self, sha256_hex: str, signature: str) -> None:
        """:meth:`verify_chunk` for a chunk whose sha256 the caller computed as it arrived."""
        self._advance(
            f"{self._payload_head}{self._previous}\n{EMPTY_SHA256}\n{sha256_hex}", signature, "chunk"
        )

    def verify_trailer(self, trailer_bytes: bytes, signature: str) -> None:
        """Check the trailer signature over the canonical trailers (``name:value\\n`` each, sorted)."""
        digest = hashlib.sha256(trailer_bytes).hexdigest()
        self._advance(f"{self._trailer_head}{self._previous}\n{digest}", signature, "trailer")

    def _advance(self, string_to_sign: str, signature: str, what: str) -> None:
        expected = _hmac(self._key, string_to_sign).hex()
        if not _same(expected, signature.lower()):
            raise SignatureMismatch(f"the {what} signature of the aws-chunked body does not match its data")
        self._previous = expected


@dataclass(frozen=True, slots=True)
class Verified:
    """Who signed a request and what its signature says about the body."""

    access_key_id: str
    payload: PayloadMode
    expected_sha256: str | None = None
    """Lower-case hex, for :attr:`PayloadMode.SIGNED`."""
    chunk_signer: ChunkSigner | None = None
    """For the STREAMING_SIGNED modes: hand it to the aws-chunked decoder."""

    def verify_payload(self, sha256_hex: str) -> None:
        """Raise ``BadDigest`` unless the body's sha256 (hex) is the signed one; no-op in other modes."""
        if self.expected_sha256 is not None and not _same(self.expected_sha256, sha256_hex.lower()):
            raise BadDigest("the body's sha256 does not match its x-amz-content-sha256 header")


def authenticate(
    request: Request, secret_of: Callable[[str], str | None], *, region: str, now: float | None = None
) -> Verified:
    """Verify the request's signature with the secret ``secret_of`` returns for its access key id.

    ``region`` is the gateway's own; a SigV4 credential scoped to another region (clients often
    default to us-east-1) is accepted all the same, since its signature binds the region it names.
    """
    del region  # accepted on purpose: see the docstring
    now = time.time() if now is None else now
    if not _URI.fullmatch(request.raw_path) or not _URI.fullmatch(request.raw_query):
        raise InvalidArgument("the request path and query must be percent-encoded ASCII")
    query = _query_pairs(request.raw_query)
    names = {name for _, _, name, _ in query}
    authorization = request.headers.get("authorization")
    schemes = [
        authorization is not None,
        not names.isdisjoint({"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"}),
        not names.isdisjoint({"AWSAccessKeyId", "Signature"}),
    ]
    if sum(schemes) > 1:
        raise InvalidArgument("a request may carry only one of an Authorization header or a presigned query")
    if authorization is not None:
        if authorization.startswith(_V4 + " "):
            return _header_v4(request, authorization[len(_V4) + 1 :], query, secret_of, now)
        if authorization.startswith("AWS "):
            return _header_v2(request, authorization[4:], query, secret_of, now)
        raise InvalidArgument("the Authorization header is neither AWS4-HMAC-SHA256 nor AWS (SigV2)")
    if schemes[1]:
        return _query_v4(request, query, secret_of, now)
    if schemes[2]:
        return _query_v2(request, query, secret_of, now)
    raise Unauthenticated("the request is not signed and anonymous access is not allowed")


# ---------------------------------------------------------------------------------------- SigV4


def _header_v4(
    request: Request, value: str, query: list[_Pair], secret_of: Callable[[str], str | None], now: float
) -> Verified:
    fields: dict[str, str] = {}
    for part in value.split(","):
        name, eq, field = part.strip().partition("=")
        if not eq or name not in ("Credential", "SignedHeaders", "Signature") or name in fields:
            raise InvalidArgument(
                "the Authorization header must be Credential=.., SignedHeaders=.., Signature=.."
            )
        fields[name] = field.strip()
    if len(fields) != 3:
        raise InvalidArgument("the Authorization header lacks one of Credential, SignedHeaders or Signature")
    access_key, scope_date, scope_region = _credential(fields["Credential"])
    signed = _signed_headers(fields["SignedHeaders"])
    signature = _signature_hex(fields["Signature"])
    headers = request.headers
    when, amz_date = _header_date(headers, v2=False)
    if amz_date[:8] != scope_date:
        raise InvalidArgument("the date of the credential scope is not the date of the request")
    claim = headers.get("x-amz-content-sha256")
    if claim is None:
        raise InvalidArgument("a SigV4-signed S3 request needs an x-amz-content-sha256 header")
    if "x-amz-content-sha256" not in signed:
        raise InvalidArgument("x-amz-content-sha256 must be one of the SignedHeaders")
    claim = claim.strip()
    mode, expected = _payload_claim(claim)
    key = _signing_key(_secret(secret_of, access_key), scope_date, scope_region, "s3")
    scope = f"{scope_date}/{scope_region}/s3/aws4_request"
    _check_v4(request, query, key, f"{_V4}\n{amz_date}\n{scope}\n", signed, claim, signature)
    if abs(now - when) > MAX_CLOCK_SKEW:
        raise RequestExpired(
            f"the request time {amz_date} is {abs(now - when):.0f} seconds away from the server clock,"
            f" more than the {MAX_CLOCK_SKEW // 60} minutes of clock skew allowed"
        )
    signer = None
    if mode in _STREAMING_SIGNED:
        signer = ChunkSigner(
            key, amz_date, scope, signature, signs_trailer=mode is PayloadMode.STREAMING_SIGNED_TRAILER
        )
    return Verified(access_key, mode, expected, signer)


def _query_v4(
    request: Request, query: list[_Pair], secret_of: Callable[[str], str | None], now: float
) -> Verified:
    params = _auth_params(query, _V4_QUERY_AUTH, optional=("X-Amz-Content-Sha256",))
    if params["X-Amz-Algorithm"] != _V4:
        raise InvalidArgument(f"X-Amz-Algorithm must be {_V4}")
    access_key, scope_date, scope_region = _credential(params["X-Amz-Credential"])
    amz_date = params["X-Amz-Date"]
    when = _parse_amz_date(amz_date, "X-Amz-Date")
    if amz_date[:8] != scope_date:
        raise InvalidArgument("the date of the credential scope is not X-Amz-Date's")
    expires = _DIGITS.fullmatch(params["X-Amz-Expires"])
    if expires is None or not 1 <= int(expires.group()) <= MAX_PRESIGNED_EXPIRES:
        raise InvalidArgument(f"X-Amz-Expires must be a number of seconds from 1 to {MAX_PRESIGNED_EXPIRES}")
    signed = _signed_headers(params["X-Amz-SignedHeaders"])
    signature = _signature_hex(params["X-Amz-Signature"])
    claim = params.get("X-Amz-Content-Sha256")
    if claim is None and "x-amz-content-sha256" in signed:
        claim = request.headers.get("x-amz-content-sha256", "").strip()
    claim = claim or PayloadMode.UNSIGNED.value
    mode, expected = _payload_claim(claim)
    if mode not in (PayloadMode.SIGNED, PayloadMode.UNSIGNED):
        raise InvalidArgument("a presigned URL cannot carry a streaming (aws-chunked) payload")
    key = _signing_key(_secret(secret_of, access_key), scope_date, scope_region, "s3")
    scope = f"{scope_date}/{scope_region}/s3/aws4_request"
    _check_v4(request, query, key, f"{_V4}\n{amz_date}\n{scope}\n", signed, claim, signature)
    if now > when + int(expires.group()):
        raise RequestExpired(f"the presigned URL expired {now - when - int(expires.group()):.0f} seconds ago")
    if when - now > MAX_CLOCK_SKEW:
        raise RequestExpired(f"the presigned URL is dated {amz_date}, in the future of the server clock")
    return Verified(access_key, PayloadMode.SIGNED if expected else PayloadMode.NONE, expected)


def _check_v4(
    request: Request, query: list[_Pair], key: bytes, head: str, signed: list[str], claim: str, given: str
) -> None:
    """Raise unless ``given`` signs the request; ``head`` opens the string to sign (up to the scope)."""
    lines = []
    for name in signed:
        value = request.headers.get(name)
        if value is None:
            raise SignatureMismatch(f"the signed header {name!r} is missing from the request")
        lines.append(f"{name}:{' '.join(value.split())}\n")
    tail = f"{''.join(lines)}\n{';'.join(signed)}\n{claim}"
    for uri in _uri_forms(request.raw_path):
        for canonical_query in _v4_query_forms(query):
            canonical = f"{request.method}\n{uri}\n{canonical_query}\n{tail}"
            if _same(_hmac(key, head + hashlib.sha256(_utf8(canonical)).hexdigest()).hex(), given):
                return
    raise SignatureMismatch("the request signature does not match the one computed with the key's secret")


def _credential(value: str) -> tuple[str, str, str]:
    parts = value.split("/")
    if len(parts) != 5 or not all(_VISIBLE.fullmatch(p) for p in parts):
        raise InvalidArgument("the credential must be <access key>/<yyyymmdd>/<region>/s3/aws4_request")
    access_key, date, region, service, terminator = parts
    if service != "s3" or terminator != "aws4_request":
        raise InvalidArgument("the credential scope must name the service s3 and end with aws4_request")
    try:
        _parse_amz_date(f"{date}T000000Z", "")
    except InvalidArgument:
        raise InvalidArgument("the date of the credential scope must be a valid yyyymmdd date") from None
    return access_key, date, region


def _signed_headers(value: str) -> list[str]:
    names = value.split(";")
    if not all(_HEADER_NAME.fullmatch(n) for n in names) or len(set(names)) != len(names):
        raise InvalidArgument("SignedHeaders must be distinct lower-case header names separated by ';'")
    if "host" not in names:
        raise InvalidArgument("the host header must be one of the SignedHeaders")
    return names


def _signature_hex(value: str) -> str:
    if not _HEX64.fullmatch(value.lower()):
        raise InvalidArgument("a SigV4 signature must be 64 hexadecimal digits")
    return value.lower()


def _payload_claim(claim: str) -> tuple[PayloadMode, str | None]:
    if _HEX64.fullmatch(claim.lower()):
        return PayloadMode.SIGNED, claim.lower()
    for mode in PayloadMode:
        if mode.value == claim and mode not in (PayloadMode.SIGNED, PayloadMode.NONE):
            return mode, None
    raise InvalidArgument("x-amz-content-sha256 must be a hex sha256, UNSIGNED-PAYLOAD or STREAMING-*")


@lru_cache(maxsize=512)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(_utf8("AWS4" + secret), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


# ---------------------------------------------------------------------------------------- SigV2


def _header_v2(
    request: Request, value: str, query: list[_Pair], secret_of: Callable[[str], str | None], now: float
) -> Verified:
    access_key, colon, signature = value.strip().rpartition(":")
    if not colon or not _VISIBLE.fullmatch(access_key) or not signature:
        raise InvalidArgument("a SigV2 Authorization header must be 'AWS <access key>:<signature>'")
    headers = request.headers
    when, _ = _header_date(headers, v2=True)
    # AWS signs an empty Date line when x-amz-date is present; botocore signs the Date header anyway.
    dates = [headers.get("date", "").strip()]
    if "x-amz-date" in headers:
        dates.insert(0, "")
    _check_v2(request, query, _secret(secret_of, access_key), dates, _v2_fields(headers), signature)
    if abs(now - when) > MAX_CLOCK_SKEW:
        raise RequestExpired(
            f"the request time is {abs(now - when):.0f} seconds away from the server clock,"
            f" more than the {MAX_CLOCK_SKEW // 60} minutes of clock skew allowed"
        )
    return Verified(access_key, PayloadMode.NONE)


def _query_v2(
    request: Request, query: list[_Pair], secret_of: Callable[[str], str | None], now: float
) -> Verified:
    params = _auth_params(query, ("AWSAccessKeyId", "Signature", "Expires"), optional=())
    access_key, expires = params["AWSAccessKeyId"], params["Expires"]
    if not _VISIBLE.fullmatch(access_key) or not _DIGITS.fullmatch(expires):
        raise InvalidArgument("a SigV2 presigned URL needs AWSAccessKeyId and Expires in epoch seconds")
    # botocore moves x-amz-*, Content-Type and Content-MD5 into the query of a SigV2 presigned URL.
    fields = _v2_fields(request.headers) | _v2_fields({name.lower(): value for _, _, name, value in query})
    signature = params["Signature"].replace(" ", "+")  # a '+' the client left unencoded
    _check_v2(request, query, _secret(secret_of, access_key), [expires], fields, signature)
    if now > int(expires):
        raise RequestExpired(f"the presigned URL expired {now - int(expires):.0f} seconds ago")
    return Verified(access_key, PayloadMode.NONE)


def _check_v2(
    request: Request, query: list[_Pair], secret: str, dates: list[str], fields: dict[str, str], given: str
) -> None:
    """Raise unless ``given`` signs the request, ``fields`` holding its x-amz-*, content-md5 and -type."""
    md5, content_type = fields.pop("content-md5", ""), fields.pop("content-type", "")
    amz_lines = "".join(f"{k}:{v}\n" for k, v in sorted(fields.items()))
    subresources = sorted(
        ((name, None if value is None else unquote(value)) for name, value, _, _ in query if name in _SUB),
        key=lambda pair: pair[0],
    )
    suffix = "&".join(name if value is None else f"{name}={value}" for name, value in subresources)
    suffix = f"?{suffix}" if suffix else ""
    uris = _uri_forms(request.raw_path)
    if request.raw_path.count("/") == 1 and len(request.raw_path) > 1:
        uris.append(request.raw_path + "/")  # botocore signs a bucket's resource as /bucket/
    for date in dates:
        for uri in uris:
            text = f"{request.method}\n{md5}\n{content_type}\n{date}\n{amz_lines}{uri}{suffix}"
            expected = base64.b64encode(hmac.digest(_utf8(secret), _utf8(text), "sha1")).decode()
            if _same(expected, given):
                return
    raise SignatureMismatch("the SigV2 signature does not match the one computed with the key's secret")


def _v2_fields(headers: Mapping[str, str]) -> dict[str, str]:
    wanted = ("content-md5", "content-type")
    return {k: v.strip() for k, v in headers.items() if k.startswith("x-amz-") or k in wanted}


# ---------------------------------------------------------------------------------------- shared


def _query_pairs(raw_query: str) -> list[_Pair]:
    pairs: list[_Pair] = []
    if raw_query:
        for part in raw_query.split("&"):
            name, eq, value = part.partition("=")
            pairs.append((name, value if eq else None, unquote_plus(name), unquote_plus(value)))
    return pairs


def _auth_params(query: list[_Pair], required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for _, _, name, value in query:
        if name in required or name in optional:
            if name in params:
                raise InvalidArgument(f"the query parameter {name} appears more than once")
            params[name] = value
    missing = [name for name in required if name not in params]
    if missing:
        raise InvalidArgument(f"the presigned URL lacks the query parameter {missing[0]}")
    return params


def _uri_forms(raw_path: str) -> list[str]:
    """The path as sent, then (if different) each segment decoded and encoded the AWS way."""
    raw = raw_path or "/"
    aws = "/".join(quote(unquote(segment), safe="-_.~") for segment in raw.split("/"))
    return [raw] if aws == raw else [raw, aws]


def _v4_query_forms(query: list[_Pair]) -> list[str]:
    """The canonical query as botocore builds it from the raw query, then the AWS re-encoded one."""
    kept = [pair for pair in query if pair[2] != "X-Amz-Signature"]
    raw = "&".join(f"{n}={v}" for n, v in sorted((n, v or "") for n, v, _, _ in kept))
    aws_pairs = sorted(
        (quote(name, safe="-_.~"), quote(value, safe="-_.~")) for raw_name, _, name, value in kept if raw_name
    )
    aws = "&".join(f"{n}={v}" for n, v in aws_pairs)
    return [raw] if aws == raw else [raw, aws]


def _header_date(headers: Mapping[str, str], *, v2: bool) -> tuple[int, str]:
    """The request time (epoch seconds, ISO 8601 basic) from x-amz-date or Date."""
    for name in ("x-amz-date", "date"):
        value = headers.get(name)
        if value is None:
            continue
        value = value.strip()
        if _AMZ_DATE.fullmatch(value):
            return _parse_amz_date(value, name), value
        if name == "x-amz-date" and not v2:
            raise InvalidArgument("x-amz-date must be in the ISO 8601 basic format yyyymmddThhmmssZ")
        try:
            parsed = parsedate_to_datetime(value)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            when = int(parsed.timestamp())
            return when, datetime.fromtimestamp(when, UTC).strftime("%Y%m%dT%H%M%SZ")
        except (TypeError, ValueError, IndexError, OverflowError, OSError):
            raise InvalidArgument(f"the {name} header is not a valid HTTP or ISO 8601 date") from None
    raise InvalidArgument("a signed request needs an x-amz-date or Date header")


def _parse_amz_date(value: str, what: str) -> int:
    try:
        if not _AMZ_DATE.fullmatch(value):
            raise ValueError(value)
        return calendar.timegm(datetime.strptime(value, "%Y%m%dT%H%M%SZ").timetuple())
    except ValueError:
        raise InvalidArgument(f"{what} is not a valid date in the format yyyymmddThhmmssZ") from None


def _secret(secret_of: Callable[[str], str | None], access_key: str) -> str:
    secret = secret_of(access_key)
    if secret is None:
        raise InvalidAccessKey(f"the access key id {access_key!r} does not exist")
    return secret


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.digest(key, _utf8(message), "sha256")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(_utf8(expected), _utf8(given))
