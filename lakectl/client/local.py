"""LocalBackend: the embedded lake, opened lazily in this process, every verb delegated to the core.

Only :func:`lakectl.client.get_backend` imports this module, when a command runs: porcelain
pulls in pyarrow and sqlite, which ``lakectl --help`` must not pay for.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from lakectl.client.protocol import PARALLELISM, ByteProgress, NewBlocks, Progress

# Every command opens the lake through this module, so it imports the lake and porcelain's reads
# alone: the modules of other verbs (writes, listing, history and diffs, merges, gc, manifests,
# refsdump, annotate, protection, actions' runs, pull requests) are imported by the methods that
# use them. A stat or a `branch list` pays nothing for them (tests/cli/test_startup_imports.py).
from lakectl.core import opening
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake, default_committer, default_home
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.client.auth import RemoteAuth
    from lakectl.core.annotate import Annotation
    from lakectl.core.merging import MergeResult
    from lakectl.core.model import (
        Branch,
        Change,
        Commit,
        FeedChange,
        ObjectInfo,
        Repository,
        ResetKind,
        Tag,
    )
    from lakectl.core.upkeep.retention import GCRules
    from lakectl.core.workflow.actionruns import ActionRun, HookRun
    from lakectl.core.workflow.pulls import (
        Comment,
        Gate,
        PullRequest,
        PullStatus,
        Review,
        StatusFilter,
        Verdict,
    )


class LocalBackend:
    """A :class:`~lakectl.client.Backend` over the lake at ``home`` (None: ``$LAKECTL_HOME`` or
    the default directory), opened on the first operation."""

    def __init__(self, home: str | None = None, opener: Callable[[], Lake] | None = None) -> None:
        self._home = home
        self._opener = opener
        """Opens another lake than an embedded one: a server's, from its configuration."""
        self._lake: Lake | None = None

    @property
    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = opening.open_lake(self._home) if self._opener is None else self._opener()
        return self._lake

    def init(self) -> dict[str, Any]:
        # The explicit ask: a new lake even over blocks already stored (core.identity).
        self.close()
        self._lake = opening.open_lake(self._home, create=True)
        out: dict[str, Any] = {"home": self._lake.home}
        if self._lake.identity is not None and self._lake.identity.just_created_over:
            out["created_over_blocks"] = self._lake.identity.just_created_over
        return out

    def location(self) -> str:
        return self.lake.home

    def close(self) -> None:
        if self._lake is not None:
            # An import still running must not outlive its lake. Only a process that imported
            # the tasks module can have started one: a read-only command does not pay for it.
            tasks = sys.modules.get("lakectl.core.importing.tasks")
            if tasks is not None:
                tasks.stop_all(self._lake)
            self._lake.close()
            self._lake = None

    def auth(self) -> RemoteAuth:
        from lakectl.client.auth import embedded

        raise embedded()

    # -- repositories ----------------------------------------------------------------------

    def create_repo(
        self, name: str, default_branch: str = "main", storage_namespace: str = "", bare: bool = False
    ) -> Repository:
        return p.create_repo(self.lake, name, default_branch, storage_namespace, bare)

    def get_repo(self, name: str) -> Repository:
        return p.get_repo(self.lake, name)

    def list_repos(self, after: str = "", amount: int | None = None) -> list[Repository]:
        return p.list_repos(self.lake, after, amount)

    def delete_repo(self, name: str) -> None:
        p.delete_repo(self.lake, name)

    # -- branches and tags -----------------------------------------------------------------

    def create_branch(self, repo: str, name: str, source: str, hidden: bool = False) -> Branch:
        return p.create_branch(self.lake, repo, name, source, hidden)

    def get_branch(self, repo: str, name: str) -> Branch:
        return p.get_branch(self.lake, repo, name)

    def list_branches(
        self, repo: str, after: str = "", amount: int | None = None, show_hidden: bool = False
    ) -> list[Branch]:
        return p.list_branches(self.lake, repo, after, amount, show_hidden)

    def delete_branch(self, repo: str, name: str) -> None:
        p.delete_branch(self.lake, repo, name)

    def create_tag(self, repo: str, name: str, ref: str, force: bool = False) -> Tag:
        return p.create_tag(self.lake, repo, name, ref, force)

    def get_tag(self, repo: str, name: str) -> Tag:
        return p.get_tag(self.lake, repo, name)

    def list_tags(self, repo: str, after: str = "", amount: int | None = None) -> list[Tag]:
        return p.list_tags(self.lake, repo, after, amount)

    def delete_tag(self, repo: str, name: str) -> None:
        p.delete_tag(self.lake, repo, name)

    # -- objects ---------------------------------------------------------------------------

    def stat(self, repo: str, ref: str, path: str) -> ObjectInfo:
        return p.stat(self.lake, repo, ref, path)

    def read(
        self, repo: str, ref: str, path: str, mapped: bool = False, offset: int = 0, length: int | None = None
    ) -> Iterator[bytes]:
        return p.read(self.lake, repo, ref, path, offset, length, mapped=mapped)

    def read_since(self, repo: str, since: str, ref: str, path: str) -> Iterator[bytes]:
        from lakectl.core import appended

        return appended.read_since(self.lake, repo, since, ref, path)

    def list_objects(
        self,
        repo: str,
        ref: str,
        prefix: str = "",
        delimiter: str = "",
        after: str = "",
        amount: int | None = None,
    ) -> Iterator[ObjectInfo]:
        from lakectl.core import listing

        return listing.list_objects(self.lake, repo, ref, prefix, delimiter, after, amount)

    def presign(self, repo: str, ref: str, path: str, expires_in: int) -> tuple[str, int]:
        p.stat(self.lake, repo, ref, path)  # a missing object is reported as such first
        raise InvalidArgument(
            "presigned URLs need a lakectl server: it signs them and serves the bytes to whoever "
            "holds one (the embedded lake has no HTTP endpoint); read the object with fs cat or "
            "fs download, or set server.endpoint_url"
        )

    def upload(
        self,
        repo: str,
        branch: str,
        path: str,
        source: BinaryIO | bytes,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        new_blocks: NewBlocks | None = None,
    ) -> ObjectInfo:
        from lakectl.core import writes
        from lakectl.core.contenttypes import guess_content_type

        content_type = guess_content_type(path) if content_type is None else content_type
        return writes.upload(
            self.lake, repo, branch, path, source, content_type, metadata, new_blocks=new_blocks
        )

    def append(self, repo: str, branch: str, path: str, source: BinaryIO | bytes) -> ObjectInfo:
        from lakectl.core import writes

        return writes.append(self.lake, repo, branch, path, source)

    def upload_files(
        self,
        repo: str,
        branch: str,
        files: Sequence[tuple[str, str]],
        content_type: str | None = None,
        progress: Progress | None = None,
        new_blocks: NewBlocks | None = None,
        parallelism: int = PARALLELISM,
    ) -> list[ObjectInfo]:
        from lakectl.core import writes

        return writes.upload_files(self.lake, repo, branch, files, content_type, progress, new_blocks)

    def copy_object(self, repo: str, branch: str, path: str, source_ref: str, source_path: str) -> ObjectInfo:
        from lakectl.core import writes
        from lakectl.core.model import ObjectInfo, PathType

        entry = writes.copy_from(self.lake, repo, branch, path, source_ref, source_path)
        return ObjectInfo(path, PathType.OBJECT, entry)

    def delete_objects(self, repo: str, branch: str, paths: Sequence[str]) -> None:
        from lakectl.core import writes

        writes.delete_objects(self.lake, repo, branch, paths)

    def delete_prefix(self, repo: str, branch: str, prefix: str) -> list[str]:
        from lakectl.core import writes

        return writes.delete_prefix(self.lake, repo, branch, prefix)

    # -- commits and history ---------------------------------------------------------------

    def commit(
        self,
        repo: str,
        branch: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
        allow_empty: bool = False,
        allow_empty_message: bool = False,
        prefixes: Sequence[str] = (),
    ) -> Commit:
        return p.commit(
            self.lake,
            repo,
            branch,
            message,
            metadata,
            allow_empty=allow_empty,
            allow_empty_message=allow_empty_message,
            prefixes=prefixes,
        )

    def get_commit(self, repo: str, ref: str) -> Commit:
        return p.get_commit(self.lake, repo, ref)

    def log(
        self,
        repo: str,
        ref: str,
        amount: int | None = None,
        first_parent: bool = False,
        no_merges: bool = False,
        objects: Sequence[str] = (),
        prefixes: Sequence[str] = (),
        *,
        after: str = "",
        since: str = "",
        stop_at: str = "",
        since_commit: str = "",
    ) -> Iterator[Commit]:
        from lakectl.core import changes

        return changes.log(
            self.lake,
            repo,
            ref,
            amount,
            first_parent,
            no_merges,
            objects,
            prefixes,
            after=after,
            since=since,
            stop_at=stop_at,
            since_commit=since_commit,
        )

    def annotate(
        self, repo: str, ref: str, prefix: str = "", recursive: bool = False
    ) -> Iterator[Annotation]:
        from lakectl.core import annotate

        after = ""
        while True:
            found = annotate.annotate(self.lake, repo, ref, prefix, recursive, after, annotate.PAGE)
            yield from found
            if len(found) < annotate.PAGE:
                return
            after = found[-1].path

    def diff_uncommitted(self, repo: str, branch: str, prefix: str = "") -> list[Change]:
        from lakectl.core import changes

        return changes.diff_uncommitted(self.lake, repo, branch, prefix)

    def diff_refs(
        self, repo: str, left: str, right: str, two_way: bool = False, prefix: str = ""
    ) -> Iterator[Change]:
        from lakectl.core import changes

        return changes.diff_refs(self.lake, repo, left, right, two_way, prefix)

    def diff_since(self, repo: str, since: str, ref: str, prefix: str = "") -> Iterator[Change]:
        from lakectl.core import changes

        return changes.diff_since(self.lake, repo, since, ref, prefix)

    def change_feed(
        self,
        repo: str,
        since: str,
        ref: str,
        prefix: str = "",
        signed: bool = False,
        by_commit: bool = False,
    ) -> list[FeedChange]:
        from lakectl.core import feed

        read = feed.commit_feed if by_commit else feed.change_feed
        return read(self.lake, repo, since, ref, prefix)

    # -- merge, revert, cherry-pick, reset -------------------------------------------------

    def find_merge_base(self, repo: str, source: str, dest: str) -> str:
        from lakectl.core import changes

        found = changes.find_merge_base(self.lake, repo, source, dest)
        return found.id if found is not None else ""

    def provenance(self, repo: str, ref: str, path: str, depth: int = 5) -> dict[str, Any]:
        from lakectl.core import provenance

        return provenance.upstream(self.lake, repo, ref, path, depth).to_dict()

    def downstream(self, repo: str, ref: str, path: str = "") -> list[dict[str, Any]]:
        from lakectl.core import provenance

        return [s.to_dict() for s in provenance.downstream(self.lake, repo, ref, path)]

    def diff_table(
        self,
        repo: str,
        left: str,
        right: str,
        path: str,
        key: Sequence[str] = (),
        amount: int = 100,
        after: str = "",
        spark_master: str | None = None,
        two_way: bool = False,
        declared: bool = True,
    ) -> dict[str, Any]:
        if spark_master is not None:
            from lakectl.sparkjobs import tablediff as spark_tablediff

            found = spark_tablediff.diff_table(
                self.lake,
                repo,
                left,
                right,
                path,
                key,
                amount,
                after,
                master=spark_master,
                two_way=two_way,
                declared=declared,
            )
            return found.to_dict()
        from lakectl.core import tablediff

        found = tablediff.diff_table(
            self.lake, repo, left, right, path, key, amount, after, two_way=two_way, use_declared=declared
        )
        return found.to_dict()

    def merge(
        self,
        repo: str,
        source: str,
        dest: str,
        strategies: Sequence[str] = (),
        message: str | None = None,
        squash: bool = False,
        spark_master: str | None = None,
    ) -> MergeResult:
        from lakectl.core import merging

        runner = None
        if spark_master is not None:
            from lakectl.sparkjobs import tablemerge as spark_tablemerge

            runner = spark_tablemerge.runner(spark_master)
        return merging.merge(
            self.lake, repo, source, dest, strategies, message, squash=squash, rows_runner=runner
        )

    def cherry_pick(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit:
        from lakectl.core import merging

        return merging.cherry_pick(self.lake, repo, branch, ref, parent_number)

    def revert(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit:
        from lakectl.core import merging

        return merging.revert(self.lake, repo, branch, ref, parent_number)

    def reset(self, repo: str, branch: str, kind: ResetKind, path: str = "") -> int:
        from lakectl.core import merging

        return merging.reset(self.lake, repo, branch, kind, path)

    # -- manifests -------------------------------------------------------------------------

    def export_manifest(self, repo: str, ref: str, prefix: str = "", signed: bool = False) -> str:
        from lakectl.core import manifests

        return manifests.export_manifest(self.lake, repo, ref, prefix)

    def import_manifest(
        self, repo: str, branch: str, prefix: str, text: str, replace: bool = False
    ) -> list[str]:
        from lakectl.core import manifests

        return manifests.import_manifest(self.lake, repo, branch, prefix, text, replace)

    def import_start(
        self,
        repo: str,
        branch: str,
        paths: Sequence[Mapping[str, str]],
        message: str = "",
        metadata: Mapping[str, str] | None = None,
        merge: bool = True,
    ) -> dict[str, Any]:
        from lakectl.core.importing import tasks

        locations = [tasks.Location.from_dict(d) for d in paths]
        st = tasks.start(self.lake, repo, branch, locations, message, metadata, merge=merge)
        return st.to_dict()

    def import_status(self, repo: str, branch: str, import_id: str) -> dict[str, Any]:
        from lakectl.core.importing import tasks

        return tasks.status(self.lake, repo, import_id, branch).to_dict()

    def import_cancel(self, repo: str, branch: str, import_id: str) -> None:
        from lakectl.core.importing import tasks

        tasks.cancel(self.lake, repo, import_id, branch)

    def import_copy(self, repo: str, branch: str, prefix: str = "") -> list[str]:
        from lakectl.core.importing import owning

        return owning.copy_imported(self.lake, repo, branch, prefix)

    def dump_refs(self, repo: str) -> dict[str, str]:
        from lakectl.core.upkeep import refsdump

        return refsdump.dump(self.lake, repo).to_dict()

    def restore_refs(self, repo: str, manifest: Mapping[str, Any]) -> None:
        from lakectl.core.upkeep import refsdump

        refsdump.restore(self.lake, repo, refsdump.RefsManifest.from_dict(manifest))

    def set_gc_rules(self, repo: str, rules: GCRules) -> None:
        from lakectl.core.upkeep import retention

        retention.set_rules(self.lake, repo, rules)

    def get_gc_rules(self, repo: str) -> GCRules:
        from lakectl.core.upkeep import retention

        return retention.get_rules(self.lake, repo)

    def delete_gc_rules(self, repo: str) -> None:
        from lakectl.core.upkeep import retention

        retention.delete_rules(self.lake, repo)

    def gc_run(
        self,
        repo: str,
        dry_run: bool,
        grace_seconds: float,
        spark_master: str | None = None,
        allow_preexisting_blocks: bool = False,
    ) -> dict[str, Any]:
        from lakectl.core.upkeep import gc

        allow = allow_preexisting_blocks
        if spark_master is not None:
            from lakectl.sparkjobs import gc as spark_gc

            return spark_gc.run(
                self.lake, repo, dry_run, grace_seconds, master=spark_master, allow_preexisting_blocks=allow
            ).to_dict()
        return gc.run(self.lake, repo, dry_run, grace_seconds, allow_preexisting_blocks=allow).to_dict()

    def list_branch_protection(self, repo: str) -> list[dict[str, Any]]:
        from lakectl.core import protection

        return protection.get_rules(self.lake, repo).to_list()

    def add_branch_protection(
        self, repo: str, pattern: str, required_approvals: int = 0, required_checks: bool = False
    ) -> None:
        from lakectl.core import protection

        protection.add_rule(
            self.lake, repo, protection.make_rule(pattern, required_approvals, required_checks)
        )

    def delete_branch_protection(self, repo: str, pattern: str) -> None:
        from lakectl.core import protection

        protection.delete_rule(self.lake, repo, pattern)

    def list_action_runs(
        self, repo: str, branch: str = "", commit: str = "", after: str = "", amount: int | None = None
    ) -> list[ActionRun]:
        from lakectl.core.workflow import actionruns

        return actionruns.list_runs(self.lake, repo, branch, commit, after, amount)

    def get_action_run(self, repo: str, run_id: str) -> ActionRun:
        from lakectl.core.workflow import actionruns

        return actionruns.get_run(self.lake, repo, run_id)

    def list_run_hooks(
        self, repo: str, run_id: str, after: str = "", amount: int | None = None
    ) -> list[HookRun]:
        from lakectl.core.workflow import actionruns

        return actionruns.list_hooks(self.lake, repo, run_id, after, amount)

    def get_hook_output(self, repo: str, run_id: str, hook_run_id: str) -> bytes:
        from lakectl.core.workflow import actionruns

        return actionruns.hook_output(self.lake, repo, run_id, hook_run_id)

    # -- pull requests -------------------------------------------------------------------

    def create_pull(
        self, repo: str, title: str, source: str, dest: str, description: str = ""
    ) -> PullRequest:
        from lakectl.core.workflow import pulls

        return pulls.create_pull(self.lake, repo, title, source, dest, description)

    def list_pulls(
        self, repo: str, status: StatusFilter, after: str = "", amount: int | None = None
    ) -> list[PullRequest]:
        from lakectl.core.workflow import pulls

        return pulls.list_pulls(self.lake, repo, status, "", after, amount)[0]

    def get_pull(self, repo: str, pull_id: str) -> PullRequest:
        from lakectl.core.workflow import pulls

        return pulls.get_pull(self.lake, repo, pull_id)

    def update_pull(
        self,
        repo: str,
        pull_id: str,
        title: str | None = None,
        description: str | None = None,
        status: PullStatus | None = None,
    ) -> PullRequest:
        from lakectl.core.workflow import pulls

        return pulls.update_pull(self.lake, repo, pull_id, title, description, status)

    def merge_pull(
        self, repo: str, pull_id: str, strategies: Sequence[str] = (), message: str | None = None
    ) -> PullRequest:
        from lakectl.core.workflow import pulls

        return pulls.merge_pull(self.lake, repo, pull_id, "", strategies, message)

    def comment_pull(self, repo: str, pull_id: str, body: str) -> Comment:
        from lakectl.core.workflow import pulls

        return pulls.add_comment(self.lake, repo, pull_id, body)

    def list_pull_comments(self, repo: str, pull_id: str) -> list[Comment]:
        from lakectl.core.workflow import pulls

        return pulls.list_comments(self.lake, repo, pull_id)

    def review_pull(self, repo: str, pull_id: str, verdict: Verdict, body: str = "") -> Review:
        from lakectl.core.workflow import pulls

        return pulls.review(self.lake, repo, pull_id, default_committer(), verdict, body)

    def list_pull_reviews(self, repo: str, pull_id: str) -> list[Review]:
        from lakectl.core.workflow import pulls

        return pulls.list_reviews(self.lake, repo, pull_id)

    def pull_gate(self, repo: str, pull_id: str) -> Gate:
        from lakectl.core.workflow import pulls

        return pulls.gate(self.lake, repo, pull_id)

    def fsck(
        self,
        repo: str | None,
        repair: bool = False,
        spark_master: str | None = None,
        progress: ByteProgress | None = None,
    ) -> dict[str, Any]:
        if spark_master is not None:
            from lakectl.sparkjobs import fsck as spark_fsck

            return spark_fsck.check(self.lake, repo, repair, master=spark_master).to_dict()
        from lakectl.core.upkeep import fsck

        return fsck.check(self.lake, repo, repair, progress).to_dict()

    def journal_enable(self, reads: bool | None = None) -> dict[str, Any]:
        from lakectl.core.journal import journal

        return journal.enable(self.lake, reads)

    def journal_disable(self) -> dict[str, Any]:
        from lakectl.core.journal import journal

        return journal.disable(self.lake)

    def journal_tail(self, repo: str = "", amount: int = 20, after: int = 0) -> list[dict[str, Any]]:
        from lakectl.core.journal import journal

        return [e.to_dict() for e in journal.tail(self.lake.kv, self.lake.blocks, amount, after, repo)]

    def journal_follow(self, repo: str = "", after: int = 0) -> Iterator[dict[str, Any]]:
        from lakectl.core.journal import journal

        for entry in journal.follow(self.lake.kv, self.lake.blocks, after, repo):
            yield entry.to_dict()

    def journal_compact(self) -> dict[str, Any]:
        from lakectl.core.journal import compact

        return compact.compact(self.lake.kv, self.lake.blocks)

    def rebuild_from_journal(self) -> dict[str, Any]:
        from lakectl.core.journal import rebuild

        # The lake is not opened: its metadata database is what is missing.
        return rebuild.rebuild_embedded(self._home or default_home())
