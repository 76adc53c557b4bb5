"""References: :class:`Reference` (any ref expression: read), :class:`Branch` (write, commit,
merge) and :class:`Tag`, as lakeFS's wrapper names them."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakectl.api.models import Change, Commit, CommonPrefix, ObjectInfo
from lakectl.api.objects import StoredObject, WriteableObject
from lakectl.exceptions import api_errors

if TYPE_CHECKING:
    from lakectl.api.client import Client
    from lakectl.core.model import Change as CoreChange


class Reference:
    """A reference of a repository: a branch, a tag, a commit id or an expression (``main~2``)."""

    def __init__(self, repository_id: str, reference_id: str, client: Client) -> None:
        self._repo, self._id, self._client = repository_id, reference_id, client

    @property
    def repo_id(self) -> str:
        return self._repo

    @property
    def id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lakefs://{self._repo}/{self._id})"

    def get_commit(self) -> Commit:
        """The commit the reference points to now."""
        with api_errors():
            return Commit.of(self._client.backend.get_commit(self._repo, self._id))

    def object(self, path: str) -> StoredObject:
        return StoredObject(self._repo, self._id, path, self._client)

    def objects(
        self,
        max_amount: int | None = None,
        after: str | None = None,
        prefix: str | None = None,
        delimiter: str | None = None,
    ) -> Iterator[ObjectInfo | CommonPrefix]:
        """Objects under ``prefix`` in path order, after ``after``; with a ``delimiter``, the
        objects and common prefixes of one level."""
        with api_errors():
            for info in self._client.backend.list_objects(
                self._repo, self._id, prefix or "", delimiter or "", after or "", max_amount
            ):
                if info.entry is None:  # a common prefix
                    yield CommonPrefix(info.path)
                else:
                    yield ObjectInfo.of(info)

    def log(self, max_amount: int | None = None, **kwargs: Any) -> Iterator[Commit]:
        """Commits reachable from the reference, newest first. lakeFS's filters (``objects``,
        ``prefixes``, ``first_parent``, ``limit``...) pass on to the log as the CLI has them."""
        with api_errors():
            for commit in self._client.backend.log(self._repo, self._id, max_amount, **kwargs):
                yield Commit.of(commit)

    def diff(
        self,
        other_ref: str | Reference,
        max_amount: int | None = None,
        after: str | None = None,
        prefix: str | None = None,
        delimiter: str | None = None,
        type: str = "three_dot",
    ) -> Iterator[Change]:
        """What changed from this reference to ``other_ref``: since their merge base
        (``three_dot``, lakeFS's default), or between the two trees (``two_dot``)."""
        other = other_ref.id if isinstance(other_ref, Reference) else other_ref
        with api_errors():
            changes = self._client.backend.diff_refs(
                self._repo, self._id, other, two_way=type == "two_dot", prefix=prefix or ""
            )
            yield from _page(changes, after, max_amount)

    def diff_table(
        self,
        other_ref: str | Reference,
        path: str,
        key: Sequence[str] = (),
        max_amount: int = 100,
        type: str = "three_dot",
    ) -> dict[str, Any]:
        """lakectl's data-aware diff of the table (Parquet files) at ``path`` from this reference
        to ``other_ref``: rows added, removed and changed by ``key`` (else by the key the
        repository declares for the table), and schema changes; one page of ``max_amount`` row
        changes (docs/tables.md). Not in lakeFS's wrapper."""
        other = other_ref.id if isinstance(other_ref, Reference) else other_ref
        with api_errors():
            return self._client.backend.diff_table(
                self._repo, self._id, other, path, key, max_amount, two_way=type == "two_dot"
            )


class Branch(Reference):
    """A branch: objects written, changes committed, merged, reset and reverted."""

    def create(
        self, source_reference: str | Reference, exist_ok: bool = False, hidden: bool = False
    ) -> Branch:
        """Create the branch at ``source_reference``; ``hidden``: listed only by lists that ask
        for hidden branches."""
        from lakectl.exceptions import ConflictException

        source = source_reference.id if isinstance(source_reference, Reference) else source_reference
        try:
            with api_errors():
                self._client.backend.create_branch(self._repo, self._id, source, hidden)
        except ConflictException:
            if not exist_ok:
                raise
        return self

    def head(self) -> Reference:
        """The commit the branch points to, as a reference."""
        return Reference(self._repo, self.get_commit().id, self._client)

    def object(self, path: str) -> WriteableObject:
        return WriteableObject(self._repo, self._id, path, self._client)

    def commit(self, message: str, metadata: Mapping[str, str] | None = None, **kwargs: Any) -> Reference:
        """Commit what is staged; the new commit as a reference."""
        with api_errors():
            done = self._client.backend.commit(self._repo, self._id, message, metadata, **kwargs)
        return Reference(self._repo, done.id, self._client)

    def uncommitted(
        self, max_amount: int | None = None, after: str | None = None, prefix: str | None = None
    ) -> Iterator[Change]:
        """The staged changes, in path order."""
        with api_errors():
            changes = self._client.backend.diff_uncommitted(self._repo, self._id, prefix or "")
        yield from _page(changes, after, max_amount)

    def merge_into(self, destination_branch: str | Branch, message: str | None = None, **kwargs: Any) -> str:
        """Merge this branch into ``destination_branch``; the merge commit's id. lakectl's
        ``strategies`` (``["PATH=rows:key=COL"]``) and lakeFS's ``squash_merge`` pass on."""
        dest = destination_branch.id if isinstance(destination_branch, Reference) else destination_branch
        squash = bool(kwargs.pop("squash_merge", False))
        strategies: Sequence[str] = kwargs.pop("strategies", ())
        with api_errors():
            result = self._client.backend.merge(self._repo, self._id, dest, strategies, message, squash)
        return result.commit.id

    def delete(self) -> None:
        with api_errors():
            self._client.backend.delete_branch(self._repo, self._id)

    @contextlib.contextmanager
    def transact(
        self,
        commit_message: str = "",
        commit_metadata: Mapping[str, str] | None = None,
        delete_branch_on_error: bool = True,
    ) -> Iterator[Branch]:
        """Work on an ephemeral hidden branch made from this one's head; on leaving the block, commit
        what it staged (``commit_message``) and merge it back, then delete it. An exception
        inside the block deletes it (unless ``delete_branch_on_error`` is False) and leaves this
        branch untouched; a merge that fails raises ``TransactionException`` and keeps the
        ephemeral branch, whose name it gives, for inspection."""
        import uuid

        from lakectl.exceptions import LakeFSException, TransactionException

        tx = Branch(self._repo, f"tx-{uuid.uuid4().hex[:16]}", self._client)
        tx.create(self.get_commit().id, hidden=True)
        try:
            yield tx
        except BaseException:
            if delete_branch_on_error:
                with contextlib.suppress(LakeFSException):
                    tx.delete()
            raise
        message = commit_message or f"transaction on {self._id}"
        try:
            if next(tx.uncommitted(max_amount=1), None) is not None:
                tx.commit(message, commit_metadata)
            tx.merge_into(self)
        except LakeFSException as exc:
            raise TransactionException(
                exc.status_code,
                f"transaction branch {tx.id!r} could not be merged into {self._id!r}: {exc.message}",
            ) from exc
        tx.delete()

    def delete_objects(self, object_paths: str | StoredObject | Sequence[str | StoredObject]) -> None:
        items = [object_paths] if isinstance(object_paths, str | StoredObject) else object_paths
        paths = [o.path if isinstance(o, StoredObject) else o for o in items]
        with api_errors():
            self._client.backend.delete_objects(self._repo, self._id, paths)

    def reset_changes(self, path_type: str = "reset", path: str | None = None) -> None:
        """Drop staged changes: all (``reset``), under a ``common_prefix``, or one ``object``."""
        from lakectl.core.model import ResetKind

        with api_errors():
            self._client.backend.reset(self._repo, self._id, ResetKind(path_type), path or "")

    def revert(self, reference: str | Reference, parent_number: int = 0) -> Commit:
        ref = reference.id if isinstance(reference, Reference) else reference
        with api_errors():
            return Commit.of(self._client.backend.revert(self._repo, self._id, ref, parent_number))

    def cherry_pick(self, reference: str | Reference, parent_number: int | None = None) -> Commit:
        ref = reference.id if isinstance(reference, Reference) else reference
        with api_errors():
            return Commit.of(self._client.backend.cherry_pick(self._repo, self._id, ref, parent_number or 0))


class Tag(Reference):
    """A tag: a name for one commit."""

    def create(self, source_ref: str | Reference, exist_ok: bool = False) -> Tag:
        from lakectl.exceptions import ConflictException

        source = source_ref.id if isinstance(source_ref, Reference) else source_ref
        try:
            with api_errors():
                self._client.backend.create_tag(self._repo, self._id, source)
        except ConflictException:
            if not exist_ok:
                raise
        return self

    def delete(self) -> None:
        with api_errors():
            self._client.backend.delete_tag(self._repo, self._id)


def _page(changes: Iterable[CoreChange], after: str | None, amount: int | None) -> Iterator[Change]:
    """The changes after the path ``after``, at most ``amount`` (None: all), as the API's records."""
    later = (c for c in changes if not after or c.path > after)
    return (Change.of(c) for c in itertools.islice(later, amount))
