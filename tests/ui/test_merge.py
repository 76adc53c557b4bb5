"""Merging from the compare page: conflicts listed path by path with nothing changed, a strategy
that resolves them, the committer being the signed-in user, and the refusals (a reader, a branch
that takes merges only through pull requests)."""

from __future__ import annotations

import httpx

from tests.server.conftest import Live, commit, upload
from tests.ui.conftest import csrf_of, make_user, new_repo, sign_in


def _diverged(api: httpx.Client) -> str:
    repo = new_repo(api)
    upload(api, repo, "main", "t/a.csv", b"base\n")
    commit(api, repo, "main", "base")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code == 201
    )
    for branch in ("main", "fix"):
        upload(api, repo, branch, "t/a.csv", f"{branch}\n".encode())
        commit(api, repo, branch, f"edit on {branch}")
    upload(api, repo, "fix", "t/new.csv", b"new\n")
    commit(api, repo, "fix", "add new")
    return repo


def test_merge_from_the_compare_page(live: Live, api: httpx.Client, admin: httpx.Client) -> None:
    repo = _diverged(api)
    compare = admin.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
    assert compare.status_code == 200 and "Merge fix into main" in compare.text
    head = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    data = {"source": "fix", "destination": "main", "csrf": csrf_of(compare.text)}

    conflict = admin.post(f"/ui/repos/{repo}/merge", data=data)
    assert conflict.status_code == 409
    assert "1 conflicting path" in conflict.text and "<code>t/a.csv</code>" in conflict.text
    assert api.get(f"/repositories/{repo}/branches/main").json()["commit_id"] == head

    assert admin.post(f"/ui/repos/{repo}/merge", data={**data, "strategy": "theirs"}).status_code == 400
    done = admin.post(
        f"/ui/repos/{repo}/merge", data={**data, "strategy": "dest-wins", "message": "merge fix"}
    )
    assert done.status_code == 303
    merged = api.get(f"/repositories/{repo}/commits/main").json()
    assert done.headers["location"] == f"/ui/repos/{repo}/commits/{merged['id']}"
    assert (merged["message"], merged["committer"], len(merged["parents"])) == ("merge fix", "admin", 2)
    assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "t/a.csv"}).content == b"main\n"
    assert (
        api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "t/new.csv"}).content == b"new\n"
    )
    # A tag is no merge destination: no form.
    api.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": "main"})
    assert "Merge fix into v1" not in admin.get(f"/ui/repos/{repo}/compare?left=v1&right=fix").text


def test_merges_a_reader_or_a_gated_branch_refuses(
    live: Live, api: httpx.Client, admin: httpx.Client
) -> None:
    repo = _diverged(api)
    viewer = make_user(live, "Viewers")
    with sign_in(live, viewer.key_id, viewer.secret) as ui:
        page = ui.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
        assert page.status_code == 200 and "Merge fix into main" not in page.text
        data = {
            "source": "fix",
            "destination": "main",
            "strategy": "dest-wins",
            "csrf": csrf_of(ui.get("/ui/").text),
        }
        assert ui.post(f"/ui/repos/{repo}/merge", data=data).status_code == 403
    rules = [{"pattern": "main", "required_approvals": 1}]
    assert api.put(f"/repositories/{repo}/settings/branch_protection", json=rules).status_code == 204
    page = admin.get(f"/ui/repos/{repo}/compare", params={"left": "main", "right": "fix"})
    data = {"source": "fix", "destination": "main", "strategy": "dest-wins", "csrf": csrf_of(page.text)}
    refused = admin.post(f"/ui/repos/{repo}/merge", data=data)
    assert refused.status_code == 403 and "only through a pull request" in refused.text
    head = api.get(f"/repositories/{repo}/branches/main").json()
    assert api.get(f"/repositories/{repo}/commits/{head['commit_id']}").json()["message"] == "edit on main"
