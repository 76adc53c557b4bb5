"""Garbage collection of the lake's blocks: what no retained commit, staged entry or upload references.

The commits kept are those the repositories' retention rules keep (:mod:`lakectl.core.upkeep.retention`);
the collector follows docs/decisions/0008.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from lakectl.core import identity as lake_identity
from lakectl.core import keys, multipart, porcelain
from lakectl.core.blocks import BlockAdapter, HasTemporaries, Temporary
from lakectl.core.events import Event, Verb
from lakectl.core.graph.ranges import ROOT_LEVEL, RangeStore
from lakectl.core.journal import journal, log
from lakectl.core.kv.helpers import drop_partition, partitions
from lakectl.core.lake import Lake
from lakectl.core.lake import now as current_time
from lakectl.core.model import (
    EXTERNAL_MARK,
    TOMBSTONE,
    BranchId,
    MetaRangeId,
    RepositoryId,
    StagingToken,
    decode_row,
)
from lakectl.core.upkeep import refsdump
from lakectl.core.upkeep.retention import DAY, GCRules, get_rules, kept_commits, list_commits
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    LakectlError,
    NotFound,
    PreconditionFailed,
)

# -- the mark: what must stay ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Roots:
    """Where a mark starts (decision 0008): the trees of the commits that stay, and the blocks
    that staged entries and multipart uploads in flight reference directly. Small (one metarange
    per kept commit): the big part of the mark, the ranges' entries, is read from these trees."""

    metaranges: frozenset[MetaRangeId]
    """The metaranges of every kept commit, in every repository of the lake."""
    trees: frozenset[MetaRangeId]
    """The metaranges of the other commits: their trees' files stay (a merge base, a diff or a
    listing at an expired commit reads them), the blocks of their objects may go."""
    locators: frozenset[str]
    """Bare locators of staged entries and of parts of uploads in flight, in every repository."""
    retained: int
    """Commits of the collected repository that its rules keep."""
    expired: int
    """Commits of the collected repository past their retention: their blocks may go."""


@dataclass(frozen=True, slots=True)
class Mark:
    """The blocks a collection of one repository must keep (decision 0008)."""

    live: frozenset[str]
    """Bare locators of every block still referenced, in any repository of the lake."""
    retained: int
    """Commits of the collected repository that its rules keep."""
    expired: int
    """Commits of the collected repository past their retention: their blocks may go."""


def roots(lake: Lake, repo: str, now: float | None = None, expiring: frozenset[str] = frozenset()) -> Roots:
    """What a mark of the lake starts from once ``repo``'s expired commits are let go.

    Kept commits: the retained commits of ``repo`` (branch heads; ancestors within their
    branch's retention; tagged commits; every commit when it has no rules) and every commit of
    every other repository. Direct locators: staged entries of every branch, the blocks of every
    refs dump (:func:`lakectl.core.upkeep.refsdump.dump_blocks`), and the parts of multipart uploads in
    flight (but for the ``expiring`` upload ids of ``repo``, about to be aborted).
    """
    target = porcelain.get_repo(lake, repo).name
    try:
        rules: GCRules | None = get_rules(lake, repo)
    except NotFound:
        rules = None
    moment = current_time() if now is None else now
    metaranges: set[MetaRangeId] = set()
    trees: set[MetaRangeId] = set()
    direct: set[str] = set()
    retained = expired = 0
    for record in lake.refs.list_repos():
        commits = {c.id: c for c in list_commits(lake, record.name)}
        keep = set(commits)
        if record.name == target:
            if rules is not None:
                keep = kept_commits(lake, record.name, commits, rules, moment)
            retained, expired = len(keep), len(commits) - len(keep)
        metaranges.update(commits[cid].meta_range_id for cid in keep)
        trees.update(commits[cid].meta_range_id for cid in commits.keys() - keep)
        _mark_staged(lake, record.name, direct)
        direct.update(refsdump.dump_blocks(lake, record.name))
        _mark_uploads(lake, record.name, direct, expiring if record.name == target else frozenset())
    direct.update(journal.sealed_blocks(lake.kv))
    return Roots(frozenset(metaranges), frozenset(trees - metaranges), frozenset(direct), retained, expired)


def mark(lake: Lake, repo: str, now: float | None = None, expiring: frozenset[str] = frozenset()) -> Mark:
    """Every block the lake still needs once ``repo``'s expired commits are let go.

    Live: the :func:`roots` direct locators, and for each kept commit its metarange, ranges
    and every entry's blocks; each range is read once however many commits share it.
    """
    start = roots(lake, repo, now, expiring)
    return Mark(frozenset(_live(lake, start)), start.retained, start.expired)


def _live(lake: Lake, start: Roots) -> set[str]:
    """The direct locators of ``start``, the metarange, pages, ranges and entries' blocks of each
    of its kept trees, and the files alone of its other trees."""
    live: set[str] = set(start.locators)
    seen_ranges: set[str] = set()
    for metarange in start.metaranges:
        _mark_tree(lake, metarange, live, seen_ranges)
    seen_files: set[str] = set()  # apart: a range seen here has had none of its entries marked
    for metarange in start.trees:
        live.update(tree_files(lake.ranges, metarange, seen_files))
    return live


def bare_locators(tokens: str) -> list[str]:
    """The bare locators of an entry's space-separated segment tokens ``<md5>+<size>[:off:len]``;
    none for an imported entry, whose bytes are outside the lake: GC never deletes them."""
    if tokens.startswith(EXTERNAL_MARK):
        return []
    return [token.split(":", 1)[0] for token in tokens.split()]


# The walk from the roots to every block they reference, shared by the mark and by fsck
# (lakectl.core.upkeep.fsck), which walks every commit of every repository.


def tree_blocks(
    store: RangeStore, metarange: MetaRangeId, seen: set[str], skip_unreadable: bool = False
) -> Iterator[tuple[str, list[str]]]:
    """``(parent, the blocks it names)`` for a tree, parents as fsck reports them: the
    metarange (the tree's root) naming its pages, then naming the ranges of each page not in
    ``seen`` (a tree of the flat format: the metarange naming its ranges); then each range not
    in ``seen`` naming its entries' bare locators. Pages and ranges are added to ``seen`` as they
    are read: what trees share is walked once.

    A metarange, page or range that cannot be read raises ``BlockNotFound`` or
    ``CorruptBlock``; with ``skip_unreadable`` it is passed over (what it names is then not
    walked)."""
    try:
        index = store.read_index(metarange)
    except (BlockNotFound, CorruptBlock):
        if not skip_unreadable:
            raise
        return
    yield metarange, [entry.id for entry in index.entries]
    ranges = index.entries
    if index.level == ROOT_LEVEL:
        ranges = []
        for page in index.entries:
            if page.id in seen:
                continue
            seen.add(page.id)
            try:
                named = store.page_ranges(page.id)
            except (BlockNotFound, CorruptBlock):
                if not skip_unreadable:
                    raise
                continue
            yield metarange, [info.id for info in named]
            ranges.extend(named)
    for info in ranges:
        if info.id in seen:
            continue
        seen.add(info.id)
        try:
            column = store.read_locators(info.id)
        except (BlockNotFound, CorruptBlock):
            if not skip_unreadable:
                raise
            continue
        yield info.id, [locator for tokens in column for locator in bare_locators(tokens)]


def tree_files(store: RangeStore, metarange: MetaRangeId, seen: set[str]) -> Iterator[str]:
    """The files of a tree (its metarange, pages and ranges), not what its entries name: what a
    collection keeps of a commit past its retention. Pages in ``seen`` are not read again. A
    file already gone (collected before collections kept these trees) is passed over."""
    yield metarange
    try:
        index = store.read_index(metarange)
    except BlockNotFound:
        return
    if index.level != ROOT_LEVEL:
        yield from (info.id for info in index.entries)  # a tree of the flat format
        return
    for page in index.entries:
        if page.id not in seen:
            seen.add(page.id)
            yield page.id
            with contextlib.suppress(BlockNotFound):
                yield from [info.id for info in store.page_ranges(page.id)]


def staged_blocks(lake: Lake, repo: RepositoryId) -> Iterator[tuple[BranchId, str, list[str]]]:
    """``(branch, path, bare locators)`` of every staged entry (current and sealed tokens) of
    the repository's branches."""
    for branch in lake.refs.list_branches(repo):
        for token in (branch.staging_token, *branch.sealed_tokens):
            for path, value in lake.kv.scan(keys.staging_partition(repo, token)):
                if value != TOMBSTONE:
                    yield branch.name, path, bare_locators(str(decode_row(value)[2]))


def upload_blocks(
    lake: Lake, repo: RepositoryId, skip: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str, list[str]]]:
    """``(upload id, object path, bare locators)`` of each part of the repository's multipart
    uploads in flight, but for the ``skip`` upload ids."""
    for upload in multipart.list_uploads(lake, repo):
        if upload.id in skip:
            continue
        for part in multipart.list_parts(lake, repo, upload.id):
            yield upload.id, upload.path, [token.split(":", 1)[0] for token in part.locators]


def _mark_tree(lake: Lake, metarange: MetaRangeId, live: set[str], seen: set[str]) -> None:
    live.add(metarange)
    for _, named in tree_blocks(lake.ranges, metarange, seen):
        live.update(named)


def _mark_staged(lake: Lake, repo: RepositoryId, live: set[str]) -> None:
    for _, _, found in staged_blocks(lake, repo):
        live.update(found)


def _mark_uploads(lake: Lake, repo: RepositoryId, live: set[str], skip: frozenset[str]) -> None:
    for _, _, found in upload_blocks(lake, repo, skip):
        live.update(found)


# -- the sweep ---------------------------------------------------------------------------------

UPLOAD_DAYS = 7
"""Multipart uploads initiated longer ago than this are aborted by a collection (as an S3
lifecycle rule would): their parts become garbage like any unreferenced block."""
GRACE_SECONDS = 6 * 3600
"""Blocks written or touched this recently before the mark began are never deleted: uploads in
flight whose objects are not staged yet (decision 0008)."""


@dataclass(frozen=True, slots=True)
class Report:
    """What one collection found and did."""

    dry_run: bool
    blocks: int
    """Blocks stored when the sweep listed them."""
    live: int
    young: int
    """Unreferenced, but written or touched within the grace period: kept."""
    deleted: int
    """Deleted (with ``dry_run``: would have been)."""
    bytes_freed: int
    retained_commits: int
    expired_commits: int
    uploads_aborted: int = 0
    """Stale multipart uploads aborted (with ``dry_run``: that would have been)."""
    staging_dropped: int = 0
    """Staging partitions no branch refers to (a deleted branch's, left by a crash or by a write
    racing the deletion) dropped (with ``dry_run``: that would have been)."""
    temporaries_deleted: int = 0
    """Temporary block files older than the grace period (killed writers left them) removed
    (with ``dry_run``: that would have been)."""
    temporaries_bytes_freed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "uploads_aborted": self.uploads_aborted,
            "staging_dropped": self.staging_dropped,
            "dry_run": self.dry_run,
            "blocks": self.blocks,
            "live": self.live,
            "young": self.young,
            "deleted": self.deleted,
            "bytes_freed": self.bytes_freed,
            "retained_commits": self.retained_commits,
            "expired_commits": self.expired_commits,
            "temporaries_deleted": self.temporaries_deleted,
            "temporaries_bytes_freed": self.temporaries_bytes_freed,
        }


@dataclass(slots=True)
class Tally:
    """The counts of a sweep, and its rule for each stored block. The in-process sweep keeps one;
    the Spark job keeps one per partition on its executors and adds them up."""

    blocks: int = 0
    live: int = 0
    young: int = 0
    deleted: int = 0
    bytes_freed: int = 0
    temporaries_deleted: int = 0
    temporaries_bytes_freed: int = 0

    def sweep(
        self, store: BlockAdapter, locator: str, live: bool, cutoff: float, dry_run: bool, logs: bool = False
    ) -> None:
        """Count one stored block; unless ``live`` or touched since ``cutoff``, delete it (not
        with ``dry_run``). A block deleted meanwhile counts as stored, and as nothing else. With
        ``logs`` (a store that keeps the journal's log records as blocks), a log block counts as
        live: the journal deletes it once its entries are sealed, and until then it is what a
        rebuild has of acknowledged changes, however short the grace period."""
        self.blocks += 1
        if live:
            self.live += 1
            return
        try:
            if store.modified(locator) >= cutoff:
                self.young += 1
                return
        except BlockNotFound:
            return  # deleted meanwhile
        if logs and is_log(store, locator):
            self.live += 1
            return
        if not dry_run:
            store.delete(locator)
        self.deleted += 1
        self.bytes_freed += int(locator.rsplit("+", 1)[1])

    def sweep_temporary(
        self, store: HasTemporaries, temporary: Temporary, cutoff: float, dry_run: bool
    ) -> None:
        """Unless written since ``cutoff`` (a put in flight), remove a temporary block file (not
        with ``dry_run``) and count it. One removed meanwhile counts as nothing."""
        if temporary.modified >= cutoff:
            return
        if not dry_run and not store.remove_temporary(temporary):
            return
        self.temporaries_deleted += 1
        self.temporaries_bytes_freed += temporary.size

    def sweep_temporaries(self, store: BlockAdapter, cutoff: float, dry_run: bool) -> None:
        """:meth:`sweep_temporary` every temporary file of the store, if it keeps any."""
        if isinstance(store, HasTemporaries):
            for temporary in store.temporaries():
                self.sweep_temporary(store, temporary, cutoff, dry_run)

    def add(self, other: Tally) -> None:
        self.blocks += other.blocks
        self.live += other.live
        self.young += other.young
        self.deleted += other.deleted
        self.bytes_freed += other.bytes_freed
        self.temporaries_deleted += other.temporaries_deleted
        self.temporaries_bytes_freed += other.temporaries_bytes_freed

    def report(
        self, dry_run: bool, retained: int, expired: int, uploads_aborted: int, staging_dropped: int
    ) -> Report:
        return Report(
            dry_run,
            self.blocks,
            self.live,
            self.young,
            self.deleted,
            self.bytes_freed,
            retained,
            expired,
            uploads_aborted,
            staging_dropped,
            self.temporaries_deleted,
            self.temporaries_bytes_freed,
        )


def check_grace(grace_seconds: float) -> None:
    """``InvalidArgument`` unless the grace period is a non-negative number of seconds."""
    if grace_seconds < 0:
        raise InvalidArgument(f"the grace period must not be negative, got {grace_seconds}")


def expire_uploads(lake: Lake, repo: str, now: float, dry_run: bool) -> frozenset[str]:
    """The ids of ``repo``'s multipart uploads initiated more than :data:`UPLOAD_DAYS` before
    ``now``; they are aborted unless ``dry_run``."""
    stale = [u for u in multipart.list_uploads(lake, repo) if u.initiated < now - UPLOAD_DAYS * DAY]
    if not dry_run:
        for upload in stale:
            multipart.abort(lake, repo, upload.id)
    return frozenset(u.id for u in stale)


def drop_orphan_staging(lake: Lake, repo: str, dry_run: bool) -> int:
    """Drop ``repo``'s staging partitions that no branch refers to; return how many (with
    ``dry_run``, how many would go). Deleting a branch drops its tokens, but a crash in between,
    or a write racing the deletion (it fails, after writing), leaves a partition behind. Their
    entries were never marked: only their metadata remains to go. Partitions are listed before
    branches are read, so a token a branch takes meanwhile is never among them. 0 when the KV
    driver cannot list partitions."""
    name = porcelain.get_repo(lake, repo).name  # an unknown repository raises: nothing is dropped
    names = partitions(lake.kv, keys.staging_partition(name, StagingToken("")))
    if not names:
        return 0
    used = {
        keys.staging_partition(name, t) for branch in lake.refs.list_branches(name) for t in branch.tokens
    }
    orphans = [partition for partition in names if partition not in used]
    if not dry_run:
        for partition in orphans:
            drop_partition(lake.kv, partition)
    return len(orphans)


def check_preexisting(lake: Lake, dry_run: bool, allow: bool) -> None:
    """Refuse to collect (``PreconditionFailed``) a lake whose metadata database was created over
    blocks already stored (:mod:`lakectl.core.identity`): no commit of this database refers to
    them, so a collection would delete them all. A dry run deletes nothing and may show it;
    ``allow`` is the user's word that what was worth keeping has been imported again."""
    identity = lake_identity.get(lake.kv)
    if identity is None or not identity.created_over_blocks or dry_run or allow:
        return
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(identity.creation_date))
    raise PreconditionFailed(
        f"garbage collection refused: this lake's metadata database was created on {created} over "
        f"{identity.created_over_blocks} blocks already in its block store, and a collection would "
        "delete every one that no commit of this database refers to. Import what you want to keep "
        "(lakectl manifest import), then run gc with --allow-preexisting-blocks (REST: "
        "allow_preexisting_blocks=true) once: it lifts this refusal for good. --dry-run shows what "
        "would go",
        created_over_blocks=identity.created_over_blocks,
    )


Collect = Callable[[Lake, Roots, float, bool], Tally]
"""How a collection marks and sweeps: given the :func:`roots` of its mark, the cutoff (blocks
touched since stay) and ``dry_run``, it deletes what nothing live references and returns its
counts. In-process by default (:func:`collect`); :mod:`lakectl.sparkjobs.gc` passes a Spark job."""


def is_log(store: BlockAdapter, locator: str) -> bool:
    """Whether a stored block is a journal log record (read only for a block about to go)."""
    try:
        return log.is_log(store.get(locator, 0, len(log.MAGIC)))
    except (BlockNotFound, CorruptBlock):
        return False


def collect(lake: Lake, start: Roots, cutoff: float, dry_run: bool) -> Tally:
    """Mark from ``start`` in this process (each range read once), then sweep every stored block
    and the temporary files killed writers left (:class:`Tally`)."""
    live = _live(lake, start)
    tally = Tally()
    logs = log.directory(lake.blocks) is None  # else the log is in files, not among the blocks
    for locator in lake.blocks.list():
        tally.sweep(lake.blocks, locator, locator in live, cutoff, dry_run, logs)
    tally.sweep_temporaries(lake.blocks, cutoff, dry_run)
    return tally


def run(
    lake: Lake,
    repo: str,
    dry_run: bool = False,
    grace_seconds: float = GRACE_SECONDS,
    now: float | None = None,
    allow_preexisting_blocks: bool = False,
    collector: Collect = collect,
) -> Report:
    """Abort ``repo``'s multipart uploads older than :data:`UPLOAD_DAYS`, mark what the lake still
    needs once its expired commits go, then delete every other block older than the grace
    period, and the temporary files killed writers left older than it (nothing with
    ``dry_run``). ``now`` dates retention (commit ages); the grace period counts from the real
    time the mark began. A lake created over existing blocks is refused unless
    ``allow_preexisting_blocks`` (:func:`check_preexisting`), which a collection that ran then
    clears. ``collector`` marks and sweeps (:data:`Collect`); whichever does, the checks, the
    actions' hooks, the journal and the report are these."""
    check_grace(grace_seconds)
    check_preexisting(lake, dry_run, allow_preexisting_blocks)
    event = Event(Verb.GARBAGE_COLLECTION, porcelain.get_repo(lake, repo).name)
    if not dry_run:
        lake.events.before(event)
    began = time.time()
    stale = expire_uploads(lake, repo, current_time() if now is None else now, dry_run)
    orphans = drop_orphan_staging(lake, repo, dry_run)
    # What this process's journal finished is sealed now, its log blocks whose entries are
    # sealed go, and the new batch is among the roots; other log blocks are the journal's until
    # sealed (docs/journal.md), and a grace period shorter than a seal's second would take them
    # for garbage.
    with contextlib.suppress(LakectlError):
        journal.flush(lake)
    start = roots(lake, repo, now, stale)
    tally = collector(lake, start, began - grace_seconds, dry_run)
    if allow_preexisting_blocks and not dry_run:
        lake_identity.clear_preexisting(lake.kv)
    report = tally.report(dry_run, start.retained, start.expired, len(stale), orphans)
    if not dry_run:
        # What a replay of the metadata needs: the uploads aborted (blocks are not replayed).
        lake.events.after(event.done(payload={"aborted_uploads": sorted(stale), "report": report.to_dict()}))
    return report
