"""A live server (tests/server/conftest.py ``serve``) for the gateway tests, with an admin, a
developer and an analyst key, and boto3 clients for them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from server.config import load_settings
from tests.server.conftest import serve, unique

START_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Gateway:
    api: str
    """Base URL of the REST API (``.../api/v1``)."""
    endpoint: str
    """The S3 gateway (``http://127.0.0.1:<port>``)."""
    keys: dict[str, tuple[str, str]]
    """Role name (``admin``, ``developer``, ``analyst``) → (access key id, secret)."""
    data_dir: Path

    def client(self, role: str = "admin", **config: Any) -> Any:
        key_id, secret = self.keys[role]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config),
        )

    def rest(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, auth=self.keys["admin"], timeout=30.0)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data_dir = tmp_path_factory.mktemp("gateway")
    with serve(load_settings(None, str(data_dir), environ={})) as live:
        keys = {"admin": (live.key_id, live.secret)}
        with live.client(keys["admin"]) as rest:
            for role, group in (("developer", "Developers"), ("analyst", "Viewers")):
                assert rest.post("/auth/users", json={"id": role}).status_code == 201
                assert rest.put(f"/auth/groups/{group}/members/{role}").status_code == 201
                creds = rest.post(f"/auth/users/{role}/credentials").json()
                keys[role] = (creds["access_key_id"], creds["secret_access_key"])
        yield Gateway(live.url, live.s3_endpoint, keys, live.data_dir)


@pytest.fixture(scope="session")
def s3(gateway: Gateway) -> Any:
    """boto3 as the admin."""
    return gateway.client()


@pytest.fixture
def bucket(gateway: Gateway) -> str:
    """A new repository (default branch ``main``) for one test."""
    name = unique("s3")
    with gateway.rest() as rest:
        r = rest.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
        assert r.status_code == 201, r.text
    return name
