"""Delta Lake tables merged across branches.

**Merging** (:func:`settle`). Two branches that both wrote a table wrote its versions after their
common one under the same numbers: a tree merge conflicts on the log. Where both did, the source's
versions since the common one are checked against the destination's as Delta's optimistic
concurrency checks a second writer (:func:`lakectl.core.tables.deltalog.conflicts`), then written
after the destination's last version (:func:`lakectl.core.tables.deltalog.replay`). The source's
data files come with the tree merge (their names are unique); the source's other log files
(checkpoints under its own numbering, ``last_checkpoint``, logs it cleaned up) are left behind:
the destination's log stays as it was, and grows by the replayed versions. The cost follows the
versions the two sides wrote, not the table's history.

The table's log and state are read by :mod:`lakectl.core.tables.delta`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from lakectl.core.lake import Lake, now
from lakectl.core.model import Entry, MetaRangeId, Row
from lakectl.core.tables import deltalog
from lakectl.core.tables.delta import (
    CONTENT_TYPE,
    DEFAULT_CHECKPOINT_INTERVAL,
    Tree,
    head_version,
    last_checkpoint,
    log_copy,
    metadata_action,
    of_tree,
    open_table,
    read,
    snapshot,
)
from lakectl.core.tables.deltalog import Line, Version
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.core import tablemerge
    from lakectl.core.graph.merge import MergePlan
    from lakectl.core.graph.tree import Update


@dataclass
class Settled:
    """What the Delta tables of a merge became: the updates that replace the tree merge's log
    updates, the conflicts per table, and the merge commit's note."""

    roots: set[str] = field(default_factory=set)
    """The tables both sides wrote (the rows strategy leaves their files alone)."""
    updates: dict[str, list[Update]] = field(default_factory=dict)
    conflicts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    replayed: list[tuple[str, int, int, int, int]] = field(default_factory=list)

    def note(self) -> dict[str, str]:
        return {deltalog.NOTE: deltalog.note(self.replayed)} if self.replayed else {}


@dataclass(frozen=True)
class RowsRules:
    """The merge's ``rows`` strategies, which settle the files both sides rewrote in a table
    they cover by rows (:func:`_rows_merge`), and what runs the merges of rows."""

    rules: Sequence[tablemerge.RowRule] = ()
    runner: tablemerge.UnitRunner | None = None

    def rule_for(self, root: str) -> tablemerge.RowRule | None:
        from lakectl.core.graph.merge import glob_matches

        probe = f"{root}part.parquet"  # a data file of the table, as a glob names its files
        return next((r for r in self.rules if glob_matches(r.pattern, probe)), None)


def settle(
    lake: Lake,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    plan: MergePlan,
    about: Mapping[str, str],
    rows: RowsRules = RowsRules(),
) -> Settled:
    """The Delta tables both sides of a merge wrote (found among the tree merge's conflicts, so
    a merge with no table costs nothing here): each one's source versions replayed after the
    destination's, or its conflicts. ``plan`` is changed for the tables that merge: the source's
    log files leave its updates, the replayed versions join them, and the log's conflicts go.
    ``about`` names the source in each replayed version's commit info. Where the only
    conflicts are files both sides rewrote and a ``rows`` strategy covers the table, the
    source's changes arrive as one version merged by rows instead (:func:`_rows_merge`)."""
    out = Settled()
    roots = sorted({r for p in plan.conflicts if (r := deltalog.table_root(p)) is not None})
    for root in roots:
        out.roots.add(root)
        found = _merge_table(lake, (base, source, dest), root, about, out, rows)
        if found:
            out.conflicts[root] = found
    merged = [r for r in roots if r not in out.conflicts]
    if not merged:
        return out
    logs = tuple(deltalog.log_prefix(r) for r in merged)
    within = tuple(merged)
    plan.conflicts = [
        p
        for p in plan.conflicts
        if not p.startswith(logs) and not (p.startswith(within) and _same_content(lake, source, dest, p))
    ]
    plan.updates = sorted(
        [u for u in plan.updates if not u[0].startswith(logs)] + [u for r in merged for u in out.updates[r]],
        key=lambda u: u[0],
    )
    lake.blocks.sync()  # the replayed versions' blocks, before the commit names them
    return out


def _same_content(lake: Lake, source: MetaRangeId, dest: MetaRangeId, path: str) -> bool:
    """Whether both sides hold the same bytes at ``path`` (a table's files uploaded again as they
    were: small objects packed anew get new locators)."""
    a, b = lake.trees.lookup(source, path), lake.trees.lookup(dest, path)
    return a is not None and b is not None and (a[0], a[1]) == (b[0], b[1])


def _new_versions(lake: Lake, mids: tuple[MetaRangeId, MetaRangeId], root: str, common: int) -> list[Version]:
    """The versions of a side's log since ``base`` (``mids``: base, side) that the base's log
    does not hold: added or written anew under a number the base has (a merge renumbers the
    versions it replays), but for the base's own versions a merge replayed on this side."""
    base, side = mids
    changed = []
    for change in lake.trees.diff(base, side, deltalog.log_prefix(root)):
        number = deltalog.version_of(change.path)
        if number is None or change.new is None:
            continue
        if change.old is not None and change.old[1] == change.new[1]:
            continue  # a version uploaded again as it was
        changed.append((number, change.path, change.new))
    datas = _read_together(lake, [row for _, _, row in changed])
    versions = [
        Version.parse(number, data, path) for (number, path, _), data in zip(changed, datas, strict=True)
    ]
    replays = _replays(lake, base, root, versions, common)
    return [version for version in versions if version.number not in replays]


def _read_together(lake: Lake, rows: Sequence[Row]) -> list[bytes]:
    """The bytes of small objects of a log, read together (packed: a block at a time); imported
    ones each from its source."""
    from lakectl.core.blocks.data import read_small_objects

    entries = [Entry.from_row(row) for row in rows]
    if any(e.external is not None for e in entries):
        return [read(lake, row) for row in rows]
    return read_small_objects(lake.blocks, [e.locators for e in entries])


def _replays(lake: Lake, base: MetaRangeId, root: str, versions: Sequence[Version], common: int) -> set[int]:
    """The numbers of the ``versions`` that are a merge's replays of one of the base's versions
    (the same actions, its commit info aside); the base's versions are read together."""
    marked: list[tuple[Version, int, Row]] = []
    for version in versions:
        if not version.mentions(deltalog.REPLAY):
            continue
        mark = version.info.get(deltalog.REPLAY)
        number = mark.get("version") if isinstance(mark, dict) else None
        if not isinstance(number, int) or number > common:
            continue
        row = lake.trees.lookup(base, deltalog.version_path(root, number))
        if row is not None:
            marked.append((version, number, row))
    originals = _read_together(lake, [row for _, _, row in marked])
    return {
        version.number
        for (version, number, _), data in zip(marked, originals, strict=True)
        if _without_info(Version.parse(number, data, deltalog.version_path(root, number)))
        == _without_info(version)
    }


def _without_info(version: Version) -> list[dict[str, Any]]:
    return [a for a in version.actions if "commitInfo" not in a]


def _merge_table(
    lake: Lake,
    mids: tuple[MetaRangeId, MetaRangeId, MetaRangeId],
    root: str,
    about: Mapping[str, str],
    out: Settled,
    rows: RowsRules,
) -> list[dict[str, Any]]:
    """One table both sides wrote: the source's versions the destination has not seen, checked
    against the destination's the source has not seen, then replayed after the destination's
    last version (or merged by rows); the conflicts, or [] with ``out`` told what to write."""
    base, source, dest = mids
    common = head_version(of_tree(lake, base), root)
    head = head_version(of_tree(lake, dest), root)
    if common is None or head is None:
        return [{"type": "created-on-both"}]
    mine = _new_versions(lake, (base, source), root, common)
    theirs = _new_versions(lake, (base, dest), root, common)
    out.updates[root] = []
    if not mine:
        return []  # the destination holds every version the source wrote
    ours, other = Line(mine), Line(theirs)
    base_meta = None
    if ours.last("metaData") is not None or other.last("metaData") is not None:
        with open_table(of_tree(lake, base), root, common) as table:
            base_meta = metadata_action(table)
    found = [c for c in deltalog.conflicts(ours, other, base_meta) if c["type"] != "removed-on-both"]
    files = _missing(lake, dest, root, ours, other)
    rule = rows.rule_for(root)
    if files and not found and rule is not None:
        conflicted = {root + c["path"] for c in files}
        sides = _Sides(mids, (ours, other), common, head)
        return _rows_merge(lake, root, sides, about, (rule, rows.runner), out, conflicted)
    if found or files:
        return files + found
    last = other.versions[-1] if other.versions else None
    written = deltalog.replay(mine, head, deltalog.in_commit_timestamp(last), about)
    logs = [(deltalog.version_path(root, n), data) for n, data in written]
    logs += _checkpoint(of_tree(lake, dest), root, head, written, (ours, other))
    out.updates[root] = _log_objects(lake, logs)
    out.replayed.append((root, mine[0].number, mine[-1].number, head + 1, head + len(mine)))
    return []


def _checkpoint(
    dest: Tree, root: str, head: int, written: list[tuple[int, bytes]], lines: tuple[Line, Line]
) -> list[tuple[str, bytes]]:
    """A checkpoint of the merged table at its new last version when its log's tail (the
    versions since its last checkpoint) would pass twice the table's checkpoint interval
    (``delta.checkpointInterval``, 100 by default, as ``deltalake``): a reader then never reads
    more than that, and a merge that leaves a shorter tail leaves the next checkpoint to the
    table's next writer. Written by ``deltalake`` from the destination's last checkpoint on, and
    the replayed versions; what it costs is ``deltalake``'s (benchmarks/bench_delta_merge.py)."""
    since = last_checkpoint(dest, root)
    tail = head + len(written) - (since if since is not None else -1)
    if tail <= 2 * _interval(dest, root, since, lines):
        return []
    from deltalake import DeltaTable

    with log_copy(dest, root, head) as (_, tmp):
        log = tmp / "_delta_log"
        for number, data in written:
            (log / f"{number:020d}.json").write_bytes(data)
        table = DeltaTable(str(tmp))
        table.create_checkpoint()
        made = [f for f in log.iterdir() if f.name.startswith(f"{table.version():020d}.checkpoint.")]
        return [
            (f"{deltalog.log_prefix(root)}{f.name}", f.read_bytes())
            for f in [*made, log / deltalog.LAST_CHECKPOINT]
        ]


def _interval(dest: Tree, root: str, since: int | None, lines: tuple[Line, Line]) -> int:
    """The table's checkpoint interval: from the newest metadata the merge read (either side's
    versions since the common one), else as the table was made (its first version; where log
    clean-up removed that, its last checkpoint). An interval changed in between and not since
    the common version is missed: the checkpoint then comes a little early or late."""
    meta = lines[0].last("metaData") or lines[1].last("metaData")
    first = dest.lookup(deltalog.version_path(root, 0)) if meta is None else None
    if first is not None:  # the table's first version made it: a small JSON, no Parquet reader
        meta = Line([Version.parse(0, dest.read(first), deltalog.version_path(root, 0))]).last("metaData")
    elif meta is None and since is not None:  # cleaned up: the last checkpoint holds it
        meta = _checkpoint_metadata(dest, root, since)
    configured = (meta or {}).get("configuration") or {}
    try:
        return max(1, int(configured.get("delta.checkpointInterval") or DEFAULT_CHECKPOINT_INTERVAL))
    except ValueError:
        return DEFAULT_CHECKPOINT_INTERVAL


def _checkpoint_metadata(dest: Tree, root: str, version: int) -> dict[str, Any] | None:
    """The ``metaData`` action a classic checkpoint holds (its one row with one)."""
    import pyarrow.parquet as pq

    handle = dest.lookup(f"{deltalog.log_prefix(root)}{version:020d}.checkpoint.parquet")
    if handle is None:
        return None
    try:
        # ParquetFile, not read_table: that one imports pyarrow.dataset (0.4 s of a merge).
        column = pq.ParquetFile(io.BytesIO(dest.read(handle))).read(columns=["metaData"]).column("metaData")
    except (OSError, KeyError, ValueError):
        return None
    found = next((m for m in column.to_pylist() if m), None)
    if found is None:
        return None
    configuration = found.get("configuration")
    return {"configuration": dict(configuration) if configuration else {}}


@dataclass(frozen=True)
class _Sides:
    """A table both sides of a merge wrote: the trees, each side's versions since the common
    one, that version and the destination's last."""

    mids: tuple[MetaRangeId, MetaRangeId, MetaRangeId]
    lines: tuple[Line, Line]
    common: int
    head: int


def _source_changes(line: Line) -> tuple[dict[str, int], list[str]]:
    """What the source's versions did to files they did not add themselves (removed: by the
    first version that did), and the files they added still active at their end; as paths under
    the table's root (the log names files URL-encoded)."""
    removed: dict[str, int] = {}
    added: dict[str, None] = {}
    for v in line.versions:
        for path in map(unquote, v.removed):
            if path in added:
                del added[path]
            else:
                removed.setdefault(path, v.number)
        added.update((unquote(path), None) for path in v.added)
    return removed, list(added)


def _missing(lake: Lake, dest: MetaRangeId, root: str, ours: Line, other: Line) -> list[dict[str, Any]]:
    """The files the source's versions removed (rewrote, deleted from, compacted) that are not
    active at the destination's last version: the destination removed them too, or never had
    them (it took the source's earlier files merged by rows). Delta refuses such a writer."""
    removed, _ = _source_changes(ours)
    if not removed:
        return []  # appends alone read no file: no snapshot needed
    found = snapshot(of_tree(lake, dest), root)
    active = set(found.files) if found is not None else set()
    theirs = {unquote(p): n for p, n in other.removed().items()}
    out = []
    for path, number in sorted(removed.items()):
        if root + path in active and path not in theirs:
            continue  # still there as the source read it (a file keyed by its deletion vector too)
        if path in theirs:
            both = {"source_version": number, "dest_version": theirs[path]}
            out.append({"type": "removed-on-both", "path": path, **both})
        else:
            out.append({"type": "missing-in-dest", "path": path, "source_version": number})
    return out


def _rows_merge(
    lake: Lake,
    root: str,
    sides: _Sides,
    about: Mapping[str, str],
    how: tuple[tablemerge.RowRule, tablemerge.UnitRunner | None],
    out: Settled,
    conflicted: set[str],
) -> list[dict[str, Any]]:
    """The source's versions as one version after the destination's: each partition holding a
    file in conflict (``conflicted``, paths under the root) merged by rows as the ``rows``
    strategy merges a Parquet directory (:func:`lakectl.core.tablemerge.merge_unit`): the
    active files there at the common version, at the source's last and at the destination's
    last, their rows merged by key into one new file that replaces the destination's; in every
    other partition, the source's files taken and removed as its versions did. Row conflicts
    come back as data, nothing written."""
    import uuid

    from lakectl.core import tablemerge
    from lakectl.core.tables import parts

    for v in sides.lines[0].versions:
        if any(isinstance(a.get("deletionVector"), dict) for a in v.of("add")):
            raise InvalidArgument(f"version {v.number} marks rows with deletion vectors: not merged by rows")
    removed, added = _source_changes(sides.lines[0])
    merged = {parts.partition_of(root, p)[0] for p in conflicted}
    at = (sides.common, None, sides.head)
    snaps = [snapshot(of_tree(lake, mid), root, v) for mid, v in zip(sides.mids, at, strict=True)]
    rule, runner = how
    units = []
    taken = [p for p in added if parts.partition_of("", p)[0] not in merged]
    dropped = [p for p in removed if parts.partition_of("", p)[0] not in merged]
    for partition in sorted(merged):
        files = [
            sorted(
                p for p in (s.files if s is not None else {}) if parts.partition_of(root, p)[0] == partition
            )
            for s in snaps
        ]
        for snap, paths in zip(snaps, files, strict=True):
            if snap is not None and any(p in snap.masks for p in paths):
                raise InvalidArgument(
                    f"partition {partition or '/'} of {root} has files with deletion vectors: "
                    "not merged by rows",
                    path=root,
                )
        b, sr, d = (
            tuple((p, _row(lake, mid, p)) for p in paths)
            for mid, paths in zip(sides.mids, files, strict=True)
        )
        output = f"{root}{partition + '/' if partition else ''}part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        key = rule.key_of(root)
        units.append(tablemerge.Unit(root + partition, key, rule.winner, (b, sr, d), output, True))
        dropped += [p[len(root) :] for p in files[2]]
    outcomes = (runner or tablemerge.run_in_process)(lake, units) if units else []
    conflicts = [
        {"type": "rows", "partition": u.directory, **o}
        for u, o in zip(units, outcomes, strict=True)
        if isinstance(o, dict)
    ]
    if conflicts:
        return conflicts
    lake.blocks.sync()  # the merged files' blocks, before the commit names them
    made = [
        (u.output, o)
        for u, o in zip(units, outcomes, strict=True)
        if o is not None and not isinstance(o, dict)
    ]
    version = _merged_version(lake, root, sides, about, (taken, dropped, made))
    number = sides.head + 1
    out.updates[root] = [*_log_objects(lake, [(deltalog.version_path(root, number), version)]), *made]
    versions = sides.lines[0].versions
    out.replayed.append((root, versions[0].number, versions[-1].number, number, number))
    return []


def _row(lake: Lake, mid: MetaRangeId, path: str) -> Row:
    row = lake.trees.lookup(mid, path)
    if row is None:
        raise InvalidArgument(f"the Delta table's log names {path}, which is not there", path=path)
    return row


def _merged_version(
    lake: Lake,
    root: str,
    sides: _Sides,
    about: Mapping[str, str],
    files: tuple[list[str], list[str], list[tuple[str, Row]]],
) -> bytes:
    """The version a rows merge writes: the source's files taken, the destination's files of
    the merged partitions and the source's removed ones removed, the merged files added, the
    source's last metadata, protocol, transactions and domains, and a commit info that names
    the source's versions and operations."""
    from lakectl.core.tables import parts

    taken, dropped, made = files
    mine = sides.lines[0]
    stamp = now() * 1000
    source_adds = {unquote(str(a.get("path"))): a for v in mine.versions for a in v.of("add")}
    actions: list[dict[str, Any]] = [
        {
            "commitInfo": {
                "timestamp": stamp,
                "operation": "MERGE",
                "operationParameters": {"predicate": "lakectl rows merge", "source": about.get("source", "")},
                "readVersion": sides.head,
                "isBlindAppend": False,
                deltalog.REPLAY: {
                    **about,
                    "versions": [v.number for v in mine.versions],
                    "operations": [v.operation for v in mine.versions],
                },
            }
        }
    ]
    for kind in ("protocol", "metaData"):
        last = mine.last(kind)
        if last is not None:
            actions.append({kind: last})
    for kind, key in (("txn", "appId"), ("domainMetadata", "domain")):
        actions += [{kind: a} for a in mine.keyed(kind, key).values()]
    actions += [{"add": source_adds[p]} for p in taken]
    for path in dropped:
        values = dict(parts.partition_of("", path)[1])
        removal = {"path": quote(path, safe="/="), "dataChange": True, "deletionTimestamp": stamp}
        removal["partitionValues"] = values
        actions.append({"remove": {**removal, "extendedFileMetadata": False}})
    for path, row in made:
        rel = path[len(root) :]
        values = dict(parts.partition_of("", rel)[1])
        actions.append(
            {
                "add": {
                    "path": quote(rel, safe="/="),
                    "partitionValues": values,
                    "size": row[0],
                    "modificationTime": stamp,
                    "dataChange": True,
                }
            }
        )
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n").encode()


def _log_objects(lake: Lake, files: Sequence[tuple[str, bytes]]) -> list[Update]:
    """New objects of the log (versions, a checkpoint and its pointer), packed into shared blocks
    as an upload of small files packs them (one block to make durable for a hundred versions,
    not a hundred); JSON but for a checkpoint's Parquet."""
    from lakectl.core.blocks.data import AdapterPacks, Packer
    from lakectl.core.writes import entry_for

    packer = Packer(AdapterPacks(lake.blocks))
    for i, (_, data) in enumerate(files):
        packer.add(str(i), data)
    written = packer.close()
    out: list[Update] = []
    for i, (path, _) in enumerate(files):
        w = written[str(i)]
        parquet = path.endswith(".parquet")
        content_type = "application/octet-stream" if parquet else CONTENT_TYPE
        out.append((path, entry_for(w.size, w.checksum, w.locators, content_type, None).to_row()))
    return out
