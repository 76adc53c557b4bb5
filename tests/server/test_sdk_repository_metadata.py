"""A repository's metadata through the lakeFS SDK: lakeFS's shapes and statuses."""

from __future__ import annotations

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException


def test_metadata_is_set_read_and_deleted_through_the_sdk(sdk: lakefs_sdk.ApiClient, repo: str) -> None:
    repos, internal = lakefs_sdk.RepositoriesApi(sdk), lakefs_sdk.InternalApi(sdk)
    assert repos.get_repository_metadata(repo) == {}
    internal.set_repository_metadata(
        repo, lakefs_sdk.RepositoryMetadataSet(metadata={"team": "data", "tier": "1"})
    )
    internal.set_repository_metadata(repo, lakefs_sdk.RepositoryMetadataSet(metadata={"tier": "2"}))
    assert repos.get_repository_metadata(repo) == {"team": "data", "tier": "2"}
    answer = internal.delete_repository_metadata_with_http_info(
        repo, lakefs_sdk.RepositoryMetadataKeys(keys=["team", "absent"])
    )
    assert answer.status_code == 204
    assert repos.get_repository_metadata(repo) == {"tier": "2"}


def test_bad_metadata_and_missing_repositories_answer_as_lakefs(sdk: lakefs_sdk.ApiClient, repo: str) -> None:
    repos, internal = lakefs_sdk.RepositoriesApi(sdk), lakefs_sdk.InternalApi(sdk)
    with pytest.raises(ApiException) as bad:
        internal.set_repository_metadata(repo, lakefs_sdk.RepositoryMetadataSet(metadata={"": "empty key"}))
    assert bad.value.status == 400
    assert repos.get_repository_metadata(repo) == {}
    for call in (
        lambda: repos.get_repository_metadata("no-such-repo"),
        lambda: internal.set_repository_metadata(
            "no-such-repo", lakefs_sdk.RepositoryMetadataSet(metadata={})
        ),
    ):
        with pytest.raises(ApiException) as missing:
            call()
        assert missing.value.status == 404
