"""Garbage-collection retention rules: the JSON form lakeFS uses, checked on the way in, per repository."""

from __future__ import annotations

import pytest

from lakectl.core import porcelain
from lakectl.core.lake import Lake
from lakectl.core.upkeep import retention
from lakectl.errors import InvalidArgument, InvalidName, NotFound, RepositoryNotFound
from tests.unit.graphkit import REPO


def test_rules_round_trip_and_pick_the_branch_rule(lake: Lake) -> None:
    data = {"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]}
    rules = retention.GCRules.from_dict(data)
    assert rules.to_dict() == data
    assert (rules.retention_days("main"), rules.retention_days("dev")) == (28, 21)
    with pytest.raises(NotFound):
        retention.get_rules(lake, REPO)
    retention.set_rules(lake, REPO, rules)
    assert retention.get_rules(lake, REPO) == rules
    retention.delete_rules(lake, REPO)
    retention.delete_rules(lake, REPO)  # idempotent
    with pytest.raises(NotFound):
        retention.get_rules(lake, REPO)


@pytest.mark.parametrize(
    "data",
    [
        [],
        {},
        {"default_retention_days": -1},
        {"default_retention_days": 1.5},
        {"default_retention_days": True},
        {"default_retention_days": "7"},
        {"default_retention_days": 7, "extra": 1},
        {"default_retention_days": 7, "branches": {}},
        {"default_retention_days": 7, "branches": [{"branch_id": "main"}]},
        {"default_retention_days": 7, "branches": [{"branch_id": 3, "retention_days": 1}]},
        {"default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 1, "x": 0}]},
        {
            "default_retention_days": 7,
            "branches": [{"branch_id": "a", "retention_days": 1}, {"branch_id": "a", "retention_days": 2}],
        },
    ],
)
def test_bad_rules_are_refused(data: object) -> None:
    with pytest.raises(InvalidArgument):
        retention.GCRules.from_dict(data)


def test_branch_names_are_checked_and_rules_belong_to_a_repository(lake: Lake) -> None:
    with pytest.raises(InvalidName):
        retention.GCRules.from_dict(
            {"default_retention_days": 1, "branches": [{"branch_id": "a b", "retention_days": 1}]}
        )
    with pytest.raises(RepositoryNotFound):
        retention.set_rules(lake, "nope", retention.GCRules(1))
    porcelain.create_repo(lake, "other")
    retention.set_rules(lake, REPO, retention.GCRules(5))
    with pytest.raises(NotFound):
        retention.get_rules(lake, "other")
    porcelain.delete_repo(lake, REPO)
    porcelain.create_repo(lake, REPO)
    with pytest.raises(NotFound):
        retention.get_rules(lake, REPO)  # a new repository of the same name starts without rules
