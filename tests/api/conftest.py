"""The ``client`` fixture: a public-API client of a fresh embedded lake, and of a live server;
``client.options`` holds the same lake's fsspec storage options, as strings a user would pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import lakectl
from lakectl.api.fs import LakectlFileSystem
from tests.server.conftest import Live, live

__all__ = ["client", "live"]


@pytest.fixture(params=["embedded", "remote"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[lakectl.Client]:
    if request.param == "embedded":
        options = {"home": str(tmp_path / "lake")}
    else:
        server: Live = request.getfixturevalue("live")
        options = {
            "host": server.url.removesuffix("/api/v1"),
            "username": server.key_id,
            "password": server.secret,
        }
    made = lakectl.Client(
        options.get("host"), options.get("username"), options.get("password"), home=options.get("home")
    )
    made.options = options  # type: ignore[attr-defined]
    with made:  # its lake, or its connections to the shared server, closed after the test
        yield made
    # The filesystems the test opened (fsspec keeps each one for its options) hold clients too.
    for fs in list(LakectlFileSystem._cache.values()):
        fs.client.close()
    LakectlFileSystem.clear_instance_cache()
