"""boto3 against the live gateway when stored blocks rot or go missing: a PUT of the same bytes
heals a rotten block; lost or damaged data is a 503 (S3 clients retry it, and never take it for
an absent key)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Gateway
from tests.rot import DAMAGE, flip_byte


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
