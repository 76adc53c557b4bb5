"""Delta Lake tables on branches: a table's log read from a tree, its state at a version through
``deltalake``, and the versions and active files the table diff compares.

**Reading.** ``deltalake`` reads a log from a directory. :func:`open_table` writes the part of a
table's log a version needs into a temporary directory (the last checkpoint at or before it, and
the versions after), never the data files: those are read through the block layer by a pyarrow
filesystem over the same tree (:mod:`lakectl.core.tables.treefs`). The cost follows the versions
since the last checkpoint, not the table's history.

**Merging** two branches that both wrote a table: :mod:`lakectl.core.tables.deltamerge`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from lakectl.core import porcelain
from lakectl.core.graph.refs import parse_ref
from lakectl.core.lake import Lake
from lakectl.core.model import Entry, MetaRangeId, Row
from lakectl.core.tables import deltalog
from lakectl.core.tables.deltalog import Version
from lakectl.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from lakectl.core.tables import parts

CONTENT_TYPE = "application/json"
DEFAULT_CHECKPOINT_INTERVAL = 100
"""``delta.checkpointInterval`` where a table sets none (``deltalake``'s)."""


@dataclass(frozen=True)
class Tree:
    """Where a table is read: a commit's tree, a branch's staging area over its commit, or a
    ref seen through a Backend (the Spark source's driver). What ``lookup`` and ``iter`` give
    for a path is only handed back to ``read``."""

    lookup: Callable[[str], Any]
    """A path's handle, or None when there is no object there."""
    iter: Callable[[str, str], Iterator[tuple[str, Any]]]
    """(path, handle) under a prefix (the second argument), after a key no object is named
    (the first), in path order."""
    read: Callable[[Any], bytes]


def of_tree(lake: Lake, mid: MetaRangeId) -> Tree:
    return Tree(
        lambda p: lake.trees.lookup(mid, p),
        lambda s, p: lake.trees.iter(mid, s, p),
        lambda row: read(lake, row),
    )


def at_ref(lake: Lake, repo: str, ref: str) -> Tree:
    """The tree of ``ref`` as :func:`lakectl.core.changes.diff_refs` sees it: a branch is its last
    commit, ``main$`` its staging area over it."""
    rid = porcelain.get_repo(lake, repo).name
    res = porcelain.resolve(lake, repo, ref)
    if res.branch is not None and parse_ref(ref).staging:
        branch = res.branch
        return Tree(
            lambda p: lake.staging.lookup(rid, branch, p),
            lambda s, p: lake.staging.iter_view(rid, branch, s, p),
            lambda row: read(lake, row),
        )
    return of_tree(lake, res.commit.meta_range_id)


def read(lake: Lake, row: Row) -> bytes:
    return b"".join(porcelain.read_entry(lake, Entry.from_row(row)))


def is_table(tree: Tree, root: str) -> bool:
    """Whether ``root`` (a prefix ending in ``/``, or "") holds a Delta table: a log with a
    version or a checkpoint in it."""
    log = deltalog.log_prefix(root)
    for path, _ in islice(tree.iter(log, log), 4):
        if deltalog.version_of(path) is not None or deltalog.checkpoint_version(path) is not None:
            return True
    return False


def last_checkpoint(tree: Tree, root: str) -> int | None:
    row = tree.lookup(deltalog.log_prefix(root) + deltalog.LAST_CHECKPOINT)
    if row is None:
        return None
    try:
        found = json.loads(tree.read(row)).get("version")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, int) and found >= 0 else None


def head_version(tree: Tree, root: str) -> int | None:
    """The last version of the table at ``root`` of ``tree``, found from its last checkpoint on;
    None when the tree has no Delta table there."""
    if not is_table(tree, root):
        return None
    log = deltalog.log_prefix(root)
    start = last_checkpoint(tree, root)
    first = f"{log}{start:020d}" if start is not None else log
    numbers = (deltalog.version_of(p) for p, _ in tree.iter(first, log))
    return max((n for n in numbers if n is not None), default=start)


def log_files(tree: Tree, root: str, version: int | None) -> tuple[int, list[tuple[str, Any]]]:
    """The log files a reader of ``version`` (None: the last) needs, and that version: the
    newest checkpoint at or before it (found from ``last_checkpoint`` when it serves, else by
    listing the log) and the versions after it."""
    log = deltalog.log_prefix(root)
    start = last_checkpoint(tree, root)
    if start is not None and version is not None and start > version:
        start = None
    if start is None:  # no checkpoint named, or a newer one: the newest at or before the version
        points = [
            n
            for p, _ in tree.iter(log, log)
            if (n := deltalog.checkpoint_version(p)) is not None and (version is None or n <= version)
        ]
        start = max(points, default=None)
    first = f"{log}{start:020d}" if start is not None else log  # its checkpoint sorts before its JSON
    files: list[tuple[str, Any]] = []
    last = -1
    for path, row in tree.iter(first, log):
        number = deltalog.version_of(path)
        point = deltalog.checkpoint_version(path)
        if number is not None and (version is None or number <= version):
            files.append((path, row))
            last = max(last, number)
        elif point is not None and point == start:
            files.append((path, row))
            last = max(last, point)
        elif number is not None:
            break
    if last < 0 or (version is not None and last < version):
        where = f"version {version}" if version is not None else "a version"
        raise InvalidArgument(f"the Delta table {root or '/'} has no {where} in its log", path=root)
    return last, files


@contextmanager
def log_copy(tree: Tree, root: str, version: int | None = None) -> Iterator[tuple[int, Path]]:
    """``version`` of the table at ``root`` of ``tree`` (None: its last), and a temporary table
    directory whose ``_delta_log`` holds the log files that version needs: where ``deltalake``
    opens the table."""
    import tempfile

    last, files = log_files(tree, root, version)
    with tempfile.TemporaryDirectory(prefix="lakectl-delta-") as tmp:
        log = Path(tmp) / "_delta_log"
        log.mkdir()
        for path, row in files:
            (log / path.rpartition("/")[2]).write_bytes(tree.read(row))
        yield last, Path(tmp)


@contextmanager
def open_table(tree: Tree, root: str, version: int | None = None) -> Iterator[DeltaTable]:
    """The Delta table at ``root`` of ``tree`` at ``version`` (None: its last), opened by
    ``deltalake`` on a temporary copy of the log files that version needs."""
    from deltalake import DeltaTable

    with log_copy(tree, root, version) as (last, tmp):
        try:
            yield DeltaTable(str(tmp), version=last)
        except Exception as e:
            if isinstance(e, InvalidArgument) or not type(e).__module__.startswith("deltalake"):
                raise
            raise InvalidArgument(f"{root or '/'} is not a readable Delta table: {e}", path=root) from e


def metadata_action(table: DeltaTable) -> dict[str, Any]:
    """The table's metadata as its log's ``metaData`` action carries what a merge compares."""
    meta = table.metadata()
    return {
        "schemaString": table.schema().to_json(),
        "partitionColumns": list(meta.partition_columns),
        "configuration": dict(meta.configuration),
    }


# -- the table diff ---------------------------------------------------------------------------


@dataclass
class Snapshot:
    """A table's state at a version: its active data files (tree path -> size), its schema,
    properties and partition columns."""

    version: int
    files: dict[str, int]
    schema: pa.Schema
    configuration: dict[str, str]
    partition_columns: list[str]
    masks: dict[str, list[bool]] = field(default_factory=dict)
    """The rows each file with a deletion vector keeps (True), by its path."""


def snapshot(tree: Tree, root: str, version: int | None = None) -> Snapshot | None:
    """The table at ``root`` of ``tree`` at ``version`` (None: its last), or None when the tree
    has no Delta table there; with the rows each file's deletion vector keeps (``masks``)."""
    import pyarrow as pa

    if not is_table(tree, root):
        return None
    with open_table(tree, root, version) as table:
        actions = pa.table(table.get_add_actions(flatten=True))
        files = {
            root + unquote(str(p)): int(s)
            for p, s in zip(
                actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), strict=True
            )
        }
        meta = table.metadata()
        found = Snapshot(
            table.version(),
            files,
            pa.schema(table.schema().to_arrow()),
            dict(meta.configuration),
            list(meta.partition_columns),
            deletion_masks(tree, root, table),
        )
    return found


def deletion_masks(tree: Tree, root: str, table: DeltaTable) -> dict[str, list[bool]]:
    """Each active file's deletion vector as the rows it keeps (True: kept), by its path in the
    tree, as ``deltalake`` reads them: none unless the table's protocol has the feature. The
    vectors stored in files (``deletion_vector_*.bin``) are copied beside the log first."""
    from urllib.parse import urlparse

    import pyarrow as pa

    if "deletionVectors" not in (table.protocol().reader_features or []):
        return {}
    local = Path(unquote(urlparse(table.table_uri).path))
    for path, handle in tree.iter(root, root):
        name = path[len(root) :]
        if name.rpartition("/")[2].startswith("deletion_vector_") and "_delta_log/" not in name:
            (local / name).parent.mkdir(parents=True, exist_ok=True)
            (local / name).write_bytes(tree.read(handle))
    found = pa.table(table.deletion_vectors()).to_pylist()
    prefix = local.as_posix().rstrip("/") + "/"
    return {
        root + unquote(urlparse(r["filepath"]).path)[len(prefix) :]: list(r["selection_vector"])
        for r in found
    }


def versions_after(tree: Tree, root: str, after: int | None, limit: int = 1000) -> dict[str, Any]:
    """The versions of the table at ``root`` of ``tree`` after ``after`` (None: all of them),
    each as :meth:`~lakectl.core.tables.deltalog.Version.summary` shows it (the first ``limit``),
    their count and the last version."""
    log = deltalog.log_prefix(root)
    start = f"{log}{after + 1:020d}" if after is not None else log
    shown: list[dict[str, Any]] = []
    count, last = 0, after
    for path, row in tree.iter(start, log):
        number = deltalog.version_of(path)
        if number is None:
            continue
        count, last = count + 1, number
        if len(shown) < limit:
            shown.append(Version.parse(number, tree.read(row), path).summary())
    return {"version": last, "count": count, "versions": shown}


def properties_changed(left: Mapping[str, str], right: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {"key": k, "old": left.get(k), "new": right.get(k)}
        for k in sorted(set(left) | set(right))
        if left.get(k) != right.get(k)
    ]


def locate(
    lake: Lake, trees: tuple[Tree, Tree], root: str
) -> tuple[parts.Located, tuple[Snapshot | None, Snapshot | None]]:
    """The data files of the table at ``root`` that differ between the two trees' last
    versions (active on one side only: added, or removed, rewritten, compacted), as
    :func:`lakectl.core.tables.parts.locate` gives a table's parts, and each side's snapshot;
    ``NotFound`` when neither tree has the table."""
    from lakectl.core.tables import parts

    sides = (snapshot(trees[0], root), snapshot(trees[1], root))
    if sides[0] is None and sides[1] is None:
        raise NotFound(f"no Delta table at {root!r} on either side", path=root)
    located = parts.Located(root, left_exists=sides[0] is not None, right_exists=sides[1] is not None)
    lfiles = sides[0].files if sides[0] is not None else {}
    rfiles = sides[1].files if sides[1] is not None else {}
    located.left_masks = sides[0].masks if sides[0] is not None else {}
    located.right_masks = sides[1].masks if sides[1] is not None else {}
    # A file in both whose deletion vector changed (rows deleted from it) differs too.
    marked = {p for p in set(lfiles) & set(rfiles) if located.left_masks.get(p) != located.right_masks.get(p)}
    for files, other, tree, into in (
        (lfiles, rfiles, trees[0], located.left),
        (rfiles, lfiles, trees[1], located.right),
    ):
        for path in sorted((set(files) - set(other)) | marked):
            row = tree.lookup(path)
            if row is None:
                raise InvalidArgument(
                    f"the Delta table {root or '/'} names {path}, which is not there", path=path
                )
            partition, columns = parts.partition_of(root, path)
            into.append((parts.Part(path, partition, columns, parts.Format.PARQUET), Entry.from_row(row)))
    located.unchanged = len((set(lfiles) & set(rfiles)) - marked)
    return located, sides
