"""The lakeFS SDK's ImportApi (``lakefs_sdk``) against this server: start (202 and an id), status
polled until completed, cancel; the imported objects read through ObjectsApi and the S3 gateway."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import lakefs_sdk
import pytest
from botocore.config import Config
from lakefs_sdk.exceptions import ApiException

from lakectl.core.importing import sources, tasks
from tests import moto_s3
from tests.server.conftest import Live

s3_endpoint = moto_s3.s3_endpoint


def creation(*paths: tuple[str, str, str], message: str = "import") -> lakefs_sdk.ImportCreation:
    locations = [lakefs_sdk.ImportLocation(type=t, path=p, destination=d) for t, p, d in paths]
    commit = lakefs_sdk.CommitCreation(message=message, metadata={"source": "sdk"})
    return lakefs_sdk.ImportCreation(paths=locations, commit=commit)


def wait(api: lakefs_sdk.ImportApi, repo: str, branch: str, import_id: str) -> lakefs_sdk.ImportStatus:
    deadline = time.monotonic() + 30
    while True:
        status = api.import_status(repo, branch, import_id)
        if status.completed or status.error is not None:
            return status
        assert time.monotonic() < deadline, "the import did not end in time"
        time.sleep(0.05)


def test_import_start_status_and_reads_through_the_sdk(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "part").mkdir(parents=True)
    (src / "part" / "a.csv").write_bytes(b"1,2\n")
    (src / "b.csv").write_bytes(b"3,4\n")
    single = tmp_path / "single.txt"
    single.write_bytes(b"one object")
    imports = lakefs_sdk.ImportApi(sdk)
    started = imports.import_start(
        repo,
        "main",
        creation(("common_prefix", str(src), "tables/"), ("object", str(single), "docs/readme.txt")),
    )
    assert started.id
    status = wait(imports, repo, "main", started.id)
    assert status.completed and status.error is None and status.ingested_objects == 3
    assert status.commit is not None and status.metarange_id
    # lakeFS's import lands on the branch: its head is the import's (merge) commit.
    head = lakefs_sdk.BranchesApi(sdk).get_branch(repo, "main").commit_id
    assert status.commit.id == head and status.commit.metadata == {"source": "sdk"}
    objects = lakefs_sdk.ObjectsApi(sdk)
    listed = objects.list_objects(repo, "main", prefix="").results
    assert sorted(o.path for o in listed) == ["docs/readme.txt", "tables/b.csv", "tables/part/a.csv"]
    stats = objects.stat_object(repo, "main", "tables/b.csv")
    assert stats.physical_address == str(src / "b.csv") and stats.size_bytes == 4
    assert bytes(objects.get_object(repo, "main", "docs/readme.txt")) == b"one object"
    assert api.get(
        f"/repositories/{repo}/refs/main/objects", params={"path": "tables/part/a.csv"}
    ).content == (b"1,2\n")
    # changed at the source: 503 with the code the CLI maps to exit 7
    (src / "b.csv").write_bytes(b"changed!")
    r = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "tables/b.csv"})
    assert r.status_code == 503 and r.json()["code"] == "source_changed"
    with pytest.raises(ApiException) as done:
        imports.import_cancel(repo, "main", started.id)
    assert done.value.status == 409
    with pytest.raises(ApiException) as missing:
        imports.import_status(repo, "main", "no-such-import")
    assert missing.value.status == 404


def test_bad_import_requests_are_refused_before_a_task(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, tmp_path: Path
) -> None:
    imports = lakefs_sdk.ImportApi(sdk)
    for path, status in (("ftp://x/y", 400), (str(tmp_path / "missing"), 404)):
        with pytest.raises(ApiException) as refused:
            imports.import_start(repo, "main", creation(("common_prefix", path, "x/")))
        assert refused.value.status == status
    r = api.post(
        f"/repositories/{repo}/branches/main/import",
        json={
            "paths": [{"type": "dir", "path": str(tmp_path), "destination": ""}],
            "commit": {"message": "m"},
        },
    )
    assert r.status_code == 400
    assert [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]] == ["main"]


@pytest.fixture
def slow_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = sources.LocalSource.list

    def slow(self: sources.LocalSource) -> Iterator[Any]:
        for item in real(self):
            time.sleep(0.02)
            yield item

    monkeypatch.setattr(sources.LocalSource, "list", slow)
    monkeypatch.setattr(tasks, "HEARTBEAT", 0.05)


def test_import_cancel_through_the_sdk(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, tmp_path: Path, slow_listing: None
) -> None:
    src = tmp_path / "many"
    src.mkdir()
    for i in range(500):
        (src / f"f{i:03d}").write_bytes(b"x")
    imports = lakefs_sdk.ImportApi(sdk)
    started = imports.import_start(repo, "main", creation(("common_prefix", str(src), "m/")))
    running = imports.import_status(repo, "main", started.id)
    assert running.completed is False and running.error is None
    imports.import_cancel(repo, "main", started.id)
    status = wait(imports, repo, "main", started.id)
    assert (
        status.completed is False and status.error is not None and status.error.message == "import canceled"
    )
    assert (
        api.get(f"/repositories/{repo}/refs/main/objects/ls", params={"prefix": "m/"}).json()["results"] == []
    )


def test_an_s3_prefix_through_the_sdk_and_the_gateway(
    sdk: lakefs_sdk.ApiClient, live: Live, repo: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    path_style = Config(s3={"addressing_style": "path"})
    source = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", config=path_style)
    bucket = f"sdk-src-{time.time_ns() % 10**9}"
    source.create_bucket(Bucket=bucket)
    source.put_object(Bucket=bucket, Key="events/2026/01.json", Body=b'{"a": 1}\n')
    source.put_object(Bucket=bucket, Key="events/2026/02.json", Body=b'{"a": 2}\n')
    imports = lakefs_sdk.ImportApi(sdk)
    started = imports.import_start(repo, "main", creation(("common_prefix", f"s3://{bucket}/events/", "ev/")))
    assert wait(imports, repo, "main", started.id).completed
    gateway = boto3.client(
        "s3",
        endpoint_url=live.s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=live.key_id,
        aws_secret_access_key=live.secret,
        config=path_style,
    )
    body = gateway.get_object(Bucket=repo, Key="main/ev/2026/02.json")["Body"].read()
    assert body == b'{"a": 2}\n'
