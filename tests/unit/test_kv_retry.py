"""The one compare-and-swap retry loop: attempts counted, waits bounded, exhaustion and refusals."""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

import pytest

from lakectl.core.kv import retry as r
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.kv.retry import AGAIN, Again, RetryPolicy, retry
from lakectl.errors import PredicateFailed, StorageError, TooManyRetries


class Contender:
    """An attempt that loses its compare-and-swap ``losses`` times, then wins, on a real store."""

    def __init__(self, losses: int) -> None:
        self.store = MemoryStore()
        self.losses = losses
        self.calls = 0

    def __call__(self) -> str | Again:
        self.calls += 1
        old = self.store.get("p", "k") if self.calls > 1 else None
        if self.calls <= self.losses:
            self.store.set("p", "k", f"theirs-{self.calls}".encode())  # another writer wins
        try:
            self.store.set_if("p", "k", b"mine", old)
        except PredicateFailed:
            return AGAIN
        return f"won on attempt {self.calls}"


def test_returns_what_the_first_winning_attempt_returns() -> None:
    attempt = Contender(losses=3)
    assert retry(RetryPolicy(attempts=4), attempt, "gave up") == "won on attempt 4"
    assert attempt.calls == 4
    assert attempt.store.get("p", "k") == b"mine"


def test_gives_up_after_the_policy_s_attempts_with_its_message() -> None:
    attempt = Contender(losses=100)
    with pytest.raises(TooManyRetries) as raised:
        retry(RetryPolicy(attempts=5), attempt, "could not move branch 'main': too many concurrent updates")
    assert attempt.calls == 5
    assert raised.value.message == "could not move branch 'main': too many concurrent updates"
    assert raised.value.details == {}


def test_exhaustion_raises_the_error_and_details_asked_for() -> None:
    with pytest.raises(StorageError) as raised:
        retry(RetryPolicy(attempts=2), Contender(losses=100), "it kept changing", error=StorageError, key="k")
    assert raised.value.message == "it kept changing"
    assert raised.value.details == {"key": "k"}


@pytest.mark.parametrize("refusal", [PredicateFailed("branch 'main' moved: try again"), KeyError("gone")])
def test_what_an_attempt_raises_passes_through_on_the_first_attempt(refusal: Exception) -> None:
    calls = 0

    def refused() -> int | Again:
        nonlocal calls
        calls += 1
        raise refusal

    # Even PredicateFailed: only AGAIN means "lost the race", a raised one is a refused precondition.
    with pytest.raises(type(refusal)) as raised:
        retry(RetryPolicy(attempts=10), refused, "gave up")
    assert raised.value is refusal
    assert calls == 1


def test_a_falsy_result_is_a_result() -> None:
    assert retry(RetryPolicy(attempts=1), lambda: None, "gave up") is None
    assert retry(RetryPolicy(attempts=1), lambda: 0, "gave up") == 0


def test_wait_bound_doubles_from_the_base_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=8, base_delay=0.01, max_delay=0.05)
    assert [policy.pause_bound(n) for n in range(1, 6)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert RetryPolicy(attempts=3).pause_bound(2) == 0
    assert policy.pause_bound(5000) == 0.05  # no overflow however long the race


def test_waits_stay_within_their_bounds() -> None:
    policy = RetryPolicy(attempts=6, base_delay=0.004, max_delay=0.01)
    started = time.monotonic()
    with pytest.raises(TooManyRetries):
        retry(policy, Contender(losses=100), "gave up")
    elapsed = time.monotonic() - started
    # Five waits (none after the last attempt) of at most 4, 8, 10, 10 and 10 ms.
    assert elapsed < sum(policy.pause_bound(n) for n in range(1, 6)) + 0.2


def test_no_wait_without_a_base_delay() -> None:
    started = time.monotonic()
    with pytest.raises(TooManyRetries):
        retry(RetryPolicy(attempts=1000), Contender(losses=10_000), "gave up")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "fields", [{"attempts": 0}, {"attempts": 3, "base_delay": -1.0}, {"attempts": 3, "max_delay": -0.5}]
)
def test_a_policy_that_could_not_run_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**fields)


def test_the_named_policies_keep_the_limits_of_the_loops_they_replaced() -> None:
    assert r.BRANCH_HEAD.attempts == 50
    assert r.STAGING_TOKEN.attempts == r.JOURNAL_CURSOR.attempts == r.SETTING.attempts == 20
    assert (r.RECORD.attempts, r.RECORD.base_delay, r.RECORD.max_delay) == (10, 0.002, 0.2)
    assert r.PRINCIPAL.attempts == r.LAKE_IDENTITY.attempts == 8


def test_only_the_helper_gives_up() -> None:
    """A compare-and-swap loop written by hand again would raise TooManyRetries itself."""
    root = Path(__file__).resolve().parents[2]
    raisers = []
    for source in sorted([*root.joinpath("lakectl").rglob("*.py"), *root.joinpath("server").rglob("*.py")]):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                named = node.exc.func
                if isinstance(named, ast.Name) and named.id == "TooManyRetries":
                    raisers.append(f"{source.relative_to(root)}:{node.lineno}")
    assert raisers == []
