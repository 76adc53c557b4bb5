"""Objects: uploads (raw, multipart, conditional), reads with Range, HEAD, stat, listing, deletes, copy."""

from __future__ import annotations

import base64
import hashlib
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server.conftest import Live, commit, upload


def obj_url(repo: str, ref: str, suffix: str = "") -> str:
    return f"/repositories/{repo}/refs/{ref}/objects{suffix}"


def staged(api: httpx.Client, repo: str, branch: str = "main") -> list[str]:
    return [d["path"] for d in api.get(f"/repositories/{repo}/branches/{branch}/diff").json()["results"]]


def test_raw_upload_stat_and_read(api: httpx.Client, repo: str) -> None:
    data = b"a,b\n1,2\n"
    stats = upload(
        api, repo, "main", "data/a.csv", data, **{"Content-Type": "text/csv", "x-lakefs-meta-owner": "me"}
    )
    assert stats["path"] == "data/a.csv" and stats["path_type"] == "object"
    assert stats["checksum"] == hashlib.md5(data).hexdigest() and stats["size_bytes"] == len(data)
    assert stats["content_type"] == "text/csv" and stats["metadata"] == {"owner": "me"}
    assert stats["physical_address"].startswith("local://") and isinstance(stats["mtime"], int)
    assert api.get(obj_url(repo, "main", "/stat"), params={"path": "data/a.csv"}).json() == stats
    plain = api.get(
        obj_url(repo, "main", "/stat"), params={"path": "data/a.csv", "user_metadata": False}
    ).json()
    assert "metadata" not in plain
    r = api.get(obj_url(repo, "main"), params={"path": "data/a.csv"})
    assert r.status_code == 200 and r.content == data
    assert r.headers["content-type"] == "text/csv" and r.headers["etag"] == f'"{stats["checksum"]}"'
    assert r.headers["content-length"] == str(len(data))


def test_multipart_upload(api: httpx.Client, repo: str) -> None:
    data = bytes(range(256)) * 10
    r = api.post(
        f"/repositories/{repo}/branches/main/objects",
        params={"path": "bin/blob"},
        files={"content": ("blob", data, "application/x-thing")},
    )
    assert r.status_code == 201, r.text
    assert r.json()["size_bytes"] == len(data) and r.json()["content_type"] == "application/x-thing"
    assert api.get(obj_url(repo, "main"), params={"path": "bin/blob"}).content == data


def test_bad_multipart_uploads_stage_nothing(api: httpx.Client, repo: str) -> None:
    url = f"/repositories/{repo}/branches/main/objects"
    cases = [
        (b'--xyz\r\nContent-Disposition: form-data; name="content"\r\n\r\npartial', "truncated"),
        (b'--xyz\r\nContent-Disposition: form-data; name="other"\r\n\r\nv\r\n--xyz--\r\n', "content"),
    ]
    for body, needle in cases:
        r = api.post(
            url,
            params={"path": "x"},
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=xyz"},
        )
        assert r.status_code == 400 and needle in r.json()["message"]
    r = api.post(url, params={"path": "x"}, content=b"", headers={"Content-Type": "multipart/form-data"})
    assert r.status_code == 400
    assert staged(api, repo) == []


def test_ranges_and_conditional_reads(api: httpx.Client, repo: str) -> None:
    data = b"0123456789"
    etag = f'"{upload(api, repo, "main", "digits", data)["checksum"]}"'
    url = obj_url(repo, "main")
    for header, status, body in [
        ("bytes=2-4", 206, b"234"),
        ("bytes=7-", 206, b"789"),
        ("bytes=-2", 206, b"89"),
        ("bytes=5-100", 206, b"56789"),
    ]:
        r = api.get(url, params={"path": "digits"}, headers={"Range": header})
        assert (r.status_code, r.content) == (status, body), header
        assert r.headers["content-length"] == str(len(body))
    r = api.get(url, params={"path": "digits"}, headers={"Range": "bytes=2-4"})
    assert r.headers["content-range"] == "bytes 2-4/10"
    for bad in ("bytes=10-", "bytes=4-2", "lines=1-2"):
        r = api.get(url, params={"path": "digits"}, headers={"Range": bad})
        assert r.status_code == 416 and r.headers["content-range"] == "bytes */10" and r.json()["message"]
    r = api.get(url, params={"path": "digits"}, headers={"If-None-Match": etag})
    assert r.status_code == 304 and r.content == b""


def test_head(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "h", b"hello")
    r = api.head(obj_url(repo, "main"), params={"path": "h"})
    assert r.status_code == 200 and r.headers["content-length"] == "5" and r.content == b""
    r = api.head(obj_url(repo, "main"), params={"path": "h"}, headers={"Range": "bytes=1-2"})
    assert r.status_code == 206 and r.headers["content-length"] == "2"
    assert api.head(obj_url(repo, "main"), params={"path": "nope"}).status_code == 404


def test_missing_objects_and_refs(api: httpx.Client, repo: str) -> None:
    r = api.get(obj_url(repo, "main"), params={"path": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "object_not_found"
    assert api.get(obj_url(repo, "nobranch"), params={"path": "x"}).status_code == 404
    assert api.get(obj_url("no-such-repo", "main"), params={"path": "x"}).status_code == 404


def test_listing_with_delimiter_and_pages(api: httpx.Client, repo: str) -> None:
    for path in ("a/1", "a/2", "b/x/1", "c", "d"):
        upload(api, repo, "main", path, path.encode())
    ls = obj_url(repo, "main", "/ls")
    top = api.get(ls, params={"delimiter": "/"}).json()
    assert [(o["path"], o["path_type"]) for o in top["results"]] == [
        ("a/", "common_prefix"),
        ("b/", "common_prefix"),
        ("c", "object"),
        ("d", "object"),
    ]
    assert {"checksum", "mtime", "physical_address"} <= set(top["results"][0])  # lakeFS requires them
    assert [o["path"] for o in api.get(ls, params={"prefix": "b/", "delimiter": "/"}).json()["results"]] == [
        "b/x/"
    ]
    paths, after = [], ""
    while True:
        body = api.get(ls, params={"amount": 2, "after": after}).json()
        paths += [o["path"] for o in body["results"]]
        assert body["pagination"]["results"] == len(body["results"]) <= 2
        if not body["pagination"]["has_more"]:
            break
        after = body["pagination"]["next_offset"]
    assert paths == ["a/1", "a/2", "b/x/1", "c", "d"]


def test_conditional_upload(api: httpx.Client, repo: str) -> None:
    url = f"/repositories/{repo}/branches/main/objects"
    first = api.post(url, params={"path": "once"}, content=b"v1", headers={"If-None-Match": "*"})
    assert first.status_code == 201
    again = api.post(url, params={"path": "once"}, content=b"v2", headers={"If-None-Match": "*"})
    assert again.status_code == 412 and again.json()["message"]
    wrong = api.post(url, params={"path": "once"}, content=b"v2", headers={"If-Match": '"0000"'})
    assert wrong.status_code == 412
    right = api.post(
        url, params={"path": "once"}, content=b"v2", headers={"If-Match": f'"{first.json()["checksum"]}"'}
    )
    assert right.status_code == 201
    assert api.get(obj_url(repo, "main"), params={"path": "once"}).content == b"v2"


def test_uploads_go_to_branches_only(api: httpx.Client, repo: str) -> None:
    api.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": "main"})
    url = f"/repositories/{repo}/branches/v1/objects"
    assert api.post(url, params={"path": "x"}, content=b"x").status_code == 404
    assert (
        api.post(
            f"/repositories/{repo}/branches/main/objects", params={"path": "/abs"}, content=b"x"
        ).status_code
        == 400
    )
    assert staged(api, repo) == []


def test_delete_one_and_many(api: httpx.Client, repo: str) -> None:
    for path in ("k1", "k2", "k3", "k4"):
        upload(api, repo, "main", path, b"x")
    commit(api, repo, "main", "four")
    url = f"/repositories/{repo}/branches/main/objects"
    assert api.delete(url, params={"path": "k1"}).status_code == 204
    assert api.delete(url, params={"path": "k1"}).status_code == 404
    r = api.post(url + "/delete", json={"paths": ["k2", "k3", "never-was", "../bad"]})
    assert r.status_code == 200
    assert [(e["path"], e["status_code"]) for e in r.json()["errors"]] == [("../bad", 400)]
    left = api.get(obj_url(repo, "main", "/ls")).json()["results"]
    assert [o["path"] for o in left] == ["k4"]
    too_many = api.post(url + "/delete", json={"paths": [f"p{i}" for i in range(1001)]})
    assert too_many.status_code == 400


def test_copy_shares_the_data(api: httpx.Client, repo: str) -> None:
    src = upload(api, repo, "main", "orig", b"payload", **{"Content-Type": "text/plain"})
    commit(api, repo, "main", "orig")
    url = f"/repositories/{repo}/branches/main/objects/copy"
    r = api.post(url, params={"dest_path": "copy/of"}, json={"src_path": "orig", "src_ref": "main"})
    assert r.status_code == 201
    copied = r.json()
    assert copied["path"] == "copy/of" and copied["checksum"] == src["checksum"]
    assert copied["physical_address"] == src["physical_address"]
    assert api.get(obj_url(repo, "main"), params={"path": "copy/of"}).content == b"payload"
    assert api.post(url, params={"dest_path": "x"}, json={"src_path": "missing"}).status_code == 404
    assert api.post(url, params={"dest_path": "../x"}, json={"src_path": "orig"}).status_code == 400


@pytest.mark.parametrize("size", [0, 1, 3 * 1024 * 1024 + 7])
def test_sizes_round_trip(api: httpx.Client, repo: str, size: int) -> None:
    data = (b"lakectl!" * (size // 8 + 1))[:size]
    stats = upload(api, repo, "main", f"size/{size}", data)
    assert stats["size_bytes"] == size and stats["checksum"] == hashlib.md5(data).hexdigest()
    assert api.get(obj_url(repo, "main"), params={"path": f"size/{size}"}).content == data


def test_a_truncated_raw_upload_stages_nothing(api: httpx.Client, live: Live, repo: str) -> None:
    """The client announces 1000 bytes, sends a few and goes away: nothing may be staged."""
    url = urlsplit(live.url)
    token = base64.b64encode(f"{live.key_id}:{live.secret}".encode()).decode()
    head = (
        f"POST {url.path}/repositories/{repo}/branches/main/objects?path=cut HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nAuthorization: Basic {token}\r\nContent-Length: 1000\r\n\r\n"
    )
    with socket.create_connection((url.hostname, url.port), timeout=10) as s:
        s.sendall(head.encode() + b"only part of it")
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        while s.recv(65536):
            pass
    assert staged(api, repo) == []
    assert api.get(obj_url(repo, "main", "/stat"), params={"path": "cut"}).status_code == 404
