"""Staged (uncommitted) changes of branches: writes that never wait, and reads merged over tokens."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from lakectl.core import keys
from lakectl.core.graph.refs import RefStore
from lakectl.core.graph.tree import Trees, Update, diff_rows
from lakectl.core.kv import KVStore, Then
from lakectl.core.kv.helpers import delete_many, drop_partition, set_many
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.model import (
    TOMBSTONE,
    Branch,
    BranchId,
    Change,
    RepositoryId,
    Row,
    StagingToken,
    decode_row,
    encode_row,
)
from lakectl.errors import KeyNotFound, PredicateFailed

Carry = Callable[[Sequence[StagingToken]], Sequence[tuple[str, str, bytes]]]
"""What a staged write stores with its rows, in the same transaction, given the tokens written so
far (the journal's entry of the write: it lands with the write, or not at all)."""


@dataclass(frozen=True, slots=True)
class Expect:
    """What a conditional staged write of one path found before it wrote (an append's read of
    its object): the branch's current staging token then, and the path's value in it (None:
    none)."""

    token: StagingToken
    value: bytes | None


def staged_values(updates: Sequence[Update]) -> list[tuple[str, bytes]]:
    """(path, value) as a staging token stores them: the encoded row, or TOMBSTONE."""
    return [(p, encode_row(r) if r is not None else TOMBSTONE) for p, r in updates]


class Staging:
    """Stages rows into a branch's current token and reads a branch as tokens over its commit."""

    def __init__(self, kv: KVStore, refs: RefStore, trees: Trees) -> None:
        self.kv = kv
        self.refs = refs
        self.trees = trees

    # -- writes ---------------------------------------------------------------------------

    def write(self, repo: RepositoryId, branch: BranchId, updates: Sequence[Update]) -> list[StagingToken]:
        """Stage rows (None = delete). Acknowledged only once the token they went to is still the
        branch's current one afterwards; otherwise a commit sealed it meanwhile and may have
        missed them, so they are written again into the new token (writes are idempotent).
        Returns the tokens written, in order (the last one was current afterwards)."""
        return self.write_values(repo, branch, staged_values(updates))

    def write_values(
        self,
        repo: RepositoryId,
        branch: BranchId,
        items: Sequence[tuple[str, bytes]],
        carry: Carry | None = None,
        expect: Expect | None = None,
    ) -> list[StagingToken]:
        """:meth:`write` of values :func:`staged_values` encoded; returns the tokens written (a
        commit that seals the branch's token meanwhile makes the write go again into the new
        one). Each write also stores the ``(partition, key, value)`` rows ``carry`` returns for
        the tokens written so far, in its own transaction, once its rows are in.

        ``expect`` (a write of one path that read it first: an append's) makes every write a
        compare-and-swap with its rows. The first goes in only over the value the writer read
        (``expect.value``, if the token is still ``expect.token``; else over none: nothing of the
        path written since the seal), or raises ``PredicateFailed``: another write landed
        between the read and this one, so the writer reads again. Written again into a new
        token, the value goes in only where that token holds none for its path: one there was
        written after the seal, so after this write, which is left under it (an append is
        ordered before a later upload of its object, never over it)."""
        if expect is not None and len(items) != 1:
            raise ValueError(f"a write that expects a value writes one path, not {len(items)}")
        written: list[StagingToken] = []

        def attempt() -> list[StagingToken] | Again:
            token = self.refs.get_branch(repo, branch).staging_token
            partition = keys.staging_partition(repo, token)
            then = None if carry is None else partial(carry, [*written, token])
            if expect is None:
                set_many(self.kv, partition, items, then)
            elif not written:
                found = expect.value if token == expect.token else None
                self.kv.set_if(partition, *items[0], found, then)
            elif not self._write_new(partition, items[0], then):
                return written  # a newer write of the path holds the new token
            written.append(token)
            return written if self.refs.get_branch(repo, branch).staging_token == token else AGAIN

        gave_up = f"could not stage on branch {branch!r}: too many concurrent commits"
        return retry(STAGING_TOKEN, attempt, gave_up)

    def _write_new(self, partition: str, item: tuple[str, bytes], then: Then) -> bool:
        """Store ``item`` and the rows ``then`` returns, in one transaction, only if the item's
        key has no value; whether it had none."""
        try:
            self.kv.set_if(partition, *item, None, then)
        except PredicateFailed:
            return False
        return True

    def expect(self, repo: RepositoryId, branch: Branch, path: str) -> Expect:
        """What a conditional write of ``path`` must find (:meth:`write_values`): the value
        staged for it in ``branch``'s current token, as the branch was read."""
        try:
            value: bytes | None = self.kv.get(keys.staging_partition(repo, branch.staging_token), path)
        except KeyNotFound:
            value = None
        return Expect(branch.staging_token, value)

    def fill(self, repo: RepositoryId, token: StagingToken, updates: Sequence[Update]) -> None:
        """Write rows into a token no branch names yet (a partial commit's kept changes)."""
        set_many(self.kv, keys.staging_partition(repo, token), staged_values(updates))

    def drop_tokens(self, repo: RepositoryId, tokens: Sequence[StagingToken]) -> None:
        for token in tokens:
            drop_partition(self.kv, keys.staging_partition(repo, token))

    def unstage(self, repo: RepositoryId, token: StagingToken, paths: list[str]) -> None:
        delete_many(self.kv, keys.staging_partition(repo, token), paths)

    # -- reads ----------------------------------------------------------------------------

    def get_staged(self, repo: RepositoryId, branch: Branch, path: str) -> bytes | None:
        """The newest staged value of ``path`` (row bytes or TOMBSTONE), None if not staged."""
        for token in branch.tokens:
            try:
                return self.kv.get(keys.staging_partition(repo, token), path)
            except KeyNotFound:
                continue
        return None

    def lookup(self, repo: RepositoryId, branch: Branch, path: str) -> Row | None:
        staged = self.get_staged(repo, branch, path)
        if staged is not None:
            return decode_row(staged) if staged != TOMBSTONE else None
        commit = self.refs.get_commit(repo, branch.commit_id)
        return self.trees.lookup(commit.meta_range_id, path)

    def iter_staged(
        self, repo: RepositoryId, tokens: Sequence[StagingToken], start: str = "", prefix: str = ""
    ) -> Iterator[tuple[str, bytes]]:
        """(path, value) staged in any of ``tokens`` (newest first wins), in path order."""
        start = max(start, prefix)
        if len(tokens) == 1:
            for key, value in self.kv.scan(keys.staging_partition(repo, tokens[0]), start):
                if prefix and not key.startswith(prefix):
                    return
                yield key, value
            return
        streams = [
            ((key, i, value) for key, value in self.kv.scan(keys.staging_partition(repo, t), start))
            for i, t in enumerate(tokens)
        ]
        last = None
        for key, _, value in heapq.merge(*streams):
            if prefix and not key.startswith(prefix):
                return
            if key != last:
                last = key
                yield key, value

    def staged_updates(
        self, repo: RepositoryId, tokens: Sequence[StagingToken], prefix: str = ""
    ) -> list[Update]:
        """Every staged row of ``tokens`` (newest first wins), decoded, in path order: what a
        commit applies. One token without a prefix (a commit's usual case) is read straight
        from the store's scan, without :meth:`iter_staged`'s merge: at 100k staged objects,
        each generator layer costs as much as the decoding."""
        decode = decode_row
        if len(tokens) == 1 and not prefix:
            staged = self.kv.scan(keys.staging_partition(repo, tokens[0]))
        else:
            staged = self.iter_staged(repo, tokens, prefix=prefix)
        return [(p, decode(v) if v else None) for p, v in staged]

    def iter_view(
        self, repo: RepositoryId, branch: Branch, start: str = "", prefix: str = ""
    ) -> Iterator[tuple[str, Row]]:
        """The branch as users see it: staged values over the committed tree, in path order."""
        commit = self.refs.get_commit(repo, branch.commit_id)
        committed = self.trees.iter(commit.meta_range_id, start, prefix)
        staged = self.iter_staged(repo, branch.tokens, start, prefix)
        c = next(committed, None)
        s = next(staged, None)
        while c is not None or s is not None:
            if s is None or (c is not None and c[0] < s[0]):
                assert c is not None
                yield c
                c = next(committed, None)
                continue
            if c is not None and c[0] == s[0]:
                c = next(committed, None)
            if s[1] != TOMBSTONE:
                yield s[0], decode_row(s[1])
            s = next(staged, None)

    def changes(self, repo: RepositoryId, branch: Branch, prefix: str = "") -> Iterator[Change]:
        """Uncommitted changes of the branch (staged values equal to the committed ones are none)."""
        commit = self.refs.get_commit(repo, branch.commit_id)
        mid = commit.meta_range_id
        staged = self.iter_staged(repo, branch.tokens, prefix=prefix)
        for path, value in staged:
            old = self.trees.lookup(mid, path)
            new = decode_row(value) if value != TOMBSTONE else None
            left = iter([(path, old)]) if old is not None else iter(())
            right = iter([(path, new)]) if new is not None else iter(())
            yield from diff_rows(left, right)

    def is_dirty(self, repo: RepositoryId, branch: Branch) -> bool:
        return next(self.changes(repo, branch), None) is not None

    def has_staged(self, repo: RepositoryId, branch: Branch) -> bool:
        return next(self.iter_staged(repo, branch.tokens), None) is not None
