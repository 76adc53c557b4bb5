"""Repositories, branches and tags: shapes, status codes, pagination, refusals."""

from __future__ import annotations

import httpx

from tests.server.conftest import commit, unique, upload


def test_repository_lifecycle(api: httpx.Client) -> None:
    name = unique("life")
    r = api.post(
        "/repositories",
        json={"name": name, "storage_namespace": f"local://{name}", "default_branch": "trunk"},
    )
    assert r.status_code == 201
    repo = r.json()
    assert set(repo) >= {"id", "creation_date", "default_branch", "storage_namespace"}
    assert (repo["id"], repo["default_branch"], repo["storage_namespace"]) == (
        name,
        "trunk",
        f"local://{name}",
    )
    assert isinstance(repo["creation_date"], int)
    assert api.get(f"/repositories/{name}").json() == repo
    again = api.post("/repositories", json={"name": name, "storage_namespace": "local://other"})
    assert again.status_code == 409 and again.json()["message"]
    assert api.get(f"/repositories/{name}").json() == repo  # the refused create changed nothing
    assert api.delete(f"/repositories/{name}").status_code == 204
    gone = api.get(f"/repositories/{name}")
    assert gone.status_code == 404 and gone.json()["code"] == "repository_not_found"
    assert api.delete(f"/repositories/{name}").status_code == 404


def test_repository_pagination(api: httpx.Client) -> None:
    stem = unique("pg")
    names = sorted(f"{stem}-{i}" for i in range(5))
    for n in names:
        assert (
            api.post("/repositories", json={"name": n, "storage_namespace": f"local://{n}"}).status_code
            == 201
        )
    first = api.get("/repositories", params={"prefix": stem, "amount": 2}).json()
    assert [r["id"] for r in first["results"]] == names[:2]
    assert first["pagination"] == {
        "has_more": True,
        "next_offset": names[1],
        "results": 2,
        "max_per_page": 1000,
    }
    seen, after = [], ""
    while True:
        body = api.get("/repositories", params={"prefix": stem, "amount": 2, "after": after}).json()
        seen += [r["id"] for r in body["results"]]
        if not body["pagination"]["has_more"]:
            assert body["pagination"]["next_offset"] == ""
            break
        after = body["pagination"]["next_offset"]
    assert seen == names
    found = api.get("/repositories", params={"search": names[3][len(stem) :]}).json()["results"]
    assert names[3] in [r["id"] for r in found]


def test_branches(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "a.txt", b"a")
    head = commit(api, repo, "main", "first")["id"]
    r = api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"})
    assert r.status_code == 201 and r.text == head  # lakeFS: the commit id, as text
    assert api.get(f"/repositories/{repo}/branches/dev").json() == {"id": "dev", "commit_id": head}
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).status_code == 409
    )
    missing = api.post(f"/repositories/{repo}/branches", json={"name": "x", "source": "nope"})
    assert missing.status_code == 404
    for i in range(3):
        api.post(f"/repositories/{repo}/branches", json={"name": f"f{i}", "source": "dev"})
    page = api.get(f"/repositories/{repo}/branches", params={"amount": 2, "prefix": "f"}).json()
    assert [b["id"] for b in page["results"]] == ["f0", "f1"] and page["pagination"]["has_more"]
    rest = api.get(f"/repositories/{repo}/branches", params={"after": "f1", "prefix": "f"}).json()
    assert [b["id"] for b in rest["results"]] == ["f2"] and not rest["pagination"]["has_more"]
    assert api.delete(f"/repositories/{repo}/branches/f2").status_code == 204
    assert api.get(f"/repositories/{repo}/branches/f2").status_code == 404
    protected = api.delete(f"/repositories/{repo}/branches/main")
    assert protected.status_code == 403 and protected.json()["code"] == "protected_branch"


def test_reset_kinds(api: httpx.Client, repo: str) -> None:
    for path in ("keep/a", "drop/b", "drop/c", "one"):
        upload(api, repo, "main", path, b"x")

    def staged() -> list[str]:
        return [d["path"] for d in api.get(f"/repositories/{repo}/branches/main/diff").json()["results"]]

    url = f"/repositories/{repo}/branches/main"
    assert api.put(url, json={"type": "object", "path": "one"}).status_code == 204
    assert staged() == ["drop/b", "drop/c", "keep/a"]
    r = api.put(url, json={"type": "common_prefix", "path": "drop/"})
    assert r.status_code == 204 and r.headers["x-lakectl-reset-count"] == "2"
    assert staged() == ["keep/a"]
    assert api.put(url, json={"type": "reset"}).status_code == 204
    assert staged() == []


def test_revert_and_cherry_pick(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "a", b"1")
    c1 = commit(api, repo, "main", "add a")
    api.post(f"/repositories/{repo}/branches", json={"name": "side", "source": "main"})
    upload(api, repo, "side", "b", b"2")
    picked = commit(api, repo, "side", "add b")
    r = api.post(f"/repositories/{repo}/branches/main/cherry-pick", json={"ref": picked["id"]})
    assert r.status_code == 201
    assert r.json()["message"] == "add b" and r.json()["parents"] == [c1["id"]]
    assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "b"}).content == b"2"
    r = api.post(f"/repositories/{repo}/branches/main/revert", json={"ref": "main", "parent_number": 0})
    assert r.status_code == 204
    assert api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": "b"}).status_code == 404
    log = api.get(f"/repositories/{repo}/refs/main/commits").json()["results"]
    assert log[0]["message"].startswith("Revert") and log[0]["committer"] == "admin"


def test_tags(api: httpx.Client, repo: str) -> None:
    head = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    r = api.post(f"/repositories/{repo}/tags", json={"id": "v1.0", "ref": "main"})
    assert r.status_code == 201 and r.json() == {"id": "v1.0", "commit_id": head}
    assert api.post(f"/repositories/{repo}/tags", json={"id": "v1.0", "ref": "main"}).status_code == 409
    assert api.get(f"/repositories/{repo}/tags/v1.0").json() == {"id": "v1.0", "commit_id": head}
    api.post(f"/repositories/{repo}/tags", json={"id": "v2.0", "ref": "v1.0"})
    body = api.get(f"/repositories/{repo}/tags", params={"amount": 1}).json()
    assert [t["id"] for t in body["results"]] == ["v1.0"] and body["pagination"]["next_offset"] == "v1.0"
    assert api.delete(f"/repositories/{repo}/tags/v1.0").status_code == 204
    assert api.get(f"/repositories/{repo}/tags/v1.0").status_code == 404
    assert api.delete(f"/repositories/{repo}/tags/v1.0").status_code == 404
