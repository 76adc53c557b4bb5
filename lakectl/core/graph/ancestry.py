"""The ancestry index: every commit's place on a lineage, so walks jump along first-parent chains.

A *lineage* is a run of commits each the first parent of the next, named by its first commit;
a commit's *place* is ``(lineage, position)``, the first commit at position 1. A commit continues
its first parent's lineage when it is the first to claim the next position there (a
compare-and-swap on the slot, so concurrent children and commits orphaned by a lost branch move
settle on one); otherwise it starts a lineage of its own. Merge commits are listed per lineage,
highest position first. What follows is cheap to answer:

- every commit at or below a place on its lineage is an ancestor of it (the chain of first
  parents), so a set of commits reached along lineages is one highest position per lineage;
- what leaves a lineage below a position is its merges' other parents and its first commit's
  first parent: a walk visits those, never the commits in between.

Storage per commit is constant: its place, its slot, and for a merge one more key. The index is
kept when a commit record is stored (:meth:`Ancestry.record`), and filled on first use for
commits stored without it (histories from before the index, restored dumps): the first query
that needs a commit's place indexes its first-parent chain down to an indexed commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from lakectl.core import keys
from lakectl.core.kv import KVStore
from lakectl.core.model import Commit, CommitId, RepositoryId
from lakectl.errors import CommitNotFound, KeyNotFound, PredicateFailed

Place = tuple[CommitId, int]
"""``(lineage, position)``: the lineage is named by the id of its first commit (position 1)."""


class Ancestry:
    """Places of a repository's commits on lineages, and each lineage's merges."""

    def __init__(self, kv: KVStore, get_commit: Callable[[RepositoryId, CommitId], Commit]) -> None:
        self.kv = kv
        self.get_commit = get_commit

    def place(self, repo: RepositoryId, commit: Commit) -> Place:
        """Where ``commit`` sits; indexed now if it was stored without its place
        (``CommitNotFound`` if a commit of its first-parent chain is not stored)."""
        found = self.record(repo, commit)  # the stored place, if there is one
        if found is None:
            raise CommitNotFound(f"a first-parent ancestor of commit {commit.id!r} is not in {repo!r}")
        return found

    def record(self, repo: RepositoryId, commit: Commit) -> Place | None:
        """Index ``commit``, and first the first-parent chain below it down to an indexed commit
        (a history stored before the index); idempotent, and safe against concurrent indexers:
        the slot a commit claims decides its place for everyone. None, and nothing indexed, when
        a commit of the chain is not stored yet (a rebuild replays a commit before its parent):
        the place is then filled on first use."""
        chain = [commit]
        below: Place | None = self._stored(repo, commit.id)
        if below is not None:
            return below
        while chain[-1].parents:
            below = self._stored(repo, chain[-1].parents[0])
            if below is not None:
                break
            try:
                chain.append(self.get_commit(repo, chain[-1].parents[0]))
            except CommitNotFound:
                return None
        for c in reversed(chain):
            below = self._claim(repo, c, below)
        assert below is not None
        return below

    def record_all(self, repo: RepositoryId, commits: Iterable[Commit]) -> None:
        """Index ``commits`` stored together (a restored dump), parents before children."""
        for commit in sorted(commits, key=lambda c: c.generation):
            self.record(repo, commit)

    def merge_below(
        self, repo: RepositoryId, lineage: CommitId, position: int
    ) -> tuple[CommitId, int] | None:
        """The highest merge commit on ``lineage`` below ``position``, with its position."""
        prefix = keys.ancestry_merge_prefix(lineage)
        start = keys.ancestry_merge_key(lineage, position - 1)
        for key, raw in self.kv.scan(keys.repo_partition(repo), start, limit=1):
            if key.startswith(prefix):
                return CommitId(raw.decode()), keys.ancestry_merge_position(key)
            break
        return None

    def _stored(self, repo: RepositoryId, cid: CommitId) -> Place | None:
        try:
            raw = self.kv.get(keys.repo_partition(repo), keys.ancestry_place_key(cid))
        except KeyNotFound:
            return None
        lineage, position = raw.decode().split(" ")
        return CommitId(lineage), int(position)

    def _claim(self, repo: RepositoryId, commit: Commit, parent: Place | None) -> Place:
        """Store ``commit``'s place: the position after its first parent's, if its slot is free
        or already ours; else position 1 of a lineage of its own. The place is written last, so
        a commit found placed has its slot and merge keys stored."""
        partition, cid = keys.repo_partition(repo), commit.id
        place: Place = (cid, 1)
        if parent is not None:
            slot = keys.ancestry_slot_key(parent[0], parent[1] + 1)
            try:
                self.kv.set_if(partition, slot, cid.encode(), None)
                place = (parent[0], parent[1] + 1)
            except PredicateFailed:
                if self.kv.get(partition, slot) == cid.encode():
                    place = (parent[0], parent[1] + 1)
        if len(commit.parents) > 1:
            self.kv.set(partition, keys.ancestry_merge_key(*place), cid.encode())
        self.kv.set(partition, keys.ancestry_place_key(cid), f"{place[0]} {place[1]}".encode())
        return place
