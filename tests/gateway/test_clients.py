"""Real data tools against the live gateway: the aws CLI, pyarrow, pandas over s3fs, polars; and
the workflow the gateway exists for (write a dataset to a branch, commit, read it back at the
commit, merge)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow import fs

from tests.gateway.conftest import Gateway

MIB = 1024 * 1024
AWS = Path(sys.executable).with_name("aws")


def aws(gateway: Gateway, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    key_id, secret = gateway.keys["admin"]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
    }
    out = subprocess.run(
        [str(AWS), "--endpoint-url", gateway.endpoint, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out


def keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    return [c["Key"] for c in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def test_aws_cli_cp_sync_ls_rm(gateway: Gateway, s3: Any, bucket: str, tmp_path: Path) -> None:
    small, big = os.urandom(1000), os.urandom(20 * MIB + 1)
    (tmp_path / "small.bin").write_bytes(small)
    (tmp_path / "big.bin").write_bytes(big)
    aws(gateway, tmp_path, "s3", "cp", str(tmp_path / "small.bin"), f"s3://{bucket}/main/small.bin")
    aws(gateway, tmp_path, "s3", "cp", str(tmp_path / "big.bin"), f"s3://{bucket}/main/big.bin")
    assert s3.head_object(Bucket=bucket, Key="main/big.bin")["ETag"].endswith('-3"'), "multipart above 8 MiB"
    aws(gateway, tmp_path, "s3", "cp", f"s3://{bucket}/main/big.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == big
    tree = tmp_path / "tree"
    for name in ("a.txt", "sub/b.txt", "sub/deeper/c.txt"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(name)
        # Written an hour ago: LastModified has whole seconds, so a file written in the same
        # second as its upload looks newer to `aws s3 sync` (docs/s3-gateway.md).
        hour_ago = time.time() - 3600
        os.utime(tree / name, (hour_ago, hour_ago))
    aws(gateway, tmp_path, "s3", "sync", str(tree), f"s3://{bucket}/main/synced/")
    assert sorted(keys(s3, bucket, "main/synced/")) == [
        "main/synced/a.txt",
        "main/synced/sub/b.txt",
        "main/synced/sub/deeper/c.txt",
    ]
    again = aws(gateway, tmp_path, "s3", "sync", str(tree), f"s3://{bucket}/main/synced/")
    assert "upload:" not in again.stdout, "an unchanged tree uploads nothing"
    listing = aws(gateway, tmp_path, "s3", "ls", f"s3://{bucket}/main/synced/").stdout
    assert "a.txt" in listing and "PRE sub/" in listing
    assert "PRE main/" in aws(gateway, tmp_path, "s3", "ls", f"s3://{bucket}/").stdout
    aws(gateway, tmp_path, "s3", "rm", "--recursive", f"s3://{bucket}/main/synced/")
    assert keys(s3, bucket, "main/synced/") == []
    assert sorted(keys(s3, bucket, "main/")) == ["main/big.bin", "main/small.bin"]


def arrow_fs(gateway: Gateway) -> fs.S3FileSystem:
    key_id, secret = gateway.keys["admin"]
    return fs.S3FileSystem(
        access_key=key_id,
        secret_key=secret,
        endpoint_override=urlsplit(gateway.endpoint).netloc,
        scheme="http",
        region="us-east-1",
    )


def table(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "region": pa.array([["eu", "us", "ap"][i % 3] for i in range(n)]),
            "amount": pa.array([i * 0.5 for i in range(n)]),
        }
    )


def test_pyarrow_partitioned_parquet(gateway: Gateway, bucket: str) -> None:
    s3fs = arrow_fs(gateway)
    data = table(30_000)
    ds.write_dataset(
        data,
        f"{bucket}/main/sales",
        filesystem=s3fs,
        format="parquet",
        partitioning=["region"],
        partitioning_flavor="hive",
    )
    files = s3fs.get_file_info(fs.FileSelector(f"{bucket}/main/sales", recursive=True))
    assert {f.path.split("/")[3] for f in files if f.type == fs.FileType.File} == {
        "region=ap",
        "region=eu",
        "region=us",
    }
    back = ds.dataset(f"{bucket}/main/sales", filesystem=s3fs, format="parquet", partitioning="hive")
    got = back.to_table().sort_by("id")
    assert got.column("id").to_pylist() == list(range(30_000))
    assert got.column("amount").equals(data.column("amount"))
    eu = back.to_table(filter=ds.field("region") == "eu")
    assert eu.num_rows == 10_000


def test_pandas_over_s3fs(gateway: Gateway, bucket: str) -> None:
    key_id, secret = gateway.keys["admin"]
    options = {"key": key_id, "secret": secret, "client_kwargs": {"endpoint_url": gateway.endpoint}}
    frame = pd.DataFrame({"x": range(1000), "y": [f"row {i}" for i in range(1000)]})
    frame.to_parquet(f"s3://{bucket}/main/frames/f.parquet", storage_options=options)
    back = pd.read_parquet(f"s3://{bucket}/main/frames/f.parquet", storage_options=options)
    assert back.equals(frame)


def test_polars(gateway: Gateway, bucket: str) -> None:
    key_id, secret = gateway.keys["admin"]
    options = {
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "aws_endpoint_url": gateway.endpoint,
        "aws_region": "us-east-1",
        "aws_allow_http": "true",
    }
    frame = pl.DataFrame({"a": list(range(5000)), "b": [str(i) for i in range(5000)]})
    frame.write_parquet(f"s3://{bucket}/main/polars/p.parquet", storage_options=options)
    back = pl.read_parquet(f"s3://{bucket}/main/polars/p.parquet", storage_options=options)
    assert back.equals(frame)
    lazy = pl.scan_parquet(f"s3://{bucket}/main/polars/p.parquet", storage_options=options)
    assert lazy.filter(pl.col("a") < 10).collect().height == 10


def test_the_workflow_branch_write_commit_read_merge(gateway: Gateway, s3: Any, bucket: str) -> None:
    """Why the gateway exists: a job writes a dataset to a branch of its own with an unchanged
    S3 tool; lakectl commits it atomically; anyone reads exactly that version by commit id; a
    merge publishes it to main."""
    with gateway.rest() as rest:
        r = rest.post(f"/repositories/{bucket}/branches", json={"name": "etl-run-1", "source": "main"})
        assert r.status_code == 201, r.text
    s3fs = arrow_fs(gateway)
    data = table(9_000)
    ds.write_dataset(data, f"{bucket}/etl-run-1/sales", filesystem=s3fs, format="parquet")
    assert keys(s3, bucket, "main/sales/") == [], "main is untouched until the merge"
    with gateway.rest() as rest:
        commit = rest.post(
            f"/repositories/{bucket}/branches/etl-run-1/commits", json={"message": "sales from run 1"}
        ).json()
    ds.write_dataset(
        table(5),
        f"{bucket}/etl-run-1/sales",
        filesystem=s3fs,
        format="parquet",
        existing_data_behavior="delete_matching",
    )  # the branch moves on
    pinned = ds.dataset(f"{bucket}/{commit['id']}/sales", filesystem=s3fs, format="parquet").to_table()
    assert pinned.sort_by("id").equals(data), "the commit id still reads the committed version"
    with gateway.rest() as rest:
        assert (
            rest.put(f"/repositories/{bucket}/branches/etl-run-1", json={"type": "reset"}).status_code == 204
        )  # drop the uncommitted rewrite
        merged = rest.post(f"/repositories/{bucket}/refs/etl-run-1/merge/main", json={})
        assert merged.status_code == 200, merged.text
    published = ds.dataset(f"{bucket}/main/sales", filesystem=s3fs, format="parquet").to_table()
    assert published.sort_by("id").equals(data)
