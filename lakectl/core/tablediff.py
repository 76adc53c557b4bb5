"""Data-aware diff of tables between two refs: schema changes, row counts, and row changes by key
(or as a multiset of whole rows), per partition; only objects whose locators differ are read.

The design and its measurements: docs/decisions/0014-table-diff.md. The parts live in
:mod:`lakectl.core.tables`: which objects to read (``parts``), schema changes (``schema``), row
changes (``rows``) and the records returned (``records``, re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import pyarrow as pa

from lakectl.core.graph.commits import merge_base
from lakectl.core.graph.refs import parse_ref
from lakectl.core.lake import Lake
from lakectl.core.porcelain import get_repo, resolve
from lakectl.core.tables import declared, delta, parts
from lakectl.core.tables.records import (
    ColumnChange,
    ColumnChangeType,
    PartitionSummary,
    RowChange,
    RowChangeType,
    TableDiff,
)
from lakectl.core.tables.rows import Compared, compare_keyed, compare_multiset
from lakectl.core.tables.schema import compare_schemas
from lakectl.errors import InvalidArgument

__all__ = [
    "ColumnChange",
    "ColumnChangeType",
    "PartitionSummary",
    "RowChange",
    "RowChangeType",
    "TableDiff",
    "diff_table",
]

MAX_AMOUNT = 10_000
"""The most row changes one page holds."""


def _check(key: tuple[str, ...], amount: int) -> None:
    if amount < 0 or amount > MAX_AMOUNT:
        raise InvalidArgument(f"amount must be between 0 and {MAX_AMOUNT}, not {amount}")
    if any(not k for k in key):
        raise InvalidArgument("an empty key column name")
    if len(set(key)) != len(key):
        raise InvalidArgument(f"a key column is named twice: {', '.join(key)}")


def _unique_names(schema: pa.Schema, side: str) -> None:
    seen: set[str] = set()
    for name in schema.names:
        if name in seen:
            raise InvalidArgument(f"the table has two columns named {name!r} at {side}")
        seen.add(name)


class KeyedCompare(Protocol):
    """What compares the two sides' rows by key, given the objects to read, each side's base
    schema, the compared column pairs and the page wanted: in-process by default
    (:func:`~lakectl.core.tables.rows.compare_keyed`), or as a Spark job
    (:mod:`lakectl.sparkjobs.tablediff`)."""

    def __call__(
        self,
        located: parts.Located,
        sides: tuple[parts.Side, parts.Side],
        bases: tuple[pa.Schema, pa.Schema],
        pairs: Sequence[tuple[str, str]],
        key: tuple[str, ...],
        amount: int,
        after: str,
    ) -> Compared: ...


def _in_process(
    located: parts.Located,
    sides: tuple[parts.Side, parts.Side],
    bases: tuple[pa.Schema, pa.Schema],
    pairs: Sequence[tuple[str, str]],
    key: tuple[str, ...],
    amount: int,
    after: str,
) -> Compared:
    lside, rside = sides
    ltable, rtable = lside.read(None, bases[0]), rside.read(None, bases[1])  # whole rows are shown
    return compare_keyed(ltable, rtable, key, tuple(pairs), (lside.ref, rside.ref), amount, after)


class MultisetCompare(Protocol):
    """What compares the two sides' whole rows (on the columns of ``pairs``) as multisets, given
    the objects to read, each side's base schema and the page wanted: in-process by default
    (:func:`~lakectl.core.tables.rows.compare_multiset`), or as a Spark job
    (:mod:`lakectl.sparkjobs.tablediff`)."""

    def __call__(
        self,
        located: parts.Located,
        sides: tuple[parts.Side, parts.Side],
        bases: tuple[pa.Schema, pa.Schema],
        pairs: Sequence[tuple[str, str]],
        amount: int,
        after: str,
    ) -> Compared: ...


def _multiset_in_process(
    located: parts.Located,
    sides: tuple[parts.Side, parts.Side],
    bases: tuple[pa.Schema, pa.Schema],
    pairs: Sequence[tuple[str, str]],
    amount: int,
    after: str,
) -> Compared:
    lside, rside = sides  # only the columns on both sides take part
    ltable = lside.read([ln for ln, _ in pairs], bases[0])
    rtable = rside.read([rn for _, rn in pairs], bases[1])
    return compare_multiset(ltable, rtable, pairs, amount, after)


def _three_dot_left(lake: Lake, repo: str, left: str, right: str) -> str:
    """The left side of a three-dot diff: the merge base's commit (left itself when their
    histories never meet), named as the user named left when it is left's commit (errors then
    say ``main``, not a commit id); a staging area (``main$``) is never a merge base."""
    lc = resolve(lake, repo, left).commit
    base = merge_base(lake.refs, get_repo(lake, repo).name, lc, resolve(lake, repo, right).commit)
    if base is None or (base.id == lc.id and not parse_ref(left).staging):
        return left
    return base.id


def diff_table(
    lake: Lake,
    repo: str,
    left: str,
    right: str,
    path: str,
    key: Sequence[str] = (),
    amount: int = 100,
    after: str = "",
    keyed: KeyedCompare = _in_process,
    multiset: MultisetCompare = _multiset_in_process,
    two_way: bool = False,
    use_declared: bool = True,
) -> TableDiff:
    """The diff of the table at ``path`` from ``left`` to ``right``: three-dot by default, as
    :func:`lakectl.core.changes.diff_refs` diffs (from their merge base's tree to right's; left's
    own when their histories never meet), or with ``two_way`` left's tree against right's.
    With ``key``, rows are matched by it (unique on each side) and reported added, removed or
    changed; without, whole rows are compared as multisets. ``rows`` holds at
    most ``amount`` row changes after ``after`` (a ``next_offset``); every count covers the
    whole diff. Raise ``NotFound`` when neither side has a table at ``path``, and
    ``InvalidArgument`` for a key column missing on a side, a key that is not unique, or an
    object that is not readable as its format. ``keyed`` compares the rows of a keyed diff,
    ``multiset`` those of a diff without a key (another engine gives the same answer).
    Without ``key``, the key the repository declares for the table
    (:mod:`lakectl.core.tables.declared`) at ``right``, else at ``left``; ``use_declared=False``
    compares whole rows instead."""
    key = tuple(key)
    _check(key, amount)
    given = left
    if not two_way:
        left = _three_dot_left(lake, repo, left, right)
    found_key = key or (declared.declared_key(lake, repo, (given, right), path) if use_declared else ())
    root = _delta_root(lake, repo, (left, right), path)
    if root is not None:
        return _diff_delta(
            lake, repo, (given, left, right), root, found_key, amount, after, (keyed, multiset), key
        )
    located = parts.locate(lake, repo, left, right, path)
    lside = parts.open_side(lake, repo, left, located.left)
    try:
        rside = parts.open_side(lake, repo, right, located.right)
        try:
            found = _diff(located, lside, rside, found_key, amount, after, keyed, multiset)
            return replace(found, key_declared=bool(found_key) and not key)
        finally:
            rside.close()
    finally:
        lside.close()


def _delta_root(lake: Lake, repo: str, refs: tuple[str, str], path: str) -> str | None:
    """The prefix of the Delta table at ``path`` (a prefix, not one object) on either side."""
    if path.lower().endswith((".parquet", ".csv", ".tsv")):
        return None
    root = path.strip("/") + "/" if path.strip("/") else ""
    for ref in refs:
        if delta.is_table(delta.at_ref(lake, repo, ref), root):
            return root
    return None


def _diff_delta(
    lake: Lake,
    repo: str,
    refs: tuple[str, str, str],
    root: str,
    key: tuple[str, ...],
    amount: int,
    after: str,
    compare: tuple[KeyedCompare, MultisetCompare],
    given_key: tuple[str, ...],
) -> TableDiff:
    """The diff of a Delta table: the rows of the data files active on one side only (as
    :func:`diff_table` compares a table's parts), the schemas and properties of the two sides'
    last versions, and the versions each of the refs given (``refs``: left as given, the
    compared left, right) wrote since their merge base."""
    given, left, right = refs
    trees = (delta.at_ref(lake, repo, left), delta.at_ref(lake, repo, right))
    located, (lsnap, rsnap) = delta.locate(lake, trees, root)
    if (located.left_masks or located.right_masks) and compare[0] is not _in_process:
        raise InvalidArgument(
            f"the Delta table {root or '/'} has deletion vectors, which only the in-process diff "
            "reads: run it without --spark",
            path=root,
        )
    lside = parts.open_side(lake, repo, left, located.left, located.left_masks)
    try:
        rside = parts.open_side(lake, repo, right, located.right, located.right_masks)
        try:
            found = _diff(located, lside, rside, key, amount, after, *compare)
        finally:
            rside.close()
    finally:
        lside.close()
    empty = pa.schema([])
    lschema = lsnap.schema if lsnap is not None else empty
    rschema = rsnap.schema if rsnap is not None else empty
    base = delta.at_ref(lake, repo, _three_dot_left(lake, repo, given, right))
    since = delta.head_version(base, root)
    report = {
        "base_version": since,
        "left": delta.versions_after(delta.at_ref(lake, repo, given), root, since),
        "right": delta.versions_after(trees[1], root, since),
        "files_added": len(located.right),
        "files_removed": len(located.left),
        "properties": delta.properties_changed(
            lsnap.configuration if lsnap is not None else {}, rsnap.configuration if rsnap is not None else {}
        ),
    }
    schema = compare_schemas(lschema, rschema).changes
    return replace(found, schema=schema, delta=report, key_declared=bool(key) and not given_key)


def _diff(
    located: parts.Located,
    lside: parts.Side,
    rside: parts.Side,
    key: tuple[str, ...],
    amount: int,
    after: str,
    keyed: KeyedCompare = _in_process,
    multiset: MultisetCompare = _multiset_in_process,
) -> TableDiff:
    empty = pa.schema([])
    lread, rread = lside.schema(), rside.schema()
    for schema_read, side in ((lread, lside), (rread, rside)):
        if schema_read is not None:
            _unique_names(schema_read, side.ref)
    # A side with nothing read has no table there (no columns), or only parts equal to the
    # other side's by locator: its schema is then reported as the other side's, unread.
    lreport = lread if lread is not None else (rread if located.left_exists and rread is not None else empty)
    rreport = rread if rread is not None else (lread if located.right_exists and lread is not None else empty)
    schema = compare_schemas(lreport, rreport)
    if lread is not None and rread is not None:
        lbase, rbase, pairs = lread, rread, schema.pairs
    else:  # rows only added or only removed: the side with nothing read is empty, in the other's columns
        lbase = rbase = lread or rread or empty
        pairs = tuple((n, n) for n in lbase.names)
    compared_names = [rn for _, rn in pairs]
    for k in key if lread is not None or rread is not None else ():
        if k not in compared_names:
            ref = lside.ref if k in rbase.names else rside.ref
            raise InvalidArgument(f"key column {k!r} is not in the table {located.path} at {ref}", column=k)
    if lread is None and rread is None:
        compared = Compared()
    elif key:
        compared = keyed(located, (lside, rside), (lbase, rbase), pairs, key, amount, after)
    else:
        compared = multiset(located, (lside, rside), (lbase, rbase), pairs, amount, after)
    lrows, rrows = lside.rows(), rside.rows()
    summaries = tuple(
        PartitionSummary(
            partition,
            lrows.get(partition, 0),
            rrows.get(partition, 0),
            counts[RowChangeType.ADDED],
            counts[RowChangeType.REMOVED],
            counts[RowChangeType.CHANGED],
        )
        for partition, counts in sorted(compared.partitions.items())
        if sum(counts.values())
    )
    return TableDiff(
        path=located.path,
        key=key,
        schema=schema.changes,
        rows_left=sum(lrows.values()),
        rows_right=sum(rrows.values()),
        added=compared.added,
        removed=compared.removed,
        changed=compared.changed,
        changed_columns=compared.changed_columns,
        partitions=summaries,
        rows=compared.rows,
        next_offset=compared.next_offset,
        files_read=lside.files + rside.files,
        files_unchanged=located.unchanged,
    )
