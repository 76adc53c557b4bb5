"""Health, set-up, config, authentication and the error contract of every route family."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.server.conftest import Live, upload

PROTECTED = [
    ("GET", "/config", None),
    ("GET", "/config/storage", None),
    ("GET", "/config/version", None),
    ("GET", "/repositories", None),
    ("POST", "/repositories", {"name": "never", "storage_namespace": "local://never"}),
    ("GET", "/repositories/x", None),
    ("DELETE", "/repositories/x", None),
    ("GET", "/repositories/x/branches", None),
    ("POST", "/repositories/x/branches", {"name": "b", "source": "main"}),
    ("PUT", "/repositories/x/branches/main", {"type": "reset"}),
    ("GET", "/repositories/x/tags", None),
    ("POST", "/repositories/x/branches/main/commits", {"message": "m"}),
    ("GET", "/repositories/x/commits/abc", None),
    ("GET", "/repositories/x/refs/main/commits", None),
    ("GET", "/repositories/x/refs/main/objects?path=a", None),
    ("GET", "/repositories/x/refs/main/objects/ls", None),
    ("POST", "/repositories/x/branches/main/objects?path=a", None),
    ("POST", "/repositories/x/branches/main/objects/delete", {"paths": ["a"]}),
    ("GET", "/repositories/x/refs/main/diff/dev", None),
    ("GET", "/repositories/x/branches/main/diff", None),
    ("POST", "/repositories/x/refs/dev/merge/main", {}),
]


def test_healthcheck_is_public(anon: httpx.Client) -> None:
    r = anon.get("/healthcheck")
    assert r.status_code == 204 and r.content == b""


def test_setup_happens_once(anon: httpx.Client) -> None:
    assert anon.get("/setup_lakefs").json()["state"] == "initialized"
    r = anon.post("/setup_lakefs", json={"username": "intruder"})
    assert r.status_code == 409 and r.json()["code"] == "already_exists"
    assert r.json()["message"]


def test_config_reports_no_presigned_urls(api: httpx.Client) -> None:
    config = api.get("/config").json()
    storage = config["storage_config"]
    assert storage["pre_sign_support"] is False and storage["pre_sign_support_ui"] is False
    assert storage["blockstore_type"] == "local"
    assert config["version_config"]["version"]
    assert api.get("/config/storage").json() == storage
    assert api.get("/config/version").json() == config["version_config"]


@pytest.mark.parametrize("method,path,body", PROTECTED, ids=[f"{m} {p}" for m, p, _ in PROTECTED])
def test_every_route_wants_credentials(anon: httpx.Client, live: Live, method: str, path: str, body) -> None:
    for auth in (None, (live.key_id, "wrong-secret"), ("AKIANOSUCHKEY", live.secret)):
        r = anon.request(method, path, json=body, auth=auth)
        assert r.status_code == 401, (auth, r.text)
        assert r.json()["message"] and r.json()["code"] == "unauthenticated"
        assert r.headers["www-authenticate"].startswith("Basic")


@pytest.mark.parametrize(
    "header",
    ["Basic", "Basic !!!notbase64", "Bearer abc", "Basic " + base64.b64encode(b"no-colon").decode()],
)
def test_malformed_authorization_is_401(anon: httpx.Client, header: str) -> None:
    r = anon.get("/repositories", headers={"Authorization": header})
    assert r.status_code == 401 and r.json()["message"]


def test_refused_writes_change_nothing(api: httpx.Client, anon: httpx.Client, repo: str) -> None:
    r = anon.post(f"/repositories/{repo}/branches/main/objects", params={"path": "x"}, content=b"data")
    assert r.status_code == 401
    r = anon.post(f"/repositories/{repo}/branches", json={"name": "sneaky", "source": "main"})
    assert r.status_code == 401
    assert api.get(f"/repositories/{repo}/branches/main/diff").json()["results"] == []
    assert [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]] == ["main"]


def test_unknown_routes_and_methods(api: httpx.Client) -> None:
    r = api.get("/no/such/route")
    assert r.status_code == 404 and r.json()["message"]
    r = api.patch("/repositories")
    assert r.status_code == 405 and r.json()["message"]


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"{not json", "malformed JSON"),
        (b'{"name": "x", "storage_namespace": "local://x", "colour": "red"}', "colour"),
        (b'{"name": 7, "storage_namespace": "local://x"}', "name"),
        (b'{"storage_namespace": "local://x"}', "name"),
        (b"[]", "invalid request"),
        (b"", "invalid request"),
    ],
)
def test_bad_bodies_are_400(api: httpx.Client, content: bytes, needle: str) -> None:
    before = api.get("/repositories").json()["results"]
    r = api.post("/repositories", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    body = r.json()
    assert needle in body["message"] and body["code"] == "invalid_argument"
    assert api.get("/repositories").json()["results"] == before


@pytest.mark.parametrize("params", [{"amount": 1001}, {"amount": -2}, {"amount": "many"}, {"amount": 1.5}])
def test_bad_query_values_are_400(api: httpx.Client, params: dict) -> None:
    r = api.get("/repositories", params=params)
    assert r.status_code == 400 and "amount" in r.json()["message"]


def test_bad_input_in_each_family_is_4xx_never_5xx(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "a", b"1")
    cases = [
        ("POST", "/repositories", {"name": "Bad_Name", "storage_namespace": "local://x"}, 400),
        ("POST", "/repositories", {"name": "okname", "storage_namespace": "nowhere"}, 400),
        ("POST", f"/repositories/{repo}/branches", {"name": "a b", "source": "main"}, 400),
        ("POST", f"/repositories/{repo}/branches", {"name": "b", "source": "main~~~x"}, 400),
        ("POST", f"/repositories/{repo}/tags", {"id": "..", "ref": "main"}, 400),
        ("PUT", f"/repositories/{repo}/branches/main", {"type": "everything"}, 400),
        ("POST", f"/repositories/{repo}/branches/main/commits", {"message": ""}, 400),
        ("POST", f"/repositories/{repo}/branches/main/commits", {"message": "m", "metadata": {"k": 1}}, 400),
        ("GET", f"/repositories/{repo}/refs/main/objects?path=../etc", None, 400),
        ("GET", f"/repositories/{repo}/refs/main/objects", None, 400),
        ("GET", f"/repositories/{repo}/refs/main/diff/main?type=four_dot", None, 400),
        ("POST", f"/repositories/{repo}/refs/main/merge/main", {"strategy": "coin-flip"}, 400),
        ("POST", f"/repositories/{repo}/branches/main/revert", {"ref": "main"}, 400),
        ("GET", f"/repositories/{repo}/refs/main/commits?since=yesterday", None, 400),
    ]
    for method, path, body, status in cases:
        r = api.request(method, path, json=body)
        assert r.status_code == status, (method, path, body, r.text)
        assert r.json()["message"]
    assert len(api.get(f"/repositories/{repo}/branches/main/diff").json()["results"]) == 1


def test_the_openapi_document_is_served(anon: httpx.Client) -> None:
    doc = anon.get("/openapi.json").json()
    assert "/api/v1/repositories/{repository}/refs/{ref}/objects" in doc["paths"]


def test_head_without_credentials_is_401(anon: httpx.Client) -> None:
    r = anon.head("/repositories/x/refs/main/objects", params={"path": "a"})
    assert r.status_code == 401 and r.content == b""
