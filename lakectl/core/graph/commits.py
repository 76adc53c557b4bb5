"""Committing staged changes under concurrency; merge bases, ranges and ancestry along the
ancestry index's lineages; the log."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from lakectl.core.blocks import BlockAdapter
from lakectl.core.graph.ancestry import Place
from lakectl.core.graph.refs import RefStore, commit_id_of, new_staging_token
from lakectl.core.graph.staging import Staging
from lakectl.core.graph.tree import Trees, Update
from lakectl.core.kv.retry import AGAIN, BRANCH_HEAD, Again, retry
from lakectl.core.model import (
    Branch,
    BranchId,
    Commit,
    CommitId,
    MetaRangeId,
    RepositoryId,
    StagingToken,
)
from lakectl.errors import DirtyBranch, NothingToCommit, PredicateFailed


@dataclass(frozen=True, slots=True)
class CommitRequest:
    message: str
    committer: str
    metadata: Mapping[str, str]
    creation_date: int
    allow_empty: bool = False


@dataclass(slots=True)
class Moved:
    """What a branch move left, for the journal: the record its final compare-and-swap wrote and
    the staging tokens it dropped (filled in by :class:`Committer` when given). ``making`` is
    told each new commit before its record is stored, so before any branch can name it (the
    journal logs it: :data:`lakectl.core.events.MAKING`)."""

    branch: Branch | None = None
    dropped: tuple[StagingToken, ...] = field(default_factory=tuple)
    making: Callable[[Commit], None] | None = None

    def publishing(self, commit: Commit) -> None:
        if self.making is not None:
            self.making(commit)


def make_commit(
    parents: tuple[CommitId, ...],
    parent_commits: Sequence[Commit],
    mid: MetaRangeId,
    req: CommitRequest,
) -> Commit:
    generation = max((c.generation for c in parent_commits), default=0) + 1
    cid = commit_id_of(parents, mid, req.message, req.committer, req.metadata, req.creation_date)
    return Commit(
        id=cid,
        parents=parents,
        committer=req.committer,
        message=req.message,
        creation_date=req.creation_date,
        meta_range_id=mid,
        metadata=dict(req.metadata),
        generation=generation,
    )


class Committer:
    """Turns a branch's staged changes into a commit without blocking writers.

    (1) CAS the branch to seal its staging token and start a fresh one; (2) apply the sealed
    tokens onto the head's tree; (3) CAS the branch to the new commit, dropping the tokens it
    applied. If (3) loses to a concurrent commit or reset, redo (2) on the branch as it is now.
    """

    def __init__(self, refs: RefStore, staging: Staging, trees: Trees, blocks: BlockAdapter) -> None:
        self.refs = refs
        self.staging = staging
        self.trees = trees
        self.blocks = blocks

    def commit(
        self,
        repo: RepositoryId,
        name: BranchId,
        req: CommitRequest,
        moved: Moved | None = None,
        prefixes: Sequence[str] = (),
    ) -> Commit:
        """Commit the staged changes; with ``prefixes``, only those under them (a partial
        commit): what is staged elsewhere is copied, in the same step (3), into one new token
        that takes the sealed ones' place. The copy costs what is staged outside the prefixes,
        never the size of the repository."""
        if prefixes:
            staged = self.refs.get_branch(repo, name)
            if all(next(self.staging.changes(repo, staged, p), None) is None for p in prefixes):
                under = ", ".join(map(repr, prefixes))
                raise NothingToCommit(f"nothing to commit under {under} on branch {name!r}")
        branch, raw = self._seal(repo, name, req.allow_empty or bool(prefixes))

        def attempt() -> Commit | Again:
            nonlocal branch, raw
            head = self.refs.get_commit(repo, branch.commit_id)
            applied = branch.sealed_tokens
            updates: list[Update] = []
            rest: list[Update] = []
            for path, row in self.staging.staged_updates(repo, applied):
                (rest if prefixes and not _under(path, prefixes) else updates).append((path, row))
            mid = self.trees.apply(head.meta_range_id, updates)
            new_head: Commit | None = None
            if mid != head.meta_range_id or req.allow_empty:
                new_head = make_commit((head.id,), [head], mid, req)
                # Blocks and range files must be durable before any record points at them.
                self.blocks.sync()
                if moved is not None:
                    moved.publishing(new_head)
                self.refs.put_commit(repo, new_head)
            kept: tuple[StagingToken, ...] = ()
            if rest:
                kept = (new_staging_token(),)
                self.staging.fill(repo, kept[0], rest)
            updated = Branch(
                name=branch.name,
                commit_id=new_head.id if new_head else head.id,
                staging_token=branch.staging_token,
                sealed_tokens=kept + tuple(t for t in branch.sealed_tokens if t not in applied),
            )
            try:
                self.refs.swap_branch(repo, raw, updated)
            except PredicateFailed:
                self.staging.drop_tokens(repo, kept)
                branch, raw = self.refs.get_branch_raw(repo, name)
                return AGAIN
            if moved is not None:
                moved.branch, moved.dropped = updated, tuple(applied)
            self.staging.drop_tokens(repo, applied)
            if new_head is None:
                raise NothingToCommit(f"nothing to commit on branch {name!r}")
            return new_head

        return retry(BRANCH_HEAD, attempt, f"could not commit branch {name!r}: too many concurrent updates")

    def _seal(self, repo: RepositoryId, name: BranchId, allow_empty: bool) -> tuple[Branch, bytes]:
        def attempt() -> tuple[Branch, bytes] | Again:
            branch, raw = self.refs.get_branch_raw(repo, name)
            # Staged rows that change nothing are no reason to seal: a commit refused after it
            # sealed would have moved the staging token with no journal entry to say so.
            if not allow_empty and not self.staging.is_dirty(repo, branch):
                raise NothingToCommit(f"nothing to commit on branch {name!r}")
            sealed = Branch(
                name=branch.name,
                commit_id=branch.commit_id,
                staging_token=new_staging_token(),
                sealed_tokens=branch.tokens,
            )
            try:
                self.refs.swap_branch(repo, raw, sealed)
            except PredicateFailed:
                return AGAIN
            return sealed, sealed.encode()

        return retry(BRANCH_HEAD, attempt, f"could not commit branch {name!r}: too many concurrent updates")

    def commit_tree(
        self,
        repo: RepositoryId,
        name: BranchId,
        parents: Sequence[Commit],
        updates: Sequence[Update],
        req: CommitRequest,
        expected_head: CommitId,
        moved: Moved | None = None,
    ) -> Commit:
        """Commit ``updates`` applied on the first parent's tree and move a clean branch to it
        (merge, revert, cherry-pick). Staged rows that change nothing are dropped with the move,
        so they cannot shadow the new commit. Raises PredicateFailed if the branch moved, and
        DirtyBranch if real changes were staged meanwhile."""
        mid = self.trees.apply(parents[0].meta_range_id, updates)
        commit = make_commit(tuple(p.id for p in parents), parents, mid, req)
        self.blocks.sync()
        if moved is not None:
            moved.publishing(commit)
        self.refs.put_commit(repo, commit)

        def attempt() -> Commit | Again:
            branch, raw = self.refs.get_branch_raw(repo, name)
            if branch.commit_id != expected_head:
                raise PredicateFailed(f"branch {name!r} moved during the operation; try again")
            if self.staging.is_dirty(repo, branch):
                raise DirtyBranch(f"branch {name!r} got uncommitted changes during the operation")
            updated = Branch(branch.name, commit.id, new_staging_token())
            try:
                self.refs.swap_branch(repo, raw, updated)
            except PredicateFailed:
                return AGAIN
            if moved is not None:
                moved.branch, moved.dropped = updated, branch.tokens
            self.staging.drop_tokens(repo, branch.tokens)
            return commit

        return retry(BRANCH_HEAD, attempt, f"could not move branch {name!r}: too many concurrent updates")


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path.startswith(prefix) for prefix in prefixes)


class _Lines:
    """One walk's view of the ancestry index (:mod:`lakectl.core.graph.ancestry`).

    A mark that *covers* lineages (the hidden side of a range; each side of a merge base) is not
    walked commit by commit: the first commit it takes on a lineage records how high it reaches
    there, and from then on the walk visits only what leaves that lineage below: its merges'
    other parents, one merge at a time from the highest, and its first commit's first parent.
    Places met are kept, and a first parent's follows from its child's with no lookup."""

    def __init__(self, refs: RefStore, repo: RepositoryId) -> None:
        self.refs = refs
        self.repo = repo
        self.places: dict[CommitId, Place] = {}
        self.reach: dict[int, dict[CommitId, int]] = {}
        """mark → lineage → the highest position the mark reaches on it."""
        self.pending: dict[tuple[int, CommitId], CommitId] = {}
        """(mark, lineage) → the merge the mark visits next there."""

    def place(self, commit: Commit) -> Place:
        found = self.places.get(commit.id)
        if found is None:
            found = self.places[commit.id] = self.refs.ancestry.place(self.repo, commit)
        return found

    def marks(self, commit: Commit) -> int:
        """The covering marks that reach ``commit`` along a lineage (0 when none covers any)."""
        if not self.reach:
            return 0
        lineage, position = self.place(commit)
        return sum(mark for mark, reached in self.reach.items() if reached.get(lineage, 0) >= position)

    def descend(self, commit: Commit) -> None:
        """Note the place of ``commit``'s first parent, if it follows from ``commit``'s."""
        place = self.places.get(commit.id)
        if place is not None and place[1] > 1 and commit.parents:
            self.places.setdefault(commit.parents[0], (place[0], place[1] - 1))

    def leave(self, mark: int, commit: Commit) -> list[CommitId]:
        """What ``mark`` must visit next, taking ``commit``: on the first commit it takes on a
        lineage, or on the merge it was to visit there next, the commit's other parents and the
        next merge below it on the lineage (or, past the last, the lineage's first commit's
        first parent); on any other commit nothing, its lineage being covered already."""
        lineage, position = self.place(commit)
        reached = self.reach.setdefault(mark, {})
        if lineage not in reached:
            reached[lineage] = position
        elif self.pending.get((mark, lineage)) != commit.id:
            return []
        out = list(commit.parents[1:])
        below = self.refs.ancestry.merge_below(self.repo, lineage, position)
        if below is not None:
            self.places[below[0]] = (lineage, below[1])
            self.pending[(mark, lineage)] = below[0]
            return [*out, below[0]]
        first = commit if position == 1 else self.refs.get_commit(self.repo, lineage)
        return [*out, *first.parents[:1]]


def merge_base(refs: RefStore, repo: RepositoryId, a: Commit, b: Commit) -> Commit | None:
    """The best common ancestor: of those with the highest generation, the smallest id. Both
    sides cover lineages (:class:`_Lines`), so the walk costs the lineages and merges above the
    base, not the commits: a line of commits is one step."""
    if a.id == b.id:
        return a
    lines = _Lines(refs, repo)
    colors: dict[CommitId, int] = {a.id: 1, b.id: 2}
    commits = {a.id: a, b.id: b}
    heap: list[tuple[int, CommitId]] = [(-a.generation, a.id), (-b.generation, b.id)]
    heapq.heapify(heap)
    while heap:
        _, cid = heapq.heappop(heap)
        commit, color = commits.pop(cid), colors[cid]
        if color | lines.marks(commit) == 3:
            return commit
        for pid in lines.leave(color, commit):
            colors[pid] = colors.get(pid, 0) | color
            if pid not in commits:
                parent = commits[pid] = refs.get_commit(repo, pid)
                heapq.heappush(heap, (-parent.generation, pid))
    return None


_SHOWN, _HIDDEN = 1, 2
"""What a commit of :func:`walk_range` is: reachable from the range's end, from its start."""


def walk_range(
    refs: RefStore, repo: RepositoryId, start: Commit, hidden: Commit, first_parent: bool = False
) -> Iterator[Commit]:
    """Commits reachable from ``start`` and not from ``hidden`` (git's ``hidden..start``), in
    :func:`walk_log`'s order. A commit leaves the queue after every commit of a higher
    generation, so after all its children: what marks it is known by then. The hidden side
    covers lineages (:class:`_Lines`): it costs the lineages and merges it crosses, and a commit
    it reaches along one is hidden. The walk stops once every commit queued is reachable from
    ``hidden``; ``first_parent`` narrows only what is shown."""
    lines = _Lines(refs, repo)
    marks = {start.id: _SHOWN}
    marks[hidden.id] = marks.get(hidden.id, 0) | _HIDDEN
    commits = {start.id: start, hidden.id: hidden}
    heap = [(-c.generation, -c.creation_date, c.id) for c in commits.values()]
    heapq.heapify(heap)
    shown = int(marks[start.id] == _SHOWN)  # queued commits marked shown only

    def take(pid: CommitId, added: int) -> None:
        nonlocal shown
        before = marks.get(pid)
        if before is None and added:
            parent = commits[pid] = refs.get_commit(repo, pid)
            heapq.heappush(heap, (-parent.generation, -parent.creation_date, pid))
            shown += added == _SHOWN
        elif before == _SHOWN and added & _HIDDEN:
            shown -= 1  # queued as shown, reachable from ``hidden`` after all
        if added:
            marks[pid] = (before or 0) | added

    while heap and shown:
        _, _, cid = heapq.heappop(heap)
        commit, mark = commits.pop(cid), marks[cid]
        if mark == _SHOWN:
            shown -= 1
            mark = marks[cid] = mark | lines.marks(commit)
        if mark == _SHOWN:
            yield commit
            lines.descend(commit)
            for i, pid in enumerate(commit.parents):
                take(pid, _SHOWN if i == 0 or not first_parent else 0)
        else:
            for pid in lines.leave(_HIDDEN, commit):
                take(pid, _HIDDEN)


def is_ancestor(refs: RefStore, repo: RepositoryId, ancestor: Commit, of: Commit) -> bool:
    """Whether ``ancestor`` is ``of`` or one of its ancestors: a walk back from ``of`` along
    lineages (:class:`_Lines`) that stops on reaching ``ancestor``'s lineage at or above it, and
    leaves out every commit of a generation below ``ancestor``'s (none of them can lead to it)."""
    if ancestor.generation >= of.generation:
        return ancestor.id == of.id
    lines = _Lines(refs, repo)
    target = lines.place(ancestor)
    heap = [(-of.generation, of.id)]
    commits = {of.id: of}
    while heap:
        _, cid = heapq.heappop(heap)
        commit = commits.pop(cid)
        lineage, position = lines.place(commit)
        if lineage == target[0]:  # what is queued is as new as ``ancestor``: at or above it
            return position >= target[1]
        for pid in lines.leave(1, commit):
            if pid not in commits:
                parent = refs.get_commit(repo, pid)
                if parent.generation >= ancestor.generation:
                    commits[pid] = parent
                    heapq.heappush(heap, (-parent.generation, pid))
    return False


def walk_log(
    refs: RefStore, repo: RepositoryId, start: Commit, first_parent: bool = False
) -> Iterator[Commit]:
    """Commits reachable from ``start``, newest first (by generation, then date)."""
    heap: list[tuple[int, int, CommitId]] = [(-start.generation, -start.creation_date, start.id)]
    seen = {start.id}
    commits = {start.id: start}
    while heap:
        _, _, cid = heapq.heappop(heap)
        commit = commits.pop(cid)
        yield commit
        parents = commit.parents[:1] if first_parent else commit.parents
        for pid in parents:
            if pid in seen:
                continue
            seen.add(pid)
            parent = refs.get_commit(repo, pid)
            commits[pid] = parent
            heapq.heappush(heap, (-parent.generation, -parent.creation_date, pid))
