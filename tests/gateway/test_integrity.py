"""boto3 against the live gateway when stored blocks rot or go missing: a PUT of the same bytes
heals a rotten block; lost or damaged data is a 503 (S3 clients retry it, and never take it for
an absent key)."""

from __future__ import annotations

import os
from typing import Any

from tests.gateway.conftest import Gateway
from tests.rot import flip_byte


def test_put_over_a_rotten_block_heals_it(gateway: Gateway, s3: Any, bucket: str) -> None:
    data = os.urandom(150_000)
    s3.put_object(Bucket=bucket, Key="main/first.bin", Body=data)
    flip_byte(gateway.data_dir / "blocks", data, 77)
    s3.put_object(Bucket=bucket, Key="main/again.bin", Body=data)
    for key in ("main/first.bin", "main/again.bin"):
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
