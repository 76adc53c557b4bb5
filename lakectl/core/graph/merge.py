"""Three-way merge of trees: two diffs from the base, each path labelled, conflicts returned as data."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from lakectl.core.graph.tree import Trees, Update
from lakectl.core.model import Change, MergeStrategy, MetaRangeId, same_row
from lakectl.errors import InvalidArgument


class Outcome(enum.Enum):
    """What a merge does with one path changed since the base."""

    TAKE_SOURCE = "take-source"  # changed on the source only, or source wins a conflict
    KEEP_DEST = "keep-dest"  # changed on the destination only, same on both, or dest wins
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class StrategyRules:
    """A default strategy and per-path-glob overrides (first matching glob wins)."""

    default: MergeStrategy = MergeStrategy.NONE
    rules: tuple[tuple[str, MergeStrategy], ...] = ()

    def for_path(self, path: str) -> MergeStrategy:
        for pattern, strategy in self.rules:
            if _glob(pattern).match(path):
                return strategy
        return self.default

    @staticmethod
    def parse(values: Sequence[str]) -> StrategyRules:
        """``dest-wins`` sets the default; ``tables/**=source-wins`` adds a rule."""
        default = MergeStrategy.NONE
        rules: list[tuple[str, MergeStrategy]] = []
        for value in values:
            pattern, eq, name = value.rpartition("=")
            strategy = _strategy(name)
            if eq:
                if not pattern:
                    raise InvalidArgument(f"empty path glob in strategy {value!r}")
                rules.append((pattern, strategy))
            else:
                default = strategy
        return StrategyRules(default, tuple(rules))


def _strategy(name: str) -> MergeStrategy:
    try:
        return MergeStrategy(name)
    except ValueError:
        choices = ", ".join(s.value for s in MergeStrategy if s is not MergeStrategy.NONE)
        raise InvalidArgument(f"unknown merge strategy {name!r} (choose from {choices})") from None


def glob_matches(pattern: str, path: str) -> bool:
    """Whether ``path`` matches a strategy's glob (``**`` spans directories)."""
    return _glob(pattern).match(path) is not None


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    """``**`` spans directories, ``*`` and ``?`` stay within one path segment."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass(slots=True)
class MergePlan:
    """The updates to apply to the destination and the paths that conflict."""

    updates: list[Update] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def classify(src: Change | None, dst: Change | None) -> Outcome:
    if dst is None:
        return Outcome.TAKE_SOURCE
    if src is None or same_row(src.new, dst.new):
        return Outcome.KEEP_DEST
    return Outcome.CONFLICT


def plan_merge(
    trees: Trees,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    strategy: StrategyRules,
) -> MergePlan:
    """Label every path changed since ``base`` on either side; cost follows the changes."""
    plan = MergePlan()
    for path, src, dst in join_changes(trees.diff(base, source), trees.diff(base, dest)):
        outcome = classify(src, dst)
        if outcome is Outcome.CONFLICT:
            chosen = strategy.for_path(path)
            if chosen is MergeStrategy.SOURCE_WINS:
                outcome = Outcome.TAKE_SOURCE
            elif chosen is MergeStrategy.DEST_WINS:
                outcome = Outcome.KEEP_DEST
            else:
                plan.conflicts.append(path)
                continue
        if outcome is Outcome.TAKE_SOURCE and src is not None:
            plan.updates.append((path, src.new))
    return plan


def join_changes(
    a: Iterator[Change], b: Iterator[Change]
) -> Iterator[tuple[str, Change | None, Change | None]]:
    """Two diffs in path order, joined by path: each path with its change on either side."""
    x = next(a, None)
    y = next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x.path < y.path):
            assert x is not None
            yield x.path, x, None
            x = next(a, None)
        elif x is None or y.path < x.path:
            yield y.path, None, y
            y = next(b, None)
        else:
            yield x.path, x, y
            x = next(a, None)
            y = next(b, None)
