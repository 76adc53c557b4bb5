"""Acceptance: the official lakeFS Python SDK (``lakefs`` over ``lakefs-sdk``) works against this server.

The ``lakefs`` package is imported from where it is kept apart from site-packages (see
:mod:`tests.server.wrapped`).
"""

from __future__ import annotations

from types import ModuleType

from tests.server.conftest import Live, unique
from tests.server.sdk_script import EXPECTED, round_trip
from tests.server.wrapped import wrapped


def _lakefs() -> ModuleType:
    module = wrapped("lakefs")
    assert hasattr(module, "Client"), module
    return module


def test_the_lakefs_sdk_round_trip(live: Live) -> None:
    lakefs = _lakefs()
    client = lakefs.Client(host=live.url.removesuffix("/api/v1"), username=live.key_id, password=live.secret)
    assert round_trip(lakefs, client, unique("sdk")) == EXPECTED
