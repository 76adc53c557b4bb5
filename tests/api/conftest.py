"""The ``client`` fixture: a public-API client of a fresh embedded lake, and of a live server;
``client.options`` holds the same lake's fsspec storage options, as strings a user would pass."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakectl
from tests.server.conftest import Live, live

__all__ = ["client", "live"]


@pytest.fixture(params=["embedded", "remote"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> lakectl.Client:
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
    return made
