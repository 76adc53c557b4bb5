"""boto3 against the live gateway: buckets, objects, listings, copies, deletes, refs and access."""

from __future__ import annotations

import hashlib
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Gateway
from tests.server.conftest import snapshot


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def status(exc: pytest.ExceptionInfo[ClientError]) -> int:
    return int(exc.value.response["ResponseMetadata"]["HTTPStatusCode"])


def blocks_on_disk(gateway: Gateway) -> int:
    """The data blocks stored: the journal's log files and sealed batches left out (its keeper
    seals earlier requests' entries whenever it likes)."""
    return sum(1 for name, _ in snapshot(gateway.data_dir)[1] if name.startswith("blocks/"))


def test_put_get_head_roundtrip(s3: Any, bucket: str) -> None:
    data = os.urandom(100_000)
    put = s3.put_object(
        Bucket=bucket, Key="main/data/a.bin", Body=data, ContentType="application/x-test", Metadata={"k": "v"}
    )
    assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="main/data/a.bin")
    assert got["Body"].read() == data
    assert got["ContentType"] == "application/x-test" and got["Metadata"] == {"k": "v"}
    assert got["ETag"] == put["ETag"] and got["ContentLength"] == len(data)
    head = s3.head_object(Bucket=bucket, Key="main/data/a.bin")
    assert head["ContentLength"] == len(data) and head["ETag"] == put["ETag"]
    assert abs(head["LastModified"] - datetime.now(UTC)) < timedelta(minutes=1)


def test_buckets_are_repositories(s3: Any, bucket: str) -> None:
    assert bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket=bucket)
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] in (None, "")
    with pytest.raises(ClientError) as missing:
        s3.head_bucket(Bucket="no-such-repo")
    assert status(missing) == 404
    with pytest.raises(ClientError) as missing_get:
        s3.get_object(Bucket="no-such-repo", Key="main/x")
    assert code(missing_get) == "NoSuchBucket"


def test_ranges_and_conditions(s3: Any, bucket: str) -> None:
    data = bytes(range(256)) * 40
    etag = s3.put_object(Bucket=bucket, Key="main/r.bin", Body=data)["ETag"]
    assert s3.get_object(Bucket=bucket, Key="main/r.bin", Range="bytes=10-19")["Body"].read() == data[10:20]
    suffix = s3.get_object(Bucket=bucket, Key="main/r.bin", Range="bytes=-100")
    assert (
        suffix["Body"].read() == data[-100:]
        and suffix["ContentRange"] == f"bytes {len(data) - 100}-{len(data) - 1}/{len(data)}"
    )
    assert s3.get_object(Bucket=bucket, Key="main/r.bin", Range="bytes=10000-")["Body"].read() == data[10000:]
    with pytest.raises(ClientError) as bad_range:
        s3.get_object(Bucket=bucket, Key="main/r.bin", Range=f"bytes={len(data)}-")
    assert code(bad_range) == "InvalidRange" and status(bad_range) == 416
    assert s3.get_object(Bucket=bucket, Key="main/r.bin", IfMatch=etag)["Body"].read() == data
    with pytest.raises(ClientError) as not_modified:
        s3.get_object(Bucket=bucket, Key="main/r.bin", IfNoneMatch=etag)
    assert status(not_modified) == 304
    with pytest.raises(ClientError) as failed:
        s3.get_object(Bucket=bucket, Key="main/r.bin", IfMatch='"0123"')
    assert code(failed) == "PreconditionFailed" and status(failed) == 412
    future = datetime.now(UTC) + timedelta(days=1)
    with pytest.raises(ClientError) as unmodified:
        s3.get_object(Bucket=bucket, Key="main/r.bin", IfModifiedSince=future)
    assert status(unmodified) == 304
    with pytest.raises(ClientError) as modified:
        s3.get_object(Bucket=bucket, Key="main/r.bin", IfUnmodifiedSince=datetime(2000, 1, 1, tzinfo=UTC))
    assert status(modified) == 412


def test_missing_keys(s3: Any, bucket: str) -> None:
    for key in ("main/nothing", "nobranch/x"):
        with pytest.raises(ClientError) as missing:
            s3.get_object(Bucket=bucket, Key=key)
        assert code(missing) == "NoSuchKey"


def test_listing_v2_branches_prefixes_and_pages(s3: Any, bucket: str, gateway: Gateway) -> None:
    with gateway.rest() as rest:
        assert (
            rest.post(f"/repositories/{bucket}/branches", json={"name": "dev", "source": "main"}).status_code
            == 201
        )
    keys = [f"main/d/{i:02d}.txt" for i in range(7)] + ["main/top.txt", "main/e/x y+z.txt"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["dev/", "main/"]
    level = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="/")
    assert [c["Key"] for c in level["Contents"]] == ["main/top.txt"]
    assert [p["Prefix"] for p in level["CommonPrefixes"]] == ["main/d/", "main/e/"]
    seen: list[str] = []
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": "main/", "MaxKeys": 4}
    while True:
        page = s3.list_objects_v2(**kwargs)
        seen += [c["Key"] for c in page.get("Contents", [])]
        assert page["KeyCount"] == len(page.get("Contents", []))
        if not page["IsTruncated"]:
            break
        kwargs["ContinuationToken"] = page["NextContinuationToken"]
    assert seen == sorted(keys)
    after = s3.list_objects_v2(Bucket=bucket, Prefix="main/d/", StartAfter="main/d/04.txt")
    assert [c["Key"] for c in after["Contents"]] == ["main/d/05.txt", "main/d/06.txt"]
    # Asked for explicitly, encoded keys reach the caller as sent (botocore decodes only when it
    # added encoding-type=url itself, as in every call above: "x y+z.txt" came back whole).
    encoded = s3.list_objects_v2(Bucket=bucket, Prefix="main/e/", EncodingType="url")
    assert [c["Key"] for c in encoded["Contents"]] == ["main/e/x%20y%2Bz.txt"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="dev/").get("KeyCount") == 0
    assert s3.list_objects_v2(Bucket=bucket, Prefix="nobranch/").get("KeyCount") == 0


def test_listing_v1_with_markers(s3: Any, bucket: str) -> None:
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"main/k{i}", Body=b"x")
    first = s3.list_objects(Bucket=bucket, Prefix="main/", MaxKeys=2)
    assert [c["Key"] for c in first["Contents"]] == ["main/k0", "main/k1"] and first["IsTruncated"]
    rest = s3.list_objects(Bucket=bucket, Prefix="main/", Marker="main/k1")
    assert [c["Key"] for c in rest["Contents"]] == ["main/k2", "main/k3", "main/k4"]
    assert not rest["IsTruncated"]


def test_copy_reuses_blocks_within_and_across_branches(s3: Any, bucket: str, gateway: Gateway) -> None:
    with gateway.rest() as rest:
        assert (
            rest.post(
                f"/repositories/{bucket}/branches", json={"name": "other", "source": "main"}
            ).status_code
            == 201
        )
    data = os.urandom(300_000)
    s3.put_object(Bucket=bucket, Key="main/src.bin", Body=data, Metadata={"a": "1"})
    before = blocks_on_disk(gateway)
    block_files = [p for p in (gateway.data_dir / "blocks").rglob("*") if p.is_file()]
    past = time.time() - 3600
    for path in block_files:
        os.utime(path, (past, past))
    s3.copy_object(Bucket=bucket, Key="main/copy.bin", CopySource={"Bucket": bucket, "Key": "main/src.bin"})
    source_blocks = [p for p in block_files if p.stat().st_mtime > past + 60]
    assert source_blocks, "a copy touches the blocks it reuses (a concurrent GC then spares them)"
    s3.copy_object(Bucket=bucket, Key="other/copy.bin", CopySource=f"{bucket}/main/src.bin")
    assert blocks_on_disk(gateway) == before, "a copy must not write data"
    for key in ("main/copy.bin", "other/copy.bin"):
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["Body"].read() == data and got["Metadata"] == {"a": "1"}
    s3.copy_object(
        Bucket=bucket,
        Key="main/replaced.bin",
        CopySource=f"{bucket}/main/src.bin",
        MetadataDirective="REPLACE",
        Metadata={"b": "2"},
        ContentType="text/plain",
    )
    replaced = s3.head_object(Bucket=bucket, Key="main/replaced.bin")
    assert replaced["Metadata"] == {"b": "2"} and replaced["ContentType"] == "text/plain"


def test_deletes(s3: Any, bucket: str) -> None:
    for key in ("main/a", "main/b", "main/c"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"1")
    s3.delete_object(Bucket=bucket, Key="main/a")
    s3.delete_object(Bucket=bucket, Key="main/never-existed")  # 204 as S3
    answer = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "main/b"}, {"Key": "main/zz"}, {"Key": "bad"}]}
    )
    assert sorted(d["Key"] for d in answer["Deleted"]) == ["main/b", "main/zz"]
    assert [e["Key"] for e in answer["Errors"]] == ["bad"]
    remaining = s3.list_objects_v2(Bucket=bucket, Prefix="main/")
    assert [c["Key"] for c in remaining["Contents"]] == ["main/c"]


def test_refs_are_readable_and_only_branches_writable(s3: Any, bucket: str, gateway: Gateway) -> None:
    s3.put_object(Bucket=bucket, Key="main/v.txt", Body=b"version 1")
    with gateway.rest() as rest:
        commit = rest.post(f"/repositories/{bucket}/branches/main/commits", json={"message": "v1"}).json()
        assert rest.post(f"/repositories/{bucket}/tags", json={"id": "v1", "ref": "main"}).status_code == 201
    s3.put_object(Bucket=bucket, Key="main/v.txt", Body=b"version 2")
    assert s3.get_object(Bucket=bucket, Key=f"{commit['id']}/v.txt")["Body"].read() == b"version 1"
    assert s3.get_object(Bucket=bucket, Key="v1/v.txt")["Body"].read() == b"version 1"
    assert s3.get_object(Bucket=bucket, Key="main/v.txt")["Body"].read() == b"version 2"
    for ref in ("v1", commit["id"]):
        with pytest.raises(ClientError) as refused:
            s3.put_object(Bucket=bucket, Key=f"{ref}/v.txt", Body=b"no")
        assert code(refused) == "MethodNotAllowed" and status(refused) == 405
    assert s3.get_object(Bucket=bucket, Key="v1/v.txt")["Body"].read() == b"version 1"


def test_bad_credentials_and_roles_change_nothing(gateway: Gateway, s3: Any, bucket: str) -> None:
    _, secret = gateway.keys["admin"]
    wrong = gateway.client()
    wrong._request_signer._credentials.secret_key = secret[:-1] + ("x" if secret[-1] != "x" else "y")
    with pytest.raises(ClientError) as mismatch:
        wrong.put_object(Bucket=bucket, Key="main/w", Body=b"no")
    assert code(mismatch) == "SignatureDoesNotMatch" and status(mismatch) == 403
    unknown = gateway.client()
    unknown._request_signer._credentials.access_key = "AKIAUNKNOWN000000000"
    with pytest.raises(ClientError) as unknown_key:
        unknown.list_buckets()
    assert code(unknown_key) == "InvalidAccessKeyId"
    analyst = gateway.client("analyst")
    s3.put_object(Bucket=bucket, Key="main/r", Body=b"readable")
    assert analyst.get_object(Bucket=bucket, Key="main/r")["Body"].read() == b"readable"
    for call in (
        lambda: analyst.put_object(Bucket=bucket, Key="main/w", Body=b"no"),
        lambda: analyst.delete_object(Bucket=bucket, Key="main/r"),
        lambda: analyst.copy_object(Bucket=bucket, Key="main/w", CopySource=f"{bucket}/main/r"),
    ):
        with pytest.raises(ClientError) as denied:
            call()
        assert code(denied) == "AccessDenied"
    developer = gateway.client("developer")
    developer.put_object(Bucket=bucket, Key="main/dev", Body=b"ok")
    assert sorted(c["Key"] for c in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]) == [
        "main/dev",
        "main/r",
    ]
