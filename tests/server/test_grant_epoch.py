"""Block signatures end with the grants they were made under (docs/decisions/0006).

A user who may read repository ``b`` gets signed locators of ``b``'s blocks (``objects/signed``,
a signed manifest export) and challenges for them. Once its access to ``b`` is revoked, however
that happens (a policy detached from it or from its group, the policy edited, the user taken out
of the group, an access key deleted), those signatures read nothing (``GET /blocks``) and claim
nothing: a link, a manifest import or a proof into repository ``a``, which it may still write, is
refused and stages nothing. A signature made after the grant is given back works; other users'
signatures are untouched. On SQLite and PostgreSQL, and across two servers over one database.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from server.app import create_app
from server.config import load_settings
from tests.pg import PostgresServer
from tests.server.conftest import START_TIMEOUT_S, Live, commit, serve, unique, upload

B_PATH = "secret/b.bin"


@dataclass
class Scene:
    live: Live
    admin: httpx.Client
    a: str
    b: str
    b_data: bytes
    user: str
    keys: tuple[str, str]
    key_ids: list[str]
    b_policy: str
    group: str
    other: tuple[str, str]
    """Another user, who reads ``b`` through a policy of its own."""

    def client(self, keys: tuple[str, str] | None = None, url: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=url or self.live.url, auth=keys or self.keys, timeout=30.0)


def _repo(admin: httpx.Client, stem: str) -> str:
    name = unique(stem)
    r = admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    return name


def _confined(repo: str, *actions: str) -> list[dict[str, Any]]:
    return [{"effect": "allow", "resource": f"arn:lakefs:fs:::repository/{repo}/*", "action": list(actions)}]


def _policy(admin: httpx.Client, statements: list[dict[str, Any]]) -> str:
    name = unique("pol")
    r = admin.post("/auth/policies", json={"id": name, "statement": statements})
    assert r.status_code == 201, r.text
    return name


def _user(admin: httpx.Client, *policies: str) -> tuple[str, tuple[str, str]]:
    name = unique("epoch")
    assert admin.post("/auth/users", json={"id": name}).status_code == 201
    for policy in policies:
        assert admin.put(f"/auth/users/{name}/policies/{policy}").status_code == 201
    creds = admin.post(f"/auth/users/{name}/credentials").json()
    return name, (creds["access_key_id"], creds["secret_access_key"])


def _scene(live: Live, admin: httpx.Client, through_group: bool) -> Scene:
    a, b = _repo(admin, "ep-a"), _repo(admin, "ep-b")
    b_data = os.urandom(300)  # a block of its own: a shares none with b
    upload(admin, b, "main", B_PATH, b_data)
    commit(admin, b, "main", "seed")
    writes_a = _policy(admin, _confined(a, "fs:ReadObject", "fs:WriteObject", "fs:List*"))
    reads_b = _policy(admin, _confined(b, "fs:ReadObject"))
    group = unique("readers")
    assert admin.post("/auth/groups", json={"id": group}).status_code == 201
    if through_group:
        assert admin.put(f"/auth/groups/{group}/policies/{reads_b}").status_code == 201
        user, keys = _user(admin, writes_a)
        assert admin.put(f"/auth/groups/{group}/members/{user}").status_code == 201
    else:
        user, keys = _user(admin, writes_a, reads_b)
    second = admin.post(f"/auth/users/{user}/credentials").json()["access_key_id"]
    _, other = _user(admin, _policy(admin, _confined(b, "fs:ReadObject")))
    return Scene(live, admin, a, b, b_data, user, keys, [keys[0], second], reads_b, group, other)


# How a user's access to b is taken away, and given back.
Change = Callable[[Scene], None]


def _ok(r: httpx.Response) -> None:
    assert r.is_success, r.text


REVOCATIONS: dict[str, tuple[bool, Change, Change]] = {
    "policy detached from the user": (
        False,
        lambda s: _ok(s.admin.delete(f"/auth/users/{s.user}/policies/{s.b_policy}")),
        lambda s: _ok(s.admin.put(f"/auth/users/{s.user}/policies/{s.b_policy}")),
    ),
    "policy detached from its group": (
        True,
        lambda s: _ok(s.admin.delete(f"/auth/groups/{s.group}/policies/{s.b_policy}")),
        lambda s: _ok(s.admin.put(f"/auth/groups/{s.group}/policies/{s.b_policy}")),
    ),
    "user taken out of the group": (
        True,
        lambda s: _ok(s.admin.delete(f"/auth/groups/{s.group}/members/{s.user}")),
        lambda s: _ok(s.admin.put(f"/auth/groups/{s.group}/members/{s.user}")),
    ),
    "policy edited": (
        True,
        lambda s: _ok(
            s.admin.put(
                f"/auth/policies/{s.b_policy}",
                json={"id": s.b_policy, "statement": _confined(unique("elsewhere"), "fs:ReadObject")},
            )
        ),
        lambda s: _ok(
            s.admin.put(
                f"/auth/policies/{s.b_policy}",
                json={"id": s.b_policy, "statement": _confined(s.b, "fs:ReadObject")},
            )
        ),
    ),
    "an access key deleted": (
        False,
        lambda s: _ok(s.admin.delete(f"/auth/users/{s.user}/credentials/{s.key_ids[1]}")),
        lambda s: None,
    ),
    "an AWS identity bound": (
        False,
        lambda s: _ok(
            s.admin.post(
                f"/auth/users/{s.user}/external/principals",
                params={"principalId": f"arn:aws:iam::123456789012:role/{s.user}"},
            )
        ),
        # Unbound again: other tests of the shared server log in with no principal bound.
        lambda s: _ok(
            s.admin.delete(
                f"/auth/users/{s.user}/external/principals",
                params={"principalId": f"arn:aws:iam::123456789012:role/{s.user}"},
            )
        ),
    ),
}


@pytest.fixture(params=["live", "live_pg"], ids=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Live:
    live: Live = request.getfixturevalue(request.param)
    return live


@pytest.fixture
def admin(server: Live) -> Iterator[httpx.Client]:
    with server.client((server.key_id, server.secret)) as c:
        yield c


def _signed(http: httpx.Client, repo: str, path: str) -> str:
    r = http.get(f"/repositories/{repo}/refs/main/objects/signed", params={"path": path})
    assert r.status_code == 200, r.text
    [locator] = r.json()["signed_locators"]
    return str(locator)


def _root(url: str) -> str:
    return url.removesuffix("/api/v1")


@dataclass
class Held:
    """What the user took while it could read b: a signed locator, a signed export of b and a
    challenge for b's block."""

    locator: str
    manifest: bytes
    bare: str
    nonce: str


def _take(s: Scene, url: str | None = None) -> Held:
    with s.client(url=url) as http, s.client(url=_root(url or s.live.url)) as blocks:
        locator = _signed(http, s.b, B_PATH)
        assert blocks.get(f"/blocks/{locator}").content == s.b_data
        manifest = http.get(f"/repositories/{s.b}/refs/main/manifest", params={"signed": "true"})
        assert manifest.status_code == 200 and b"+A" in manifest.content, manifest.text
        bare = locator.split("+A")[0]
        nonce = blocks.post("/blocks/missing", json={"locators": [bare]}).json()["challenges"][bare]
    return Held(locator, manifest.content, bare, nonce)


def _refused(r: httpx.Response) -> None:
    json_ = r.headers.get("content-type", "").startswith("application/json")
    assert r.status_code == 403 and json_ and r.json()["code"] == "signature_error", (
        r.status_code,
        r.text[:200] if json_ else "",
    )


def _attack(s: Scene, held: Held, url: str | None = None) -> None:
    """Every use of what was taken: all refused, nothing staged in a."""
    with s.client(url=url) as http, s.client(url=_root(url or s.live.url)) as blocks:
        _refused(blocks.get(f"/blocks/{held.locator}"))
        _refused(blocks.get(f"/blocks/{held.locator}", headers={"Range": "bytes=0-9"}))
        link = f"/repositories/{s.a}/branches/main/objects/link"
        _refused(http.post(link, json={"path": "stolen.bin", "segments": [held.locator]}))
        links = f"/repositories/{s.a}/branches/main/objects/links"
        _refused(http.post(links, json={"objects": [{"path": "stolen.bin", "segments": [held.locator]}]}))
        imported = f"/repositories/{s.a}/branches/main/manifest"
        _refused(http.post(imported, params={"prefix": "in"}, content=held.manifest))
        answer = hashlib.md5(held.nonce.encode() + s.b_data).hexdigest()
        proof = {"locator": held.bare, "nonce": held.nonce, "answer": answer}
        _refused(blocks.post("/blocks/prove", json=proof))
        diff = http.get(f"/repositories/{s.a}/branches/main/diff")
        assert diff.status_code == 200 and diff.json()["results"] == [], diff.text


@pytest.mark.parametrize("how", list(REVOCATIONS))
def test_signatures_made_before_a_revoke_read_and_claim_nothing(
    server: Live, admin: httpx.Client, how: str
) -> None:
    through_group, revoke, restore = REVOCATIONS[how]
    s = _scene(server, admin, through_group)
    held = _take(s)
    with s.client(s.other) as http:
        others = _signed(http, s.b, B_PATH)

    revoke(s)
    _attack(s, held)

    # The grant given back: the old signatures stay dead, new ones work.
    restore(s)
    _attack(s, held)
    with s.client() as http, s.client(url=_root(s.live.url)) as blocks:
        fresh = _signed(http, s.b, B_PATH)
        assert fresh != held.locator
        assert blocks.get(f"/blocks/{fresh}").content == s.b_data
        link = f"/repositories/{s.a}/branches/main/objects/link"
        r = http.post(link, json={"path": "given.bin", "segments": [fresh]})
        assert r.status_code == 201, r.text
        read = http.get(f"/repositories/{s.a}/refs/main/objects", params={"path": "given.bin"})
        assert read.content == s.b_data
    # Another user's signature of the same block never depended on this user's grants.
    with httpx.Client(base_url=_root(s.live.url), auth=s.other, timeout=30.0) as blocks:
        assert blocks.get(f"/blocks/{others}").content == s.b_data


def test_a_grant_given_changes_no_one_elses_signatures(server: Live, admin: httpx.Client) -> None:
    """Group and policy changes renew the epoch of the users they apply to only."""
    s = _scene(server, admin, through_group=True)
    with s.client(s.other) as http, s.client(s.other, _root(s.live.url)) as blocks:
        others = _signed(http, s.b, B_PATH)
        REVOCATIONS["policy detached from its group"][1](s)
        REVOCATIONS["policy edited"][1](s)
        assert admin.delete(f"/auth/groups/{s.group}").status_code == 204
        assert blocks.get(f"/blocks/{others}").content == s.b_data


# -- two servers over one database ----------------------------------------------------------------


@contextmanager
def _second_server(settings: Any) -> Iterator[str]:
    """Another server process's worth of state (its own app, caches and connections) over the
    same database and data directory, serving the API on a port of its own."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning", lifespan="on"))
    sock = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the second server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        sock.close()


def test_two_servers_over_one_database_agree_on_the_revoke(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> None:
    """The epoch lives in the database: a signature taken from one server is refused by the other
    once the revoke went through the first."""
    url = postgres_server.create_database()
    env = {"LAKECTL_SERVER_DATABASE_TYPE": "postgres", "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": url}
    settings = load_settings(None, str(tmp_path_factory.mktemp("two-servers")), environ=env)
    try:
        with (
            serve(settings) as first,
            _second_server(settings) as second,
            first.client((first.key_id, first.secret)) as admin,
        ):
            s = _scene(first, admin, through_group=True)
            held = _take(s, second)
            REVOCATIONS["policy detached from its group"][1](s)
            _attack(s, held, second)
            REVOCATIONS["policy detached from its group"][2](s)
            fresh = _take(s).locator  # signed by the first server, read through the second
            with s.client(url=_root(second)) as blocks:
                assert blocks.get(f"/blocks/{fresh}").content == s.b_data
    finally:
        postgres_server.drop_database(url)
