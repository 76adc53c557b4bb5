"""Malformed and lying requests to the gateway: a clear S3 error, never a 5xx, nothing stored."""

from __future__ import annotations

import base64
import hashlib
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.conftest import Gateway

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def signed(
    gateway: Gateway,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    payload_sha256: str | None = None,
) -> httpx.Response:
    """A request signed with the admin's key by botocore's SigV4 signer, sent by httpx. With
    ``payload_sha256`` the body's hash is claimed as given (the base signer signs the header
    as it is; the S3 signer would recompute it from the body)."""
    key_id, secret = gateway.keys["admin"]
    request = AWSRequest(method=method, url=gateway.endpoint + path, data=body, headers=dict(headers or {}))
    request.headers["x-amz-content-sha256"] = payload_sha256 or hashlib.sha256(body).hexdigest()
    signer = SigV4Auth if payload_sha256 else S3SigV4Auth
    signer(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return httpx.request(
        method, prepared.url, content=body, headers=dict(prepared.headers.items()), timeout=30
    )


def error_code(response: httpx.Response) -> str:
    text = response.text
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0] if "<Code>" in text else ""


def listed(s3: Any, bucket: str) -> list[str]:
    return [c["Key"] for c in s3.list_objects_v2(Bucket=bucket, Prefix="main/").get("Contents", [])]


def test_bodies_that_do_not_match_their_claims_store_nothing(gateway: Gateway, s3: Any, bucket: str) -> None:
    body = b"the real bytes"
    wrong_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    r = signed(gateway, "PUT", f"/{bucket}/main/md5", body, {"Content-MD5": wrong_md5})
    assert (r.status_code, error_code(r)) == (400, "BadDigest")
    r = signed(gateway, "PUT", f"/{bucket}/main/crc", body, {"x-amz-checksum-crc32": "AAAAAA=="})
    assert (r.status_code, error_code(r)) == (400, "BadDigest")
    r = signed(gateway, "PUT", f"/{bucket}/main/sha", body, payload_sha256=hashlib.sha256(b"x").hexdigest())
    assert (r.status_code, error_code(r)) == (400, "BadDigest"), r.text
    r = signed(gateway, "PUT", f"/{bucket}/main/bad-md5", body, {"Content-MD5": "not base64!"})
    assert r.status_code == 400
    assert listed(s3, bucket) == []


def test_a_truncated_upload_stores_nothing(gateway: Gateway, s3: Any, bucket: str) -> None:
    key_id, secret = gateway.keys["admin"]
    body = b"x" * 100_000
    request = AWSRequest(method="PUT", url=f"{gateway.endpoint}/{bucket}/main/cut", data=body)
    request.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    host = urlsplit(gateway.endpoint)
    head = f"PUT /{bucket}/main/cut HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in request.headers.items()
    )
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection((host.hostname, host.port)) as sock:
        sock.sendall(head.encode() + body[:40_000])  # then the client dies
    s3.put_object(Bucket=bucket, Key="main/after", Body=b"the server still serves")
    assert listed(s3, bucket) == ["main/after"]


def test_malformed_documents(gateway: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/keep", Body=b"1")
    for document in (b"<Delete><Object><Key>main/keep", b"not xml", b"<Other/>", b"<!DOCTYPE x []><Delete/>"):
        md5 = base64.b64encode(hashlib.md5(document).digest()).decode()
        r = signed(gateway, "POST", f"/{bucket}?delete", document, {"Content-MD5": md5})
        assert r.status_code == 400, r.text
    uid = s3.create_multipart_upload(Bucket=bucket, Key="main/mp")["UploadId"]
    for document in (b"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber></Part>", b"<Complete/>"):
        r = signed(gateway, "POST", f"/{bucket}/main/mp?uploadId={uid}", document)
        assert r.status_code == 400, r.text
    assert listed(s3, bucket) == ["main/keep"]


def test_unsigned_and_forged_requests_change_nothing(gateway: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/keep", Body=b"1")
    for method, path in (("PUT", f"/{bucket}/main/x"), ("DELETE", f"/{bucket}/main/keep"), ("GET", "/")):
        r = httpx.request(method, gateway.endpoint + path, content=b"data")
        assert r.status_code == 403 and error_code(r) == "AccessDenied"
    forged = {
        "Authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=" + "0" * 64
    }
    r = httpx.delete(f"{gateway.endpoint}/{bucket}/main/keep", headers=forged)
    assert r.status_code == 400, "no x-amz-date or x-amz-content-sha256: a malformed request"
    key_id, _ = gateway.keys["admin"]
    now = time.gmtime()
    complete = {
        "Authorization": f"AWS4-HMAC-SHA256 Credential={key_id}/{time.strftime('%Y%m%d', now)}/us-east-1/s3/"
        "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + "0" * 64,
        "x-amz-date": time.strftime("%Y%m%dT%H%M%SZ", now),
        "x-amz-content-sha256": EMPTY_SHA256,
    }
    r = httpx.delete(f"{gateway.endpoint}/{bucket}/main/keep", headers=complete)
    assert (r.status_code, error_code(r)) == (403, "SignatureDoesNotMatch")
    assert listed(s3, bucket) == ["main/keep"]


methods = st.sampled_from(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"])
segments = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
queries = st.sampled_from(
    [
        "",
        "?uploads",
        "?uploadId=zz",
        "?uploadId=",
        "?partNumber=0&uploadId=a",
        "?delete",
        "?list-type=2&max-keys=x",
        "?location",
        "?versioning",
        "?continuation-token=%%%",
        "?encoding-type=zip",
        "?marker=%7F%00",
    ]
)
junk_headers = st.dictionaries(
    st.sampled_from(
        [
            "Range",
            "If-Match",
            "If-Modified-Since",
            "x-amz-copy-source",
            "Content-MD5",
            "x-amz-checksum-crc64nvme",
            "x-amz-metadata-directive",
            "x-amz-copy-source-range",
            "x-amz-decoded-content-length",
            "Content-Type",
        ]
    ),
    # (stripped: h11 refuses to send a value with surrounding whitespace)
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30).map(str.strip),
    max_size=3,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=methods, a=segments, b=segments, query=queries, headers=junk_headers, body=st.binary(max_size=64)
)
def test_signed_junk_never_gets_a_5xx(
    gateway: Gateway,
    bucket: str,
    method: str,
    a: str,
    b: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
) -> None:
    from urllib.parse import quote

    path = f"/{bucket}/{quote(a, safe='/')}/{quote(b, safe='')}{query}"
    r = signed(gateway, method, path, body, headers)
    assert r.status_code < 500, (method, path, headers, r.status_code, r.text[:300])
