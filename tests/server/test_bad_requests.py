"""Bad requests get a 4xx with a clear message, never a 5xx, and store nothing partial."""

from __future__ import annotations

import base64
import hashlib
import random
import socket

import httpx
import pytest

from tests.server.conftest import Live, commit, upload


def state(api: httpx.Client, repo: str) -> tuple:
    branches = api.get(f"/repositories/{repo}/branches").json()["results"]
    objects = api.get(f"/repositories/{repo}/refs/main/objects/ls").json()["results"]
    diff = api.get(f"/repositories/{repo}/branches/main/diff").json()["results"]
    return (
        sorted((b["id"], b["commit_id"]) for b in branches),
        sorted((o["path"], o["checksum"]) for o in objects),
        sorted((d["path"], d["type"]) for d in diff),
    )


@pytest.fixture
def seeded(api: httpx.Client, repo: str) -> str:
    upload(api, repo, "main", "a.csv", b"1,2\n")
    commit(api, repo, "main", "seed")
    return repo


def _bad_cases(repo: str) -> list[tuple[str, str, dict]]:
    objects = f"/repositories/{repo}/branches/main/objects"
    return [
        ("POST", "/repositories", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}),
        ("POST", "/repositories", {"json": {"name": "Bad Name", "storage_namespace": "local://x"}}),
        ("POST", "/repositories", {"json": {"name": "okname", "storage_namespace": "x", "surprise": 1}}),
        ("POST", f"/repositories/{repo}/branches", {"json": {"name": "x..y", "source": "main"}}),
        ("POST", f"/repositories/{repo}/branches", {"json": {"name": "ok", "source": "main~zz"}}),
        ("POST", f"/repositories/{repo}/branches", {"json": ["not", "an", "object"]}),
        ("POST", f"/repositories/{repo}/branches/main/commits", {"json": {"message": 42}}),
        ("POST", objects, {"params": {"path": "a/../b"}, "content": b"x"}),
        ("POST", objects, {"params": {"path": "a\x00b"}, "content": b"x"}),
        ("POST", f"/repositories/{repo}/branches/main/objects/delete", {"json": {"paths": "a.csv"}}),
        ("POST", f"/repositories/{repo}/refs/main/merge/nope", {"json": {}}),
        ("GET", f"/repositories/{repo}/refs/main~99/objects/ls", {}),
        ("GET", f"/repositories/{repo}/refs/main/diff/main^^^^", {}),
        (
            "POST",
            f"/repositories/{repo}/branches/main/objects/link",
            {"json": {"path": "stolen", "segments": [hashlib.md5(b"1,2\n").hexdigest() + "+4"]}},
        ),
        (
            "POST",
            f"/repositories/{repo}/branches/main/objects/link",
            {
                "json": {
                    "path": "forged",
                    "segments": [hashlib.md5(b"1,2\n").hexdigest() + "+4+A" + "0" * 40 + "@ffffffff"],
                }
            },
        ),
        ("POST", f"/repositories/{repo}/branches/main/manifest", {"content": b"not a manifest"}),
        ("POST", f"/repositories/{repo}/branches/main/manifest", {"content": b"\xff\xfe"}),
    ]


def test_each_bad_request_is_a_4xx_and_changes_nothing(api: httpx.Client, seeded: str) -> None:
    before = state(api, seeded)
    for method, path, kw in _bad_cases(seeded):
        r = api.request(method, path, **kw)
        assert 400 <= r.status_code < 500, (method, path, r.status_code, r.text)
        assert r.json().get("message"), (method, path, r.text)
    assert state(api, seeded) == before


def test_blocks_refuse_mismatched_oversized_and_forged_input(api: httpx.Client, live: Live) -> None:
    base = live.url.removesuffix("/api/v1")
    with httpx.Client(base_url=base, auth=(live.key_id, live.secret), timeout=30) as raw:
        md5 = hashlib.md5(b"full body").hexdigest()
        r = raw.put(f"/blocks/{md5}", content=b"truncated")
        assert r.status_code == 400 and "does not match" in r.json()["message"]
        r = raw.put("/blocks/not-a-hash", content=b"x")
        assert r.status_code == 400
        status = send_partial(live, f"/blocks/{md5}", "PUT", 65 * 1024 * 1024, b"x" * 1000)
        assert status is None or 400 <= status < 500
        assert raw.post("/blocks/missing", json={"locators": [f"{md5}+9"]}).json()["missing"] == [f"{md5}+9"]
        forged = f"{md5}+9+A{'1' * 40}@ffffffff"
        assert raw.get(f"/blocks/{forged}").status_code == 403
        r = raw.post("/blocks/prove", json={"locator": f"{md5}+9", "nonce": "0.0", "answer": "0" * 32})
        assert r.status_code == 403


def send_partial(live: Live, path: str, method: str, declared: int, body: bytes) -> int | None:
    """Send a request whose body is shorter than its Content-Length, then hang up; the status
    the server answered before that, if any."""
    url = httpx.URL(live.url)
    token = base64.b64encode(f"{live.key_id}:{live.secret}".encode()).decode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Basic {token}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {declared}\r\n\r\n"
    )
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        sock.shutdown(socket.SHUT_WR)
        try:
            answer = sock.recv(200)
        except OSError:
            return None
    return int(answer.split()[1]) if answer.startswith(b"HTTP/") else None


def test_a_truncated_upload_stores_nothing(api: httpx.Client, seeded: str, live: Live) -> None:
    before = state(api, seeded)
    path = f"/api/v1/repositories/{seeded}/branches/main/objects?path=cut.bin"
    status = send_partial(live, path, "POST", 1000, b"only part of it")
    assert status is None or status < 500
    assert state(api, seeded) == before


def test_random_junk_never_gets_a_5xx(api: httpx.Client, seeded: str) -> None:
    rng = random.Random(7)
    paths = [
        "/repositories",
        f"/repositories/{seeded}/branches",
        f"/repositories/{seeded}/tags",
        f"/repositories/{seeded}/branches/main/commits",
        f"/repositories/{seeded}/refs/main/merge/main",
        f"/repositories/{seeded}/branches/main/objects/delete",
        f"/repositories/{seeded}/branches/main/revert",
        f"/repositories/{seeded}/branches/main/cherry-pick",
        f"/repositories/{seeded}/branches/main/objects/copy",
    ]
    junk: list[object] = [
        None,
        1,
        "x",
        [],
        {},
        {"name": None},
        {"name": 5},
        {"message": ""},
        {"paths": [1, 2]},
        {"ref": "", "parent_number": -1},
        {"src_path": "../x", "src_ref": "main"},
        "\x00" * 3,
    ]
    for _ in range(120):
        path = rng.choice(paths)
        body = rng.choice(junk)
        r = api.post(path, json=body)
        assert r.status_code < 500, (path, body, r.status_code, r.text)
