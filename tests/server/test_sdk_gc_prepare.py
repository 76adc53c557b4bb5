"""lakeFS's garbage-collection preparation through the SDK, as its GC client calls it: the run's
commits CSV (every commit, expired under the rules or not), its async form and status, and the
uncommitted addresses (a Parquet file naming staged blocks), each fetched from the URL returned."""

from __future__ import annotations

import csv
import io
import time

import httpx
import lakefs_sdk
import pyarrow.parquet as pq
import pytest
from lakefs_sdk.exceptions import ApiException

from lakectl.core.graph.refs import commit_id_of
from tests.server.conftest import commit, upload

DAY = 86_400


def _fetch(api: httpx.Client, url: str) -> bytes:
    r = api.get(url)
    assert r.status_code == 200, r.text
    return r.content


def _commits(api: httpx.Client, url: str) -> dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(_fetch(api, url).decode())))
    assert rows and list(rows[0]) == ["commit_id", "expired", "metarange_id"]
    return {r["commit_id"]: r["expired"] for r in rows}


def _old_commit(internal: lakefs_sdk.InternalApi, repo: str, parent: dict, days: int) -> dict:
    """A commit record dated ``days`` ago (a commit's date cannot be set otherwise)."""
    fields = {
        "parents": [parent["id"]],
        "committer": "past",
        "message": f"{days} days ago",
        "creation_date": int(time.time()) - days * DAY,
        "metadata": {},
        "generation": parent["generation"] + 1,
    }
    cid = commit_id_of(
        (parent["id"],), parent["meta_range_id"], fields["message"], "past", {}, fields["creation_date"]
    )
    internal.create_commit_record(
        repo,
        lakefs_sdk.CommitRecordCreation(
            commit_id=cid, metarange_id=parent["meta_range_id"], version=1, **fields
        ),
    )
    return {"id": cid, "meta_range_id": parent["meta_range_id"], "generation": fields["generation"]}


@pytest.fixture
def aged(sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str) -> dict[str, str]:
    """main: the initial commit and one of today; branch old: commits 30 (tagged), 20 and 10
    days old on the initial one."""
    internal = lakefs_sdk.InternalApi(sdk)
    initial = api.get(f"/repositories/{repo}/refs/main/commits").json()["results"][0]
    upload(api, repo, "main", "today.txt", b"today")
    today = commit(api, repo, "main", "today")
    d30 = _old_commit(internal, repo, initial, 30)
    d20 = _old_commit(internal, repo, d30, 20)
    d10 = _old_commit(internal, repo, d20, 10)
    lakefs_sdk.BranchesApi(sdk).create_branch(repo, lakefs_sdk.BranchCreation(name="old", source=d10["id"]))
    lakefs_sdk.TagsApi(sdk).create_tag(repo, lakefs_sdk.TagCreation(id="t30", ref=d30["id"]))
    return {
        "initial": initial["id"],
        "today": today["id"],
        "d30": d30["id"],
        "d20": d20["id"],
        "d10": d10["id"],
    }


def test_prepared_commits_carry_the_rules_expiry(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, aged: dict[str, str]
) -> None:
    internal = lakefs_sdk.InternalApi(sdk)
    run = internal.prepare_garbage_collection_commits_with_http_info(repo)
    assert run.status_code == 201
    assert set(_commits(api, run.data.gc_commits_presigned_url).values()) == {"false"}  # no rules
    lakefs_sdk.RepositoriesApi(sdk).set_gc_rules(
        repo,
        lakefs_sdk.GarbageCollectionRules(
            default_retention_days=7,
            branches=[lakefs_sdk.GarbageCollectionRule(branch_id="old", retention_days=15)],
        ),
    )
    prepared = internal.prepare_garbage_collection_commits(repo)
    assert prepared.run_id and prepared.run_id != run.data.run_id
    assert prepared.gc_commits_location.startswith("local://")
    assert prepared.gc_addresses_location.endswith("/_lakefs/retention/gc/addresses/")
    flags = _commits(api, prepared.gc_commits_presigned_url)
    assert flags == {
        aged["initial"]: "false",
        aged["today"]: "false",
        aged["d30"]: "false",  # tagged
        aged["d20"]: "true",  # 20 days old, past the branch's 15
        aged["d10"]: "false",  # the head of old
    }
    with pytest.raises(ApiException) as missing:
        internal.prepare_garbage_collection_commits("no-such-repo")
    assert missing.value.status == 404


def test_the_async_preparation_reports_its_result(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, aged: dict[str, str]
) -> None:
    internal = lakefs_sdk.InternalApi(sdk)
    lakefs_sdk.RepositoriesApi(sdk).set_gc_rules(
        repo, lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[])
    )
    submitted = internal.prepare_garbage_collection_commits_async_with_http_info(repo)
    assert submitted.status_code == 202 and submitted.data.id
    status = internal.prepare_garbage_collection_commits_status(repo, submitted.data.id)
    assert status.task_id == submitted.data.id and status.completed and status.error is None
    assert status.update_time.timestamp() == pytest.approx(time.time(), abs=60)
    assert status.result is not None and status.result.gc_commits_location.startswith("local://")
    flags = _commits(api, status.result.gc_commits_presigned_url)
    assert {c for c, expired in flags.items() if expired == "true"} == {aged["d20"]}  # d30 is tagged
    for unknown in ("0" * 32, "nope"):
        with pytest.raises(ApiException) as missing:
            internal.prepare_garbage_collection_commits_status(repo, unknown)
        assert missing.value.status == 404


def test_uncommitted_addresses_name_the_staged_blocks(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str
) -> None:
    internal = lakefs_sdk.InternalApi(sdk)
    empty = internal.prepare_garbage_collection_uncommitted_with_http_info(repo)
    assert empty.status_code == 201
    assert (
        empty.data.run_id
        and empty.data.gc_uncommitted_location == ""
        and empty.data.continuation_token is None
    )
    upload(api, repo, "main", "committed.txt", b"committed")
    commit(api, repo, "main", "one")
    staged = upload(api, repo, "main", "staged.txt", b"staged, not committed")
    committed = lakefs_sdk.ObjectsApi(sdk).stat_object(repo, "main", "committed.txt")
    prepared = internal.prepare_garbage_collection_uncommitted(repo, lakefs_sdk.PrepareGCUncommittedRequest())
    assert prepared.continuation_token is None and prepared.run_id != empty.data.run_id
    table = pq.read_table(io.BytesIO(_fetch(api, prepared.gc_uncommitted_location)))
    assert table.schema.names == ["physical_address", "creation_date"]
    addresses = table.column("physical_address").to_pylist()
    assert addresses == [staged["physical_address"]]
    assert committed.physical_address not in addresses
    with pytest.raises(ApiException) as refused:
        internal.prepare_garbage_collection_uncommitted(
            repo, lakefs_sdk.PrepareGCUncommittedRequest(continuation_token="made-up")
        )
    assert refused.value.status == 400
