"""User metadata through the gateway: UTF-8 header values, S3's 2 KB limit, and stored metadata that
headers cannot carry as is (sent RFC 2047-encoded, as S3 does)."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from lakectl.core import writes
from tests.gateway.conftest import Gateway
from tests.gateway.test_bad_requests import error_code
from tests.server.conftest import changes, plumbing, snapshot


def send_raw_headers(
    gateway: Gateway, method: str, path: str, body: bytes, headers: dict[str, bytes]
) -> httpx.Response:
    """A signed request whose header values are sent as the given bytes (boto3 refuses non-ASCII
    metadata; other clients send UTF-8)."""
    key_id, secret = gateway.keys["admin"]
    as_text = {name: value.decode("latin-1") for name, value in headers.items()}
    request = AWSRequest(method=method, url=gateway.endpoint + path, data=body, headers=as_text)
    request.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    raw = {name: value.encode("latin-1") for name, value in prepared.headers.items()}
    return httpx.request(method, prepared.url, content=body, headers=raw, timeout=30)


def _stat_metadata(gateway: Gateway, bucket: str, path: str) -> dict[str, str]:
    with gateway.rest() as rest:
        r = rest.get(f"/repositories/{bucket}/refs/main/objects/stat", params={"path": path})
        assert r.status_code == 200, r.text
        return dict(r.json()["metadata"])


def test_metadata_header_values_are_read_as_utf8(gateway: Gateway, s3: Any, bucket: str) -> None:
    r = send_raw_headers(gateway, "PUT", f"/{bucket}/main/city", b"x", {"x-amz-meta-city": "Zürich".encode()})
    assert r.status_code == 200, r.text
    assert _stat_metadata(gateway, bucket, "city") == {"city": "Zürich"}  # not "ZÃ¼rich"
    # Read back RFC 2047-encoded, as S3 returns metadata that is not ASCII.
    head = s3.head_object(Bucket=bucket, Key="main/city")
    assert head["Metadata"] == {"city": "=?UTF-8?B?WsO8cmljaA==?="}
    before = snapshot(gateway.data_dir)
    r = send_raw_headers(gateway, "PUT", f"/{bucket}/main/latin1", b"x", {"x-amz-meta-city": b"Z\xfcrich"})
    assert (r.status_code, error_code(r)) == (400, "InvalidArgument"), r.text
    assert "not UTF-8" in r.text
    after = snapshot(gateway.data_dir)
    assert after == before, changes(before, after)


def _refused(call: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as raised:
        call()
    response = raised.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_metadata_over_2kb_is_metadata_too_large(gateway: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/source", Body=b"data")
    big = {"a": "v" * 1024, "b": "v" * 1024}  # 2050 bytes of keys and values
    before = snapshot(gateway.data_dir)
    calls = {
        "PutObject": lambda: s3.put_object(Bucket=bucket, Key="main/big", Body=b"x", Metadata=big),
        "CreateMultipartUpload": lambda: s3.create_multipart_upload(
            Bucket=bucket, Key="main/big", Metadata=big
        ),
        "CopyObject": lambda: s3.copy_object(
            Bucket=bucket,
            Key="main/big",
            CopySource=f"{bucket}/main/source",
            Metadata=big,
            MetadataDirective="REPLACE",
        ),
    }
    for name, call in calls.items():
        assert _refused(call) == (400, "MetadataTooLarge"), name
    # Within S3's 2 KB, lakectl's own limits still hold (a value of at most 4 KiB: here 2 KB is less).
    many = {f"k{i}": "v" for i in range(101)}
    assert _refused(lambda: s3.put_object(Bucket=bucket, Key="main/many", Body=b"x", Metadata=many)) == (
        400,
        "InvalidArgument",
    )
    after = snapshot(gateway.data_dir)
    assert after == before, changes(before, after)
    s3.put_object(Bucket=bucket, Key="main/fits", Body=b"x", Metadata={"a": "v" * 1024, "b": "v" * 1022})


def test_stored_metadata_headers_cannot_carry_as_is_still_reads(
    gateway: Gateway, s3: Any, bucket: str
) -> None:
    """Metadata set through the REST API or the library may hold any text, and keys that are no
    header names; the object still reads (S3 sends such values RFC 2047-encoded, and counts the
    metadata it cannot show in ``x-amz-missing-meta``)."""
    metadata = {"price": "5 €", "with space": "v", "lines": "a\nb", "plain": "ok"}
    with plumbing(gateway.data_dir) as lake:
        writes.upload(lake, bucket, "main", "odd", b"data", "text/plain; charset=€", metadata)
    for method in ("GET", "HEAD"):
        r = send_raw_headers(gateway, method, f"/{bucket}/main/odd", b"", {})
        assert r.status_code == 200, (method, r.text)
        assert r.headers["x-amz-meta-plain"] == "ok"
        assert r.headers["x-amz-meta-price"] == "=?UTF-8?B?NSDigqw=?="
        assert r.headers["x-amz-meta-lines"] == "=?UTF-8?B?YQpi?="
        assert r.headers["x-amz-missing-meta"] == "1"
    assert s3.get_object(Bucket=bucket, Key="main/odd")["Body"].read() == b"data"
