"""A live server with its S3 gateway for the gateway tests: uvicorn in a thread, both listening
sockets on 127.0.0.1, an admin, a developer and an analyst key, and boto3 clients for them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import uvicorn
from botocore.config import Config

from server.app import Dispatch, create_app, create_gateway
from server.config import load_settings
from tests.server.conftest import unique

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


def _bound() -> socket.socket:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data_dir = tmp_path_factory.mktemp("gateway")
    api_sock, s3_sock = _bound(), _bound()
    api_port, s3_port = api_sock.getsockname()[1], s3_sock.getsockname()[1]
    env = {
        "LAKECTL_SERVER_LISTEN_ADDRESS": f"127.0.0.1:{api_port}",
        "LAKECTL_SERVER_GATEWAYS_S3_LISTEN_ADDRESS": f"127.0.0.1:{s3_port}",
    }
    app = create_app(load_settings(None, str(data_dir), environ=env))
    config = uvicorn.Config(Dispatch(app, create_gateway(app), {s3_port}), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [api_sock, s3_sock]}, name="lakectl-gateway", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive(), "the test server died while starting"
            assert time.monotonic() < deadline, "the test server did not start in time"
            time.sleep(0.02)
        api = f"http://127.0.0.1:{api_port}/api/v1"
        with httpx.Client(base_url=api, timeout=30.0) as anon:
            admin = anon.post("/setup_lakefs", json={"username": "admin"}).json()
        keys = {"admin": (admin["access_key_id"], admin["secret_access_key"])}
        with httpx.Client(base_url=api, auth=keys["admin"], timeout=30.0) as rest:
            for role, group in (("developer", "Developers"), ("analyst", "Analysts")):
                assert rest.post("/auth/users", json={"id": role}).status_code == 201
                assert rest.put(f"/auth/groups/{group}/members/{role}").status_code == 201
                creds = rest.post(f"/auth/users/{role}/credentials").json()
                keys[role] = (creds["access_key_id"], creds["secret_access_key"])
        yield Gateway(api, f"http://127.0.0.1:{s3_port}", keys, Path(data_dir))
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        api_sock.close()
        s3_sock.close()


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
