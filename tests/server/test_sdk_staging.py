"""Staging through a backing address, through the lakeFS SDK: get an address and its URL, write
the bytes there with a plain HTTP client, link it (and lakeFS's older ``PUT .../objects``); and
the object property operations: rewriting user metadata, underlying properties."""

from __future__ import annotations

import hashlib

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.server.conftest import Live, commit, upload


def _status(call: object, *args: object, **kwargs: object) -> int:
    with pytest.raises(ApiException) as refused:
        call(*args, **kwargs)  # type: ignore[operator]
    return refused.value.status


def _write(location: lakefs_sdk.StagingLocation, data: bytes) -> str:
    """PUT the bytes to the address's URL, without credentials, as a presigned upload is."""
    assert location.presigned_url
    r = httpx.put(location.presigned_url, content=data)
    assert r.status_code == 200, r.text
    return r.headers["ETag"].strip('"')


def _meta(
    checksum: str, size: int, location: lakefs_sdk.StagingLocation, **kw: object
) -> lakefs_sdk.StagingMetadata:
    return lakefs_sdk.StagingMetadata(staging=location, checksum=checksum, size_bytes=size, **kw)


def test_an_address_written_through_its_url_links_as_the_object(
    sdk: lakefs_sdk.ApiClient, live: Live, repo: str, api: httpx.Client
) -> None:
    staging, objects = lakefs_sdk.StagingApi(sdk), lakefs_sdk.ObjectsApi(sdk)
    data = b"id,value\n1,one\n" * 1000
    location = staging.get_physical_address(repo, "main", "data/a.csv", presign=True)
    assert location.physical_address.startswith(f"local://{repo}/")
    assert location.presigned_url_expiry and location.presigned_url.startswith(live.url.split("/api/")[0])
    etag = _write(location, b"an earlier attempt")
    etag = _write(location, data)  # a second write replaces the first
    assert etag == hashlib.md5(data).hexdigest()
    assert objects.list_objects(repo, "main").results == []  # written, not staged yet
    stats = staging.link_physical_address(
        repo,
        "main",
        "data/a.csv",
        _meta(etag, len(data), location, content_type="text/csv", user_metadata={"team": "data"}),
    )
    assert (stats.path, stats.checksum, stats.size_bytes) == ("data/a.csv", etag, len(data))
    assert stats.content_type == "text/csv" and stats.metadata == {"team": "data"}
    assert bytes(objects.get_object(repo, "main", "data/a.csv")) == data
    # An address links once.
    assert (
        _status(staging.link_physical_address, repo, "main", "data/a.csv", _meta(etag, len(data), location))
        == 400
    )
    # Its URL writes no more, and never reads.
    assert httpx.put(location.presigned_url, content=b"late").status_code == 400
    assert httpx.get(location.presigned_url).status_code == 403


def test_a_link_that_does_not_match_what_was_written_stages_nothing(
    sdk: lakefs_sdk.ApiClient, repo: str, api: httpx.Client, live: Live
) -> None:
    staging, objects = lakefs_sdk.StagingApi(sdk), lakefs_sdk.ObjectsApi(sdk)
    data = b"payload bytes"
    location = staging.get_physical_address(repo, "main", "p.bin")
    unwritten = lakefs_sdk.StagingLocation(physical_address=location.physical_address)
    assert _status(staging.link_physical_address, repo, "main", "p.bin", _meta("0" * 32, 1, unwritten)) == 400
    etag = _write(location, data)
    wrong = [
        ("p.bin", _meta("0" * 32, len(data), location)),  # another checksum
        ("p.bin", _meta(etag, len(data) + 1, location)),  # another size
        ("elsewhere.bin", _meta(etag, len(data), location)),  # another path than asked for
        (
            "p.bin",
            _meta(
                etag, len(data), lakefs_sdk.StagingLocation(physical_address="local://x/_lakectl/staging/1")
            ),
        ),
        (
            "p.bin",
            _meta(
                etag, len(data), lakefs_sdk.StagingLocation(physical_address=location.physical_address + "0")
            ),
        ),
    ]
    for path, body in wrong:
        assert _status(staging.link_physical_address, repo, "main", path, body) == 400, path
    assert objects.list_objects(repo, "main").results == []
    # Another repository's address is not this one's.
    other = lakefs_sdk.RepositoriesApi(sdk).create_repository(
        lakefs_sdk.RepositoryCreation(name=repo + "-o", storage_namespace=f"local://{repo}-o")
    )
    assert (
        _status(staging.link_physical_address, other.id, "main", "p.bin", _meta(etag, len(data), location))
        == 400
    )
    # If-None-Match: * refuses an existing path (412), and the address stays linkable.
    upload(api, repo, "main", "p.bin", b"already here")
    assert (
        _status(
            staging.link_physical_address,
            repo,
            "main",
            "p.bin",
            _meta(etag, len(data), location),
            if_none_match="*",
        )
        == 412
    )
    staging.link_physical_address(repo, "main", "p.bin", _meta(f'"{etag}"', len(data), location))
    assert bytes(objects.get_object(repo, "main", "p.bin")) == data
    # A URL altered, or of a user deleted since, writes nothing.
    fresh = staging.get_physical_address(repo, "main", "q.bin")
    assert (
        httpx.put(
            fresh.presigned_url[:-1] + ("0" if fresh.presigned_url[-1] != "0" else "1"), content=b"x"
        ).status_code
        == 403
    )
    with pytest.raises(ApiException) as unknown_repo:
        staging.get_physical_address(repo + "-missing", "main", "x")
    assert unknown_repo.value.status == 404
    assert _status(staging.get_physical_address, repo, "no-such-branch", "x") == 404


def test_the_older_stage_object_links_a_written_address(sdk: lakefs_sdk.ApiClient, repo: str) -> None:
    staging, objects = lakefs_sdk.StagingApi(sdk), lakefs_sdk.ObjectsApi(sdk)
    internal = lakefs_sdk.InternalApi(sdk)
    data = b"\x00\x01 staged the old way"
    location = staging.get_physical_address(repo, "main", "old/way.bin")
    etag = _write(location, data)
    creation = lakefs_sdk.ObjectStageCreation(
        physical_address=location.physical_address,
        checksum=etag,
        size_bytes=len(data),
        mtime=1_700_000_000,
        metadata={"k": "v"},
    )
    response = internal.stage_object_with_http_info(repo, "main", "old/way.bin", creation)
    assert response.status_code == 201
    assert response.data.mtime == 1_700_000_000 and response.data.metadata == {"k": "v"}
    assert bytes(objects.get_object(repo, "main", "old/way.bin")) == data
    bogus = lakefs_sdk.ObjectStageCreation(
        physical_address="s3://bucket/key", checksum=etag, size_bytes=len(data)
    )
    assert _status(internal.stage_object, repo, "main", "x.bin", bogus) == 400


def test_user_metadata_is_rewritten_whole_and_the_data_stays(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str
) -> None:
    objects = lakefs_sdk.ObjectsApi(sdk)
    upload(
        api, repo, "main", "t.csv", b"a,b\n", **{"x-lakefs-meta-owner": "ada", "x-lakefs-meta-stage": "raw"}
    )
    committed = commit(api, repo, "main", "first")["id"]
    before = objects.stat_object(repo, "main", "t.csv")
    update = lakefs_sdk.UpdateObjectUserMetadata(set={"stage": "clean", "rows": "1"})
    response = objects.update_object_user_metadata_with_http_info(repo, "main", "t.csv", update)
    assert response.status_code == 201
    after = objects.stat_object(repo, "main", "t.csv")
    assert after.metadata == {"stage": "clean", "rows": "1"}  # all of it: "owner" is gone
    assert (after.checksum, after.size_bytes, after.mtime) == (
        before.checksum,
        before.size_bytes,
        before.mtime,
    )
    assert objects.stat_object(repo, committed, "t.csv").metadata == {"owner": "ada", "stage": "raw"}
    diff = lakefs_sdk.BranchesApi(sdk).diff_branch(repo, "main").results
    assert [(d.path, d.type) for d in diff] == [("t.csv", "changed")]
    assert _status(objects.update_object_user_metadata, repo, "main", "missing.csv", update) == 404
    assert _status(objects.update_object_user_metadata, repo, committed, "t.csv", update) in (400, 404)
    too_big = lakefs_sdk.UpdateObjectUserMetadata(set={"k": "v" * 10_000})
    assert _status(objects.update_object_user_metadata, repo, "main", "t.csv", too_big) == 400
    assert objects.stat_object(repo, "main", "t.csv").metadata == {"stage": "clean", "rows": "1"}


def test_underlying_properties_of_a_local_block_store(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str
) -> None:
    objects = lakefs_sdk.ObjectsApi(sdk)
    upload(api, repo, "main", "u.bin", b"some bytes")
    assert objects.get_underlying_properties(repo, "main", "u.bin").storage_class is None
    assert _status(objects.get_underlying_properties, repo, "main", "nope.bin") == 404


def test_symlink_manifests_list_a_commits_objects_by_directory_and_the_gateway_serves_both(
    sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, live: Live
) -> None:
    import boto3
    from botocore.config import Config

    files = {
        "t/year=1/a.csv": b"1\n",
        "t/year=1/b.csv": b"2\n",
        "t/year=2/c.csv": b"3\n",
        "other/x.csv": b"x",
    }
    for path, data in files.items():
        upload(api, repo, "main", path, data)
    head = commit(api, repo, "main", "tables")["id"]
    upload(api, repo, "main", "t/year=3/staged.csv", b"not committed")
    internal = lakefs_sdk.InternalApi(sdk)
    response = internal.create_symlink_file_with_http_info(repo, "main", location="t/")
    assert response.status_code == 201
    location = response.data.location
    assert location == f"s3://{repo}/_lakefs_exported/main/{head}/"
    s3 = boto3.client(
        "s3",
        endpoint_url=live.s3_endpoint,
        aws_access_key_id=live.key_id,
        aws_secret_access_key=live.secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    manifests = sorted(item["Key"].removeprefix(prefix) for item in listed)
    assert manifests == ["t/year=1/symlink.txt", "t/year=2/symlink.txt"]
    manifest = s3.get_object(Bucket=bucket, Key=prefix + "t/year=1/symlink.txt")["Body"].read().decode()
    addresses = manifest.split("\n")
    assert addresses == [f"s3://{repo}/{head}/t/year=1/a.csv", f"s3://{repo}/{head}/t/year=1/b.csv"]
    for address in addresses:  # each line reads the object, through the same gateway
        key = address.removeprefix(f"s3://{repo}/")
        assert s3.get_object(Bucket=repo, Key=key)["Body"].read() == files[key.split("/", 1)[1]]
    # Again for the same commit: the same location, nothing new committed on the export branch.
    branches = lakefs_sdk.BranchesApi(sdk)
    before = branches.get_branch(repo, "_lakefs_exported").commit_id
    assert internal.create_symlink_file(repo, "main", location="t/").location == location
    assert branches.get_branch(repo, "_lakefs_exported").commit_id == before
    # The user's branch is untouched (only its own staged object), and a tag is no branch.
    assert [d.path for d in branches.diff_branch(repo, "main").results] == ["t/year=3/staged.csv"]
    lakefs_sdk.TagsApi(sdk).create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref=head))
    assert _status(internal.create_symlink_file, repo, "v1") in (400, 404)
    assert _status(internal.create_symlink_file, repo, "no-such-branch") == 404


def test_the_high_level_sdk_uploads_through_a_presigned_address(live: Live, repo: str) -> None:
    """lakeFS's own client with ``pre_sign=True``: it asks for an address, PUTs the bytes to the
    URL with its own HTTP pool, and links them with the ETag it was answered."""
    from tests.server.wrapped import wrapped

    lakefs = wrapped("lakefs")
    client = lakefs.Client(host=live.url.removesuffix("/api/v1"), username=live.key_id, password=live.secret)
    main = lakefs.Repository(repo, client=client).branch("main")
    data = b"id,value\n" + b"".join(b"%d,v\n" % i for i in range(5000))
    main.object("presigned/t.csv").upload(
        data=data, pre_sign=True, content_type="text/csv", metadata={"k": "v"}
    )
    stat = main.object("presigned/t.csv").stat()
    assert (stat.size_bytes, stat.checksum, stat.content_type) == (
        len(data),
        hashlib.md5(data).hexdigest(),
        "text/csv",
    )
    assert stat.metadata == {"k": "v"}
    assert main.object("presigned/t.csv").reader(mode="rb").read() == data
    with pytest.raises(lakefs.exceptions.ObjectExistsException):
        main.object("presigned/t.csv").upload(data=b"again", mode="xb", pre_sign=True)
