"""S3 request authentication against AWS's published vectors, real clients and botocore's signers."""

from __future__ import annotations

import calendar
import contextlib
import functools
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSPreparedRequest, AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.errors import (
    BadDigest,
    InvalidAccessKey,
    InvalidArgument,
    LakectlError,
    RequestExpired,
    SignatureMismatch,
    Unauthenticated,
)
from server.s3.sigv4 import EMPTY_SHA256, PayloadMode, Request, Verified, authenticate

KEY, SECRET = "AKIDLAKECTL", "s3cr3t/with+odd=chars"
CREDENTIALS = Credentials(KEY, SECRET)
ENDPOINT = "http://127.0.0.1:9000"
BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Secrets = Callable[[str], str | None]


def auth(request: Request, now: float | None = None, secrets: Secrets = {KEY: SECRET}.get) -> Verified:
    return authenticate(request, secrets, region="eu-west-1", now=now)


def epoch(amz_date: str) -> int:
    return calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))


def text_headers(headers: Any) -> dict[str, str]:
    return {k.lower(): v.decode("latin-1") if isinstance(v, bytes) else v for k, v in headers.items()}


def to_request(prepared: AWSPreparedRequest | AWSRequest) -> Request:
    """What the gateway sees: the URL's raw path and query, lower-case headers, a Host header."""
    parts = urlsplit(prepared.url)
    headers = text_headers(prepared.headers)
    headers.setdefault("host", parts.netloc)
    return Request(prepared.method, parts.path, parts.query, headers)


def replace(request: Request, headers: dict[str, str] | None = None, **fields: str) -> Request:
    return Request(
        fields.get("method", request.method),
        fields.get("raw_path", request.raw_path),
        fields.get("raw_query", request.raw_query),
        {**request.headers, **(headers or {})},
    )


class _Sent(Exception):
    """Raised in place of sending: carries the request a real boto3 client built and signed."""


@functools.cache
def client(signature_version: str = "s3v4") -> Any:
    config = Config(signature_version=signature_version, s3={"addressing_style": "path"})
    made = boto3.client(
        "s3", endpoint_url=ENDPOINT, region_name="us-east-1", aws_access_key_id=KEY,
        aws_secret_access_key=SECRET, config=config,
    )  # fmt: skip

    def grab(request: AWSPreparedRequest, **_: Any) -> None:
        raise _Sent(request)

    made.meta.events.register("before-send.s3.*", grab)
    return made


def sent(operation: str, signature_version: str = "s3v4", **params: Any) -> AWSPreparedRequest:
    with pytest.raises(_Sent) as caught:
        getattr(client(signature_version), operation)(**params)
    return caught.value.args[0]


def resign(prepared: AWSPreparedRequest, signer: Any) -> Request:
    """Sign the request a client serialised again, with one of botocore's pure-Python signers."""
    dropped = {"authorization", "x-amz-date", "date", "x-amz-content-sha256", "host"}
    headers = {k: v for k, v in text_headers(prepared.headers).items() if k not in dropped}
    request = AWSRequest(method=prepared.method, url=prepared.url, headers=headers, data=prepared.body)
    signer.add_auth(request)
    return to_request(request.prepare())


def v4_auth(region: str) -> S3SigV4Auth:
    return S3SigV4Auth(CREDENTIALS, "s3", region)


SIGNERS: dict[str, Callable[[str, dict[str, Any]], Request]] = {
    "client-s3v4": lambda op, params: to_request(sent(op, **params)),  # botocore's CRT signer (awscrt)
    "client-sigv2": lambda op, params: to_request(sent(op, "s3", **params)),
    "S3SigV4Auth": lambda op, params: resign(sent(op, **params), v4_auth("us-east-1")),
    "S3SigV4Auth-ap-south-2": lambda op, params: resign(sent(op, **params), v4_auth("ap-south-2")),
    "HmacV1Auth": lambda op, params: resign(sent(op, **params), HmacV1Auth(CREDENTIALS)),
}
KEYS = [
    "plain.txt", "a b.txt", "ünïcødé/日本語 €.txt", "a+b=c~d", "x//y///z", "sp ace/+plus/=eq/~tilde/",
    "!'()*$&,;:@[]^`{|}\\\"<>#%", "%41 is not A",
]  # fmt: skip


# ---------------------------------------------------------------------------------- fixed vectors

DOC_KEY, DOC_NOW = "AKIAIOSFODNN7EXAMPLE", epoch("20130524T000000Z")
DOC_SECRETS = {DOC_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}.get
DOC_AUTH = f"AWS4-HMAC-SHA256 Credential={DOC_KEY}/20130524/us-east-1/s3/aws4_request,SignedHeaders="


def test_aws_documentation_header_example() -> None:
    request = Request("GET", "/test.txt", "", {
        "host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9", "x-amz-content-sha256": EMPTY_SHA256,
        "x-amz-date": "20130524T000000Z", "authorization": DOC_AUTH + "host;range;x-amz-content-sha256;"
        "x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    })  # fmt: skip
    verified = auth(request, DOC_NOW, DOC_SECRETS)
    assert verified == Verified(DOC_KEY, PayloadMode.SIGNED, EMPTY_SHA256, None)
    with pytest.raises(SignatureMismatch):
        auth(replace(request, headers={"range": "bytes=0-10"}), DOC_NOW, DOC_SECRETS)


def test_aws_documentation_presigned_example() -> None:
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3"
        "%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )
    request = Request("GET", "/test.txt", query, {"host": "examplebucket.s3.amazonaws.com"})
    assert auth(request, DOC_NOW + 86400, DOC_SECRETS) == Verified(DOC_KEY, PayloadMode.NONE)
    with pytest.raises(RequestExpired):
        auth(request, DOC_NOW + 86401, DOC_SECRETS)
    with pytest.raises(SignatureMismatch):
        auth(replace(request, raw_query=query.replace("86400", "86401")), DOC_NOW, DOC_SECRETS)


# Real clients' requests (secret "testing"), from /work/shared/reference/s3-client-requests.txt.
CAPTURED = {
    "polars/object_store ranged GET": (
        "GET", "/b-polars/t/data.parquet", "", "20261122T044234Z", PayloadMode.UNSIGNED,
        {"range": "bytes=-262144", "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "host": "127.0.0.1:5057"},
        "host;range;x-amz-content-sha256;x-amz-date",
        "ca3a057165ca51559da533e8a7f41906a80c49e53d76300003c5d1cca35d49ab",
    ),
    "duckdb list with a trailing slash": (
        "GET", "/b-duckdb/", "encoding-type=url&list-type=2&prefix=t%2F", "20261122T044235Z",
        PayloadMode.SIGNED, {"x-amz-content-sha256": EMPTY_SHA256, "host": "127.0.0.1:5057"},
        "host;x-amz-content-sha256;x-amz-date",
        "c58fec9134c564ea05ba6c193632bc27a2b3acae3aad71e1ffca792193eb3a9b",
    ),
    "botocore aws-chunked PUT over TLS": (
        "PUT", "/b-tls/bytes.txt", "", "20261122T044403Z", PayloadMode.STREAMING_UNSIGNED_TRAILER,
        {"host": "127.0.0.1:5058", "expect": "100-continue", "transfer-encoding": "chunked",
         "content-encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
         "x-amz-decoded-content-length": "11", "x-amz-sdk-checksum-algorithm": "CRC32",
         "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"},
        "content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
        "x-amz-sdk-checksum-algorithm;x-amz-trailer",
        "c3c1c2262d18ac9d5440d7cd2e04af38d42692d6e997c44dabf1edca0148f322",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", CAPTURED)
def test_captured_real_client_requests(name: str) -> None:
    method, path, query, amz_date, mode, headers, signed, signature = CAPTURED[name]
    credential = f"testing/{amz_date[:8]}/us-east-1/s3/aws4_request"
    value = f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed}, Signature={signature}"
    request = Request(method, path, query, {**headers, "x-amz-date": amz_date, "authorization": value})
    assert auth(request, epoch(amz_date), lambda _: "testing").payload is mode
    with pytest.raises(SignatureMismatch):
        auth(replace(request, raw_path=path + "x"), epoch(amz_date), lambda _: "testing")


def test_captured_sigv2_presigned_url() -> None:
    query = "AWSAccessKeyId=testing&Signature=Ucvb9azwt5SCj2m5S2XpGccluSc%3D&Expires=1795322609"
    v2 = Request("GET", "/b-boto3/small/hello.txt", query, {"host": "127.0.0.1:5057"})
    assert auth(v2, 1795322609, lambda _: "testing").payload is PayloadMode.NONE
    with pytest.raises(RequestExpired):
        auth(v2, 1795322610, lambda _: "testing")


# ---------------------------------------------------------------------------------- botocore oracles


@pytest.mark.parametrize("signer", SIGNERS)
@pytest.mark.parametrize("key", KEYS)
def test_botocore_signed_objects_are_accepted(signer: str, key: str) -> None:
    params = {"Bucket": "bucket", "Key": key, "Body": b"hello", "Metadata": {"note": " two  spaces "}}
    verified = auth(SIGNERS[signer]("put_object", params))
    assert verified.access_key_id == KEY
    if verified.payload is not PayloadMode.NONE:  # SigV4 over plain HTTP: botocore signs the body's sha256
        assert verified.payload is PayloadMode.SIGNED
        verified.verify_payload("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        with pytest.raises(BadDigest):
            verified.verify_payload(EMPTY_SHA256)


SUBRESOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "create multipart (?uploads)": ("create_multipart_upload", {"Bucket": "b", "Key": "k e+y"}),
    "upload part": ("upload_part", {"Bucket": "b", "Key": "k", "UploadId": "a/b+c=", "PartNumber": 2}),
    "list prefix and delimiter": ("list_objects_v2", {"Bucket": "b", "Prefix": "a/b c", "Delimiter": "/"}),
    "delete objects (?delete)": ("delete_objects", {"Bucket": "b", "Delete": {"Objects": [{"Key": "k"}]}}),
    "versioned get with overrides": ("get_object", {"Bucket": "b", "Key": "k", "VersionId": "v 1",
                                                    "ResponseContentType": "text/plain; charset=utf-8"}),
}  # fmt: skip


@pytest.mark.parametrize("signer", SIGNERS)
@pytest.mark.parametrize("operation", SUBRESOURCES)
def test_botocore_signed_subresource_queries_are_accepted(signer: str, operation: str) -> None:
    request = SIGNERS[signer](*SUBRESOURCES[operation])
    assert request.raw_query  # the operation does carry a query
    assert auth(request).access_key_id == KEY


@pytest.mark.parametrize("version", ["s3v4", "s3"])
@pytest.mark.parametrize("key", KEYS[:4])
def test_presigned_urls_are_accepted_until_they_expire(version: str, key: str) -> None:
    params = {"Bucket": "b", "Key": key, "VersionId": "v+1"}
    parts = urlsplit(client(version).generate_presigned_url("get_object", Params=params, ExpiresIn=600))
    request = Request("GET", parts.path, parts.query, {"host": parts.netloc})
    assert auth(request).payload is PayloadMode.NONE
    with pytest.raises(RequestExpired):
        auth(request, time.time() + 601)
    longer = re.sub(r"(?<=Expires=)[0-9]+", lambda m: f"{int(m[0]) + 1}", parts.query)
    with pytest.raises(SignatureMismatch):
        auth(replace(request, raw_query=longer))


@pytest.mark.parametrize(
    "signer", [S3SigV4QueryAuth(CREDENTIALS, "s3", "us-east-1", 60), HmacV1QueryAuth(CREDENTIALS, 60)]
)
def test_botocore_query_signers(signer: Any) -> None:
    request = AWSRequest(method="PUT", url=f"{ENDPOINT}/b/a%20b%2Bc?uploadId=x%2By&partNumber=3")
    signer.add_auth(request)
    signed = to_request(request.prepare())
    assert auth(signed).access_key_id == KEY
    with pytest.raises(SignatureMismatch):
        auth(replace(signed, raw_query=signed.raw_query.replace("partNumber=3", "partNumber=4")))


def test_streaming_and_unsigned_payload_modes() -> None:
    trailer = AWSRequest(method="PUT", url=f"{ENDPOINT}/b/k", headers={"Content-Encoding": "aws-chunked"})
    trailer.context["checksum"] = {"request_algorithm": {"in": "trailer", "name": "x-amz-checksum-crc32"}}
    v4_auth("us-east-1").add_auth(trailer)
    verified = auth(to_request(trailer.prepare()))
    assert verified.payload is PayloadMode.STREAMING_UNSIGNED_TRAILER and verified.chunk_signer is None
    unsigned = AWSRequest(method="PUT", url=f"https{ENDPOINT[4:]}/b/k", data=b"x")
    unsigned.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    v4_auth("us-east-1").add_auth(unsigned)
    assert auth(to_request(unsigned.prepare())) == Verified(KEY, PayloadMode.UNSIGNED)


FORMS = {  # (what the client signed, what arrives): the signature binds the path's and query's meaning
    "sub-delims left raw in the path, signed as sent": ("/b/a=b@c!", "/b/a=b@c!", True),
    "path signed AWS-encoded, sub-delims sent raw": ("/b/a%3Db%40c%21", "/b/a=b@c!", True),
    "lower-case escapes sent": ("/b/%C3%BC", "/b/%c3%bc", True),
    "an encoded slash is not a slash": ("/b/a%2Fb", "/b/a/b", False),
    "a raw query signed as sent": ("/b?prefix=a/b", "/b?prefix=a/b", True),
    "query signed AWS-encoded, sent form-encoded": ("/b?prefix=a%2Fb&q=a%20b", "/b?prefix=a/b&q=a+b", True),
    "an encoded plus is not a space": ("/b?q=a%2Bb", "/b?q=a+b", False),
}


@pytest.mark.parametrize("case", FORMS)
def test_paths_and_queries_encoded_otherwise_than_signed(case: str) -> None:
    signed_target, sent_target, accepted = FORMS[case]
    request = AWSRequest(method="GET", url=ENDPOINT + signed_target)
    v4_auth("us-east-1").add_auth(request)
    path, _, query = sent_target.partition("?")
    sent_request = replace(to_request(request.prepare()), raw_path=path, raw_query=query)
    if accepted:
        assert auth(sent_request).access_key_id == KEY
    else:
        with pytest.raises(SignatureMismatch):
            auth(sent_request)


# ---------------------------------------------------------------------------------- tampering


def signed_part() -> Request:
    return to_request(sent("upload_part", Bucket="b", Key="a b", UploadId="u1", PartNumber=2, Body=b"data"))


def later(amz_date: str) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch(amz_date) + 1))


TAMPERED: dict[str, tuple[Callable[[Request], Request], type[LakectlError]]] = {
    "method": (lambda r: replace(r, method="POST"), SignatureMismatch),
    "path": (lambda r: replace(r, raw_path=r.raw_path.replace("a%20b", "a%20c")), SignatureMismatch),
    "query value": (lambda r: replace(r, raw_query=r.raw_query.replace("=2", "=3")), SignatureMismatch),
    "added query": (lambda r: replace(r, raw_query=r.raw_query + "&versionId=1"), SignatureMismatch),
    "signed header": (lambda r: replace(r, {"x-amz-checksum-crc32": "AAAAAA=="}), SignatureMismatch),
    "payload claim": (lambda r: replace(r, {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}), SignatureMismatch),
    "host": (lambda r: replace(r, {"host": "evil.example"}), SignatureMismatch),
    "date (+1s)": (lambda r: replace(r, {"x-amz-date": later(r.headers["x-amz-date"])}), SignatureMismatch),
    "signature": (lambda r: replace(r, {"authorization": r.headers["authorization"][:-4] + "0000"}),
                  SignatureMismatch),
    "access key": (lambda r: replace(r, {"authorization": r.headers["authorization"].replace(KEY, "AKIDX")}),
                   InvalidAccessKey),
    "dropped signed header": (lambda r: Request(r.method, r.raw_path, r.raw_query, {
        k: v for k, v in r.headers.items() if k != "x-amz-sdk-checksum-algorithm"}), SignatureMismatch),
}  # fmt: skip


@pytest.mark.parametrize("case", TAMPERED)
def test_tampered_requests_are_refused(case: str) -> None:
    request = signed_part()
    auth(request)
    tamper, error = TAMPERED[case]
    with pytest.raises(error) as raised:
        auth(tamper(request))
    assert type(raised.value) is error and SECRET not in raised.value.message


def test_wrong_secret_and_clock_skew() -> None:
    request = signed_part()
    with pytest.raises(SignatureMismatch):
        auth(request, secrets=lambda _: SECRET + "x")
    assert auth(request, time.time() + 14 * 60).access_key_id == KEY
    for skew in (16 * 60, -16 * 60):
        with pytest.raises(RequestExpired, match="clock skew"):
            auth(request, time.time() + skew)


STAMP = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
"""One moment for every hand-made request of this module, so that a run across midnight UTC does
not give a request a date other than its credential scope's."""
TODAY = STAMP[:8]
V4 = f"AWS4-HMAC-SHA256 Credential={KEY}/{TODAY}/r/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256"
V4 += ";x-amz-date"
SIG = f"Signature={'0' * 64}"
PRESIGNED = (
    f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={KEY}%2F{TODAY}%2Fr%2Fs3%2Faws4_request"
    f"&X-Amz-Date={TODAY}T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature={'0' * 64}"
)


def almost(query: str = "", path: str = "/b/k", **headers: str | None) -> Request:
    """A well-formed request with a wrong signature, but for the ``headers`` changed (None: removed)."""
    base = {"host": "h", "x-amz-date": STAMP,
            "x-amz-content-sha256": EMPTY_SHA256, "authorization": f"{V4}, {SIG}"}  # fmt: skip
    base.update({k.replace("_", "-"): v for k, v in headers.items()})
    return Request("GET", path, query, {k: v for k, v in base.items() if v is not None})


def signed_with(authorization: str) -> Request:
    return almost(authorization=f"{authorization}, {SIG}")


def presigned(query: str) -> Request:
    return almost(query=query, authorization=None)


MALFORMED: dict[str, tuple[Request, str]] = {
    "unknown scheme": (almost(authorization="Bearer x"), "neither"),
    "missing Signature": (almost(authorization=V4), "lacks one of"),
    "unknown field": (signed_with(f"{V4}, {SIG}, Extra=1"), "must be Credential"),
    "short signature": (almost(authorization=f"{V4}, Signature=abc"), "64 hexadecimal"),
    "service not s3": (signed_with(V4.replace("/s3/", "/ec2/")), "service s3"),
    "bad credential date": (signed_with(V4.replace(TODAY, "20131324")), "yyyymmdd"),
    "scope date not the request's": (signed_with(V4.replace(TODAY, "20130524")), "scope"),
    "host not signed": (signed_with(V4.replace("host;", "")), "host header"),
    "no x-amz-content-sha256": (almost(x_amz_content_sha256=None), "needs an x-amz-content-sha256"),
    "x-amz-content-sha256 unsigned": (signed_with(V4.replace("x-amz-content-sha256;", "")), "must be one"),
    "bad payload claim": (almost(x_amz_content_sha256="STREAMING-X"), "UNSIGNED-PAYLOAD"),
    "bad x-amz-date": (almost(x_amz_date=f"{TODAY}T250000Z"), "not a valid date"),
    "no date": (almost(x_amz_date=None), "needs an x-amz-date or Date"),
    "two mechanisms": (almost(query=PRESIGNED), "only one"),
    "presigned for 8 days": (presigned(PRESIGNED.replace("Expires=60", "Expires=691200")), "X-Amz-Expires"),
    "presigned twice signed": (presigned(PRESIGNED + "&X-Amz-Signature=1"), "more than once"),
    "presigned missing date": (presigned(PRESIGNED.replace("&X-Amz-Date", "&X")), "lacks"),
    "sigv2 without colon": (almost(authorization="AWS keyonly"), "AWS <access key>:<signature>"),
    "sigv2 query without Expires": (presigned("AWSAccessKeyId=a&Signature=b"), "Expires"),
    "path not ASCII": (almost(path="/b/ü"), "percent-encoded ASCII"),
}  # fmt: skip


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_requests_are_invalid_arguments(case: str) -> None:
    request, message = MALFORMED[case]
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        auth(request)


def test_the_well_formed_base_fails_only_its_signature_and_anonymous_is_unauthenticated() -> None:
    with pytest.raises(SignatureMismatch):
        auth(almost())
    with pytest.raises(SignatureMismatch):
        auth(presigned(PRESIGNED), epoch(f"{TODAY}T000000Z"))
    with pytest.raises(Unauthenticated) as raised:
        auth(almost(authorization=None))
    assert type(raised.value) is Unauthenticated


# ---------------------------------------------------------------------------------- properties


@BOUNDED
@given(
    key=st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    sv=st.sampled_from(["s3v4", "s3"]),
)
def test_any_key_signed_by_botocore_is_accepted(key: str, sv: str) -> None:
    assert auth(to_request(sent("head_object", sv, Bucket="b", Key=key))).access_key_id == KEY


junk_text = st.text(max_size=80) | st.sampled_from(["AWS4-HMAC-SHA256 ", "AWS ", "X-Amz-", "%", "=", "&"])
junk_auth = st.builds(lambda a, b: a + b, st.sampled_from(["AWS4-HMAC-SHA256 ", "AWS ", V4, ""]), junk_text)
query_names = st.sampled_from(["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                               "X-Amz-SignedHeaders", "X-Amz-Signature", "AWSAccessKeyId", "Signature",
                               "Expires"])  # fmt: skip
junk_query = st.lists(st.tuples(query_names | junk_text, junk_text), max_size=6).map(
    lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)
)
header_names = st.sampled_from(["authorization", "x-amz-date", "date", "x-amz-content-sha256", "host"])
header_values = junk_text | junk_auth | st.sampled_from(["20130524T000000Z", "Fri, 24 May 2013 00:00:00 GMT"])


@BOUNDED
@given(st.text(max_size=8), st.sampled_from(["/", "/b/k", ""]) | junk_text, junk_query,
       st.dictionaries(header_names | junk_text, header_values))  # fmt: skip
def test_junk_raises_only_lakectl_errors(method: str, path: str, query: str, headers: dict[str, str]) -> None:
    with contextlib.suppress(LakectlError):
        auth(Request(method, path, query, headers), DOC_NOW)


@BOUNDED
@given(data=st.data())
def test_mutated_signed_requests_raise_only_lakectl_errors(data: st.DataObject) -> None:
    request = signed_part()
    field = data.draw(st.sampled_from(["raw_path", "raw_query", *request.headers]))
    original = getattr(request, field) if field.startswith("raw_") else request.headers[field]
    at = data.draw(st.integers(0, len(original)))
    mutated = original[:at] + data.draw(st.text(max_size=3)) + original[at + data.draw(st.integers(0, 3)) :]
    headers, fields = ({}, {field: mutated}) if field.startswith("raw_") else ({field: mutated}, {})
    with contextlib.suppress(LakectlError):
        auth(replace(request, headers, **fields))
