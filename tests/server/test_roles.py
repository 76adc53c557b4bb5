"""Who may call what over HTTP: every route of the app for every kind of caller (login tokens and
the auth API: test_auth_api.py; the server and its callers: roles_world.py).

The matrix enumerates the app's routes: a route added without a declared requirement, or
without a row in ``ROUTES`` below, fails ``test_every_route_declares_its_requirement``. Each row
builds a valid request, so that allowed callers succeed; a refused call (401 or 403) must leave
the metadata database and the data directory exactly as they were.
"""

from __future__ import annotations

import hashlib
import os

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from lakectl.core import blockaccess
from server.api.deps import AuthFirstRoute
from tests.server.conftest import changes
from tests.server.roles_matrix import PUBLIC, ROUTES, Outcome, declared, expected
from tests.server.roles_world import (
    REPOS,
    World,
    snapshot,
    world_fixture,  # noqa: F401 - the fixture `world`
)


def test_the_snapshot_sees_metadata_and_block_writes(world: World) -> None:
    """The guard of the matrix: a staged object, a branch or a bare block changes the snapshot."""
    before = snapshot(world)
    world.branch()
    assert snapshot(world) != before
    before = snapshot(world)
    data = os.urandom(64)
    blockaccess.put_block(world.lake, hashlib.md5(data).hexdigest(), data, "admin")
    assert snapshot(world)[1] != before[1]


def test_every_route_declares_its_requirement(world: World) -> None:
    served = declared(world.app)
    assert sorted(set(served) - set(ROUTES)) == [], "routes without a row in the matrix"
    assert sorted(set(ROUTES) - set(served)) == [], "matrix rows without a route"
    for key, reqs in served.items():
        if reqs is None:  # the OpenAPI document: FastAPI's own route, public
            assert ROUTES[key][0] == PUBLIC and key[1].endswith("/openapi.json"), key
            continue
        assert reqs == [ROUTES[key][0]], f"{key}: declares {reqs}, the matrix expects {ROUTES[key][0]}"
    for rc in iter_route_contexts(world.app.routes):
        if isinstance(rc.original_route, APIRoute):  # checks its requirement before the body
            assert isinstance(rc.original_route, AuthFirstRoute), rc.path


def test_credentials_are_checked_before_the_body_is_read(world: World) -> None:
    """A malformed body gets 401 or 403 like any other, not a 400 that reveals the route parsed it."""
    junk, json_type = b"{not json", {"content-type": "application/json"}
    with world.client() as http:
        for caller, status in (("anonymous", 401), ("wrong-secret", 401), ("ann", 403), ("admin", 400)):
            r = http.post(REPOS, content=junk, headers={**json_type, **world.callers[caller].headers})
            assert r.status_code == status, (caller, r.text)


@pytest.mark.parametrize("method,path", sorted(ROUTES), ids=[f"{m} {p}" for m, p in sorted(ROUTES)])
def test_matrix(world: World, method: str, path: str) -> None:
    requirement, build, ok = ROUTES[(method, path)]
    with world.client() as http:
        for caller in world.callers.values():
            call = build(world, caller)
            outcome = expected(requirement, caller)
            before = snapshot(world) if outcome is not Outcome.OK else None
            r = http.request(
                method,
                call.path,
                params=call.params,
                json=call.json,
                content=call.content,
                headers={**caller.headers, **(call.headers or {})},
            )
            where = f"{caller.name}: {method} {call.path} → {r.status_code} {r.text[:300]}"
            if outcome is Outcome.OK:
                assert r.status_code in ok or (not ok and 200 <= r.status_code < 300), where
                continue
            assert r.status_code == int(outcome.value), where
            if method != "HEAD":
                body = r.json()
                code = "forbidden" if outcome is Outcome.FORBIDDEN else "unauthenticated"
                assert body["code"] == code and body["message"], where
            if outcome is Outcome.UNAUTHENTICATED:
                assert r.headers["www-authenticate"].startswith("Basic"), where
            after = snapshot(world)
            assert after == before, f"{where}: {changes(before, after)}"
