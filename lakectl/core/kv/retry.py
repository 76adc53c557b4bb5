"""Bounded retries of read → compute → conditional write: the named policies and the one loop.

Every read-modify-write of shared metadata is a compare-and-swap that may lose to another writer
(two server processes must be as safe as one, so no lock guards it). The loser starts again from
its read, a bounded number of times. :func:`retry` is that loop, once; a caller writes one
attempt and names the :class:`RetryPolicy` that bounds it. An attempt returns :data:`AGAIN`
when it lost (a ``set_if`` refused, or the state it read moved under it); whatever it raises
passes through at once, so a refused precondition is never retried into ``TooManyRetries``.

The policies below keep the limits each loop had before they met here; a policy is named by what
it guards, so that a limit is changed for every loop of its kind at once.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from lakectl.errors import LakectlError, TooManyRetries

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``attempts`` attempts; after the n-th lost one, a random wait of up to
    ``base_delay`` doubled n - 1 times, capped at ``max_delay`` (no wait when ``base_delay`` is 0)."""

    attempts: int
    base_delay: float = 0.0
    max_delay: float = 0.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError(f"a retry policy needs attempts >= 1 and delays >= 0, not {self!r}")

    def pause_bound(self, lost: int) -> float:
        """The longest wait after the ``lost``-th lost attempt (counted from 1)."""
        # The exponent stops at 64: any delay is capped long before, and 2.0 ** 1024 overflows.
        return min(self.max_delay, self.base_delay * 2.0 ** min(lost - 1, 64))


BRANCH_HEAD: Final = RetryPolicy(attempts=50)
"""Moving a branch's head: a commit (its seal, then its move), a merge, revert or cherry-pick.
An attempt redoes real work, but the branch is the most contended record, and giving up loses
the user's commit."""

STAGING_TOKEN: Final = RetryPolicy(attempts=20)
"""Work that must see one staging token of a branch while a commit may seal it: a staged write
(written again into the new token), a read or diff merged over the tokens (read again), a reset
(which swaps the token itself)."""

JOURNAL_CURSOR: Final = RetryPolicy(attempts=20)
"""Publishing a sealed batch, or a compacted generation, against the journal's cursor: another
sealer won, so this one starts over from the cursor it published."""

SETTING: Final = RetryPolicy(attempts=20)
"""A small record changed as a whole, the change applied again over whatever won: a repository's
metadata, the journal's setting, the mark of a pull request open between two branches."""

RECORD: Final = RetryPolicy(attempts=10, base_delay=0.002, max_delay=0.2)
"""A record rewritten by a pure function of its old value
(:func:`~lakectl.core.kv.helpers.update_with_retries`): pull requests, their counters, branch
protection rules. Full jitter between attempts spreads the contenders out instead of letting
them collide again in lockstep."""

PRINCIPAL: Final = RetryPolicy(attempts=8)
"""A user, group, policy or external principal's binding: rarely written by two at once."""

LAKE_IDENTITY: Final = RetryPolicy(attempts=8)
"""The lake's identity record: written when the lake is created, and once more when it stops
counting as created over blocks it found (:func:`~lakectl.core.identity.clear_preexisting`)."""


class Again(enum.Enum):
    """What an attempt returns when it lost its race and must start again from its read."""

    AGAIN = "again"


AGAIN: Final = Again.AGAIN


def retry(
    policy: RetryPolicy,
    attempt: Callable[[], T | Again],
    gave_up: str,
    *,
    error: type[LakectlError] = TooManyRetries,
    **details: Any,
) -> T:
    """Call ``attempt`` until it returns something other than :data:`AGAIN`, and return that; at
    most ``policy.attempts`` times, waiting between them as the policy says. When every attempt
    lost, raise ``error(gave_up, **details)``. What ``attempt`` raises passes through."""
    for lost in range(1, policy.attempts + 1):
        result = attempt()
        if result is not Again.AGAIN:
            return result
        pause = policy.pause_bound(lost)
        if pause > 0 and lost < policy.attempts:
            import random  # here: only a lost race needs it (with secrets, ~1.6 ms of start-up)

            # Full jitter: contenders spread out instead of colliding again in lockstep.
            time.sleep(random.uniform(0, pause))
    raise error(gave_up, **details)
