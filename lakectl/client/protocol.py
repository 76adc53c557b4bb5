"""The Backend protocol: every operation the CLI performs, whatever runs the lake.

The CLI talks only to a :class:`Backend` and never knows which one it holds: a
``LocalBackend`` (the embedded lake, in this process) or a ``RemoteBackend`` (HTTP
to ``lakectl server run``). Arguments are plain values — repository names, ref strings
(``main``, ``v1``, ``main~2``), object paths, file objects — and results are the records of
:mod:`lakectl.core.model`. Every method raises only :class:`~lakectl.errors.LakectlError`
subclasses.

This module is imported by the CLI at start-up, so it imports nothing heavy: the records
are named for type checkers only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

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

Progress = Callable[[int], None]
"""Called with a number of files just done."""
ByteProgress = Callable[[int, int], None]
"""Called with the bytes done so far and the bytes to do in all."""
NewBlocks = Callable[[str, int], None]
"""Called with the bare locator and size of each block an upload stored that the lake did not
hold before (a remote lake: that the server lacked, so that its bytes were sent): what
deduplication did not save. Two puts of one block that race may both tell it, and the calls may
come from several threads: a caller adding up sizes keys them by locator (``dict.__setitem__``)."""
PARALLELISM = 25
"""Transfers of one command at once, at most, unless told (``-p``): lakeFS's lakectl's default."""


class Backend(Protocol):
    """What the CLI needs from a lake, one method per verb (mirrors the core's verbs)."""

    def init(self) -> dict[str, Any]:
        """Make sure the lake exists: ``{"home"}``, where it is (a directory or a server URL), and
        ``created_over_blocks`` when a new lake was created over blocks already stored (the
        embedded lake creates one even then: init is the explicit ask)."""
        ...

    def location(self) -> str:
        """Where the lake is (its directory, or the server's URL), opening it as every other verb
        does: a missing lake is created, a lost metadata database over stored blocks refused."""
        ...

    def close(self) -> None:
        """Release what the backend holds (database connections, HTTP sessions)."""
        ...

    def auth(self) -> RemoteAuth:
        """The server's users, access keys, groups and policies (``lakectl auth``); the
        embedded lake has none and raises ``InvalidArgument`` without opening the lake."""
        ...

    # -- repositories ----------------------------------------------------------------------

    def create_repo(
        self, name: str, default_branch: str = "main", storage_namespace: str = "", bare: bool = False
    ) -> Repository:
        """Create a repository with one branch holding its initial commit; ``storage_namespace``
        recorded (``local://<name>`` when empty); ``bare``: no commit and no branch yet."""
        ...

    def get_repo(self, name: str) -> Repository: ...

    def list_repos(self, after: str = "", amount: int | None = None) -> list[Repository]:
        """Repositories by name, those named after ``after``; at most ``amount`` (None: all)."""
        ...

    def delete_repo(self, name: str) -> None: ...

    # -- branches and tags -----------------------------------------------------------------

    def create_branch(self, repo: str, name: str, source: str, hidden: bool = False) -> Branch:
        """A new branch at the commit ``source`` (any ref) resolves to; ``hidden``: listed only
        when a list asks for hidden branches (lakeFS's)."""
        ...

    def get_branch(self, repo: str, name: str) -> Branch: ...

    def list_branches(
        self, repo: str, after: str = "", amount: int | None = None, show_hidden: bool = False
    ) -> list[Branch]:
        """Branches by name, those named after ``after``; at most ``amount`` (None: all); hidden
        ones only with ``show_hidden``."""
        ...

    def delete_branch(self, repo: str, name: str) -> None:
        """Delete a branch; the default branch is protected."""
        ...

    def create_tag(self, repo: str, name: str, ref: str, force: bool = False) -> Tag:
        """A tag on the commit ``ref`` resolves to; ``force`` replaces an existing tag."""
        ...

    def get_tag(self, repo: str, name: str) -> Tag: ...

    def list_tags(self, repo: str, after: str = "", amount: int | None = None) -> list[Tag]:
        """Tags by name, those named after ``after``; at most ``amount`` (None: all)."""
        ...

    def delete_tag(self, repo: str, name: str) -> None: ...

    # -- objects ---------------------------------------------------------------------------

    def stat(self, repo: str, ref: str, path: str) -> ObjectInfo: ...

    def read(
        self, repo: str, ref: str, path: str, mapped: bool = False, offset: int = 0, length: int | None = None
    ) -> Iterator[bytes]:
        """The object's bytes, chunk by chunk (verified against their locators); from
        ``offset``, and at most ``length`` of them when given (only the blocks that hold them
        are read; a range past the end is cut at the end). ``mapped``: the caller writes each
        chunk out before it takes the next (a download), so an embedded lake may hand out its
        block files' checked mappings (bytes-like) instead of copies."""
        ...

    def read_since(self, repo: str, since: str, ref: str, path: str) -> Iterator[bytes]:
        """The bytes the commits after ``since`` up to ``ref`` appended to the object (all of it
        written since a delete or overwrite among them); ``InvalidArgument`` unless ``since`` is
        an ancestor of ``ref``."""
        ...

    def list_objects(
        self,
        repo: str,
        ref: str,
        prefix: str = "",
        delimiter: str = "",
        after: str = "",
        amount: int | None = None,
    ) -> Iterator[ObjectInfo]:
        """Objects (and with a delimiter, common prefixes) under ``prefix``, in path order, after
        the path ``after``; at most ``amount`` (None: all)."""
        ...

    def presign(self, repo: str, ref: str, path: str, expires_in: int) -> tuple[str, int]:
        """A URL any HTTP client may GET the object's bytes (as they are now) through for
        ``expires_in`` seconds, and its expiry (Unix seconds). Only a server signs them: the
        embedded lake raises ``InvalidArgument``."""
        ...

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
        """Store the bytes read from ``source`` and stage them at ``path`` on the branch, with
        ``content_type``, or when None the type guessed from ``path``
        (:func:`~lakectl.core.contenttypes.guess_content_type`: ``text/csv`` for ``a.csv``)."""
        ...

    def append(self, repo: str, branch: str, path: str, source: BinaryIO | bytes) -> ObjectInfo:
        """Add the bytes read from ``source`` to the end of the object at ``path`` on the branch,
        as new blocks (created if missing; its content type and metadata stay). ``InvalidArgument``
        for an imported object."""
        ...

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
        """Upload local files ``(path in the lake, local path)`` as one staged batch, each with
        ``content_type``, or when None the type guessed from its own path. ``parallelism``: a
        server's requests in flight at once, at most (an embedded lake writes its blocks on
        two threads, whatever it says)."""
        ...

    def copy_object(self, repo: str, branch: str, path: str, source_ref: str, source_path: str) -> ObjectInfo:
        """Stage at ``path`` on the branch a copy of the object at ``source_path`` of
        ``source_ref`` (any ref of the repository): it shares the source's blocks."""
        ...

    def delete_objects(self, repo: str, branch: str, paths: Sequence[str]) -> None: ...

    def delete_prefix(self, repo: str, branch: str, prefix: str) -> list[str]:
        """Delete every object under ``prefix``; return the deleted paths."""
        ...

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
        """Commit the staged changes (only those under ``prefixes`` when given: the rest stays
        staged); an empty ``message`` only with ``allow_empty_message``."""
        ...

    def get_commit(self, repo: str, ref: str) -> Commit: ...

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
        """:func:`lakectl.core.changes.log`: ``after`` a commit (the page that follows it),
        ``since`` an RFC 3339 date-time, up to ``stop_at``'s commit, and with ``since_commit``
        only the commits that ref's commit does not reach."""
        ...

    def annotate(
        self, repo: str, ref: str, prefix: str = "", recursive: bool = False
    ) -> Iterator[Annotation]:
        """The entries under ``prefix`` (one level, or every object with ``recursive``) in path
        order, each with the last commit that changed it (None: only staged)."""
        ...

    def diff_uncommitted(self, repo: str, branch: str, prefix: str = "") -> list[Change]: ...

    def diff_refs(
        self, repo: str, left: str, right: str, two_way: bool = False, prefix: str = ""
    ) -> Iterator[Change]: ...

    def diff_since(self, repo: str, since: str, ref: str, prefix: str = "") -> Iterator[Change]:
        """:func:`lakectl.core.changes.diff_since`."""
        ...

    def change_feed(
        self,
        repo: str,
        since: str,
        ref: str,
        prefix: str = "",
        signed: bool = False,
        by_commit: bool = False,
    ) -> list[FeedChange]:
        """:func:`lakectl.core.feed.change_feed`, or with ``by_commit``
        :func:`lakectl.core.feed.commit_feed`. ``signed``: the entries name their blocks by
        locators this client may fetch itself (a server signs them; the embedded lake reads any
        block)."""
        ...

    def find_merge_base(self, repo: str, source: str, dest: str) -> str:
        """The id of the best common ancestor of two refs' commits ("" when there is none)."""
        ...

    def provenance(self, repo: str, ref: str, path: str, depth: int = 5) -> dict[str, Any]:
        """What ``path`` at ``ref`` was made from (:func:`lakectl.core.provenance.upstream`), as
        its ``to_dict``."""
        ...

    def downstream(self, repo: str, ref: str, path: str = "") -> list[dict[str, Any]]:
        """The commits made from ``ref``'s commit (:func:`lakectl.core.provenance.downstream`)."""
        ...

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
        """The data-aware diff of the table at ``path`` from ``left`` to ``right`` (three-dot,
        since their merge base; ``two_way``: left's tree against right's); without ``key``, by
        the key the repository declares for the table unless ``declared`` is false; as
        :meth:`lakectl.core.tablediff.TableDiff.to_dict` shapes it (one page of row changes).
        With ``spark_master``, the same diff runs as a Spark job on that master
        (:func:`lakectl.sparkjobs.tablediff.diff_table`), against an embedded lake only."""
        ...

    # -- merge, revert, cherry-pick, reset -------------------------------------------------

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
        """Three-way merge; raises ``MergeConflict`` (with the paths) when sides disagree.
        ``squash``: the result has the destination as its one parent (lakeFS's squash_merge).
        With ``spark_master``, a ``rows`` strategy's merges run as a Spark job on that master
        (:func:`lakectl.sparkjobs.tablemerge.runner`), against an embedded lake only."""
        ...

    def cherry_pick(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit: ...

    def revert(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit: ...

    def reset(self, repo: str, branch: str, kind: ResetKind, path: str = "") -> int:
        """Discard uncommitted changes; return how many paths were reset."""
        ...

    # -- manifests -------------------------------------------------------------------------

    def export_manifest(self, repo: str, ref: str, prefix: str = "", signed: bool = False) -> str:
        """The normalized Keep manifest of the objects under ``prefix`` (paths relative to it).
        ``signed``: blocks named by locators this client may fetch itself (a server signs them;
        the embedded lake reads any block)."""
        ...

    def import_manifest(
        self, repo: str, branch: str, prefix: str, text: str, replace: bool = False
    ) -> list[str]:
        """Stage the files a manifest describes under ``prefix``, all or nothing; return their
        paths. ``replace``: every other object under ``prefix`` goes in the same staged write."""
        ...

    # -- zero-copy import ------------------------------------------------------------------

    def import_start(
        self,
        repo: str,
        branch: str,
        paths: Sequence[Mapping[str, str]],
        message: str = "",
        metadata: Mapping[str, str] | None = None,
        merge: bool = True,
    ) -> dict[str, Any]:
        """Start importing ``paths`` (lakeFS ``ImportLocation``s: ``path``, ``destination``,
        ``type``) onto ``_<branch>_imported``, merged into the branch with ``merge``; the
        task's status (its ``id`` first), the import running on (:mod:`lakectl.core.importing`)."""
        ...

    def import_status(self, repo: str, branch: str, import_id: str) -> dict[str, Any]:
        """An import's status: lakeFS's ``ImportStatus`` fields, and ``id``, ``branch``,
        ``import_branch``, ``import_commit_id``, ``merged``."""
        ...

    def import_cancel(self, repo: str, branch: str, import_id: str) -> None:
        """Stop a running import (``Conflict`` when it already ended)."""
        ...

    def import_copy(self, repo: str, branch: str, prefix: str = "") -> list[str]:
        """Copy the imported objects under ``prefix`` into the lake (owned blocks), staged on the
        branch; their paths."""
        ...

    # -- refs dump and restore -------------------------------------------------------------

    def dump_refs(self, repo: str) -> dict[str, str]:
        """Store the repository's commits, tags and branches in the lake; lakeFS's ``RefsDump``
        manifest of them (:mod:`lakectl.core.upkeep.refsdump`)."""
        ...

    def restore_refs(self, repo: str, manifest: Mapping[str, Any]) -> None:
        """Load a ``RefsDump`` manifest's commits, tags and branches into a bare repository."""
        ...

    # -- garbage collection ----------------------------------------------------------------

    def set_gc_rules(self, repo: str, rules: GCRules) -> None:
        """Replace the repository's retention rules."""
        ...

    def get_gc_rules(self, repo: str) -> GCRules:
        """The repository's retention rules; ``NotFound`` when none are set."""
        ...

    def delete_gc_rules(self, repo: str) -> None:
        """Forget the repository's retention rules (idempotent)."""
        ...

    def gc_run(
        self,
        repo: str,
        dry_run: bool,
        grace_seconds: float,
        spark_master: str | None = None,
        allow_preexisting_blocks: bool = False,
    ) -> dict[str, Any]:
        """Collect the blocks the lake no longer needs once ``repo``'s expired commits go; the
        report of :func:`lakectl.core.upkeep.gc.run`. With ``spark_master``, the same collection runs
        as a Spark job on that master (:func:`lakectl.sparkjobs.gc.run`), where the lake is.
        ``allow_preexisting_blocks``: collect even though the lake's database was created over
        blocks already stored (refused otherwise), and forget that it was."""
        ...

    # -- branch protection -----------------------------------------------------------------

    def list_branch_protection(self, repo: str) -> list[dict[str, Any]]:
        """The rules (lakeFS's ``BranchProtectionRule``: ``pattern``, and ``required_approvals``
        and ``required_checks`` when set) of branches that refuse direct writes."""
        ...

    def add_branch_protection(
        self, repo: str, pattern: str, required_approvals: int = 0, required_checks: bool = False
    ) -> None:
        """Protect the branches matching ``pattern``, with what a pull request into them needs;
        ``AlreadyExists`` if it has a rule."""
        ...

    def delete_branch_protection(self, repo: str, pattern: str) -> None:
        """Remove the rule of ``pattern``; ``NotFound`` if it has none."""
        ...

    # -- action runs -----------------------------------------------------------------------

    def list_action_runs(
        self, repo: str, branch: str = "", commit: str = "", after: str = "", amount: int | None = None
    ) -> list[ActionRun]:
        """Runs of the repository's actions newest first (only a branch's, or a commit's), after
        the run id ``after``; at most ``amount`` (None: all)."""
        ...

    def get_action_run(self, repo: str, run_id: str) -> ActionRun: ...

    def list_run_hooks(
        self, repo: str, run_id: str, after: str = "", amount: int | None = None
    ) -> list[HookRun]:
        """The hook runs of a run, by hook run id."""
        ...

    def get_hook_output(self, repo: str, run_id: str, hook_run_id: str) -> bytes:
        """A hook run's output (its log); ``NotFound`` for no such run or hook run."""
        ...

    # -- integrity -------------------------------------------------------------------------

    # -- pull requests -------------------------------------------------------------------

    def create_pull(
        self, repo: str, title: str, source: str, dest: str, description: str = ""
    ) -> PullRequest:
        """Open a pull request from ``source`` into ``dest``; its author is the caller."""
        ...

    def list_pulls(
        self, repo: str, status: StatusFilter, after: str = "", amount: int | None = None
    ) -> list[PullRequest]: ...

    def get_pull(self, repo: str, pull_id: str) -> PullRequest: ...

    def update_pull(
        self,
        repo: str,
        pull_id: str,
        title: str | None = None,
        description: str | None = None,
        status: PullStatus | None = None,
    ) -> PullRequest:
        """Retitle, redescribe, close or reopen."""
        ...

    def merge_pull(
        self, repo: str, pull_id: str, strategies: Sequence[str] = (), message: str | None = None
    ) -> PullRequest:
        """Merge when the destination's rule finds nothing missing (``PreconditionFailed``)."""
        ...

    def comment_pull(self, repo: str, pull_id: str, body: str) -> Comment: ...

    def list_pull_comments(self, repo: str, pull_id: str) -> list[Comment]: ...

    def review_pull(self, repo: str, pull_id: str, verdict: Verdict, body: str = "") -> Review:
        """The caller's verdict on the source's current head."""
        ...

    def list_pull_reviews(self, repo: str, pull_id: str) -> list[Review]: ...

    def pull_gate(self, repo: str, pull_id: str) -> Gate:
        """What merging needs now: approvals, checks, and the reasons it is refused."""
        ...

    def fsck(
        self,
        repo: str | None,
        repair: bool = False,
        spark_master: str | None = None,
        progress: ByteProgress | None = None,
    ) -> dict[str, Any]:
        """Verify every block the lake (``repo`` None) or one repository references: the report
        of :func:`lakectl.core.upkeep.fsck.check`. With ``spark_master``, the blocks are verified by a
        Spark job on that master (:func:`lakectl.sparkjobs.fsck.check`), where the lake is.
        ``progress`` is called only where the check runs in this process."""
        ...

    # -- the journal (docs/decisions/0009-journal.md) ---------------------------------------

    def journal_enable(self, reads: bool | None = None) -> dict[str, Any]:
        """Switch the lake's journal on (idempotent), and read auditing on or off (``reads``;
        None: as it is): ``{"enabled", "since", "reads"}``."""
        ...

    def journal_disable(self) -> dict[str, Any]:
        """Switch the lake's journal off (idempotent): ``{"enabled", "since", "reads"}``."""
        ...

    def journal_tail(self, repo: str = "", amount: int = 20, after: int = 0) -> list[dict[str, Any]]:
        """The last ``amount`` journal entries (every one after ``after`` when given), oldest first,
        of one repository or (``repo`` empty) the lake:
        :meth:`lakectl.core.journal.seal.Entry.to_dict`."""
        ...

    def journal_follow(self, repo: str = "", after: int = 0) -> Iterator[dict[str, Any]]:
        """Every journal entry after ``after``, as it is sealed, until the caller stops."""
        ...

    def journal_compact(self) -> dict[str, Any]:
        """Rewrite the sealed journal without superseded entries: ``{"entries", "dropped",
        "batches"}`` (:func:`lakectl.core.journal.compact.compact`)."""
        ...

    def rebuild_from_journal(self) -> dict[str, Any]:
        """A new metadata database for the embedded lake from its blocks and journal alone
        (:func:`lakectl.core.journal.rebuild.rebuild_embedded`); a server refuses
        (``InvalidArgument``)."""
        ...
