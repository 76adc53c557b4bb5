"""boto3 against the live gateway when stored blocks rot or go missing: a PUT of the same bytes
heals a rotten block; lost or damaged data is a 503 (S3 clients retry it, and never take it for
an absent key)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.exceptions import ClientError, ResponseStreamingError

from tests.gateway.conftest import Gateway
from tests.rot import DAMAGE, flip_byte, signed_manifest_of_blocks


def test_put_over_a_rotten_block_heals_it(gateway: Gateway, s3: Any, bucket: str) -> None:
    data = os.urandom(150_000)
    s3.put_object(Bucket=bucket, Key="main/first.bin", Body=data)
    flip_byte(gateway.data_dir / "blocks", data, 77)
    s3.put_object(Bucket=bucket, Key="main/again.bin", Body=data)
    for key in ("main/first.bin", "main/again.bin"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_get_of_lost_or_damaged_data_is_503_not_no_such_key(
    gateway: Gateway, s3: Any, bucket: str, damage: str
) -> None:
    data = os.urandom(60_000)
    s3.put_object(Bucket=bucket, Key="main/data.bin", Body=data)
    DAMAGE[damage](gateway.data_dir / "blocks", data)
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key="main/data.bin")
    assert info.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    # HEAD answers from metadata and reads no block: the key exists.
    assert s3.head_object(Bucket=bucket, Key="main/data.bin")["ContentLength"] == len(data)


PART = 512 * 1024


def several_blocks(gateway: Gateway, bucket: str, path: str, count: int = 4) -> list[bytes]:
    """An object of ``count`` blocks of 512 KiB (more than the 1 MiB read inline: streamed)."""
    parts = [os.urandom(PART) for _ in range(count)]
    with gateway.rest() as rest:
        text = signed_manifest_of_blocks(rest, path, parts)
        r = rest.post(f"/repositories/{bucket}/branches/main/manifest", content=text)
        assert r.status_code == 200, r.text
    return parts


def test_streamed_get_with_a_damaged_first_block_is_a_503(gateway: Gateway, s3: Any, bucket: str) -> None:
    parts = several_blocks(gateway, bucket, "big.bin")
    flip_byte(gateway.data_dir / "blocks", parts[0], PART - 1)
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key="main/big.bin")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_streamed_get_with_a_damaged_later_block_fails_the_reader(
    gateway: Gateway, s3: Any, bucket: str, damage: str
) -> None:
    """The 200 is out when the last block fails: boto3 must raise while reading the body (the
    connection ends short of its Content-Length), never hand back a short object."""
    parts = several_blocks(gateway, bucket, "big.bin")
    DAMAGE[damage](gateway.data_dir / "blocks", parts[3])
    got = s3.get_object(Bucket=bucket, Key="main/big.bin")
    assert got["ContentLength"] == 4 * PART
    with pytest.raises(ResponseStreamingError, match="IncompleteRead"):
        got["Body"].read()
