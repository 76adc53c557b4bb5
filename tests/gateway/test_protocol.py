"""Protocol features no Python client exercises by default, sent by hand: signed streaming
chunks (as the AWS Java SDK and Hadoop s3a send them) and virtual-host-style addressing."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.gateway.conftest import Gateway

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def streaming_put(
    gateway: Gateway, path: str, chunks: list[bytes], tamper: int | None = None
) -> httpx.Response:
    """A PUT whose body is aws-chunked with per-chunk signatures chained from the seed signature
    (computed here from the AWS specification, independently of the server's code)."""
    key_id, secret = gateway.keys["admin"]
    now = time.gmtime()
    amz_date, day = time.strftime("%Y%m%dT%H%M%SZ", now), time.strftime("%Y%m%d", now)
    scope = f"{day}/us-east-1/s3/aws4_request"
    decoded = sum(len(c) for c in chunks)
    headers = {
        "x-amz-date": amz_date,
        "x-amz-content-sha256": STREAMING,
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(decoded),
    }
    host = gateway.endpoint.removeprefix("http://")
    signed_headers = sorted([*headers, "host"])
    canonical_headers = "".join(f"{h}:{headers[h] if h != 'host' else host}\n" for h in signed_headers)
    canonical = "\n".join(["PUT", path, "", canonical_headers, ";".join(signed_headers), STREAMING])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), "us-east-1"), "s3"), "aws4_request")
    previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={';'.join(signed_headers)}, "
        f"Signature={previous}"
    )
    body = b""
    for i, chunk in enumerate([*chunks, b""]):
        chunk_to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                amz_date,
                scope,
                previous,
                EMPTY_SHA256,
                hashlib.sha256(chunk).hexdigest(),
            ]
        )
        previous = hmac.new(key, chunk_to_sign.encode(), hashlib.sha256).hexdigest()
        signature = previous if i != tamper else "0" * 64
        body += f"{len(chunk):x};chunk-signature={signature}\r\n".encode() + chunk + b"\r\n"
    headers["authorization"] = authorization
    return httpx.put(gateway.endpoint + path, content=body, headers=headers, timeout=30)


def test_signed_streaming_chunks(gateway: Gateway, s3: Any, bucket: str) -> None:
    chunks = [b"a" * 65536, b"b" * 65536, b"c" * 1024]
    answer = streaming_put(gateway, f"/{bucket}/main/streamed.bin", chunks)
    assert answer.status_code == 200, answer.text
    assert s3.get_object(Bucket=bucket, Key="main/streamed.bin")["Body"].read() == b"".join(chunks)
    refused = streaming_put(gateway, f"/{bucket}/main/forged.bin", chunks, tamper=1)
    assert refused.status_code == 403 and b"SignatureDoesNotMatch" in refused.content
    missing = s3.list_objects_v2(Bucket=bucket, Prefix="main/forged").get("KeyCount")
    assert missing == 0, "a body with one forged chunk stores nothing"


def test_virtual_host_style(gateway: Gateway, s3: Any, bucket: str) -> None:
    """``<bucket>.<domain_name>`` in the Host header addresses the bucket; the path is the key."""
    key_id, secret = gateway.keys["admin"]
    port = gateway.endpoint.rsplit(":", 1)[1]
    virtual = f"http://{bucket}.s3.local.lakefs.io:{port}"

    def send(method: str, key: str, body: bytes = b"") -> httpx.Response:
        request = AWSRequest(method=method, url=f"{virtual}/{key}", data=body)
        S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
        prepared = request.prepare()
        headers = dict(prepared.headers.items())
        headers["Host"] = f"{bucket}.s3.local.lakefs.io:{port}"
        return httpx.request(method, f"{gateway.endpoint}/{key}", content=body, headers=headers, timeout=30)

    assert send("PUT", "main/vhost.txt", b"virtual").status_code == 200
    assert s3.get_object(Bucket=bucket, Key="main/vhost.txt")["Body"].read() == b"virtual"
    assert send("GET", "main/vhost.txt").content == b"virtual"
    listing = send("GET", "?list-type=2&prefix=main%2F")
    assert listing.status_code == 200 and b"<Key>main/vhost.txt</Key>" in listing.content
