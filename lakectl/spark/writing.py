"""Writing a job's output onto a branch with the ``lakefs`` data source
(:mod:`lakectl.spark.source`): each task writes its rows as one object, cut into blocks and
stored as they fill, and reports the blocks to the driver; only when Spark commits the job does
the driver stage every file on the branch in one write (with ``overwrite``, replacing what was
under the prefix in that same write), and, with ``commit_message``, commit the job's prefix. A
failed or aborted job stages nothing, and its blocks are garbage for ``gc run``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakectl.errors import InvalidArgument
from lakectl.spark.lake import BlockWriter, segments_of

if TYPE_CHECKING:
    from lakectl.core.model import Commit
    from lakectl.spark.lake import Connection


class Source(Protocol):
    """What a write needs of its data source (:class:`lakectl.spark.source.LakeFSDataSource`,
    which imports this module)."""

    options: Any
    target: Any
    """``repo``, ``ref`` (the branch) and ``prefix``."""
    format: str
    lake: Connection

    def recorded(self) -> dict[str, str]: ...
    def announce(self, commit: Commit) -> None: ...
    def header(self) -> bool: ...
    def separator(self) -> str: ...


EXTENSIONS = {"parquet": ".parquet", "csv": ".csv", "json": ".json", "text": ".txt"}


@dataclass
class Written(WriterCommitMessage):
    """What one task wrote: ``(file name, block locators, size)`` per file, and its rows."""

    files: list[tuple[str, list[str], int]]
    rows: int


class LakeFSWriter(DataSourceArrowWriter):
    def __init__(self, source: Source, schema: StructType, overwrite: bool) -> None:
        self.source = source
        self.overwrite = overwrite
        self.job = uuid.uuid4().hex[:16]
        self.message = source.options.get("commit_message")
        t = source.target
        backend = source.lake.backend()
        try:
            backend.get_branch(t.repo, t.ref)  # refuse before any task runs: no repo, no branch
        finally:
            backend.close()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        from pyspark import TaskContext

        context = TaskContext.get()
        index = context.partitionId() if context is not None else 0
        fmt = self.source.format
        name = f"part-{index:05d}-{self.job}-c000{EXTENSIONS[fmt]}"
        blocks = self.source.lake.blocks()
        try:
            sink = BlockWriter(blocks)
            rows = FORMAT_WRITERS[fmt](self.source, iterator, sink)
            if rows == 0:
                return Written([], 0)
            locators = sink.finish()
            blocks.sync()  # durable before the driver links them
            return Written([(name, locators, sink.size)], rows)
        finally:
            blocks.close()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from lakectl.core.blocks.manifest import Segment, format_manifest

        files = {
            name: [Segment(*s) for s in segments_of(locators)]
            for m in messages
            if isinstance(m, Written)
            for name, locators, _ in m.files
        }
        t = self.source.target
        backend = self.source.lake.backend()
        try:
            backend.import_manifest(t.repo, t.ref, t.prefix, format_manifest(files), self.overwrite)
            if self.message and backend.diff_uncommitted(t.repo, t.ref, t.prefix):
                rows = sum(m.rows for m in messages if isinstance(m, Written))
                metadata = {"spark.rows": str(rows), "spark.files": str(len(files)), **self.source.recorded()}
                # The job's own prefix only: what others staged on the branch stays staged.
                prefixes = [t.prefix] if t.prefix else []
                made = backend.commit(t.repo, t.ref, self.message, metadata, prefixes=prefixes)
                self.source.announce(made)
        finally:
            backend.close()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing was staged: the branch is as it was. Blocks already written are unreferenced
        and young; ``gc run`` collects them after its grace period."""


def _write_arrow(open_writer: Any, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    """Write the batches with a pyarrow writer opened on the first one; return the rows."""
    writer = None
    rows = 0
    out = pa.PythonFile(sink, mode="w")
    for batch in batches:
        if writer is None:
            writer = open_writer(out, batch.schema)
        writer.write_batch(batch)
        rows += batch.num_rows
    if writer is not None:
        writer.close()
    return rows


def _write_lines(to_lines: Any, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    """Write each batch as text lines; return the rows."""
    rows = 0
    for batch in batches:
        lines = to_lines(batch)
        if lines:
            sink.write(("\n".join(lines) + "\n").encode())
        rows += batch.num_rows
    return rows


def _write_parquet(source: Source, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    import pyarrow.parquet as pq

    def open_writer(out: Any, schema: pa.Schema) -> Any:
        return pq.ParquetWriter(out, schema, compression="snappy")

    return _write_arrow(open_writer, batches, sink)


def _write_csv(source: Source, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    import pyarrow.csv as csv

    options = csv.WriteOptions(include_header=source.header(), delimiter=source.separator())

    def open_writer(out: Any, schema: pa.Schema) -> Any:
        return csv.CSVWriter(out, schema, write_options=options)

    return _write_arrow(open_writer, batches, sink)


def _write_json(source: Source, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    def lines(batch: pa.RecordBatch) -> list[str]:
        return [json.dumps(row, default=str, ensure_ascii=False) for row in batch.to_pylist()]

    return _write_lines(lines, batches, sink)


def _write_text(source: Source, batches: Iterator[pa.RecordBatch], sink: BlockWriter) -> int:
    def lines(batch: pa.RecordBatch) -> list[str]:
        if batch.num_columns != 1 or not pa.types.is_string(batch.schema.types[0]):
            raise InvalidArgument("the text format writes one string column")
        return ["" if v is None else v for v in batch.column(0).to_pylist()]

    return _write_lines(lines, batches, sink)


FORMAT_WRITERS = {"parquet": _write_parquet, "csv": _write_csv, "json": _write_json, "text": _write_text}
