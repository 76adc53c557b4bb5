"""The lakeFS SDK (``lakefs_sdk``) against this server's branch protection and presigned stats:
the generated client parses our answers and sends what we read (ETag/If-Match included)."""

from __future__ import annotations

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.server.conftest import upload


def test_rules_through_the_sdk(sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str) -> None:
    repos = lakefs_sdk.RepositoriesApi(sdk)
    internal = lakefs_sdk.InternalApi(sdk)
    assert repos.get_branch_protection_rules(repo) == []
    rules = [
        lakefs_sdk.BranchProtectionRule(pattern="main"),
        lakefs_sdk.BranchProtectionRule(pattern="rel-*"),
    ]
    etag = repos.get_branch_protection_rules_with_http_info(repo).headers["ETag"]
    repos.set_branch_protection_rules(repo, rules, if_match=etag)
    assert [r.pattern for r in repos.get_branch_protection_rules(repo)] == ["main", "rel-*"]
    with pytest.raises(ApiException) as stale:
        repos.set_branch_protection_rules(repo, [], if_match=etag)
    assert stale.value.status == 412
    internal.internal_create_branch_protection_rule(repo, lakefs_sdk.BranchProtectionRule(pattern="x"))
    internal.internal_delete_branch_protection_rule(repo, lakefs_sdk.BranchProtectionRule(pattern="rel-*"))
    assert [r.pattern for r in internal.internal_get_branch_protection_rules(repo)] == ["main", "x"]
    with pytest.raises(ApiException) as refused:
        creation = lakefs_sdk.CommitCreation(message="direct", allow_empty=True)
        lakefs_sdk.CommitsApi(sdk).commit(repo, "main", creation)
    assert refused.value.status == 403


def test_presigned_stat_through_the_sdk(sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str) -> None:
    upload(api, repo, "main", "data.bin", b"through the sdk")
    stats = lakefs_sdk.ObjectsApi(sdk).stat_object(repo, "main", "data.bin", presign=True)
    assert stats.physical_address_expiry and "/presigned/" in stats.physical_address
    assert httpx.get(stats.physical_address).content == b"through the sdk"
