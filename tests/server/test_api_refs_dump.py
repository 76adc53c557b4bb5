"""Bare repositories, refs dump and restore over REST, driven by the lakeFS SDK (``lakefs_sdk``): its
models check our answers' shapes (``TaskInfo``, ``RepositoryDumpStatus``, ...). Also the older
``PUT /refs/dump|restore``, ``tag --force``, and empty commit messages."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import lakefs_sdk
import pytest

from tests.server.conftest import Live, commit, unique, upload


@pytest.fixture
def sdk(live: Live) -> Iterator[lakefs_sdk.ApiClient]:
    config = lakefs_sdk.Configuration(host=live.url, username=live.key_id, password=live.secret)
    with lakefs_sdk.ApiClient(config) as client:
        yield client


def _state(api: httpx.Client, repo: str) -> dict:
    branches = api.get(f"/repositories/{repo}/branches").json()["results"]
    return {
        "branches": branches,
        "tags": api.get(f"/repositories/{repo}/tags").json()["results"],
        "logs": {
            b["id"]: api.get(f"/repositories/{repo}/refs/{b['id']}/commits").json()["results"]
            for b in branches
        },
    }


def test_the_sdk_dumps_and_restores_into_a_bare_repository(
    api: httpx.Client, sdk: lakefs_sdk.ApiClient, repo: str
) -> None:
    repos = lakefs_sdk.RepositoriesApi(sdk)
    upload(api, repo, "main", "a.csv", b"1\n")
    commit(api, repo, "main", "first", owner="ada")
    assert api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).is_success
    upload(api, repo, "dev", "b.csv", b"2\n")
    commit(api, repo, "dev", "on dev")
    assert api.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": "main"}).is_success
    before = _state(api, repo)

    task = repos.dump_submit(repo)
    status = repos.dump_status(repo, task.id)
    assert status.done and status.error is None and status.update_time is not None
    refs = status.refs
    assert refs is not None and all(
        (refs.commits_meta_range_id, refs.tags_meta_range_id, refs.branches_meta_range_id)
    )

    dst = unique("bare")
    bare = repos.create_repository(
        lakefs_sdk.RepositoryCreation(
            name=dst, storage_namespace=f"s3://bucket/{dst}", default_branch="main"
        ),
        bare=True,
    )
    assert (bare.id, bare.storage_namespace, bare.default_branch) == (dst, f"s3://bucket/{dst}", "main")
    assert api.get(f"/repositories/{dst}/branches").json()["results"] == []

    restore = lakefs_sdk.RefsRestore(**refs.to_dict(), force=False)
    done = repos.restore_status(dst, repos.restore_submit(dst, restore).id)
    assert done.done and done.error is None
    assert _state(api, dst) == before  # commit ids, heads and tags identical

    # Not bare any more: the submit itself is refused, with the conflict's status.
    again = api.post(f"/repositories/{dst}/restore", json=refs.to_dict())
    assert again.status_code == 409 and "not bare" in again.json()["message"]
    assert _state(api, dst) == before


def test_task_status_refusals(api: httpx.Client, repo: str) -> None:
    task = api.post(f"/repositories/{repo}/dump")
    assert task.status_code == 202 and set(task.json()) == {"id"}
    assert api.get(f"/repositories/{repo}/dump", params={"task_id": task.json()["id"]}).json()["done"] is True
    # A dump task is not a restore task, and an unknown id is not found.
    assert api.get(f"/repositories/{repo}/restore", params={"task_id": task.json()["id"]}).status_code == 404
    assert api.get(f"/repositories/{repo}/dump", params={"task_id": "dump-" + "0" * 32}).status_code == 404
    assert api.get(f"/repositories/{repo}/dump", params={"task_id": "../x"}).status_code == 404
    assert api.get(f"/repositories/{repo}/dump").status_code == 400
    assert api.post(f"/repositories/{unique('none')}/dump").status_code == 404
    for body in (None, [], {"commits_meta_range_id": "x"}, {"colour": 1}):
        assert api.post(f"/repositories/{repo}/restore", json=body).status_code == 400, body


def test_the_older_refs_dump_and_restore(api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "a", b"a")
    commit(api, repo, "main", "a")
    dumped = api.put(f"/repositories/{repo}/refs/dump")
    assert dumped.status_code == 201
    assert set(dumped.json()) == {"commits_meta_range_id", "tags_meta_range_id", "branches_meta_range_id"}
    dst = unique("old")
    created = api.post(
        "/repositories", params={"bare": "true"}, json={"name": dst, "storage_namespace": f"local://{dst}"}
    )
    assert created.status_code == 201
    assert api.put(f"/repositories/{dst}/refs/restore", json=dumped.json()).status_code == 200
    assert _state(api, dst) == _state(api, repo)
    assert api.put(f"/repositories/{dst}/refs/restore", json=dumped.json()).status_code == 409


def test_storage_namespaces_tag_force_and_empty_messages(api: httpx.Client, repo: str) -> None:
    for bad in ("gs://bucket", "", "s3://", "local://a\u202eb"):
        name = unique("ns")
        r = api.post("/repositories", json={"name": name, "storage_namespace": bad})
        assert r.status_code == 400 and "storage namespace" in r.json()["message"], bad
        assert api.get(f"/repositories/{name}").status_code == 404

    upload(api, repo, "main", "a", b"a")
    head = commit(api, repo, "main", "a")["id"]
    assert api.post(f"/repositories/{repo}/tags", json={"id": "t", "ref": "main~1"}).is_success
    assert api.post(f"/repositories/{repo}/tags", json={"id": "t", "ref": "main"}).status_code == 409
    moved = api.post(f"/repositories/{repo}/tags", json={"id": "t", "ref": "main", "force": True})
    assert moved.status_code == 201 and moved.json() == {"id": "t", "commit_id": head}

    upload(api, repo, "main", "b", b"b")
    url = f"/repositories/{repo}/branches/main/commits"
    assert api.post(url, json={"message": ""}).status_code == 400
    empty = api.post(url, params={"allow_empty_message": "true"}, json={"message": ""})
    assert empty.status_code == 201 and empty.json()["message"] == ""
