"""Branch protection over the REST API and the S3 gateway: lakeFS's rule routes (the settings list
with ETag/If-Match and the older per-rule routes), and every direct write to a protected branch
refused (403 ``protected_branch``, S3 ``AccessDenied``) with nothing stored, while merges land."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.server.conftest import Live, changes, commit, snapshot, upload

SETTINGS = "/repositories/{}/settings/branch_protection"
RULES = "/repositories/{}/branch_protection"


def _protect(api: httpx.Client, repo: str, pattern: str) -> None:
    r = api.post(RULES.format(repo), json={"pattern": pattern})
    assert r.status_code == 204, r.text


def test_settings_list_with_etag_and_if_match(api: httpx.Client, repo: str) -> None:
    first = api.get(SETTINGS.format(repo))
    assert first.status_code == 200 and first.json() == []
    etag = first.headers["ETag"]
    rules = [{"pattern": "main"}, {"pattern": "release-*"}]
    put = api.put(SETTINGS.format(repo), json=rules, headers={"If-Match": etag})
    assert put.status_code == 204, put.text
    again = api.get(SETTINGS.format(repo))
    assert again.json() == rules and again.headers["ETag"] != etag
    # A writer that read the old list loses, and changes nothing.
    stale = api.put(SETTINGS.format(repo), json=[], headers={"If-Match": etag})
    assert stale.status_code == 412 and stale.json()["code"] == "precondition_failed"
    assert api.get(SETTINGS.format(repo)).json() == rules
    # Without If-Match the list is replaced whatever it was.
    assert api.put(SETTINGS.format(repo), json=[{"pattern": "x?"}]).status_code == 204
    assert api.get(RULES.format(repo)).json() == [{"pattern": "x?"}]


def test_per_rule_routes(api: httpx.Client, repo: str) -> None:
    _protect(api, repo, "stable_*")
    dup = api.post(RULES.format(repo), json={"pattern": "stable_*"})
    assert dup.status_code == 409
    assert api.get(RULES.format(repo)).json() == [{"pattern": "stable_*"}]
    missing = api.request("DELETE", RULES.format(repo), json={"pattern": "nope"})
    assert missing.status_code == 404
    assert api.request("DELETE", RULES.format(repo), json={"pattern": "stable_*"}).status_code == 204
    assert api.get(SETTINGS.format(repo)).json() == []


@pytest.mark.parametrize(
    "body",
    [{}, {"pattern": ""}, {"pattern": 3}, {"pattern": "a", "extra": 1}, {"pattern": "a\nb"}],
    ids=["no-pattern", "empty", "number", "extra-field", "newline"],
)
def test_bad_rules_are_400(api: httpx.Client, repo: str, body: dict[str, Any]) -> None:
    assert api.post(RULES.format(repo), json=body).status_code == 400
    assert api.put(SETTINGS.format(repo), json=[body]).status_code == 400
    assert api.get(SETTINGS.format(repo)).json() == []


def test_rules_of_a_missing_repository_are_404(api: httpx.Client) -> None:
    assert api.get(SETTINGS.format("no-such-repo")).status_code == 404
    assert api.post(RULES.format("no-such-repo"), json={"pattern": "main"}).status_code == 404


def test_only_admins_set_rules(live: Live, api: httpx.Client, repo: str) -> None:
    user = f"dev-{repo}"
    assert api.post("/auth/users", json={"id": user}).status_code == 201
    assert api.put(f"/auth/groups/Developers/members/{user}").status_code == 201
    creds = api.post(f"/auth/users/{user}/credentials").json()
    with live.client((creds["access_key_id"], creds["secret_access_key"])) as dev:
        assert dev.get(SETTINGS.format(repo)).status_code == 200
        assert dev.post(RULES.format(repo), json={"pattern": "main"}).status_code == 403
        assert dev.put(SETTINGS.format(repo), json=[]).status_code == 403


def _refused(r: httpx.Response) -> None:
    assert r.status_code == 403, r.text
    assert r.json()["code"] == "protected_branch"


def test_rest_writes_to_a_protected_branch_are_refused(live: Live, api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "kept.txt", b"kept")
    commit(api, repo, "main", "base")
    _protect(api, repo, "ma?n")
    base = f"/repositories/{repo}/branches/main"
    signed = api.get(f"/repositories/{repo}/refs/main/objects/signed", params={"path": "kept.txt"}).json()
    manifest = api.get(f"/repositories/{repo}/refs/main/manifest", params={"signed": True}).text
    before = snapshot(live.data_dir)
    _refused(api.post(f"{base}/objects", params={"path": "new.txt"}, content=b"new"))
    _refused(api.delete(f"{base}/objects", params={"path": "kept.txt"}))
    _refused(api.post(f"{base}/objects/delete", json={"paths": ["kept.txt"]}))
    _refused(api.post(f"{base}/objects/copy", params={"dest_path": "c.txt"}, json={"src_path": "kept.txt"}))
    _refused(api.post(f"{base}/commits", json={"message": "direct"}))
    _refused(api.post(f"{base}/commits", json={"message": "direct", "allow_empty": True}))
    _refused(api.put(base, json={"type": "reset"}))
    _refused(api.post(f"{base}/objects/link", json={"path": "l.txt", "segments": signed["signed_locators"]}))
    _refused(api.post(f"{base}/manifest", params={"prefix": "m/"}, content=manifest.encode()))
    assert snapshot(live.data_dir) == before, changes(before, snapshot(live.data_dir))


def test_merges_and_reverts_into_a_protected_branch_land(api: httpx.Client, repo: str) -> None:
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).status_code == 201
    )
    _protect(api, repo, "main")
    upload(api, repo, "dev", "feature.txt", b"f")
    commit(api, repo, "dev", "feature")
    merged = api.post(f"/repositories/{repo}/refs/dev/merge/main", json={})
    assert merged.status_code == 200, merged.text
    stat = api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": "feature.txt"})
    assert stat.status_code == 200
    reverted = api.post(
        f"/repositories/{repo}/branches/main/revert", json={"ref": "main", "parent_number": 1}
    )
    assert reverted.status_code == 204, reverted.text
    gone = api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": "feature.txt"})
    assert gone.status_code == 404
    # dev matches no rule: it takes writes as before.
    upload(api, repo, "dev", "more.txt", b"m")


def _access_denied(call: Any, **kw: Any) -> None:
    with pytest.raises(ClientError) as info:
        call(**kw)
    assert info.value.response["Error"]["Code"] == "AccessDenied"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_s3_writes_to_a_protected_branch_are_access_denied(live: Live, api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "kept.txt", b"kept")
    commit(api, repo, "main", "base")
    _protect(api, repo, "main")
    s3 = live.s3()
    before = snapshot(live.data_dir)
    _access_denied(s3.put_object, Bucket=repo, Key="main/new.txt", Body=b"new")
    _access_denied(s3.delete_object, Bucket=repo, Key="main/kept.txt")
    _access_denied(s3.copy_object, Bucket=repo, Key="main/c.txt", CopySource=f"{repo}/main/kept.txt")
    _access_denied(s3.create_multipart_upload, Bucket=repo, Key="main/big.bin")
    assert snapshot(live.data_dir) == before, changes(before, snapshot(live.data_dir))
    assert s3.get_object(Bucket=repo, Key="main/kept.txt")["Body"].read() == b"kept"


def test_stage_allowed_and_set_allowed(live: Live, api: httpx.Client, repo: str) -> None:
    allowed = f"/repositories/{repo}/branches/main/objects/stage_allowed"
    assert api.get(allowed, params={"path": "x"}).status_code == 204
    assert api.get(f"/repositories/{repo}/branches/nope/objects/stage_allowed").status_code == 404
    _protect(api, repo, "main")
    _refused(api.get(allowed, params={"path": "x"}))
    assert api.get(RULES.format(repo) + "/set_allowed").status_code == 204
    user = f"dev2-{repo}"
    assert api.post("/auth/users", json={"id": user}).status_code == 201
    assert api.put(f"/auth/groups/Developers/members/{user}").status_code == 201
    creds = api.post(f"/auth/users/{user}/credentials").json()
    with live.client((creds["access_key_id"], creds["secret_access_key"])) as dev:
        assert dev.get(RULES.format(repo) + "/set_allowed").status_code == 403


def test_s3_multipart_started_before_protection_cannot_complete(
    live: Live, api: httpx.Client, repo: str
) -> None:
    s3 = live.s3()
    started = s3.create_multipart_upload(Bucket=repo, Key="main/big.bin")
    part = s3.upload_part(
        Bucket=repo, Key="main/big.bin", UploadId=started["UploadId"], PartNumber=1, Body=b"p"
    )
    _protect(api, repo, "main")
    _access_denied(
        s3.complete_multipart_upload,
        Bucket=repo,
        Key="main/big.bin",
        UploadId=started["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    with pytest.raises(ClientError):
        s3.head_object(Bucket=repo, Key="main/big.bin")
