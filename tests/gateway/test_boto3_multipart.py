"""boto3 multipart uploads and presigned URLs against the live gateway."""

from __future__ import annotations

import hashlib
import io
import os
import time
from typing import Any

import httpx
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.gateway.conftest import Gateway
from tests.gateway.test_boto3_objects import blocks_on_disk, code

MIB = 1024 * 1024


def multipart_etag(parts: list[bytes]) -> str:
    digest = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    return f'"{digest}-{len(parts)}"'


def test_upload_file_goes_multipart(s3: Any, bucket: str, tmp_path: Any) -> None:
    data = os.urandom(20 * MIB + 12345)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    config = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=4)
    s3.upload_file(str(src), bucket, "main/big.bin", Config=config)
    head = s3.head_object(Bucket=bucket, Key="main/big.bin")
    parts = [data[i : i + 8 * MIB] for i in range(0, len(data), 8 * MIB)]
    assert head["ETag"] == multipart_etag(parts) and head["ContentLength"] == len(data)
    out = tmp_path / "back.bin"
    s3.download_file(bucket, "main/big.bin", str(out), Config=config)
    assert out.read_bytes() == data


def test_the_multipart_protocol(s3: Any, bucket: str, gateway: Gateway) -> None:
    key = "main/mp.bin"
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key=key, ContentType="application/x-mp", Metadata={"m": "1"}
    )
    uid = upload["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [uid]
    one, two = os.urandom(5 * MIB), os.urandom(1000)
    # Parts may arrive out of order and be replaced.
    e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2, Body=b"replaced")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2, Body=two)["ETag"]
    e1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=one)["ETag"]
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == [(1, e1, len(one)), (2, e2, len(two))]
    for parts, expected in (
        ([(2, e2), (1, e1)], "InvalidPartOrder"),
        ([(1, e1), (2, '"00000000000000000000000000000000"')], "InvalidPart"),
        ([(1, e1), (3, e2)], "InvalidPart"),
    ):
        with pytest.raises(ClientError) as refused:
            s3.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=uid,
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
            )
        assert code(refused) == expected
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key=key)
    assert code(missing) == "404", "a refused completion stages nothing"
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    assert done["ETag"] == multipart_etag([one, two])
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == one + two
    assert got["ContentType"] == "application/x-mp" and got["Metadata"] == {"m": "1"}
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(ClientError) as gone:
        s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)
    assert code(gone) == "NoSuchUpload"


def test_small_parts_abort_and_part_copies(s3: Any, bucket: str, gateway: Gateway) -> None:
    key = "main/small.bin"
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=b"tiny")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=2, Body=b"end")["ETag"]
    with pytest.raises(ClientError) as small:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
        )
    assert code(small) == "EntityTooSmall"
    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)
    with pytest.raises(ClientError) as aborted:
        s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=3, Body=b"late")
    assert code(aborted) == "NoSuchUpload"

    source = os.urandom(6 * MIB)
    s3.put_object(Bucket=bucket, Key="main/source.bin", Body=source)
    before = blocks_on_disk(gateway)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="main/assembled.bin")["UploadId"]
    c1 = s3.upload_part_copy(
        Bucket=bucket,
        Key="main/assembled.bin",
        UploadId=uid,
        PartNumber=1,
        CopySource=f"{bucket}/main/source.bin",
    )["CopyPartResult"]["ETag"]
    c2 = s3.upload_part_copy(
        Bucket=bucket,
        Key="main/assembled.bin",
        UploadId=uid,
        PartNumber=2,
        CopySource=f"{bucket}/main/source.bin",
        CopySourceRange="bytes=100-199",
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="main/assembled.bin",
        UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": c1}, {"PartNumber": 2, "ETag": c2}]},
    )
    assert s3.get_object(Bucket=bucket, Key="main/assembled.bin")["Body"].read() == source + source[100:200]
    assert blocks_on_disk(gateway) == before, "part copies reuse the source's blocks"


@pytest.mark.parametrize("signature", ["s3", "s3v4"])
def test_presigned_get_and_put(gateway: Gateway, bucket: str, signature: str) -> None:
    client = gateway.client(signature_version=signature)
    client.put_object(Bucket=bucket, Key="main/p.txt", Body=b"presigned")
    url = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/p.txt"}, ExpiresIn=60
    )
    assert httpx.get(url).content == b"presigned"
    put_url = client.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "main/q.txt"}, ExpiresIn=60
    )
    assert httpx.put(put_url, content=b"sent by url").status_code == 200
    assert client.get_object(Bucket=bucket, Key="main/q.txt")["Body"].read() == b"sent by url"
    tampered = url.replace("p.txt", "q.txt")
    assert httpx.get(tampered).status_code == 403


def test_expired_presigned_urls_are_refused(gateway: Gateway, bucket: str) -> None:
    client = gateway.client(signature_version="s3v4")
    client.put_object(Bucket=bucket, Key="main/e.txt", Body=b"x")
    url = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/e.txt"}, ExpiresIn=1
    )
    time.sleep(2.1)
    answer = httpx.get(url)
    assert answer.status_code == 403 and b"AccessDenied" in answer.content


def test_streaming_and_checksummed_uploads(gateway: Gateway, bucket: str) -> None:
    """botocore's default checksums (x-amz-checksum-crc32 headers) and an unsigned streaming body
    with a trailer checksum, as pyarrow and botocore-over-HTTPS send them."""
    client = gateway.client(request_checksum_calculation="when_supported")
    data = os.urandom(70_000)
    client.put_object(Bucket=bucket, Key="main/crc.bin", Body=data, ChecksumAlgorithm="CRC32")
    assert client.get_object(Bucket=bucket, Key="main/crc.bin")["Body"].read() == data
    client.upload_fileobj(io.BytesIO(data), bucket, "main/fileobj.bin")
    assert client.get_object(Bucket=bucket, Key="main/fileobj.bin")["Body"].read() == data
