"""Presigned URLs: the REST API hands them out as lakeFS (stat ``presign=true`` puts one in
``physical_address``; a read with ``presign=true`` redirects to one), and a plain HTTP client
without credentials reads the object through one until it expires; an altered URL, an expired
one, or one whose signer was deleted is refused."""

from __future__ import annotations

import time

import httpx

from tests.server.conftest import Live, commit, upload

STAT = "/repositories/{}/refs/{}/objects/stat"


def _presign(api: httpx.Client, repo: str, ref: str, path: str, **extra: object) -> dict:
    r = api.get(STAT.format(repo, ref), params={"path": path, "presign": True, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_plain_client_reads_through_a_presigned_url(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "data/a.bin", b"0123456789")
    stats = _presign(api, repo, "main", "data/a.bin")
    url = stats["physical_address"]
    assert url.startswith("http://127.0.0.1:") and "/presigned/" in url
    assert 14 * 60 < stats["physical_address_expiry"] - time.time() <= 15 * 60
    assert stats["size_bytes"] == 10 and stats["path"] == "data/a.bin"
    got = httpx.get(url)  # no credentials
    assert got.status_code == 200 and got.content == b"0123456789"
    assert got.headers["ETag"] == f'"{stats["checksum"]}"'
    part = httpx.get(url, headers={"Range": "bytes=2-4"})
    assert part.status_code == 206 and part.content == b"234"
    # The URL names this version of the object: it keeps serving it after the branch moves on.
    upload(api, repo, "main", "data/a.bin", b"changed")
    commit(api, repo, "main", "change")
    assert httpx.get(url).content == b"0123456789"


def test_read_with_presign_redirects(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "r.txt", b"redirected")
    r = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "r.txt", "presign": True})
    assert r.status_code == 302 and "/presigned/" in r.headers["Location"]
    assert httpx.get(r.headers["Location"]).content == b"redirected"


def test_altered_and_expired_urls_are_refused(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "x.txt", b"secret")
    url = _presign(api, repo, "main", "x.txt")["physical_address"]
    base, token = url.rsplit("/", 1)
    body, mac = token.split(".")
    flipped_mac = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    flipped_body = ("A" if body[0] != "A" else "B") + body[1:]
    for bad in (f"{body}.{flipped_mac}", f"{flipped_body}.{mac}", body, "x", "a" * 7000):
        r = httpx.get(f"{base}/{bad}")
        assert r.status_code == 403, (bad[:40], r.status_code, r.text)
        assert r.json()["code"] == "signature_error"
    short = _presign(api, repo, "main", "x.txt", presign_expiry=1)["physical_address"]
    time.sleep(1.1)
    deadline = time.time() + 3
    while httpx.get(short).status_code == 200 and time.time() < deadline:
        time.sleep(0.2)
    expired = httpx.get(short)
    assert expired.status_code == 403 and "expired" in expired.json()["message"]
    assert httpx.get(url).content == b"secret"  # the long-lived one still works


def test_bad_expiry_and_missing_objects(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "x.txt", b"x")
    for bad in (0, -5, 8 * 24 * 3600, "soon"):
        r = api.get(
            STAT.format(repo, "main"), params={"path": "x.txt", "presign": True, "presign_expiry": bad}
        )
        assert r.status_code == 400, (bad, r.text)
    r = api.get(STAT.format(repo, "main"), params={"path": "nope", "presign": True})
    assert r.status_code == 404


def test_a_deleted_users_urls_stop_working(live: Live, api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "x.txt", b"theirs")
    user = f"presigner-{repo}"
    assert api.post("/auth/users", json={"id": user}).status_code == 201
    assert api.put(f"/auth/groups/Developers/members/{user}").status_code == 201
    creds = api.post(f"/auth/users/{user}/credentials").json()
    with live.client((creds["access_key_id"], creds["secret_access_key"])) as theirs:
        url = _presign(theirs, repo, "main", "x.txt")["physical_address"]
    assert httpx.get(url).content == b"theirs"
    assert api.delete(f"/auth/users/{user}").status_code == 204
    refused = httpx.get(url)
    assert refused.status_code == 403 and refused.json()["code"] == "signature_error"
