"""lakectl's public API runs a script written for lakeFS's Python wrapper, with only its module
and client changed (``import lakectl as lakefs``), on the embedded lake and against a server,
and sees what lakeFS's own package sees against the server
(tests/server/test_sdk_acceptance.py runs the same script with ``lakefs``)."""

from __future__ import annotations

import lakectl
from tests.server.conftest import unique
from tests.server.sdk_script import EXPECTED, round_trip


def test_a_lakefs_script_runs_on_lakectl(client: lakectl.Client) -> None:
    assert round_trip(lakectl, client, unique("api")) == EXPECTED
