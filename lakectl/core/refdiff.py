"""A diff between two states of a repository where either may be a branch's staging area (``main$``):
the committed diff of their trees, with every staged path compared on its own."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from lakectl.core.graph.staging import Staging
from lakectl.core.graph.tree import Trees, diff_rows
from lakectl.core.model import TOMBSTONE, Branch, Change, MetaRangeId, RepositoryId, Row, decode_row


@dataclass(frozen=True, slots=True)
class View:
    """A committed tree, and the rows staged over it (None: deleted), as one state to compare."""

    meta_range_id: MetaRangeId
    staged: Mapping[str, Row | None] = field(default_factory=dict)


def staged_rows(staging: Staging, repo: RepositoryId, branch: Branch, prefix: str) -> dict[str, Row | None]:
    """The rows staged on ``branch`` under ``prefix`` (in every token, newest first wins)."""
    return {
        path: None if value == TOMBSTONE else decode_row(value)
        for path, value in staging.iter_staged(repo, branch.tokens, prefix=prefix)
    }


def diff_views(trees: Trees, left: View, right: View, prefix: str = "") -> Iterator[Change]:
    """Changes from ``left`` to ``right`` in path order. The cost stays that of the changes: the
    trees' diff skips shared ranges, and each staged path is looked up alone (lakeFS's combined
    diff of a commit and a branch's staging area)."""
    touched = sorted(set(left.staged) | set(right.staged))
    seen = set(touched)

    def row(view: View, path: str) -> Row | None:
        return view.staged[path] if path in view.staged else trees.lookup(view.meta_range_id, path)

    def one(path: str, r: Row | None) -> Iterator[tuple[str, Row]]:
        return iter([(path, r)] if r is not None else [])

    staged = (
        c for path in touched for c in diff_rows(one(path, row(left, path)), one(path, row(right, path)))
    )
    committed = (c for c in trees.diff(left.meta_range_id, right.meta_range_id, prefix) if c.path not in seen)
    return heapq.merge(committed, staged, key=lambda c: c.path)
