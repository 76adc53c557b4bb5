"""The ``client`` fixture: a public-API client of a fresh embedded lake, and of a live server."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakectl
from tests.server.conftest import Live, live

__all__ = ["client", "live"]


@pytest.fixture(params=["embedded", "remote"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> lakectl.Client:
    if request.param == "embedded":
        return lakectl.Client(home=str(tmp_path / "lake"))
    server: Live = request.getfixturevalue("live")
    return lakectl.Client(
        host=server.url.removesuffix("/api/v1"), username=server.key_id, password=server.secret
    )
