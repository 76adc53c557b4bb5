"""lakeFS's metadata operations and commit records through the SDK: a commit's metarange, its pages
and ranges by id (locations this server serves, bytes of our own range format), and a commit
record written as given, as lakeFS's refs restore writes them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph.ranges import ROOT_LEVEL, RangeStore
from lakectl.core.graph.refs import commit_id_of
from tests.server.conftest import commit, unique, upload


def _status(call: object, *args: object, **kwargs: object) -> int:
    with pytest.raises(ApiException) as refused:
        call(*args, **kwargs)  # type: ignore[operator]
    return refused.value.status


def _fetch(api: httpx.Client, url: str) -> bytes:
    r = api.get(url)
    assert r.status_code == 200, r.text
    return r.content


def _is_block(data: bytes, locator: str) -> bool:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}" == locator


def test_a_commits_tree_is_served_file_by_file(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, tmp_path: Path
) -> None:
    upload(api, repo, "main", "data/a.csv", b"id\n1\n")
    upload(api, repo, "main", "data/b.csv", b"id\n2\n")
    head = commit(api, repo, "main", "two files")
    metadata, internal = lakefs_sdk.MetadataApi(sdk), lakefs_sdk.InternalApi(sdk)
    mid = head["meta_range_id"]
    answer = metadata.get_meta_range_with_http_info(repo, mid)
    assert answer.status_code == 200
    location = answer.data.location
    assert answer.headers["Location"] == location
    assert location.endswith(f"/repositories/{repo}/metadata/object/meta_range/{mid}")
    root = _fetch(api, location)
    assert _is_block(root, mid)
    assert bytes(internal.get_metadata_object(repo, mid, "meta_range")) == root

    # Walk the tree as a client would: decode each file, fetch what it names by its location.
    local = LocalAdapter(tmp_path / "blocks")
    local.put(mid, root)
    store = RangeStore(local)
    index = store.read_index(mid)
    names = [e.id for e in index.entries]
    if index.level == ROOT_LEVEL:
        ranges = []
        for page in names:
            data = _fetch(api, metadata.get_range(repo, page).location)
            assert _is_block(data, page)
            local.put(page, data)
            ranges += [e.id for e in store.read_index(page).entries]
        names = ranges
    paths = []
    for rid in names:
        data = _fetch(api, metadata.get_range(repo, rid).location)
        assert _is_block(data, rid) and bytes(internal.get_metadata_object(repo, rid, "range")) == data
        local.put(rid, data)
        paths += store.read_range(rid).paths
    assert paths == ["data/a.csv", "data/b.csv"]

    # presign: a redirect to the file's block, signed for the caller.
    redirect = api.get(f"/repositories/{repo}/metadata/object/meta_range/{mid}", params={"presign": "true"})
    assert redirect.status_code == 302 and "/blocks/" in redirect.headers["location"]
    assert _fetch(api, redirect.headers["location"]) == root


def test_unknown_ids_are_404_and_unknown_types_400(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str
) -> None:
    upload(api, repo, "main", "x", b"x")
    mid = commit(api, repo, "main", "x")["meta_range_id"]
    metadata, internal = lakefs_sdk.MetadataApi(sdk), lakefs_sdk.InternalApi(sdk)
    stray = f"{hashlib.md5(os.urandom(8)).hexdigest()}+8"
    for oid in (stray, "not-a-locator"):
        assert _status(metadata.get_meta_range, repo, oid) == 404
        assert _status(metadata.get_range, repo, oid) == 404
        assert _status(internal.get_metadata_object, repo, oid, "range") == 404
    assert _status(metadata.get_range, repo, mid) == 404  # a metarange is not a range
    other = unique("other")
    r = api.post("/repositories", json={"name": other, "storage_namespace": f"local://{other}"})
    assert r.status_code == 201, r.text
    assert _status(metadata.get_meta_range, other, mid) == 404  # stored, but not other's tree
    assert _status(internal.get_metadata_object, other, mid, "meta_range") == 404
    assert _status(internal.get_metadata_object, repo, mid, "sstable") == 400
    assert _status(metadata.get_meta_range, "no-such-repo", mid) == 404


def _record(parent: dict, **changes: object) -> dict:
    record = {
        "parents": [parent["id"]],
        "committer": "restorer",
        "message": "restored record",
        "creation_date": 1_700_000_000,
        "metarange_id": parent["meta_range_id"],
        "metadata": {"origin": "dump"},
        "generation": parent["generation"] + 1,
        "version": 1,
        **changes,
    }
    record["commit_id"] = commit_id_of(
        tuple(record["parents"]),
        record["metarange_id"],
        record["message"],
        record["committer"],
        record["metadata"],
        record["creation_date"],
    )
    return record


def test_a_commit_record_is_written_as_given(sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "data/a.csv", b"id\n1\n")
    head = commit(api, repo, "main", "data")
    internal, commits = lakefs_sdk.InternalApi(sdk), lakefs_sdk.CommitsApi(sdk)
    record = _record(head)
    creation = lakefs_sdk.CommitRecordCreation(**record)
    assert internal.create_commit_record_with_http_info(repo, creation).status_code == 204
    assert internal.create_commit_record_with_http_info(repo, creation).status_code == 204  # idempotent
    got = commits.get_commit(repo, record["commit_id"])
    assert (got.parents, got.meta_range_id, got.message, got.committer, got.creation_date) == (
        [head["id"]],
        head["meta_range_id"],
        "restored record",
        "restorer",
        1_700_000_000,
    )
    assert got.metadata == {"origin": "dump"} and got.generation == head["generation"] + 1
    assert lakefs_sdk.BranchesApi(sdk).get_branch(repo, "main").commit_id == head["id"]  # no move

    # A restore into a bare repository: records in generation order, then a ref to read through.
    bare = unique("bare")
    r = api.post(
        "/repositories", params={"bare": "true"}, json={"name": bare, "storage_namespace": f"local://{bare}"}
    )
    assert r.status_code == 201, r.text
    log = api.get(f"/repositories/{repo}/refs/main/commits").json()["results"]
    for c in sorted(log, key=lambda c: c["generation"]):
        fields = {
            k: c[k] for k in ("parents", "committer", "message", "creation_date", "metadata", "generation")
        }
        internal.create_commit_record(
            bare,
            lakefs_sdk.CommitRecordCreation(
                commit_id=c["id"], metarange_id=c["meta_range_id"], version=1, **fields
            ),
        )
    lakefs_sdk.TagsApi(sdk).create_tag(bare, lakefs_sdk.TagCreation(id="restored", ref=head["id"]))
    objects = lakefs_sdk.ObjectsApi(sdk)
    assert bytes(objects.get_object(bare, "restored", "data/a.csv")) == b"id\n1\n"

    bad = [
        {**record, "commit_id": "f" * 64},
        _record(head, parents=["e" * 64]),
        _record(head, metarange_id=f"{'d' * 32}+10"),
        _record(head, generation=9),
    ]
    for fields in bad:
        with pytest.raises(ApiException) as refused:
            internal.create_commit_record(repo, lakefs_sdk.CommitRecordCreation(**fields))
        assert refused.value.status == 400, fields
        assert refused.value.body and "commit" in refused.value.body
    wrong = api.post(f"/repositories/{repo}/commits", json={**record, "commit_id": "f" * 64})
    assert wrong.status_code == 400 and record["commit_id"] in wrong.json()["message"]
    assert api.post(f"/repositories/{repo}/commits", json={**record, "extra": 1}).status_code == 400
    missing = api.post("/repositories/no-such-repo/commits", json=record)
    assert missing.status_code == 404
