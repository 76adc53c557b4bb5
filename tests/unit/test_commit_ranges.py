"""Ranges of commits (git's ``FROM..REF``) and the ancestor test, against the plain log as oracle:
what ``log --since-commit FROM REF`` lists is exactly REF's log without FROM's."""

from __future__ import annotations

import random
from typing import Any

import pytest

from lakectl.core import changes, merging, porcelain
from lakectl.core.lake import Lake
from lakectl.core.model import Commit
from tests.unit.graphkit import REPO, commit, log_messages

MERGE_MSG = "Merge 'dev' into 'main'"


def oracle(lake: Lake, ref: str, since: str, **kw: Any) -> list[str]:
    """``ref``'s log with every commit of ``since``'s log left out."""
    hidden = {c.id for c in changes.log(lake, REPO, since)}
    return [c.id for c in changes.log(lake, REPO, ref, **kw) if c.id not in hidden]


def ranged(lake: Lake, ref: str, since: str, **kw: Any) -> list[str]:
    return [c.id for c in changes.log(lake, REPO, ref, since_commit=since, **kw)]


@pytest.mark.parametrize(
    ("ref", "since", "expected"),
    [
        ("main", "main~2", ["c3", MERGE_MSG, "d1"]),  # the merged branch's commit is in the range
        ("main", "dev", ["c3", MERGE_MSG, "c2"]),
        ("main", "v1", ["c3", MERGE_MSG, "d1"]),
        ("dev", "main", []),  # everything dev has, main has too
        ("main", "main", []),
        ("v1", "dev", ["c2"]),  # not an ancestor: what v1 has and dev lacks
    ],
)
def test_a_range_is_what_ref_reaches_and_since_does_not(
    lake: Lake, history: dict[str, Commit], ref: str, since: str, expected: list[str]
) -> None:
    assert log_messages(lake, ref, since_commit=since) == expected
    assert ranged(lake, ref, since) == oracle(lake, ref, since)


def test_a_range_keeps_the_logs_filters_and_pages(lake: Lake, history: dict[str, Commit]) -> None:
    assert log_messages(lake, "main", since_commit="main~3", first_parent=True) == ["c3", MERGE_MSG, "c2"]
    assert log_messages(lake, "main", since_commit="main~3", no_merges=True) == ["c3", "d1", "c2"]
    assert log_messages(lake, "main", since_commit="main~3", objects=["d"]) == [MERGE_MSG, "d1"]
    assert log_messages(lake, "main", since_commit="main~3", amount=2) == ["c3", MERGE_MSG]
    after = history["M"].id
    assert log_messages(lake, "main", since_commit="main~3", after=after) == ["d1", "c2"]


@pytest.mark.parametrize(
    ("ancestor", "ref", "expected"),
    [
        ("C1", "C3", True),
        ("D1", "C3", True),
        ("C3", "C3", True),
        ("C3", "D1", False),
        ("D1", "C2", False),
        ("C2", "D1", False),
        ("C0", "D1", True),
    ],
)
def test_ancestor_of(lake: Lake, history: dict[str, Commit], ancestor: str, ref: str, expected: bool) -> None:
    assert changes.ancestor_of(lake, REPO, history[ancestor].id, history[ref].id) is expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranges_and_ancestry_of_random_histories_agree_with_the_log(lake: Lake, seed: int) -> None:
    """Three branches that commit and merge into each other at random: every range between two
    commits is the oracle's, and the ancestor test says what the log says."""
    rng = random.Random(seed)
    branches = ["main", "b1", "b2"]
    for b in branches[1:]:
        porcelain.create_branch(lake, REPO, b, "main")
    made: list[Commit] = []
    for i in range(24):
        b = rng.choice(branches)
        other = rng.choice([x for x in branches if x != b])
        if rng.random() < 0.3 and not changes.ancestor_of(lake, REPO, other, b):
            made.append(merging.merge(lake, REPO, other, b, committer="tester").commit)
        else:
            made.append(commit(lake, b, f"c{i}", **{f"f{i}": str(i)}))
    picks = rng.sample(made, 8)
    for ref in picks:
        reached = {c.id for c in changes.log(lake, REPO, ref.id)}
        for since in picks:
            assert ranged(lake, ref.id, since.id) == oracle(lake, ref.id, since.id)
            assert changes.ancestor_of(lake, REPO, since.id, ref.id) is (since.id in reached)
