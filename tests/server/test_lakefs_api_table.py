"""docs/lakefs-api.md is the lakeFS SDK's operation list matched against the server's routes."""

from __future__ import annotations

import re
from pathlib import Path

from server.app import create_app
from server.config import load_settings
from tests.server.conftest import Live
from tests.server.lakefs_api_table import Operation, is_routed, sdk_operations, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "lakefs-api.md"


def test_the_sdk_operation_list_is_read_from_the_sdk_itself() -> None:
    ops = sdk_operations()
    stable = [op for op in ops if not op.experimental]
    assert len(stable) == 123 and len(ops) > len(stable)
    names = {op.name for op in stable}
    assert {"get_repository_metadata", "commit", "merge_into_branch", "upload_object"} <= names


def test_routing_tells_served_from_unserved(tmp_path: Path) -> None:
    app = create_app(load_settings(data_dir=str(tmp_path)))
    ops = {op.name: op for op in sdk_operations()}
    assert is_routed(app, ops["commit"]) and is_routed(app, ops["list_repositories"])
    assert not is_routed(app, Operation("x", "nowhere", "GET", "/no/such/route"))
    assert not is_routed(app, Operation("x", "wrong_method", "PATCH", "/repositories"))


def test_the_api_page_is_in_sync_with_the_sdk_and_the_routes(tmp_path: Path) -> None:
    app = create_app(load_settings(data_dir=str(tmp_path)))
    expected = table(app)
    assert DOC.read_text() == expected, (
        "docs/lakefs-api.md is out of date: python -m tests.server.lakefs_api_table > docs/lakefs-api.md"
    )


def test_every_stable_operation_of_the_sdk_is_served(live: Live) -> None:
    """The contract: each non-experimental operation of the SDK, called on a live server (every
    path parameter ``x1``, no body), reaches a route; the router's own "no such route" (404
    ``Not Found``) or "no such method" (405) answer fails it. What each operation does is
    tested through the SDK in the test_sdk_* modules."""
    unserved = []
    with live.client((live.key_id, live.secret)) as api:
        for op in sdk_operations():
            if op.experimental:
                continue
            r = api.request(op.method, re.sub(r"\{\w+\}", "x1", op.path))
            router_404 = r.status_code == 404 and r.json().get("message") == "Not Found"
            if router_404 or r.status_code == 405:
                unserved.append(f"{op.method} {op.path} ({op.name}): {r.status_code}")
    assert unserved == [], "operations of the lakeFS SDK this server does not serve"
