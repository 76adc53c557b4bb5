"""The ``lakefs`` PySpark data source: read any version of a lake, write a job's output onto a branch.

Reading ``lakefs://repo/ref/prefix``: the driver lists the objects under the prefix once (a Keep
manifest of the ref as it is at planning time: a consistent snapshot) and groups them into
partitions; each task reads its objects' blocks itself, by locator. Hive-style directories
(``day=2026-11-01/``) become partition columns.

With ``since`` (a change feed, lakectl's: :mod:`lakectl.core.feed`), the listing is what the
commits after ``since`` up to the ref changed under the prefix, from the range's diff: the rows
of objects added or changed as ``insert``, of objects removed (read as they were at ``since``)
as ``delete``, every row with ``_change_type``, ``_commit_id`` and ``_path``. An object the range
only appended to gives its appended bytes alone in the line formats (text, JSON Lines, CSV
without a header); Parquet and CSV with a header read every changed object whole. With ``key``
as well, the feed is of rows, commit by commit (:func:`lakectl.core.feed.commit_feed`): one task
per commit reads the objects it changed, before and after, and matches their rows by the key
(:func:`lakectl.core.tables.rows.match_keyed`, the table diff's): ``insert``, ``delete``, and
``update_preimage`` with ``update_postimage`` for a row whose other columns changed, as Delta's
change data feed names them. The key must be unique among the rows of each side's changed
objects (rows of objects a commit did not touch did not change).

What is read is chosen by path: the prefix itself (``.../events/day=2026-11-01`` with
``basePath`` ``.../events`` keeps ``day`` as a column) and ``pathGlobFilter``; columns by a
user-given schema (``.schema("id long, name string")``: Parquet reads only those). Spark's filter
pushdown for Python sources is not used: Spark 4.3 keeps the reader a pushdown planned with and
uses it again for the next query of the same DataFrame, even one without filters, which would
then silently miss the files the filter skipped (docs/spark.md).

Writing (:mod:`lakectl.spark.writing`): each task writes its rows as one object; Spark's commit
of the job stages every file on the branch in one write, and may commit the job's prefix.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from lakectl.core.graph.inputs import Input
from lakectl.core.model import Commit, RepositoryId
from lakectl.errors import InvalidArgument, InvalidURI, NotFound
from lakectl.spark.lake import Connection, LakeFile, lake_files, segments_from, segments_of
from lakectl.spark.provenance import Recorder
from lakectl.spark.writing import LakeFSWriter

if TYPE_CHECKING:
    from lakectl.core.model import FeedChange

FORMATS = ("parquet", "csv", "json", "text", "delta")
MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""As Spark's ``spark.sql.files.maxPartitionBytes``: the most bytes of objects one task reads."""
OPEN_COST = 4 * 1024 * 1024
"""As ``spark.sql.files.openCostInBytes``: what opening one more object is worth, in bytes."""
BATCH_ROWS = 65_536
FEED_COLUMNS = ("_change_type", "_commit_id", "_path")
"""The string columns a change feed adds to every row: insert or delete, the commit, the path."""
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_INTEGER = re.compile(r"-?[0-9]{1,18}")


@dataclass(frozen=True)
class Target:
    """``lakefs://repo/ref/prefix`` split, the prefix as a directory (``""`` for the whole ref)."""

    repo: str
    ref: str
    prefix: str

    @staticmethod
    def parse(options: Any) -> Target:
        from lakectl.core.uri import check_path, parse_uri

        text = options.get("path")
        if not text:
            raise InvalidURI("no path: use .load('lakefs://<repository>/<ref>/<prefix>')")
        uri = parse_uri(text)
        if uri.ref is None:
            raise InvalidURI(f"invalid URI {text!r}: expected lakefs://<repository>/<ref>/<prefix>")
        prefix = check_path(uri.path.rstrip("/"), allow_empty=True)
        return Target(uri.repo, uri.ref, prefix + "/" if prefix else "")


class LakeFSDataSource(DataSource):
    """``spark.read.format("lakefs")`` / ``df.write.format("lakefs")``; see the module docstring.

    Options: ``format`` (parquet, csv, json, text, delta; default parquet: ``delta`` reads a Delta
    table's active files at the ref, ``versionAsOf`` an older version of it), ``header`` and ``sep`` (csv,
    as Spark: no header by default), ``pathGlobFilter`` (file names to read), ``basePath``
    (where partition directories start, at or above the loaded prefix), ``maxPartitionBytes``,
    ``commit_message`` (write: also commit), ``since`` (read: a change feed, the module
    docstring), ``key`` (with ``since``, or in a stream: a feed of rows matched by these
    comma-separated columns), ``readChangeFeed`` (the change feed's columns on every row: implied
    by ``since`` and ``key``; a batch read with it needs ``since``; a stream's choice,
    :mod:`lakectl.spark.streamsource`). ``home`` or ``endpoint`` + ``access_key_id`` +
    ``secret_access_key`` name another lake than the one :func:`lakectl.spark.register` captured.
    """

    connection: ClassVar[Connection | None] = None
    parallelism: ClassVar[int] = 2
    provenance: ClassVar[Recorder | None] = None
    """The application's provenance record (:mod:`lakectl.spark.provenance`)."""

    @classmethod
    def name(cls) -> str:
        return "lakefs"

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.target = Target.parse(options)
        self.format = str(options.get("format", "parquet")).lower()
        if self.format not in FORMATS:
            raise InvalidArgument(f"unknown format {self.format!r}: expected one of {', '.join(FORMATS)}")
        self.lake = _connection(options, type(self).connection)
        self.since = str(options.get("since") or "")
        self.key = tuple(k.strip() for k in str(options.get("key") or "").split(",") if k.strip())
        if set(self.key) & set(FEED_COLUMNS):
            raise InvalidArgument(f"a key column cannot be one of the feed's: {', '.join(FEED_COLUMNS)}")
        flag = str(options.get("readChangeFeed", "false")).lower() == "true"
        self.read_change_feed = flag or bool(self.key)

    def schema(self) -> StructType:
        listing = Listing.take(self)
        schema = listing.arrow_schema(self)
        if self.read_change_feed and not listing.labels:  # a stream's rows: the snapshot's, labelled
            schema = pa.schema([*schema, *(pa.field(k, pa.string()) for k in FEED_COLUMNS)])
        return _spark_schema(schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        if self.read_change_feed and not self.since:
            raise InvalidArgument(
                (
                    "key matches the rows of a change feed"
                    if self.key
                    else "readChangeFeed reads a range of commits"
                )
                + ": give since (the commit after which to read), or read a stream (readStream)"
            )
        self._note_read()
        return LakeFSReader(self, schema)

    def _note_read(self) -> None:
        """Add this read, its ref resolved to a commit, to the application's provenance record."""
        recorder = type(self).provenance
        if recorder is None:
            return
        t = self.target
        backend = self.lake.backend()
        try:
            commit = backend.get_commit(t.repo, t.ref)
        finally:
            backend.close()
        recorder.read(Input(RepositoryId(t.repo), commit.id, t.prefix.rstrip("/")))

    def announce(self, commit: Commit) -> None:
        """Send the OpenLineage event of a commit this source made, where events are configured."""
        recorder = type(self).provenance
        if recorder is not None and recorder.lineage:
            from lakectl.spark.lineage import announce

            announce(recorder.lineage, self.target.repo, self.target.prefix.rstrip("/"), commit)

    def recorded(self) -> dict[str, str]:
        """The provenance a commit this source makes records (none without a record)."""
        recorder = type(self).provenance
        return recorder.metadata() if recorder is not None else {}

    def writer(self, schema: StructType, overwrite: bool) -> LakeFSWriter:
        if self.format == "delta":
            raise InvalidArgument(
                "format delta reads Delta tables; write them with Delta's own connector "
                "(format('delta') on an s3a:// path of the S3 gateway)"
            )
        return LakeFSWriter(self, schema, overwrite)

    # -- format options --------------------------------------------------------------------

    def header(self) -> bool:
        return str(self.options.get("header", "false")).lower() == "true"

    def separator(self) -> str:
        return str(self.options.get("sep", self.options.get("delimiter", ",")))

    def reads_appends(self) -> bool:
        """Whether appended bytes alone parse as rows: lines without a header to repeat."""
        return self.format in ("text", "json") or (self.format == "csv" and not self.header())


def _connection(options: Any, captured: Connection | None) -> Connection:
    if options.get("home"):
        return Connection.resolve(home=options["home"])
    if options.get("endpoint"):
        return Connection.resolve(
            endpoint=options["endpoint"],
            access_key_id=options.get("access_key_id"),
            secret_access_key=options.get("secret_access_key"),
        )
    return captured if captured is not None else Connection.resolve()


# -- listing --------------------------------------------------------------------------------


@dataclass
class Listing:
    """The objects under the target at planning time, with their Hive partition columns and the
    change feed's columns (:data:`FEED_COLUMNS`, each file's :attr:`LakeFile.labels`)."""

    files: list[LakeFile]
    partition_columns: list[tuple[str, pa.DataType]] = field(default_factory=list)
    labels: tuple[str, ...] = ()
    schema: pa.Schema | None = None
    """A Delta table's schema, from its log (else each read takes the newest file's)."""

    @staticmethod
    def take(source: LakeFSDataSource) -> Listing:
        if source.format == "delta":
            return Listing.delta(source)
        if source.since:
            return Listing.changed(source)
        t = source.target
        backend = source.lake.backend()
        try:
            text = backend.export_manifest(t.repo, t.ref, t.prefix, signed=source.lake.remote)
            if not text and t.prefix:  # no directory of that name: perhaps one object
                parent, _, name = t.prefix.rstrip("/").rpartition("/")
                siblings = backend.export_manifest(t.repo, t.ref, parent, signed=source.lake.remote)
                one = [f for f in lake_files(siblings) if f.path == name]
                if one:
                    return Listing(one)
        finally:
            backend.close()
        lead = _below_base(source)
        files = _selected(source, lake_files(text, lambda path: _partition_of(lead + path)))
        if not files:
            raise NotFound(
                f"no objects to read under lakefs://{t.repo}/{t.ref}/{t.prefix} (a stream that starts "
                "before its data needs a schema: .schema(...))"
            )
        return Listing(files, _partition_columns(files))

    @staticmethod
    def changed(source: LakeFSDataSource, since: str = "", ref: str = "") -> Listing:
        """The change feed's objects from ``since`` to ``ref`` (by default the source's ``since``
        and ref; a stream's batch names both): the target's prefix as a directory, or as one
        object."""
        t = source.target
        backend = source.lake.backend()
        try:
            changes = backend.change_feed(
                t.repo,
                since or source.since,
                ref or t.ref,
                t.prefix[:-1],
                signed=source.lake.remote,
                by_commit=bool(source.key),
            )
        finally:
            backend.close()
        lead = _below_base(source)
        files = [_feed_file(source, c, lead) for c in changes if _names_target(c.path, t.prefix)]
        files = _selected(source, files)
        return Listing(files, _partition_columns(files) if files else [], FEED_COLUMNS)

    @staticmethod
    def delta(source: LakeFSDataSource) -> Listing:
        """A Delta table's active files at the ref (``versionAsOf``: at that version of the
        table, in the ref's log), from its log through ``deltalake`` on the driver
        (:func:`lakectl.core.tables.delta.open_table`); its schema and partition columns typed
        as the log says."""
        from urllib.parse import unquote

        from lakectl.core.tables.delta import deletion_masks, open_table

        t = source.target
        if source.since:
            raise InvalidArgument("a change feed (since) reads objects or rows, not a Delta table's versions")
        version = source.options.get("versionAsOf")
        if version is not None and not _INTEGER.fullmatch(str(version)):
            raise InvalidArgument(f"versionAsOf is a Delta table version (0, 1, ...), not {version!r}")
        backend = source.lake.backend()
        try:
            tree = backend_tree(backend, t.repo, t.ref)
            with open_table(tree, t.prefix, _int_or_none(version)) as table:
                if deletion_masks(tree, t.prefix, table):
                    raise InvalidArgument(
                        f"the Delta table at {t.prefix} has deletion vectors, which the lakefs source does "
                        "not apply: read it with Delta's connector, or diff it with lakectl diff --table"
                    )
                active = {
                    unquote(str(p))
                    for p in pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
                }
                schema = pa.schema(table.schema().to_arrow())
                partitioned = list(table.metadata().partition_columns)
            text = backend.export_manifest(t.repo, t.ref, t.prefix, signed=source.lake.remote)
        finally:
            backend.close()
        files = [f for f in lake_files(text, _partition_of) if f.path in active]
        missing = active - {f.path for f in files}
        if missing:
            raise NotFound(
                f"the Delta table at {t.prefix} names {sorted(missing)[0]}, which is not at {t.ref}"
            )
        columns = [(name, schema.field(name).type) for name in partitioned]
        return Listing(files, columns, schema=schema)

    def arrow_schema(self, source: LakeFSDataSource) -> pa.Schema:
        if self.schema is not None:
            return self.schema
        if not self.files:
            t = source.target
            raise NotFound(
                f"nothing changed under lakefs://{t.repo}/{t.ref}/{t.prefix} since {source.since!r}: "
                "give a schema (.schema(...)) to read an empty change feed"
            )
        schema_of, _ = FORMAT_READERS[source.format]
        blocks = source.lake.blocks()
        try:
            data = schema_of(source, self._newest().open(blocks))
        finally:
            blocks.close()
        names = set(data.names)
        extra = [pa.field(k, t) for k, t in self.partition_columns if k not in names]
        return pa.schema([*data, *extra, *(pa.field(k, pa.string()) for k in self.labels)])

    def _newest(self) -> LakeFile:
        """The file whose columns the rows take: of a feed by commit, its newest version written
        (the last insert), else the first file."""
        inserts = [f for f in self.files if ("_change_type", "insert") in f.labels]
        return inserts[-1] if inserts else self.files[0]


def _int_or_none(text: Any) -> int | None:
    return int(text) if text is not None else None


def backend_tree(backend: Any, repo: str, ref: str) -> Any:
    """``ref`` seen through a Backend as :class:`lakectl.core.tables.delta.Tree` reads a table:
    each object's handle is its path."""
    from lakectl.core.tables.delta import Tree

    def lookup(path: str) -> str | None:
        try:
            backend.stat(repo, ref, path)
        except NotFound:
            return None
        return path

    def listing(after: str, prefix: str) -> Iterator[tuple[str, str]]:
        return ((o.path, o.path) for o in backend.list_objects(repo, ref, prefix, after=after))

    return Tree(lookup, listing, lambda path: b"".join(backend.read(repo, ref, path)))


def _names_target(path: str, prefix: str) -> bool:
    """Whether ``path`` is under the directory ``prefix`` or is the object it names (not one of
    a sibling that starts alike: ``events2/`` for ``events``)."""
    return path.startswith(prefix) or path == prefix[:-1]


def _feed_file(source: LakeFSDataSource, change: FeedChange, lead: str) -> LakeFile:
    """What a change feed reads of one object: its bytes from the change's offset where appended
    bytes alone parse (:meth:`LakeFSDataSource.reads_appends`), else all of them; its path
    relative to the loaded prefix (its name when the prefix is the object)."""
    prefix = source.target.prefix
    name = change.path[len(prefix) :] if change.path.startswith(prefix) else change.path.rpartition("/")[2]
    segments = segments_of(change.entry.locators)
    if change.offset and source.reads_appends() and not source.key:
        segments = list(segments_from(segments, change.offset))
    labels = (("_change_type", change.kind.value), ("_commit_id", change.commit_id), ("_path", change.path))
    return LakeFile(name, tuple(segments), _partition_of(lead + name), labels)


def _selected(source: LakeFSDataSource, files: Sequence[LakeFile]) -> list[LakeFile]:
    """The files Spark would read of these: data files (:func:`_visible`) whose names match
    ``pathGlobFilter``."""
    pattern = source.options.get("pathGlobFilter")
    return [
        f
        for f in files
        if _visible(f.path) and (not pattern or fnmatch.fnmatchcase(f.path.rsplit("/", 1)[-1], pattern))
    ]


def _below_base(source: LakeFSDataSource) -> str:
    """The part of the loaded prefix below ``basePath`` (a path, or a lakefs:// URI of the same
    ref), whose ``key=value`` directories are partition columns too."""
    base = str(source.options.get("basePath") or "")
    if not base:
        return ""
    if base.startswith("lakefs://"):
        base = Target.parse({"path": base}).prefix
    base = base.strip("/") + "/" if base.strip("/") else ""
    prefix = source.target.prefix
    if not prefix.startswith(base):
        raise InvalidArgument(f"basePath {base!r} is not above the loaded prefix {prefix!r}")
    return prefix[len(base) :]


def _visible(path: str) -> bool:
    """Spark's rule: names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``) are not data."""
    return not any(part.startswith(("_", ".")) and "=" not in part for part in path.split("/"))


def _partition_of(path: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        tuple(part.split("=", 1))  # type: ignore[misc]
        for part in path.split("/")[:-1]
        if "=" in part and not part.startswith("=")
    )


def _partition_columns(files: Sequence[LakeFile]) -> list[tuple[str, pa.DataType]]:
    """Hive columns shared by every file (none when files disagree), typed as Spark infers
    them: integers when every value is one, else strings."""
    keys = [k for k, _ in files[0].partition]
    if any([k for k, _ in f.partition] != keys for f in files):
        return []
    columns = []
    for i, key in enumerate(keys):
        values = [f.partition[i][1] for f in files if f.partition[i][1] != _HIVE_NULL]
        integer = bool(values) and all(_INTEGER.fullmatch(v) for v in values)
        columns.append((key, pa.int64() if integer else pa.string()))
    return columns


def _partition_value(raw: str, kind: pa.DataType) -> Any:
    if raw == _HIVE_NULL:
        return None
    from urllib.parse import unquote

    text = unquote(raw)
    return int(text) if pa.types.is_integer(kind) else text


def _spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return from_arrow_schema(schema)
    except TypeError as e:
        raise InvalidArgument(f"Spark has no type for a column of these files: {e}") from e


# -- reading ----------------------------------------------------------------------------------


class FilePartition(InputPartition):
    """The objects one task reads."""

    def __init__(self, index: int, files: list[LakeFile]) -> None:
        super().__init__(index)
        self.files = files


class LakeFSReader(DataSourceReader):
    def __init__(self, source: LakeFSDataSource, schema: StructType, listing: Listing | None = None) -> None:
        """Reads ``listing`` (by default the source's: :meth:`Listing.take`)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        self.source = source
        self.schema = schema
        self.arrow = to_arrow_schema(schema, timezone="UTC")
        listing = listing if listing is not None else Listing.take(source)
        self.files = listing.files
        self.partition_types = dict(listing.partition_columns)
        self.constants = {*self.partition_types, *listing.labels}
        missing = [k for k in source.key if k not in self.arrow.names]
        if missing:
            raise InvalidArgument(
                f"key column {missing[0]!r} is not a column of the rows read: {self.arrow.names}"
            )

    def _constants(self, file: LakeFile) -> dict[str, Any]:
        """The columns of every row of ``file`` that are not in it: its partition's, its labels."""
        values = {k: _partition_value(v, self.partition_types[k]) for k, v in file.partition}
        return {**values, **dict(file.labels)}

    def partitions(self) -> list[InputPartition]:
        """Objects packed into tasks as Spark packs files: largest first, up to a split size
        chosen so every core gets work. A feed of rows: one task per commit."""
        if self.source.key:
            return by_commit(self.files)
        total = sum(f.size + OPEN_COST for f in self.files)
        limit = int(self.source.options.get("maxPartitionBytes", MAX_PARTITION_BYTES))
        split = min(limit, max(OPEN_COST, total // max(1, self.source.parallelism)))
        groups: list[list[LakeFile]] = []
        current: list[LakeFile] = []
        size = 0
        for f in sorted(self.files, key=lambda x: x.size, reverse=True):
            if current and size + f.size > split:
                groups.append(current)
                current, size = [], 0
            current.append(f)
            size += f.size + OPEN_COST
        if current:
            groups.append(current)
        # No objects (an empty change feed): one task that reads none, as Spark reads a source
        # that plans no partition with a partition of its own the reader would not know.
        return [FilePartition(i, g) for i, g in enumerate(groups)] or [FilePartition(0, [])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        if self.source.key:
            yield from self._row_changes(partition.files)
            return
        blocks = self.source.lake.blocks()
        try:
            for file in partition.files:
                yield from self._batches(file, blocks)
        finally:
            blocks.close()

    def _batches(self, file: LakeFile, blocks: Any) -> Iterator[pa.RecordBatch]:
        """The rows of one file in Spark's columns."""
        _, batches_of = FORMAT_READERS[self.source.format]
        wanted = [f.name for f in self.arrow if f.name not in self.constants]
        values = self._constants(file)
        for batch in batches_of(self.source, file.open(blocks), wanted, self.arrow):
            yield _conform(batch, self.arrow, values)

    def _row_changes(self, files: list[LakeFile]) -> Iterator[pa.RecordBatch]:
        """One commit's row changes: the rows of the objects it removed or replaced (its deletes)
        matched by key with those of the objects it wrote (its inserts), on every column but the
        feed's (module docstring)."""
        from lakectl.core.tables.rows import LEFT_INDEX, RIGHT_INDEX, match_keyed

        blocks = self.source.lake.blocks()
        try:
            sides = [
                pa.Table.from_batches(
                    [
                        b
                        for f in files
                        if ("_change_type", kind) in f.labels
                        for b in self._batches(f, blocks)
                    ],
                    schema=self.arrow,
                )
                for kind in ("delete", "insert")
            ]
        finally:
            blocks.close()
        if not files:
            return
        before, after = sides
        commit = dict(files[0].labels)["_commit_id"]
        pairs = [(n, n) for n in self.arrow.names if n not in FEED_COLUMNS]
        matched = match_keyed(before, after, self.source.key, pairs, (f"{commit}~1", commit))
        changed = matched.changed
        for table, index, kind in (
            (before, matched.removed[LEFT_INDEX], "delete"),
            (before, changed[LEFT_INDEX], "update_preimage"),
            (after, changed[RIGHT_INDEX], "update_postimage"),
            (after, matched.added[RIGHT_INDEX], "insert"),
        ):
            rows = table.take(index)
            if rows.num_rows:
                at = rows.schema.get_field_index("_change_type")
                rows = rows.set_column(at, "_change_type", pa.repeat(pa.scalar(kind), rows.num_rows))
                yield from rows.to_batches(max_chunksize=BATCH_ROWS)


def by_commit(files: Sequence[LakeFile]) -> list[InputPartition]:
    """A feed by commit's files, one partition per commit in the feed's (commit) order."""
    groups: dict[str, list[LakeFile]] = {}
    for f in files:
        groups.setdefault(dict(f.labels)["_commit_id"], []).append(f)
    return [FilePartition(i, g) for i, g in enumerate(groups.values())] or [FilePartition(0, [])]


def _conform(batch: pa.RecordBatch, target: pa.Schema, constants: dict[str, Any]) -> pa.RecordBatch:
    """The batch with exactly Spark's columns and types: partition columns filled in, columns a
    file lacks as nulls."""
    columns = []
    names = batch.schema.names
    for f in target:
        if f.name in constants and f.name not in names:
            value = constants[f.name]
            column = (
                pa.nulls(batch.num_rows, f.type)
                if value is None
                else pa.repeat(pa.scalar(value).cast(f.type), batch.num_rows)
            )
        elif f.name in names:
            column = batch.column(f.name)
            if column.type != f.type:
                column = column.cast(f.type, safe=False)
        else:
            column = pa.nulls(batch.num_rows, f.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=target)


# Each format: the schema of one object, and its record batches (``columns`` wanted, ``target``
# the Spark schema as Arrow); ``data`` is the opened object. _conform selects and casts after.


def _parquet_schema(source: LakeFSDataSource, data: Any) -> pa.Schema:
    import pyarrow.parquet as pq

    return pq.ParquetFile(data).schema_arrow


def _parquet_batches(
    source: LakeFSDataSource, data: Any, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(data)
    present = [c for c in columns if c in handle.schema_arrow.names]  # only these are read
    yield from handle.iter_batches(batch_size=BATCH_ROWS, columns=present)


def _csv_options(source: LakeFSDataSource, target: pa.Schema | None = None) -> tuple[Any, Any, Any]:
    """pyarrow's options for Spark's: without a header, columns are ``_c0, _c1, ...`` (pyarrow
    calls them ``f0, f1, ...``); with a target schema, every object is read with its types."""
    import pyarrow.csv as csv

    header = source.header()
    types = {}
    for f in target or ():
        name = f.name if header else "f" + f.name[2:] if f.name.startswith("_c") else f.name
        types[name] = f.type
    read = csv.ReadOptions(autogenerate_column_names=not header, block_size=1 << 22)
    return read, csv.ParseOptions(delimiter=source.separator()), csv.ConvertOptions(column_types=types)


def _csv_names(names: list[str], header: bool) -> list[str]:
    return list(names) if header else [f"_c{i}" for i in range(len(names))]


def _csv_schema(source: LakeFSDataSource, data: Any) -> pa.Schema:
    import pyarrow.csv as csv

    table = csv.read_csv(data, *_csv_options(source))
    return table.rename_columns(_csv_names(table.schema.names, source.header())).schema


def _csv_batches(
    source: LakeFSDataSource, data: Any, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as csv

    stream = csv.open_csv(data, *_csv_options(source, target))
    names = _csv_names(stream.schema.names, source.header())
    for batch in stream:
        yield pa.RecordBatch.from_arrays(batch.columns, names=names)


def _json_schema(source: LakeFSDataSource, data: Any) -> pa.Schema:
    import pyarrow.json as pj

    return pj.read_json(data).schema


def _json_batches(
    source: LakeFSDataSource, data: Any, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """JSON Lines (one object per line), as Spark's ``json`` source reads by default."""
    import pyarrow.json as pj

    wanted = pa.schema([target.field(c) for c in columns])
    options = pj.ParseOptions(explicit_schema=wanted, unexpected_field_behavior="ignore")
    yield from pj.read_json(data, parse_options=options).to_batches(max_chunksize=BATCH_ROWS)


def _text_schema(source: LakeFSDataSource, data: Any) -> pa.Schema:
    return pa.schema([pa.field("value", pa.string())])


def _text_batches(
    source: LakeFSDataSource, data: Any, columns: list[str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """One row per line, in a ``value`` string column (as Spark's ``text`` source)."""
    lines = data.read().decode("utf-8", errors="replace").splitlines()
    for start in range(0, len(lines), BATCH_ROWS):
        chunk = pa.array(lines[start : start + BATCH_ROWS], pa.string())
        yield pa.RecordBatch.from_arrays([chunk], names=["value"])


FORMAT_READERS: dict[str, tuple[Any, Any]] = {
    "parquet": (_parquet_schema, _parquet_batches),
    "csv": (_csv_schema, _csv_batches),
    "json": (_json_schema, _json_batches),
    "text": (_text_schema, _text_batches),
    "delta": (_parquet_schema, _parquet_batches),  # a Delta table's active files are Parquet
}
