"""Pull requests through the official lakeFS SDK's PullsApi (list, create, get, update, merge),
on SQLite and on PostgreSQL, with approvals (lakeFS's upstream ``/approvals``), comments and the
merge gate of a protection rule; and the refusals a reviewer relies on."""

from __future__ import annotations

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.server.conftest import Live, commit, unique, upload


def _client(live: Live, key_id: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, auth=(key_id, secret), timeout=30.0)


def _developer(admin: httpx.Client, name: str) -> tuple[str, str]:
    user_id = unique(name)
    assert admin.post("/auth/users", json={"id": user_id}).status_code == 201
    assert admin.put(f"/auth/groups/Developers/members/{user_id}").status_code == 201
    creds = admin.post(f"/auth/users/{user_id}/credentials").json()
    return creds["access_key_id"], creds["secret_access_key"]


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Live:
    live: Live = request.getfixturevalue("live" if request.param == "sqlite" else "live_pg")
    return live


def test_a_pull_request_through_the_sdk(server: Live) -> None:
    admin = _client(server, server.key_id, server.secret)
    repo = unique("pulls")
    created = admin.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
    assert created.status_code == 201, created.text
    assert (
        admin.post(f"/repositories/{repo}/branches", json={"name": "fix", "source": "main"}).status_code
        == 201
    )
    upload(admin, repo, "fix", "tables/orders.csv", b"id,amount\n1,10\n")
    commit(admin, repo, "fix", "fix orders")
    # Approvals required: main takes merges only through a pull request from now on.
    rules = [{"pattern": "main", "required_approvals": 1}]
    assert admin.put(f"/repositories/{repo}/settings/branch_protection", json=rules).status_code == 204
    assert admin.get(f"/repositories/{repo}/settings/branch_protection").json() == rules

    sdk = lakefs_sdk.ApiClient(
        lakefs_sdk.Configuration(host=server.url, username=server.key_id, password=server.secret)
    )
    api = lakefs_sdk.PullsApi(sdk)
    base = lakefs_sdk.RefsApi(sdk).find_merge_base(repo, "fix", "main")
    main_head = admin.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    assert base.base_commit_id == base.destination_commit_id == main_head != base.source_commit_id
    creation = lakefs_sdk.PullRequestCreation(
        title="Fix orders",
        description="amounts were *negative*",
        source_branch="fix",
        destination_branch="main",
    )
    pid = api.create_pull_request(repo, creation).id
    pr = api.get_pull_request(repo, pid)
    assert (pr.status, pr.title, pr.source_branch, pr.destination_branch) == (
        "open",
        "Fix orders",
        "fix",
        "main",
    )
    assert pr.author == "admin" and pr.merged_commit_id is None and pr.creation_date.year >= 2026
    listed = api.list_pull_requests(repo, status="open")
    assert [x.id for x in listed.results] == [pid] and listed.pagination.has_more is False
    api.update_pull_request(repo, pid, lakefs_sdk.PullRequestBasic(title="Fix the orders table"))
    assert api.get_pull_request(repo, pid).title == "Fix the orders table"

    direct = admin.post(f"/repositories/{repo}/refs/fix/merge/main", json={})
    assert direct.status_code == 403 and direct.json()["code"] == "protected_branch"
    with pytest.raises(ApiException) as refused:
        api.merge_pull_request(repo, pid)
    assert refused.value.status == 412 and "0 of 1 required approval" in refused.value.body
    assert admin.post(f"/repositories/{repo}/pulls/{pid}/approvals").status_code == 403  # its author

    bob = _client(server, *_developer(admin, "bob"))
    comment = bob.post(f"/repositories/{repo}/pulls/{pid}/comments", json={"body": "<b>looks right</b>"})
    assert comment.status_code == 201 and comment.json()["author"].startswith("bob")
    assert bob.post(f"/repositories/{repo}/pulls/{pid}/approvals").status_code == 204
    gate = admin.get(f"/repositories/{repo}/pulls/{pid}/status").json()
    assert gate["mergeable"] and gate["approvals"] == [comment.json()["author"]]

    merge = api.merge_pull_request(repo, pid)
    head = admin.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    assert merge.reference == head
    merged = api.get_pull_request(repo, pid)
    assert merged.status == "merged" and merged.merged_commit_id == head and merged.closed_date is not None
    assert admin.get(
        f"/repositories/{repo}/refs/main/objects/stat", params={"path": "tables/orders.csv"}
    ).is_success
    assert [c["body"] for c in admin.get(f"/repositories/{repo}/pulls/{pid}/comments").json()["results"]] == [
        "<b>looks right</b>"
    ]
    assert api.list_pull_requests(repo, status="open").results == []
    assert [x.id for x in api.list_pull_requests(repo, status="closed").results] == [pid]


def test_refusals(live: Live, api: httpx.Client, repo: str) -> None:
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "b1", "source": "main"}).status_code == 201
    )
    path = f"/repositories/{repo}/pulls"
    for body, status in [
        ({"title": "t", "source_branch": "b1"}, 400),
        ({"title": "", "source_branch": "b1", "destination_branch": "main"}, 400),
        ({"title": "t", "source_branch": "nope", "destination_branch": "main"}, 404),
        ({"title": "t", "source_branch": "main", "destination_branch": "main"}, 400),
        ({"title": "t", "source_branch": "b1", "destination_branch": "main", "extra": 1}, 400),
    ]:
        assert api.post(path, json=body).status_code == status, body
    assert api.get(path).json()["results"] == []
    pid = api.post(path, json={"title": "t", "source_branch": "b1", "destination_branch": "main"}).json()[
        "id"
    ]
    assert (
        api.post(path, json={"title": "t", "source_branch": "b1", "destination_branch": "main"}).status_code
        == 409
    )
    assert api.get(f"{path}/999").status_code == 404
    assert api.get(f"{path}/x").status_code == 400
    assert api.get(path, params={"status": "weird"}).status_code == 400
    assert api.patch(f"{path}/{pid}", json={"status": "merged"}).status_code == 400
    assert api.patch(f"{path}/{pid}", json={"status": "closed"}).status_code == 204
    assert api.put(f"{path}/{pid}/merge").status_code == 412
    assert api.patch(f"{path}/{pid}", json={"status": "open"}).status_code == 204
    anonymous = httpx.Client(base_url=live.url)
    assert anonymous.get(path).status_code == 401
    assert anonymous.post(path, json={}).status_code == 401
