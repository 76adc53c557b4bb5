"""The block adapter conformance suite: Local, VolumeSet and S3 (a real S3 server on 127.0.0.1).

Every test above the S3-only part runs against each adapter. The S3 adapter talks HTTP to moto's
server, started once for this module; if it cannot start, the S3 tests are skipped with a
warning, or fail when the environment variable CI is set.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber

from lakectl.core.blocks import BlockAdapter, HasParts, HasStorageClass
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.blocks.s3 import S3Adapter
from lakectl.core.blocks.volumes import local_volumes
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    StorageError,
)
from tests import moto_s3

s3_endpoint = moto_s3.s3_endpoint  # the fixture, shared with the import tests

REGION = "us-east-1"
DUMMY_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def loc(data: bytes) -> str:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


@dataclass
class Subject:
    """An adapter plus what only its test harness can do to the storage behind it."""

    adapter: BlockAdapter
    damage: Callable[[str, bytes], None]  # replace every stored copy of a block with these bytes
    stored: Callable[[], list[str]]  # raw names of everything stored, blocks or not


# --- the S3 server --------------------------------------------------------------------------


def raw_client(endpoint: str, **config: Any) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        config=Config(s3={"addressing_style": "path"}, **config),
        **DUMMY_KEYS,
    )


_buckets = iter(range(1_000_000))


def new_bucket(client: Any) -> str:
    name = f"blocks-{os.getpid()}-{next(_buckets)}"
    client.create_bucket(Bucket=name)
    return name


def s3_adapter(endpoint: str, bucket: str, prefix: str = "", **kwargs: Any) -> S3Adapter:
    return S3Adapter(
        bucket,
        prefix,
        endpoint_url=endpoint,
        region=REGION,
        access_key_id="testing",
        secret_access_key="testing",
        **kwargs,
    )


def all_keys(client: Any, bucket: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", ()))


# --- the subjects ---------------------------------------------------------------------------


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def rewrite_block_files(roots: list[Path], locator: str, data: bytes) -> None:
    md5 = locator.split("+")[0]
    for root in roots:
        path = root / md5[:3] / md5
        if path.exists():
            path.chmod(0o644)  # blocks are stored read-only
            path.write_bytes(data)


@pytest.fixture(params=["local", "volumes", "s3"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    if request.param == "local":
        root = tmp_path / "blocks"
        return Subject(
            LocalAdapter(root),
            lambda locator, data: rewrite_block_files([root], locator, data),
            lambda: files_under(tmp_path),
        )
    if request.param == "volumes":
        roots = [tmp_path / f"volume{i}" for i in range(3)]
        return Subject(
            local_volumes(roots, replicas=2),
            lambda locator, data: rewrite_block_files(roots, locator, data),
            lambda: files_under(tmp_path),
        )
    endpoint = request.getfixturevalue("s3_endpoint")
    client = raw_client(endpoint)
    bucket = new_bucket(client)
    adapter = s3_adapter(endpoint, bucket, "lake/blocks")

    def damage(locator: str, data: bytes) -> None:
        md5 = locator.split("+")[0]
        client.put_object(Bucket=bucket, Key=f"lake/blocks/{md5[:3]}/{md5}", Body=data)

    return Subject(adapter, damage, lambda: all_keys(client, bucket))


# --- the protocol ---------------------------------------------------------------------------


def test_satisfies_the_protocol(subject: Subject) -> None:
    assert isinstance(subject.adapter, BlockAdapter)


def test_put_get_and_ranges(subject: Subject) -> None:
    adapter = subject.adapter
    data = b"hello, blocks"
    locator = loc(data)
    adapter.put(locator, data)
    assert adapter.exists(locator)
    assert adapter.get(locator) == data
    assert adapter.get(locator, 7) == b"blocks"
    assert adapter.get(locator, 0, 5) == b"hello"
    assert adapter.get(locator, 7, 100) == b"blocks"
    assert adapter.get(locator, 100) == b""
    assert adapter.get(locator, 3, 0) == b""
    assert adapter.get(locator, 0, len(data)) == data


def test_larger_block_and_a_range_inside_it(subject: Subject) -> None:
    data = os.urandom((1 << 20) + 17)
    locator = loc(data)
    subject.adapter.put(locator, data)
    assert subject.adapter.get(locator) == data
    assert subject.adapter.get(locator, 500_000, 4096) == data[500_000:504_096]
    assert subject.adapter.get(locator, len(data) - 3) == data[-3:]


def test_a_part_is_read_alone_unverified_and_a_checked_read_falls_back_to_the_block(subject: Subject) -> None:
    """``get_part`` (every adapter here has it) reads a range without the rest of the block:
    it does not notice rot elsewhere, so :func:`get_checked` checks the part against its own md5
    and reads the whole block, verified, when they differ."""
    from lakectl.core.blocks.data import get_checked

    adapter = subject.adapter
    assert isinstance(adapter, HasParts)
    data = os.urandom(300_000)
    locator = loc(data)
    adapter.put(locator, data)
    part = data[100_000:104_096]
    assert adapter.get_part(locator, 100_000, 4096) == part
    assert adapter.get_part(locator, len(data) - 10, 100) == data[-10:]  # short at the end
    md5 = hashlib.md5(part).hexdigest()
    rotten = bytearray(data)
    rotten[0] ^= 1  # outside the part
    subject.damage(locator, bytes(rotten))
    assert adapter.get_part(locator, 100_000, 4096) == part
    assert get_checked(adapter, locator, 100_000, 4096, md5) == part
    with pytest.raises(CorruptBlock):
        get_checked(adapter, locator, 100_000, 4096, "0" * 32)  # not the part's: the block decides
    rotten[100_001] ^= 1  # inside it
    subject.damage(locator, bytes(rotten))
    with pytest.raises(CorruptBlock):
        get_checked(adapter, locator, 100_000, 4096, md5)
    with pytest.raises(BlockNotFound):
        adapter.get_part(loc(b"never stored"), 0, 5)


def test_empty_block(subject: Subject) -> None:
    locator = "d41d8cd98f00b204e9800998ecf8427e+0"
    subject.adapter.put(locator, b"")
    assert subject.adapter.exists(locator)
    assert subject.adapter.get(locator) == b""
    assert list(subject.adapter.list()) == [locator]


def test_put_is_idempotent(subject: Subject) -> None:
    data = os.urandom(10_000)
    subject.adapter.put(loc(data), data)
    stored = subject.stored()
    subject.adapter.put(loc(data), data)
    assert subject.stored() == stored
    assert list(subject.adapter.list()) == [loc(data)]
    assert subject.adapter.get(loc(data)) == data


def test_put_of_data_of_another_size_is_refused_and_stores_nothing(subject: Subject) -> None:
    with pytest.raises(InvalidLocator):
        subject.adapter.put(loc(b"abc"), b"abcd")
    assert subject.stored() == []


def test_missing_block(subject: Subject) -> None:
    locator = loc(b"never stored")
    assert not subject.adapter.exists(locator)
    with pytest.raises(BlockNotFound):
        subject.adapter.get(locator)
    with pytest.raises(BlockNotFound):
        subject.adapter.get(locator, 1, 2)
    subject.adapter.delete(locator)  # absent is not an error


def test_list_and_delete(subject: Subject) -> None:
    adapter = subject.adapter
    blobs = [os.urandom(n) for n in (1, 100, 10_000, 3)]
    for data in blobs:
        adapter.put(loc(data), data)
    assert sorted(adapter.list()) == sorted(loc(d) for d in blobs)
    adapter.delete(loc(blobs[1]))
    assert not adapter.exists(loc(blobs[1]))
    with pytest.raises(BlockNotFound):
        adapter.get(loc(blobs[1]))
    assert sorted(adapter.list()) == sorted(loc(d) for d in (blobs[0], blobs[2], blobs[3]))
    adapter.delete(loc(blobs[1]))
    for data in blobs:
        adapter.delete(loc(data))
    assert list(adapter.list()) == []


def test_touch_refreshes_a_stored_block_and_only_a_stored_one(subject: Subject) -> None:
    """The mark of a garbage collection cannot see a block a concurrent upload deduplicates:
    the upload touches it instead, and the sweep spares blocks touched after its mark began."""
    adapter = subject.adapter
    data = b"touch me"
    assert adapter.touch(loc(data)) is False
    assert subject.stored() == [], "touching a missing block stores nothing"
    with pytest.raises(BlockNotFound):
        adapter.modified(loc(data))
    adapter.put(loc(data), data)
    written = adapter.modified(loc(data))
    assert abs(written - time.time()) < 60
    time.sleep(1.1)  # S3's Last-Modified has whole seconds
    assert adapter.touch(loc(data)) is True
    assert adapter.modified(loc(data)) > written
    assert adapter.get(loc(data)) == data
    for bad in ("nope", "0" * 32 + "+x"):
        with pytest.raises(InvalidLocator):
            adapter.touch(bad)
        with pytest.raises(InvalidLocator):
            adapter.modified(bad)


def test_list_of_an_empty_store(subject: Subject) -> None:
    assert list(subject.adapter.list()) == []


def test_truncated_block_does_not_exist_reads_corrupt_and_put_repairs(subject: Subject) -> None:
    data = os.urandom(5000)
    locator = loc(data)
    subject.adapter.put(locator, data)
    subject.damage(locator, data[:1234])
    assert not subject.adapter.exists(locator)
    with pytest.raises(CorruptBlock):
        subject.adapter.get(locator)
    with pytest.raises(CorruptBlock):
        subject.adapter.get(locator, 0, 10)
    subject.adapter.put(locator, data)
    assert subject.adapter.exists(locator)
    assert subject.adapter.get(locator) == data


@pytest.mark.parametrize("position", [0, 4999])
def test_a_flipped_byte_fails_every_read(subject: Subject, position: int) -> None:
    data = os.urandom(5000)
    locator = loc(data)
    subject.adapter.put(locator, data)
    damaged = bytearray(data)
    damaged[position] ^= 0x01
    subject.damage(locator, bytes(damaged))
    assert subject.adapter.exists(locator)  # same size: only reading can tell
    with pytest.raises(CorruptBlock):
        subject.adapter.get(locator)
    with pytest.raises(CorruptBlock):  # even a range far from the damaged byte
        subject.adapter.get(locator, 0 if position > 100 else 4000, 10)


@pytest.mark.parametrize("position", [0, 4999])
def test_put_over_a_rotten_copy_heals_it(subject: Subject, position: int) -> None:
    """A re-upload of the same bytes must not trust a stored copy of the right size: it checks
    it, and rewrites it when a byte rotted, so that reads of every object linking it work again."""
    data = os.urandom(5000)
    locator = loc(data)
    subject.adapter.put(locator, data)
    stored = subject.stored()
    damaged = bytearray(data)
    damaged[position] ^= 0x01
    subject.damage(locator, bytes(damaged))
    subject.adapter.put(locator, data)
    assert subject.adapter.get(locator) == data
    assert subject.adapter.get(locator, 4990, 10) == data[4990:]
    assert subject.stored() == stored, "a fresh copy replaces the rotten one, nothing is left over"
    assert list(subject.adapter.list()) == [locator]


def test_put_of_a_stored_block_refreshes_it(subject: Subject) -> None:
    """A put that finds an intact copy keeps it, and makes it as fresh as a new write: the mark
    of a concurrent garbage collection cannot see it, its sweep spares recent blocks."""
    data = b"stored once, put twice"
    subject.adapter.put(loc(data), data)
    written = subject.adapter.modified(loc(data))
    time.sleep(1.1)  # S3's Last-Modified has whole seconds
    subject.adapter.put(loc(data), data)
    assert subject.adapter.modified(loc(data)) > written
    assert subject.adapter.get(loc(data)) == data


def test_negative_range_is_invalid(subject: Subject) -> None:
    subject.adapter.put(loc(b"abc"), b"abc")
    with pytest.raises(InvalidArgument):
        subject.adapter.get(loc(b"abc"), -1)
    with pytest.raises(InvalidArgument):
        subject.adapter.get(loc(b"abc"), 0, -1)


BAD_LOCATORS = [
    "../../etc",
    "../../etc/passwd+1",
    "/etc/passwd",
    "",
    "d41d8cd98f00b204e9800998ecf8427e",
    "d41d8cd98f00b204e9800998ecf8427e+",
    "D41D8CD98F00B204E9800998ECF8427E+0",
    "d41d8cd98f00b204e9800998ecf8427+0",
    "d41d8cd98f00b204e9800998ecf8427e+0\n",
    "d41d8cd98f00b204e9800998ecf8427e+-1",
    "d41d8cd98f00b204e9800998ecf8427e+0+Afff@1234",
    "d41d8cd98f00b204e9800998ecf8427e+٣",  # a non-ASCII digit
    "d41d8cd98f00b204e9800998ecf8427e+" + "9" * 5000,
    "../d41d8cd98f00b204e9800998ecf8427e+0",
    "d41d8cd98f00b204e9800998ecf8427e/../x+0",
]


def test_invalid_locators_are_rejected_before_anything_is_touched(subject: Subject) -> None:
    for bad in BAD_LOCATORS:
        with pytest.raises(InvalidLocator):
            subject.adapter.put(bad, b"")
        with pytest.raises(InvalidLocator):
            subject.adapter.get(bad)
        with pytest.raises(InvalidLocator):
            subject.adapter.exists(bad)
        with pytest.raises(InvalidLocator):
            subject.adapter.delete(bad)
    with pytest.raises(InvalidLocator):
        subject.adapter.exists(None)  # type: ignore[arg-type]
    assert subject.stored() == []


def test_sync_after_puts(subject: Subject) -> None:
    for i in range(3):
        data = f"block {i}".encode()
        subject.adapter.put(loc(data), data)
    subject.adapter.sync()
    subject.adapter.sync()  # nothing new: still fine
    assert len(list(subject.adapter.list())) == 3


def test_threads_putting_and_reading_the_same_blocks(subject: Subject) -> None:
    blobs = [hashlib.sha256(str(i).encode()).digest() * (64 + i) for i in range(12)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for data in blobs:
                subject.adapter.put(loc(data), data)
                assert subject.adapter.get(loc(data)) == data
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    subject.adapter.sync()
    assert sorted(subject.adapter.list()) == sorted(loc(d) for d in blobs)


# --- what only the S3 adapter adds ----------------------------------------------------------


@pytest.fixture
def s3(s3_endpoint: str) -> tuple[S3Adapter, Any, str]:
    client = raw_client(s3_endpoint)
    bucket = new_bucket(client)
    return s3_adapter(s3_endpoint, bucket), client, bucket


def record_requests(adapter: S3Adapter) -> list[tuple[str, str, dict[str, str]]]:
    """(operation, url, headers) of every request the adapter's client sends from now on."""
    sent: list[tuple[str, str, dict[str, str]]] = []

    def before_send(request: Any, event_name: str, **_: Any) -> None:
        headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        sent.append((event_name.rsplit(".", 1)[-1], request.url, headers))

    adapter._client.meta.events.register("before-send.s3", before_send)
    return sent


def test_s3_key_layout_and_content_md5(s3: tuple[S3Adapter, Any, str]) -> None:
    adapter, client, bucket = s3
    data = b"content-addressed"
    md5 = hashlib.md5(data).hexdigest()
    sent = record_requests(adapter)
    adapter.put(loc(data), data)
    assert all_keys(client, bucket) == [f"{md5[:3]}/{md5}"]
    assert [op for op, _, _ in sent] == ["HeadObject", "PutObject"]
    [(_, _, headers)] = [s for s in sent if s[0] == "PutObject"]
    assert headers["content-md5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    assert not any(h.startswith("x-amz-checksum-") for h in headers)  # Content-MD5 is the check


def test_s3_says_the_storage_class_of_a_block_and_other_stores_have_none(
    s3: tuple[S3Adapter, Any, str], tmp_path: Path
) -> None:
    adapter, client, bucket = s3
    data = b"cold data"
    adapter.put(loc(data), data)
    assert isinstance(adapter, HasStorageClass) and adapter.storage_class(loc(data)) == "STANDARD"
    key = f"{hashlib.md5(data).hexdigest()[:3]}/{hashlib.md5(data).hexdigest()}"
    client.copy_object(
        Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key}, StorageClass="STANDARD_IA"
    )
    assert adapter.storage_class(loc(data)) == "STANDARD_IA"
    with pytest.raises(BlockNotFound):
        adapter.storage_class(loc(b"never stored"))
    assert not isinstance(LocalAdapter(tmp_path), HasStorageClass)


def test_s3_put_of_an_intact_block_sends_no_bytes(s3: tuple[S3Adapter, Any, str]) -> None:
    """Dedup on S3: the stored object's ETag (its md5) and size prove the copy intact, and a
    server-side copy refreshes it; only an object that fails that check is uploaded again."""
    adapter, client, bucket = s3
    data = os.urandom(100_000)
    adapter.put(loc(data), data)
    sent = record_requests(adapter)
    adapter.put(loc(data), data)
    assert [op for op, _, _ in sent] == ["HeadObject", "CopyObject"]
    md5 = hashlib.md5(data).hexdigest()
    client.put_object(Bucket=bucket, Key=f"{md5[:3]}/{md5}", Body=b"\0" + data[1:])
    sent.clear()
    adapter.put(loc(data), data)
    assert [op for op, _, _ in sent] == ["HeadObject", "PutObject"]
    assert adapter.get(loc(data)) == data


def test_s3_ranged_read_fetches_the_whole_block_to_verify_it(s3: tuple[S3Adapter, Any, str]) -> None:
    adapter, _, _ = s3
    data = os.urandom(100_000)
    adapter.put(loc(data), data)
    sent = record_requests(adapter)
    assert adapter.get(loc(data), 10, 5) == data[10:15]
    [(operation, _, headers)] = sent
    assert operation == "GetObject"
    assert "range" not in headers


def test_s3_prefixes_keep_stores_apart_and_foreign_keys_are_not_blocks(
    s3_endpoint: str, s3: tuple[S3Adapter, Any, str]
) -> None:
    _, client, bucket = s3
    first = s3_adapter(s3_endpoint, bucket, "blocks")
    second = s3_adapter(s3_endpoint, bucket, "blocks2/")
    assert first.prefix == "blocks/"
    one, two = b"one", b"two"
    first.put(loc(one), one)
    second.put(loc(two), two)
    md5 = hashlib.md5(one).hexdigest()
    for foreign in ("blocks/README", f"blocks/{md5}", f"blocks/fff/{md5}", f"blocks/{md5[:3]}/{md5}.tmp"):
        client.put_object(Bucket=bucket, Key=foreign, Body=b"x")
    assert list(first.list()) == [loc(one)]
    assert list(second.list()) == [loc(two)]
    assert not first.exists(loc(two))
    with pytest.raises(BlockNotFound):
        second.get(loc(one))


def test_s3_list_follows_pagination(s3_endpoint: str, s3: tuple[S3Adapter, Any, str]) -> None:
    _, _, bucket = s3
    adapter = s3_adapter(s3_endpoint, bucket, list_page_size=2)
    blobs = [f"page {i}".encode() for i in range(5)]
    for data in blobs:
        adapter.put(loc(data), data)
    sent = record_requests(adapter)
    assert sorted(adapter.list()) == sorted(loc(d) for d in blobs)
    assert [op for op, _, _ in sent] == ["ListObjectsV2"] * 3


def test_s3_object_of_the_wrong_size_is_corrupt_without_downloading_it(
    s3: tuple[S3Adapter, Any, str],
) -> None:
    adapter, client, bucket = s3
    data = b"x" * 100
    md5 = hashlib.md5(data).hexdigest()
    client.put_object(Bucket=bucket, Key=f"{md5[:3]}/{md5}", Body=b"y" * 5_000_000)
    with pytest.raises(CorruptBlock, match="5000000 bytes"):
        adapter.get(loc(data))


def test_s3_missing_bucket_is_a_storage_error(s3_endpoint: str) -> None:
    adapter = s3_adapter(s3_endpoint, "no-such-bucket-here")
    with pytest.raises(StorageError) as info:
        adapter.put(loc(b"x"), b"x")
    assert isinstance(info.value.__cause__, ClientError)
    with pytest.raises(StorageError):
        adapter.get(loc(b"x"))
    with pytest.raises(StorageError):
        list(adapter.list())
    with pytest.raises(StorageError):
        adapter.delete(loc(b"x"))


def test_s3_unreachable_endpoint_is_a_storage_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    adapter = s3_adapter(f"http://127.0.0.1:{port}", "bucket", max_attempts=1)
    for call in (
        lambda: adapter.put(loc(b"x"), b"x"),
        lambda: adapter.get(loc(b"x")),
        lambda: adapter.exists(loc(b"x")),
        lambda: adapter.delete(loc(b"x")),
        lambda: list(adapter.list()),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert isinstance(info.value.__cause__, EndpointConnectionError)


def stubbed(error_code: str, status: int, operation: str) -> tuple[S3Adapter, Stubber]:
    client = boto3.client("s3", region_name=REGION, **DUMMY_KEYS)
    stubber = Stubber(client)
    if operation == "put_object":  # a put first asks whether a copy is stored: none is
        stubber.add_client_error("head_object", service_error_code="404", http_status_code=404)
    stubber.add_client_error(operation, service_error_code=error_code, http_status_code=status)
    stubber.activate()
    return S3Adapter("bucket", client=client), stubber


def test_s3_refusing_the_content_md5_is_a_corrupt_block() -> None:
    # moto does not check Content-MD5; S3 answers a mismatch with 400 BadDigest.
    adapter, stubber = stubbed("BadDigest", 400, "put_object")
    with stubber, pytest.raises(CorruptBlock) as info:
        adapter.put(loc(b"abc"), b"abc")
    assert isinstance(info.value.__cause__, ClientError)


@pytest.mark.parametrize(
    ("code", "status"), [("InternalError", 500), ("SlowDown", 503), ("AccessDenied", 403)]
)
def test_s3_server_errors_are_storage_errors(code: str, status: int) -> None:
    adapter, stubber = stubbed(code, status, "get_object")
    with stubber, pytest.raises(StorageError) as info:
        adapter.get(loc(b"abc"))
    assert isinstance(info.value.__cause__, ClientError)


def test_s3_constructor_rejects_bad_settings() -> None:
    client = boto3.client("s3", region_name=REGION, **DUMMY_KEYS)
    for bucket in ("", "a", "has/slash", "../x", None):
        with pytest.raises(InvalidArgument):
            S3Adapter(bucket, client=client)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        S3Adapter("bucket", "bad\nprefix", client=client)
    with pytest.raises(InvalidArgument):
        S3Adapter("bucket", client=client, endpoint_url="http://127.0.0.1:1")
    with pytest.raises(InvalidArgument):
        S3Adapter("bucket", client=client, list_page_size=0)
