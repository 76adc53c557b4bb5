"""What reaches the REST API from the wire: text that is not valid Unicode, bodies and values over
the limits, and clients that hang up, are refused (400) or logged as routine, never a 5xx, and
store nothing; records stored before those checks still render."""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from lakectl.core import porcelain as p
from lakectl.core.graph.commits import CommitRequest
from lakectl.core.limits import MAX_MESSAGE_BYTES, MAX_METADATA_ENTRIES, MAX_PATH_BYTES
from lakectl.core.model import BranchId, RepositoryId
from server.api.edge import MAX_JSON_BODY
from tests.server.conftest import Live, changes, commit, plumbing, snapshot, unique, upload

JSON = {"Content-Type": "application/json"}


def _raw_json(api: httpx.Client, method: str, path: str, text: str, **kw: object) -> httpx.Response:
    """Send ``text`` as the JSON body, as written: ``\\udcff`` escapes stay escapes, and a lone
    surrogate itself is sent as its bytes (``ED B3 BF``)."""
    return api.request(method, path, content=text.encode("utf-8", "surrogatepass"), headers=JSON, **kw)  # type: ignore[arg-type]


@pytest.fixture
def seeded(api: httpx.Client, repo: str) -> str:
    upload(api, repo, "main", "a.csv", b"1,2\n")
    commit(api, repo, "main", "seed")
    upload(api, repo, "main", "staged.csv", b"3,4\n")
    return repo


def test_lone_surrogates_in_json_bodies_are_refused_and_store_nothing(
    api: httpx.Client, live: Live, seeded: str
) -> None:
    branch = f"/repositories/{seeded}/branches/main"
    cases = [
        (f"{branch}/commits", '{"message": "fix \\udcff"}', "message"),
        (f"{branch}/commits", '{"message": "fix \\uDCFF"}', "message"),
        (f"{branch}/commits", '{"message": "m", "metadata": {"k": "raw \udcff bytes"}}', "metadata.k"),
        (f"{branch}/commits", '{"message": "m", "metadata": {"k\\udcff": "v"}}', "metadata"),
        (f"{branch}/commits", '{"message": "m", "metadata": {"k": "\\ud800"}}', "metadata.k"),
        (f"{branch}/objects/copy?dest_path=b.csv", '{"src_path": "a\\udcff"}', "src_path"),
        (
            f"{branch}/objects/copy?dest_path=b.csv",
            '{"src_path": "a.csv", "src_ref": "m\\udcffain"}',
            "src_ref",
        ),
        (f"{branch}/objects/delete", '{"paths": ["a.csv", "x\\udcff"]}', "paths[1]"),
        (f"{branch}/objects/link", '{"path": "l\\udcff", "segments": []}', "path"),
        (f"/repositories/{seeded}/refs/main/merge/main", '{"message": "\\udcff"}', "message"),
        ("/auth/login", '{"access_key_id": "AKIA\\udcff", "secret_access_key": "x"}', "access_key_id"),
    ]
    before = snapshot(live.data_dir)
    for path, text, field in cases:
        r = _raw_json(api, "POST", path, text)
        assert r.status_code == 400, (path, text, r.status_code, r.text)
        body = r.json()
        assert body["code"] == "invalid_argument" and "not valid Unicode" in body["message"], body
        assert body["details"]["field"] == field, (text, body)
    after = snapshot(live.data_dir)
    assert after == before, changes(before, after)
    log = api.get(f"/repositories/{seeded}/refs/main/commits")
    assert log.status_code == 200 and log.json()["results"][0]["message"] == "seed"


def test_paths_and_queries_that_are_not_utf8_are_refused(api: httpx.Client, live: Live, seeded: str) -> None:
    """Starlette would make ``%ff`` a U+FFFD and store that; the edge refuses it instead."""
    branch = f"/repositories/{seeded}/branches/main"
    before = snapshot(live.data_dir)
    r = api.post(f"{branch}/objects?path=bad%FFname", content=b"x")
    assert r.status_code == 400 and "query parameter 'path' is not UTF-8" in r.json()["message"], r.text
    r = api.post(f"{branch}/objects?path=bad%ED%B3%BFname", content=b"x")  # an encoded lone surrogate
    assert r.status_code == 400, r.text
    r = api.delete(f"{branch}/objects?path=a.csv&force=%FF")
    assert r.status_code == 400, r.text
    r = api.get(f"/repositories/{seeded}/refs/main/objects/ls?prefix=%C3")
    assert r.status_code == 400 and "'prefix'" in r.json()["message"], r.text
    r = api.post(f"/repositories/{seeded}/tags", json={"id": "t1", "ref": "main"})
    assert r.status_code == 201, r.text  # the control case: a plain request passes
    for path in (f"/repositories/{seeded}/tags/t%FF1", f"/repositories/{seeded}/branches/ma%ED%B3%BFin"):
        r = api.delete(path)
        assert r.status_code == 400 and "the path is not UTF-8" in r.json()["message"], (path, r.text)
    api.delete(f"/repositories/{seeded}/tags/t1")
    after = snapshot(live.data_dir)
    assert after == before, changes(before, after)


def test_metadata_headers_are_utf8_text_within_the_limits(api: httpx.Client, live: Live, seeded: str) -> None:
    objects = f"/repositories/{seeded}/branches/main/objects"
    r = api.post(
        objects, params={"path": "utf8.bin"}, content=b"x", headers={"x-lakefs-meta-city": "Zürich".encode()}
    )
    assert r.status_code == 201, r.text
    stat = api.get(f"/repositories/{seeded}/refs/main/objects/stat", params={"path": "utf8.bin"})
    assert stat.json()["metadata"] == {"city": "Zürich"}  # not the latin-1 reading "ZÃ¼rich"
    before = snapshot(live.data_dir)
    refused = {
        "not UTF-8": {"x-lakefs-meta-k": b"caf\xe9"},
        "value over 4 KiB": {"x-lakefs-meta-k": b"v" * 4097},
        "value of 1 MB": {"x-lakefs-meta-k": b"v" * (1 << 20)},
        "key over 256 bytes": {"x-lakefs-meta-" + "k" * 257: b"v"},
        "too many": {f"x-lakefs-meta-k{i}": b"v" for i in range(MAX_METADATA_ENTRIES + 1)},
    }
    for name, headers in refused.items():
        r = api.post(objects, params={"path": "refused.bin"}, content=b"x" * 1000, headers=headers)
        assert r.status_code == 400 and r.json()["code"] == "invalid_argument", (name, r.text)
    after = snapshot(live.data_dir)
    assert after == before, changes(before, after)


def test_a_stored_lone_surrogate_does_not_break_the_log(api: httpx.Client, live: Live, seeded: str) -> None:
    """A commit written before the edge checks (here through the plumbing, which has none)."""
    with plumbing(live.data_dir) as lake:
        request = CommitRequest(
            message="old \udcff message",
            committer="legacy",
            metadata={"k\udcff": "v\ud800"},
            creation_date=int(time.time()),
        )
        stored = lake.committer.commit(RepositoryId(seeded), BranchId("main"), request)
    log = api.get(f"/repositories/{seeded}/refs/main/commits")
    assert log.status_code == 200, log.text
    newest = log.json()["results"][0]
    assert newest["id"] == stored.id
    assert newest["message"] == "old \udcff message" and newest["metadata"] == {"k\udcff": "v\ud800"}
    one = api.get(f"/repositories/{seeded}/commits/{stored.id}")
    assert one.status_code == 200 and one.json()["message"] == "old \udcff message"


def send_partial(
    live: Live, path: str, method: str, declared: int, body: bytes, content_type: str, wait: bool = True
) -> bytes:
    """Send headers announcing ``declared`` bytes and then ``body`` (fewer); with ``wait``,
    what the server answered before the client hung up (b"" if nothing), else hang up at once."""
    url = httpx.URL(live.url)
    token = base64.b64encode(f"{live.key_id}:{live.secret}".encode()).decode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Basic {token}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {declared}\r\n\r\n"
    )
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        if not wait:
            return b""
        try:
            return sock.recv(4096)
        except OSError:
            return b""


def test_oversized_bodies_and_values_are_400_and_store_nothing(
    api: httpx.Client, live: Live, seeded: str
) -> None:
    commits = f"/repositories/{seeded}/branches/main/commits"
    before = snapshot(live.data_dir)
    # A 60 MB commit message is refused from its Content-Length, before its body is read.
    answer = send_partial(live, f"/api/v1{commits}", "POST", 60_000_000, b'{"message": "', "application/json")
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert str(MAX_JSON_BODY).encode() in answer

    # Sent chunked (no Content-Length), it is refused once the cap is passed.
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(MAX_JSON_BODY // (1 << 20) + 2):
            yield b"x" * (1 << 20)
        yield b'"}'

    r = api.post(commits, content=chunks(), headers=JSON)
    assert r.status_code == 400 and "JSON body is larger" in r.json()["message"], r.text
    too_big = {
        "message": {"message": "m" * (MAX_MESSAGE_BYTES + 1)},
        "metadata value": {"message": "m", "metadata": {"k": "v" * 4097}},
        "metadata key": {"message": "m", "metadata": {"k" * 257: "v"}},
        "metadata entries": {
            "message": "m",
            "metadata": {f"k{i}": "v" for i in range(MAX_METADATA_ENTRIES + 1)},
        },
    }
    for name, body in too_big.items():
        r = api.post(commits, json=body)
        assert r.status_code == 400 and r.json()["code"] == "invalid_argument", (name, r.text)
    long_path = "p" * (MAX_PATH_BYTES + 1)
    r = api.post(f"/repositories/{seeded}/branches/main/objects", params={"path": long_path}, content=b"x")
    assert r.status_code == 400, r.text
    r = api.post(
        f"/repositories/{seeded}/branches/main/objects/copy",
        params={"dest_path": long_path},
        json={"src_path": "a.csv"},
    )
    assert r.status_code == 400, r.text
    after = snapshot(live.data_dir)
    assert after == before, changes(before, after)


@pytest.fixture(scope="module")
def many_tags(live: Live) -> str:
    """A repository with 101 tags: one more than the default page."""
    name = unique("tags")
    with plumbing(live.data_dir) as lake:
        p.create_repo(lake, name, "main", f"local://{name}")
        for i in range(101):
            p.create_tag(lake, name, f"t{i:03d}", "main")
    return name


@pytest.mark.parametrize(
    "amount,status,size",
    [(-1, 200, 100), (0, 200, 100), (1, 200, 1), (1000, 200, 101), (-2, 400, 0), (1001, 400, 0)],
)
def test_amount_follows_lakefs_pagination_amount(
    api: httpx.Client, many_tags: str, amount: int, status: int, size: int
) -> None:
    """lakeFS's ``PaginationAmount``: -1 to 1000, where -1 and 0 mean the default page (100)."""
    r = api.get(f"/repositories/{many_tags}/tags", params={"amount": amount})
    assert r.status_code == status, r.text
    if status == 200:
        assert len(r.json()["results"]) == size and r.json()["pagination"]["max_per_page"] == 1000
    else:
        assert "amount" in r.json()["message"]


def _wait_for(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [r for r in caplog.records if text in r.getMessage()]
        if found:
            return found
        time.sleep(0.02)
    return []


@pytest.mark.parametrize("route", ["PUT /blocks", "POST commits"])
def test_a_client_hanging_up_mid_body_is_one_info_line(
    live: Live, seeded: str, caplog: pytest.LogCaptureFixture, route: str
) -> None:
    caplog.set_level(logging.INFO, logger="lakectl.server")
    if route == "PUT /blocks":
        path, content_type = f"/blocks/{hashlib.md5(b'whole').hexdigest()}", "application/octet-stream"
    else:
        path, content_type = f"/api/v1/repositories/{seeded}/branches/main/commits", "application/json"
    method = route.split()[0]
    send_partial(live, path, method, 1000, b'{"message": "only part', content_type, wait=False)
    found = _wait_for(caplog, "disconnected")
    assert found, [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in found] == [logging.INFO] and found[0].exc_info is None
    server = [r for r in caplog.records if r.name.startswith("lakectl.server")]
    assert not [r for r in server if r.levelno >= logging.WARNING or r.exc_info], [
        r.getMessage() for r in server
    ]
