"""``GET /repositories/{r}/refs/{ref}/annotate`` (a lakectl extension): pages of entries, each
with the last commit that changed it."""

from __future__ import annotations

import httpx

from tests.server.conftest import commit, upload


def test_annotate_pages(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "d/a.txt", b"a")
    upload(api, repo, "main", "d/b.txt", b"b")
    first = commit(api, repo, "main", "first")
    upload(api, repo, "main", "d/c.txt", b"c")
    second = commit(api, repo, "main", "second")
    url = f"/repositories/{repo}/refs/main/annotate"
    one = api.get(url, params={"prefix": "d/", "recursive": True, "amount": 2}).json()
    assert [(a["path"], a["commit"]["id"]) for a in one["results"]] == [
        ("d/a.txt", first["id"]),
        ("d/b.txt", first["id"]),
    ]
    assert one["pagination"]["has_more"] and one["pagination"]["next_offset"] == "d/b.txt"
    two = api.get(url, params={"prefix": "d/", "recursive": True, "after": "d/b.txt"}).json()
    assert [(a["path"], a["commit"]["id"]) for a in two["results"]] == [("d/c.txt", second["id"])]
    assert not two["pagination"]["has_more"]
    level = api.get(url).json()["results"]
    assert [(a["path"], a["path_type"], a["commit"]["message"]) for a in level] == [
        ("d/", "common_prefix", "second")
    ]
    assert api.get(f"/repositories/{repo}/refs/nope/annotate").status_code == 404
