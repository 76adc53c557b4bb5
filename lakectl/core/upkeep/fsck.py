"""fsck: verify every block the lake (or one repository) references, and find what it stores for nothing.

The walk is garbage collection's (:mod:`lakectl.core.upkeep.gc`: ``list_commits``, ``tree_blocks``,
``staged_blocks``, ``upload_blocks``), from every commit of every repository (no retention), every
staged entry and every multipart upload in flight. Each referenced block (metaranges, ranges and
object data) is then read through the block adapter, which verifies its md5: ``BlockNotFound``
makes it *missing*, ``CorruptBlock`` *corrupt*. In a :class:`~lakectl.core.blocks.volumes.VolumeSet`
each copy is verified on its own volume (a read through the set would fall back past a bad copy
and hide it): a corrupt copy, or fewer intact copies than the set's replicas, is damage on that
volume, repairable from an intact copy elsewhere (``repair``).

Lake-wide, fsck also lists what is stored for nothing: *orphaned* blocks (stored, referenced by
nothing: garbage that ``gc run`` collects, or a put whose object is not staged yet) and the
temporary files of killed writers. Neither is damage.

Each damaged block names one place that references it, chosen the same way by the in-process
check and by the Spark job (:mod:`lakectl.sparkjobs.fsck`): of the blocks that name it, the least
by ``(parent, root)`` — its range (or metarange) and the metarange that range was reached from —
then the first commit (repositories and commit ids in order) with that metarange, and the first
path of the range whose entry names the block.
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from lakectl.core import porcelain
from lakectl.core.blocks import BlockAdapter, HasTemporaries, Temporary
from lakectl.core.blocks.volumes import VolumeSet
from lakectl.core.graph.ranges import ROOT_LEVEL, RangeStore
from lakectl.core.journal import journal, log
from lakectl.core.lake import Lake, now
from lakectl.core.model import Commit, CommitId, MetaRangeId, RangeId, RepositoryId
from lakectl.core.upkeep import gc, refsdump, retention
from lakectl.errors import BlockNotFound, CorruptBlock, LakectlError, NotFound

ORPHANS_SHOWN = 1000
"""Orphaned blocks listed by locator in a report (all are counted): a lake with much garbage has
millions, which ``gc run`` is for."""
VERIFY_THREADS = max(2, min(4, os.cpu_count() or 1))
"""Blocks read and hashed at once: reads and md5 release the GIL, so threads use every core."""
_IN_FLIGHT = 2 * VERIFY_THREADS

Progress = Callable[[int, int], None]
"""Called with the bytes verified so far and the bytes to verify in all."""

Link = tuple[str, str]
"""How the walk reached a block: ``(parent, root)``, the block naming it (a range, or the
metarange for its pages and their ranges) and the metarange that parent was reached from;
``("", "")`` for a root (a commit's metarange, a staged entry's or an upload's block)."""
ROOT: Link = ("", "")


class Kind(enum.Enum):
    """What a referenced block holds."""

    METARANGE = "metarange"
    PAGE = "page"
    """A page of a tree's index, naming ranges."""
    RANGE = "range"
    DATA = "data"


class Problem(enum.Enum):
    MISSING = "missing"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class Origin:
    """One place that references a block."""

    repository: str
    commit: str | None = None
    """A commit whose tree holds it (None: a staged entry, or a part of an upload in flight)."""
    branch: str | None = None
    """The branch it is staged on."""
    upload: str | None = None
    """The multipart upload in flight it is a part of."""
    path: str | None = None
    """An object whose data it is (None for a metarange or range)."""


@dataclass(frozen=True, slots=True)
class Start:
    """Where the walk starts (small: one metarange per distinct tree)."""

    repository: str | None
    """The repository checked; None: the whole lake."""
    repositories: int
    commits: int
    metaranges: dict[str, Origin]
    """Each commit's metarange, and its first commit."""
    direct: dict[str, Origin]
    """The blocks of staged entries and of uploads in flight, and the first entry or upload."""
    expired: int = 0
    """Commits past their repository's retention: garbage collection may have taken their
    blocks, so they are counted, not checked."""
    expired_trees: frozenset[str] = frozenset()
    """Their metaranges: the files of their trees, which collections keep, are no orphans."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A damaged copy, as the verification found it (before attribution and repair)."""

    locator: str
    link: Link
    problem: Problem
    volume: str | None = None
    """The volume of a volume set holding the bad copy (or lacking one)."""
    repairable: bool = False
    """An intact copy exists on another volume."""


@dataclass(frozen=True, slots=True)
class Damage:
    """A missing or corrupt block (or copy of one), where it is referenced, and whether it was repaired."""

    locator: str
    problem: Problem
    kind: Kind
    origin: Origin
    volume: str | None
    repaired: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "locator": self.locator,
            "kind": self.kind.value,
            "repository": self.origin.repository,
            "commit": self.origin.commit,
            "branch": self.origin.branch,
            "upload": self.origin.upload,
            "path": self.origin.path,
            "volume": self.volume,
            "repaired": self.repaired,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """What one check found (and, with ``repair``, mended)."""

    repository: str | None
    repair: bool
    repositories: int
    commits: int
    blocks: int
    """Distinct referenced blocks verified."""
    bytes: int
    """Their bytes."""
    damaged: tuple[Damage, ...]
    """Sorted by problem, locator and volume."""
    orphaned: tuple[str, ...] | None
    """The first :data:`ORPHANS_SHOWN` orphaned blocks by locator; None when one repository
    was checked (orphans are a property of the whole lake)."""
    orphaned_count: int
    orphaned_bytes: int
    temporaries: tuple[Temporary, ...] | None
    """Temporary files writers left, by volume and name; None when one repository was checked."""
    expired: int = 0
    """Commits past their retention, not checked (garbage collection may have taken them)."""

    @property
    def ok(self) -> bool:
        """No damage is left (none found, or all of it repaired)."""
        return all(d.repaired for d in self.damaged)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; its field names are stable."""
        return {
            "repository": self.repository,
            "repair": self.repair,
            "ok": self.ok,
            "repositories": self.repositories,
            "commits": self.commits,
            "expired_commits": self.expired,
            "blocks": self.blocks,
            "bytes": self.bytes,
            "missing": [d.to_dict() for d in self.damaged if d.problem is Problem.MISSING],
            "corrupt": [d.to_dict() for d in self.damaged if d.problem is Problem.CORRUPT],
            "repaired": sum(d.repaired for d in self.damaged),
            "unrepaired": sum(not d.repaired for d in self.damaged),
            "orphaned": None
            if self.orphaned is None
            else {
                "count": self.orphaned_count,
                "bytes": self.orphaned_bytes,
                "locators": list(self.orphaned),
            },
            "temporaries": None
            if self.temporaries is None
            else {
                "count": len(self.temporaries),
                "bytes": sum(t.size for t in self.temporaries),
                "files": [
                    {"name": t.name, "volume": t.volume, "size": t.size, "modified": t.modified}
                    for t in self.temporaries
                ],
            },
        }


# -- the walk ----------------------------------------------------------------------------------


def start(lake: Lake, repo: str | None = None) -> Start:
    """The roots of a check of ``repo`` (None: every repository): the metarange of every commit
    its repository's retention keeps (those past it are counted), every staged entry's, upload
    part's and refs dump's blocks. ``RepositoryNotFound`` for an unknown one."""
    if repo is None:
        names = [record.name for record in lake.refs.list_repos()]
    else:
        names = [porcelain.get_repo(lake, repo).name]
    commits = expired = 0
    metaranges: dict[str, Origin] = {}
    trees: set[str] = set()
    direct: dict[str, Origin] = {}
    moment = now()
    for name in names:
        every = {c.id: c for c in retention.list_commits(lake, name)}
        kept = _retained(lake, name, every, moment)
        expired += len(every) - len(kept)
        for commit in every.values():
            if commit.id in kept:
                commits += 1
                metaranges.setdefault(commit.meta_range_id, Origin(name, commit=commit.id))
            else:
                trees.add(commit.meta_range_id)
        for branch, path, found in gc.staged_blocks(lake, name):
            for locator in found:
                direct.setdefault(locator, Origin(name, branch=branch, path=path))
        for upload, path, found in gc.upload_blocks(lake, name):
            for locator in found:
                direct.setdefault(locator, Origin(name, upload=upload, path=path))
        for locator in refsdump.dump_blocks(lake, name):  # a refs dump: a backup, kept by gc
            direct.setdefault(locator, Origin(name))
    if repo is None:  # the journal's sealed batches belong to the lake, kept by gc too
        for batch in journal.batches(lake.kv):
            where = f"(journal batch {batch['first']}..{batch['last']})"
            direct.setdefault(batch["locator"], Origin("", path=where))
    expired_trees = frozenset(trees - metaranges.keys())
    scope = None if repo is None else names[0]
    return Start(scope, len(names), commits, metaranges, direct, expired, expired_trees)


def _retained(
    lake: Lake, repo: RepositoryId, commits: Mapping[CommitId, Commit], moment: float
) -> set[CommitId]:
    """The commits of ``repo`` its retention rules keep (all of them without rules), as
    garbage collection decides them: what it collects is what expired, not damage."""
    try:
        rules = retention.get_rules(lake, repo)
    except NotFound:
        return set(commits)
    return retention.kept_commits(lake, repo, commits, rules, moment)


def references(lake: Lake, begin: Start) -> dict[str, Link]:
    """Every block the roots reference, with the least link that reaches it. Ranges are read
    through a store without cache (what is on disk, not what a long-running server remembers);
    one that cannot be read is passed over here, and found damaged by the verification."""
    store = RangeStore(lake.blocks, cache_size=0)
    found: dict[str, Link] = dict.fromkeys(begin.direct, ROOT)
    seen: set[str] = set()
    for metarange in sorted(begin.metaranges):
        found[metarange] = ROOT
        for block, named in gc.tree_blocks(store, MetaRangeId(metarange), seen, skip_unreadable=True):
            # A range is read under the first metarange (in order) that names it, its least
            # parent; one tuple is shared by all its entries.
            link = (block, metarange)
            for locator in named:
                known = found.get(locator)
                if known is None or link < known:
                    found[locator] = link
    return found


def _orphans(lake: Lake, begin: Start, found: Mapping[str, Link], began: float) -> list[str]:
    """Stored blocks nothing references, as a collection would see them: not the files of the
    trees it keeps, nor a block written since the check began (a write or a seal in flight),
    nor the journal's log records where they are blocks (the journal's until sealed)."""
    kept = _expired_tree_files(lake, begin)
    logs = log.directory(lake.blocks) is None
    orphans = []
    for locator in lake.blocks.list():
        if locator in found or locator in kept:
            continue
        try:
            if lake.blocks.modified(locator) >= began or (logs and gc.is_log(lake.blocks, locator)):
                continue
        except BlockNotFound:
            continue  # deleted meanwhile
        orphans.append(locator)
    return orphans


def _expired_tree_files(lake: Lake, begin: Start) -> set[str]:
    """The files of the trees of commits past their retention, as far as they are stored:
    collections keep them, and those an older collection took are not reported missing."""
    store = RangeStore(lake.blocks, cache_size=0)
    files: set[str] = set()
    seen: set[str] = set()
    for metarange in sorted(begin.expired_trees):
        files.update(gc.tree_files(store, MetaRangeId(metarange), seen))
    return files


# -- verification ------------------------------------------------------------------------------


def verify(blocks: BlockAdapter, locator: str, link: Link) -> list[Finding]:
    """The damage of one referenced block: none when it reads back intact (in a volume set:
    every copy intact, and as many as the set's replicas)."""
    if isinstance(blocks, VolumeSet):
        return _verify_copies(blocks, locator, link)
    try:
        blocks.get(locator)
    except BlockNotFound:
        return [Finding(locator, link, Problem.MISSING)]
    except CorruptBlock:
        return [Finding(locator, link, Problem.CORRUPT)]
    return []


def _verify_copies(volumes: VolumeSet, locator: str, link: Link) -> list[Finding]:
    order = volumes.probe_order(locator)
    expected = set(order[: volumes.replicas])
    good: list[str] = []
    corrupt: list[str] = []
    lacking: list[str] = []
    for volume_id in order:
        adapter = volumes.volume(volume_id)
        if volume_id not in expected and not adapter.exists(locator):
            continue
        try:
            adapter.get(locator)
        except BlockNotFound:
            lacking.append(volume_id)
        except CorruptBlock:
            corrupt.append(volume_id)
        else:
            good.append(volume_id)
    shortfall = max(0, volumes.replicas - len(good) - len(corrupt))
    findings = [Finding(locator, link, Problem.CORRUPT, vid, bool(good)) for vid in corrupt]
    findings += [Finding(locator, link, Problem.MISSING, vid, bool(good)) for vid in lacking[:shortfall]]
    return findings


def verify_all(
    blocks: BlockAdapter, found: dict[str, Link], progress: Progress | None = None
) -> list[Finding]:
    """:func:`verify` every block of ``found``, :data:`VERIFY_THREADS` at a time."""
    total = sum(_size(locator) for locator in found)
    done = 0
    findings: list[Finding] = []
    pending: deque[tuple[str, Future[list[Finding]]]] = deque()
    with ThreadPoolExecutor(VERIFY_THREADS, thread_name_prefix="lakectl-fsck") as pool:
        items = iter(found.items())
        while True:
            while len(pending) < _IN_FLIGHT:
                item = next(items, None)
                if item is None:
                    break
                pending.append((item[0], pool.submit(verify, blocks, *item)))
            if not pending:
                return findings
            locator, future = pending.popleft()
            findings.extend(future.result())
            done += _size(locator)
            if progress is not None:
                progress(done, total)


def _size(locator: str) -> int:
    return int(locator.rsplit("+", 1)[1])


# -- the report --------------------------------------------------------------------------------


def conclude(
    lake: Lake,
    begin: Start,
    blocks: int,
    size: int,
    findings: Iterable[Finding],
    orphaned: Iterable[str] | None,
    temporaries: Iterable[Temporary] | None,
    repair: bool,
) -> Report:
    """The report of a check (in-process or on Spark): each finding attributed to one place that
    references it and, with ``repair``, rewritten from an intact copy where one exists."""
    store = RangeStore(lake.blocks, cache_size=0)
    damaged = []
    for finding in sorted(findings, key=lambda f: (f.problem.value, f.locator, f.volume or "")):
        kind, origin = _origin(store, begin, finding)
        repaired = repair and finding.repairable and _repair(lake.blocks, finding)
        damaged.append(Damage(finding.locator, finding.problem, kind, origin, finding.volume, repaired))
    orphans = None if orphaned is None else sorted(orphaned)
    return Report(
        begin.repository,
        repair,
        begin.repositories,
        begin.commits,
        blocks,
        size,
        tuple(damaged),
        None if orphans is None else tuple(orphans[:ORPHANS_SHOWN]),
        0 if orphans is None else len(orphans),
        0 if orphans is None else sum(_size(o) for o in orphans),
        None if temporaries is None else tuple(sorted(temporaries, key=lambda t: (t.volume or "", t.name))),
        begin.expired,
    )


def _origin(store: RangeStore, begin: Start, finding: Finding) -> tuple[Kind, Origin]:
    parent, root = finding.link
    if finding.link == ROOT:
        if finding.locator in begin.metaranges:
            return Kind.METARANGE, begin.metaranges[finding.locator]
        return Kind.DATA, begin.direct[finding.locator]
    commit = begin.metaranges[root]
    if parent == root:
        return (Kind.PAGE if _is_page(store, root, finding.locator) else Kind.RANGE), commit
    return Kind.DATA, replace(commit, path=_first_path(store, parent, finding.locator))


def _is_page(store: RangeStore, metarange: str, locator: str) -> bool:
    """Whether the tree's root names ``locator`` as one of its pages."""
    try:
        index = store.read_index(metarange)
    except LakectlError:
        return False
    return index.level == ROOT_LEVEL and any(page.id == locator for page in index.entries)


def _first_path(store: RangeStore, range_id: str, locator: str) -> str | None:
    """The first path of the range whose entry names the block (None if it cannot be read)."""
    try:
        data = store.read_range(RangeId(range_id))
    except LakectlError:
        return None
    for path, row in zip(data.paths, data.rows, strict=True):
        if locator in gc.bare_locators(str(row[2])):
            return path
    return None


def _repair(blocks: BlockAdapter, finding: Finding) -> bool:
    """Rewrite a volume's bad or missing copy from an intact one; True when it then reads back."""
    if not isinstance(blocks, VolumeSet) or finding.volume is None:
        return False
    try:
        data = blocks.get(finding.locator)  # the first intact copy
        volume = blocks.volume(finding.volume)
        volume.delete(finding.locator)  # a corrupt copy of the right size would only be touched
        volume.put(finding.locator, data)
        volume.sync()
        volume.get(finding.locator)
    except LakectlError:
        return False
    return True


# -- the verb ----------------------------------------------------------------------------------


def check(
    lake: Lake, repo: str | None = None, repair: bool = False, progress: Progress | None = None
) -> Report:
    """Verify every block ``repo`` (None: the whole lake) references; lake-wide, list orphaned
    blocks and temporary files too. With ``repair``, damaged copies are rewritten from intact
    ones on other volumes where they exist. ``progress`` is called as blocks are verified."""
    # What this process journalled is sealed first (a batch is referenced) and its log blocks
    # deleted: a log block is no orphan, but the journal's until its entries are sealed.
    with contextlib.suppress(LakectlError):
        journal.flush(lake)
    began = time.time()
    begin = start(lake, repo)
    found = references(lake, begin)
    findings = verify_all(lake.blocks, found, progress)
    orphaned: list[str] | None = None
    temporaries: list[Temporary] | None = None
    if repo is None:
        orphaned = _orphans(lake, begin, found, began)
        temporaries = list(lake.blocks.temporaries()) if isinstance(lake.blocks, HasTemporaries) else []
    size = sum(_size(locator) for locator in found)
    return conclude(lake, begin, len(found), size, findings, orphaned, temporaries, repair)
