"""Delta tables on branches are tested through the public API, embedded and against a server."""

from __future__ import annotations

from tests.api.conftest import client, live

__all__ = ["client", "live"]
