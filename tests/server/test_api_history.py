"""Commits, the log and its filters, diffs (two-dot, three-dot, uncommitted) and merges."""

from __future__ import annotations

import httpx

from tests.server.conftest import commit, upload


def test_commit_and_get(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "a", b"1")
    c = commit(api, repo, "main", "add a", team="data")
    assert set(c) >= {"id", "parents", "committer", "message", "creation_date", "meta_range_id", "metadata"}
    assert (c["message"], c["metadata"], c["committer"]) == ("add a", {"team": "data"}, "admin")
    assert api.get(f"/repositories/{repo}/commits/{c['id']}").json() == c
    assert api.get(f"/repositories/{repo}/branches/main").json()["commit_id"] == c["id"]
    assert api.get(f"/repositories/{repo}/commits/{'0' * 64}").status_code == 404
    empty = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "nothing"})
    assert empty.status_code == 412 and empty.json()["code"] == "nothing_to_commit"
    allowed = api.post(
        f"/repositories/{repo}/branches/main/commits", json={"message": "e", "allow_empty": True}
    )
    assert allowed.status_code == 201


def test_log_pages_and_filters(api: httpx.Client, repo: str) -> None:
    ids = []
    for i in range(5):
        upload(api, repo, "main", f"{'x' if i % 2 else 'y'}/{i}", b"%d" % i)
        ids.append(commit(api, repo, "main", f"c{i}")["id"])
    url = f"/repositories/{repo}/refs/main/commits"
    everything = api.get(url).json()
    assert [c["id"] for c in everything["results"][:5]] == ids[::-1]
    assert everything["results"][-1]["message"] == "Repository created"
    seen, after = [], ""
    while True:
        body = api.get(url, params={"amount": 2, "after": after}).json()
        seen += [c["id"] for c in body["results"]]
        if not body["pagination"]["has_more"]:
            break
        after = body["pagination"]["next_offset"]
        assert after == seen[-1]
    assert seen == [c["id"] for c in everything["results"]]
    limited = api.get(url, params={"amount": 2, "limit": True}).json()
    assert len(limited["results"]) == 2 and not limited["pagination"]["has_more"]
    by_prefix = api.get(url, params={"prefixes": "x/"}).json()["results"]
    assert [c["message"] for c in by_prefix] == ["c3", "c1"]
    by_object = api.get(url, params={"objects": ["y/0", "y/4"]}).json()["results"]
    assert [c["message"] for c in by_object] == ["c4", "c0"]
    stopped = api.get(url, params={"stop_at": ids[2]}).json()["results"]
    assert [c["id"] for c in stopped] == ids[:1:-1]
    assert api.get(url, params={"since": "2100-01-01T00:00:00"}).json()["results"] == []
    assert (
        api.get(f"/repositories/{repo}/refs/main~1/commits", params={"amount": 1}).json()["results"][0]["id"]
        == ids[3]
    )


def test_diffs(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "keep", b"k")
    upload(api, repo, "main", "change", b"v1")
    upload(api, repo, "main", "remove", b"r")
    commit(api, repo, "main", "base")
    api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"})
    upload(api, repo, "dev", "change", b"v2")
    upload(api, repo, "dev", "dir/a", b"a")
    upload(api, repo, "dev", "dir/b", b"b")
    api.delete(f"/repositories/{repo}/branches/dev/objects", params={"path": "remove"})
    uncommitted = api.get(f"/repositories/{repo}/branches/dev/diff").json()
    assert [(d["path"], d["type"]) for d in uncommitted["results"]] == [
        ("change", "changed"),
        ("dir/a", "added"),
        ("dir/b", "added"),
        ("remove", "removed"),
    ]
    folded = api.get(f"/repositories/{repo}/branches/dev/diff", params={"delimiter": "/"}).json()["results"]
    assert [(d["path"], d["type"], d["path_type"]) for d in folded][1] == (
        "dir/",
        "prefix_changed",
        "common_prefix",
    )
    commit(api, repo, "dev", "work")
    upload(api, repo, "main", "keep", b"k2")
    commit(api, repo, "main", "main moved on")
    url = f"/repositories/{repo}/refs/main/diff/dev"
    three = api.get(url).json()["results"]
    assert [d["path"] for d in three] == ["change", "dir/a", "dir/b", "remove"]
    two = api.get(url, params={"type": "two_dot"}).json()["results"]
    assert [d["path"] for d in two] == ["change", "dir/a", "dir/b", "keep", "remove"]
    page = api.get(url, params={"amount": 2}).json()
    assert page["pagination"]["has_more"] and page["pagination"]["next_offset"] == "dir/a"
    rest = api.get(url, params={"after": "dir/a"}).json()["results"]
    assert [d["path"] for d in rest] == ["dir/b", "remove"]
    assert [d["path"] for d in api.get(url, params={"prefix": "dir/"}).json()["results"]] == [
        "dir/a",
        "dir/b",
    ]
    assert api.get(f"/repositories/{repo}/refs/main/diff/nope").status_code == 404


def test_merge(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "base", b"b")
    commit(api, repo, "main", "base")
    api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"})
    upload(api, repo, "dev", "new", b"n")
    commit(api, repo, "dev", "dev work")
    url = f"/repositories/{repo}/refs/dev/merge/main"
    r = api.post(url, json={"message": "merge dev", "metadata": {"by": "test"}})
    assert r.status_code == 200
    ref = r.json()["reference"]
    merged = api.get(f"/repositories/{repo}/commits/{ref}").json()
    assert (
        merged["message"] == "merge dev"
        and len(merged["parents"]) == 2
        and merged["metadata"] == {"by": "test"}
    )
    assert api.get(f"/repositories/{repo}/branches/main").json()["commit_id"] == ref
    again = api.post(url, json={})
    assert again.status_code == 200 and again.json()["reference"] == ref and again.json()["changed"] is False
    assert api.post(f"/repositories/{repo}/refs/dev/merge/nobranch", json={}).status_code == 404


def test_merge_conflict_is_409_with_paths(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "c1", b"0")
    upload(api, repo, "main", "c2", b"0")
    commit(api, repo, "main", "base")
    api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"})
    for branch, value in (("main", b"main"), ("dev", b"dev")):
        upload(api, repo, branch, "c1", value)
        upload(api, repo, branch, "c2", value)
        commit(api, repo, branch, f"{branch} edit")
    before = api.get(f"/repositories/{repo}/branches/main").json()
    r = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={})
    assert r.status_code == 409
    body = r.json()
    assert body["code"] == "merge_conflict" and body["message"]
    assert body["details"]["conflicts"] == ["c1", "c2"]
    assert api.get(f"/repositories/{repo}/branches/main").json() == before
    r = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={"strategy": "source-wins"})
    assert r.status_code == 200
    assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "c1"}).content == b"dev"


def test_merge_into_a_dirty_branch_is_refused(api: httpx.Client, repo: str) -> None:
    api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"})
    upload(api, repo, "dev", "d", b"d")
    commit(api, repo, "dev", "dev")
    upload(api, repo, "main", "dirty", b"x")
    r = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={})
    assert r.status_code == 412 and r.json()["code"] == "dirty_branch"


def test_merge_takes_lakefs_squash_merge(api: httpx.Client, repo: str) -> None:
    """The Merge body's ``squash_merge``: one commit on the destination, one parent."""
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).status_code == 201
    )
    upload(api, repo, "dev", "a", b"1")
    commit(api, repo, "dev", "a")
    upload(api, repo, "dev", "b", b"2")
    commit(api, repo, "dev", "b")
    head = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    r = api.post(
        f"/repositories/{repo}/refs/dev/merge/main", json={"message": "squashed", "squash_merge": True}
    )
    assert r.status_code == 200, r.text
    merged = api.get(f"/repositories/{repo}/commits/{r.json()['reference']}").json()
    assert (merged["parents"], merged["message"]) == ([head], "squashed")
    listed = api.get(f"/repositories/{repo}/refs/main/objects/ls").json()["results"]
    assert [o["path"] for o in listed] == ["a", "b"]
    bad = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={"squash_merge": "yes"})
    assert bad.status_code == 400


def test_revert_and_cherry_pick_of_a_merge_commit_take_parent_number(api: httpx.Client, repo: str) -> None:
    """RevertCreation / CherryPickCreation's ``parent_number``: required (400) for a merge
    commit, whose change is then taken relative to that parent."""
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).status_code == 201
    )
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "other", "source": "main"}).status_code
        == 201
    )
    upload(api, repo, "dev", "feature", b"f")
    commit(api, repo, "dev", "feature")
    upload(api, repo, "main", "own", b"o")
    commit(api, repo, "main", "own")
    merged = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={}).json()["reference"]
    for verb, branch in (("revert", "main"), ("cherry-pick", "other")):
        url = f"/repositories/{repo}/branches/{branch}/{verb}"
        refused = api.post(url, json={"ref": merged, "parent_number": 0})
        assert refused.status_code == 400 and "parent-number" in refused.json()["message"]
        assert api.post(url, json={"ref": merged, "parent_number": 3}).status_code == 400
    assert (
        api.post(
            f"/repositories/{repo}/branches/other/cherry-pick", json={"ref": merged, "parent_number": 1}
        ).status_code
        == 201
    )
    assert (
        api.post(
            f"/repositories/{repo}/branches/main/revert", json={"ref": merged, "parent_number": 1}
        ).status_code
        == 204
    )

    def paths(ref: str) -> list[str]:
        return [o["path"] for o in api.get(f"/repositories/{repo}/refs/{ref}/objects/ls").json()["results"]]

    assert paths("main") == ["own"] and paths("other") == ["feature"]


def test_change_feed_by_commit_pages_by_position(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "t/a", b"a0")
    start = commit(api, repo, "main", "start")["id"]
    upload(api, repo, "main", "t/a", b"a1")
    upload(api, repo, "main", "t/b", b"b1")
    first = commit(api, repo, "main", "first")["id"]
    upload(api, repo, "main", "t/a", b"a2")
    second = commit(api, repo, "main", "second")["id"]
    url = f"/repositories/{repo}/refs/{second}/changes"
    seen, after = [], ""
    for _ in range(10):
        params = {"since": start, "by_commit": "true", "amount": 2, **({"after": after} if after else {})}
        body = api.get(url, params=params).json()
        seen += [(r["commit_id"], r["type"], r["path"], r["size_bytes"]) for r in body["results"]]
        after = body["pagination"]["next_offset"]
        if not body["pagination"]["has_more"]:
            break
    assert seen == [
        (first, "delete", "t/a", 2),
        (first, "insert", "t/a", 2),
        (first, "insert", "t/b", 2),
        (second, "delete", "t/a", 2),
        (second, "insert", "t/a", 2),
    ]
    bad = api.get(url, params={"since": start, "by_commit": "true", "after": "t/a"})
    assert bad.status_code == 400 and "pages by position" in bad.text
