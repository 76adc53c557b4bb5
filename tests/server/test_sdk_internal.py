"""lakeFS's internal and telemetry operations through the SDK: gc rules under their older path,
the gc preflight and configuration, and the telemetry endpoints (answered, nothing sent)."""

from __future__ import annotations

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from lakectl.core.upkeep.gc import GRACE_SECONDS
from tests.server.conftest import Live


def test_gc_rules_under_the_internal_path_are_the_repositorys_rules(
    sdk: lakefs_sdk.ApiClient, repo: str
) -> None:
    internal, repos = lakefs_sdk.InternalApi(sdk), lakefs_sdk.RepositoriesApi(sdk)
    assert internal.set_garbage_collection_rules_preflight_with_http_info(repo).status_code == 204
    rules = lakefs_sdk.GarbageCollectionRules(
        default_retention_days=7,
        branches=[lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=3)],
    )
    internal.internal_set_garbage_collection_rules(repo, rules)
    for got in (internal.internal_get_garbage_collection_rules(repo), repos.get_gc_rules(repo)):
        assert got.default_retention_days == 7
        assert [(b.branch_id, b.retention_days) for b in got.branches] == [("main", 3)]
    internal.internal_delete_garbage_collection_rules(repo)
    with pytest.raises(ApiException) as gone:
        repos.get_gc_rules(repo)
    assert gone.value.status == 404
    with pytest.raises(ApiException) as missing:
        internal.set_garbage_collection_rules_preflight("no-such-repo")
    assert missing.value.status == 404


def test_gc_configuration_says_the_grace_period(sdk: lakefs_sdk.ApiClient) -> None:
    assert lakefs_sdk.InternalApi(sdk).get_garbage_collection_config().grace_period == GRACE_SECONDS


def test_telemetry_is_answered_and_nothing_is_reported(
    sdk: lakefs_sdk.ApiClient, live: Live, api: httpx.Client
) -> None:
    internal = lakefs_sdk.InternalApi(sdk)
    events = lakefs_sdk.StatsEventsList(events=[lakefs_sdk.StatsEvent(var_class="ui", name="view", count=2)])
    assert internal.post_stats_events_with_http_info(events).status_code == 204
    report = internal.get_usage_report_summary()
    assert report.installation_id and report.reports == []
    prefs = lakefs_sdk.CommPrefsInput(email="ada@example.com", feature_updates=False, security_updates=True)
    assert internal.setup_comm_prefs_with_http_info(prefs).status_code == 200
    assert (
        lakefs_sdk.InternalApi(lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=live.url)))
        .get_setup_state()
        .comm_prefs_missing
        is False
    )
    refused = api.post("/setup_comm_prefs", json={"email": "x"})  # the two booleans are required
    assert refused.status_code == 400, refused.text
