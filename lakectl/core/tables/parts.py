"""A table's objects between two refs, and reading the ones whose locators differ.

A table is one object (``.parquet``, ``.csv``, ``.tsv``, or any object named exactly) or a prefix
whose ``*.parquet`` objects are its parts; ``name=value`` directories under the prefix are hive
partitions, read as string columns. Which parts to read comes from the two-way diff of the refs
(:func:`lakectl.core.changes.diff_refs`), which never yields an object whose locators are the
same on both sides: those are counted from a listing of the right side, never opened. A part is
read through the block layer as a seekable file (:mod:`lakectl.core.objectfile`): its footer
first, then the column chunks asked for.
"""

from __future__ import annotations

import enum
import io
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from lakectl.core import changes, objectfile, porcelain, reads
from lakectl.core.graph.refs import parse_ref
from lakectl.core.lake import Lake
from lakectl.core.model import Entry, Row
from lakectl.core.uri import check_path
from lakectl.errors import InvalidArgument, LakectlError, NotFound

PART_COLUMN = "__lakectl_partition"
"""The column each row read carries its partition in (dropped from every row shown)."""
HIVE_DEFAULT = "__HIVE_DEFAULT_PARTITION__"
"""A hive partition directory's value for null."""

ARROW_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, OverflowError, IndexError)


class Format(enum.Enum):
    PARQUET = "Parquet"
    CSV = "CSV"
    TSV = "TSV"


def format_of(path: str, content_type: str = "") -> Format:
    lower = path.lower()
    if lower.endswith(".csv") or content_type == "text/csv":
        return Format.CSV
    if lower.endswith(".tsv") or content_type == "text/tab-separated-values":
        return Format.TSV
    return Format.PARQUET


@dataclass(frozen=True, slots=True)
class Part:
    """One object of a table, with its hive partition."""

    path: str
    partition: str
    """``name=value/...`` of its directories under the table's prefix ("" when none)."""
    columns: tuple[tuple[str, str | None], ...]
    """The partition's columns and their values (None: the hive default partition)."""
    format: Format


def partition_of(prefix: str, path: str) -> tuple[str, tuple[tuple[str, str | None], ...]]:
    segments = [s for s in path[len(prefix) :].split("/")[:-1] if "=" in s and not s.startswith("=")]
    columns = []
    for segment in segments:
        name, _, value = segment.partition("=")
        text = unquote(value)
        columns.append((unquote(name), None if text == HIVE_DEFAULT else text))
    return "/".join(segments), tuple(columns)


def is_part(prefix: str, path: str) -> bool:
    """A ``*.parquet`` object under ``prefix``, not in a hidden or bookkeeping directory
    (``_delta_log/``, ``.spark-staging/``) nor one itself (``_SUCCESS``, ``.part.crc``)."""
    if not path.startswith(prefix) or not path.lower().endswith(".parquet"):
        return False
    return not any(s.startswith(("_", ".")) and "=" not in s for s in path[len(prefix) :].split("/"))


@dataclass
class Located:
    """What to read of a table between two refs."""

    path: str
    """The table: an object path, or a prefix ending in "/"."""
    left: list[tuple[Part, Entry]] = field(default_factory=list)
    """The left versions of the parts changed or removed."""
    right: list[tuple[Part, Entry]] = field(default_factory=list)
    """The right versions of the parts changed or added."""
    unchanged: int = 0
    """Parts with the same locators on both sides (never read)."""
    left_exists: bool = False
    """Whether the table has any part on the left (read or not)."""
    right_exists: bool = False
    left_masks: dict[str, list[bool]] = field(default_factory=dict)
    """The rows a part keeps on the left (a Delta file's deletion vector), by path."""
    right_masks: dict[str, list[bool]] = field(default_factory=dict)


def _view(lake: Lake, repo: str, ref: str, prefix: str) -> Iterator[tuple[str, Row]]:
    """The objects under ``prefix`` at ``ref`` as :func:`changes.diff_refs` sees the ref: a
    branch is its last commit, ``main$`` its staging area."""
    rid = porcelain.get_repo(lake, repo).name
    res = porcelain.resolve(lake, repo, ref)
    if res.branch is not None and parse_ref(ref).staging:
        return lake.staging.iter_view(rid, res.branch, "", prefix)
    return lake.trees.iter(res.commit.meta_range_id, "", prefix)


def _exists(lake: Lake, repo: str, ref: str, path: str) -> bool:
    rid = porcelain.get_repo(lake, repo).name
    res = porcelain.resolve(lake, repo, ref)
    if res.branch is not None and parse_ref(ref).staging:
        return lake.staging.lookup(rid, res.branch, path) is not None
    return lake.trees.lookup(res.commit.meta_range_id, path) is not None


def locate(lake: Lake, repo: str, left: str, right: str, path: str) -> Located:
    """The table at ``path`` and its parts that differ between ``left`` and ``right``; raise
    ``NotFound`` when neither side has a table there."""
    path = check_path(path, allow_empty=True)
    single = path.lower().endswith((".parquet", ".csv", ".tsv"))
    if path and not path.endswith("/") and not single:
        single = _exists(lake, repo, left, path) or _exists(lake, repo, right, path)
    if not single and path and not path.endswith("/"):
        path += "/"
    located = Located(path)
    changed: set[str] = set()
    for change in changes.diff_refs(lake, repo, left, right, two_way=True, prefix=path):
        if (single and change.path != path) or (not single and not is_part(path, change.path)):
            continue
        changed.add(change.path)
        part = _part(path, change.path, single, change.new or change.old)
        if change.old is not None:
            located.left.append((part, Entry.from_row(change.old)))
            located.left_exists = True
        if change.new is not None:
            located.right.append((part, Entry.from_row(change.new)))
            located.right_exists = True
    for other, _ in _view(lake, repo, right, path):
        if (other == path if single else is_part(path, other)) and other not in changed:
            located.unchanged += 1
    if located.unchanged:
        located.left_exists = located.right_exists = True
    if not (located.left_exists or located.right_exists):
        what = f"object {path!r}" if single else f"Parquet object under {path!r}"
        raise NotFound(f"no table at {path!r} in {repo} at {left} or {right}: no {what}", path=path)
    return located


def _part(prefix: str, path: str, single: bool, row: Row | None) -> Part:
    content_type = row[4] if row is not None else ""
    if single:
        return Part(path, "", (), format_of(path, content_type))
    partition, columns = partition_of(prefix, path)
    return Part(path, partition, columns, Format.PARQUET)


@dataclass
class Opened:
    """One part opened for reading: its schema known (a Parquet footer, or a whole CSV)."""

    part: Part
    file: objectfile.ObjectFile
    schema: pa.Schema
    parquet: Any = None  # pq.ParquetFile
    csv: Any = None  # pa.Table
    rows: int = 0
    keep: Any = None
    """The rows kept (a boolean array: a Delta file's deletion vector), or None: all."""


@dataclass
class Side:
    """The parts of one side opened for reading."""

    ref: str
    opened: list[Opened] = field(default_factory=list)

    @property
    def files(self) -> int:
        return len(self.opened)

    def schema(self) -> pa.Schema | None:
        """The unified schema of the parts, partition columns last; None when no part."""
        if not self.opened:
            return None
        try:
            return pa.unify_schemas([o.schema for o in self.opened], promote_options="permissive")
        except ARROW_ERRORS as e:
            raise InvalidArgument(
                f"the objects of the table at {self.ref} disagree on their columns: {e}"
            ) from e

    def rows(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for o in self.opened:
            counts[o.part.partition] += o.rows
        return counts

    def read(self, columns: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        """The rows of every part (only ``columns`` when given), in ``schema``'s column types,
        with :data:`PART_COLUMN`."""
        wanted = [f for f in schema if columns is None or f.name in columns]
        target = pa.schema([*wanted, pa.field(PART_COLUMN, pa.string())])
        tables = [read_columns(o, [f.name for f in wanted]) for o in self.opened]
        if not tables:
            return target.empty_table()
        try:
            table = pa.concat_tables(tables, promote_options="permissive")
            return table.select(target.names).cast(target)
        except ARROW_ERRORS as e:
            raise InvalidArgument(
                f"the objects of the table at {self.ref} cannot be read as one table: {e}"
            ) from e

    def close(self) -> None:
        for o in self.opened:
            o.file.close()


def open_side(
    lake: Lake,
    repo: str,
    ref: str,
    parts: Sequence[tuple[Part, Entry]],
    masks: Mapping[str, Sequence[bool]] | None = None,
) -> Side:
    """Open each part and read its schema; the reads are announced to the journal as reads of
    the objects at ``ref``. ``masks``: the rows a part keeps, by its path (a Delta file's
    deletion vector): the others are not read."""
    side = Side(ref)
    if not parts:
        return side
    rid = porcelain.get_repo(lake, repo).name
    res = porcelain.resolve(lake, repo, ref)
    branch = res.branch.name if res.branch is not None else ""
    staged = res.branch is not None and parse_ref(ref).staging
    try:
        for part, entry in parts:
            found = reads.ObjectRead(rid, ref, part.path, entry, res.commit.id, branch, staged=staged)
            f = objectfile.open_read(lake, found)
            try:
                side.opened.append(_kept(_open(part, f), (masks or {}).get(part.path)))
            except BaseException:
                f.close()
                raise
    except BaseException:
        side.close()
        raise
    return side


def _kept(opened: Opened, mask: Sequence[bool] | None) -> Opened:
    if mask is None:
        return opened
    if len(mask) != opened.rows:
        raise InvalidArgument(
            f"the deletion vector of {opened.part.path} covers {len(mask)} rows; the file has {opened.rows}",
            path=opened.part.path,
        )
    opened.keep = pa.array(mask, pa.bool_())
    opened.rows = sum(1 for kept in mask if kept)
    return opened


def _open(part: Part, f: objectfile.ObjectFile) -> Opened:
    try:
        if part.format is Format.PARQUET:
            f.prefetch(0, f.size - 1)  # the first row group starts at byte 4; the footer ends the file
            parquet = pq.ParquetFile(f)
            opened = Opened(part, f, parquet.schema_arrow, parquet=parquet, rows=parquet.metadata.num_rows)
        else:
            delimiter = "\t" if part.format is Format.TSV else ","
            data = f.readall()
            table = pacsv.read_csv(io.BytesIO(data), parse_options=pacsv.ParseOptions(delimiter=delimiter))
            opened = Opened(part, f, table.schema, csv=table, rows=table.num_rows)
    except LakectlError:
        raise
    except ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot read {part.path} as {part.format.value}: {e}", path=part.path) from e
    opened.schema = _decoded(opened.schema)
    for name, _ in part.columns:
        if name not in opened.schema.names:
            opened.schema = opened.schema.append(pa.field(name, pa.string()))
    return opened


def read_columns(o: Opened, columns: Sequence[str]) -> pa.Table:
    try:
        if o.parquet is not None:
            present = set(o.parquet.schema_arrow.names)
            table = o.parquet.read(columns=[c for c in columns if c in present])
        else:
            table = o.csv.select([c for c in columns if c in o.csv.schema.names])
    except LakectlError:
        raise
    except ARROW_ERRORS as e:
        raise InvalidArgument(
            f"cannot read {o.part.path} as {o.part.format.value}: {e}", path=o.part.path
        ) from e
    table = table.cast(_decoded(table.schema)) if table.schema != _decoded(table.schema) else table
    if o.keep is not None:
        table = table.filter(o.keep)
    n = table.num_rows
    for name, value in o.part.columns:
        if name in columns and name not in table.column_names:
            table = table.append_column(name, pa.repeat(pa.scalar(value, pa.string()), n))
    return table.append_column(PART_COLUMN, pa.repeat(pa.scalar(o.part.partition, pa.string()), n))


_PLAIN = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def _decoded(schema: pa.Schema) -> pa.Schema:
    """``schema`` with dictionary-encoded columns (pandas categoricals) as their values' type,
    and view columns (``string_view``, as Delta's writers may store strings) as plain strings:
    the encoding is how an object stores a column, not what the column holds, and two objects'
    encodings differ."""
    if not any(pa.types.is_dictionary(f.type) or f.type in _PLAIN for f in schema):
        return schema
    return pa.schema([_plain(f) for f in schema], metadata=schema.metadata)


def _plain(field: pa.Field) -> pa.Field:
    kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    return field.with_type(_PLAIN.get(kind, kind))
