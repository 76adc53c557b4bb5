"""Structured Streaming into a branch, exactly once: each micro-batch is one commit.

``df.writeStream.format("lakefs").option("checkpointLocation", C).start("lakefs://r/BRANCH/path")``:
tasks write their rows as blocks, as a batch write does (:class:`~lakectl.spark.writing.LakeFSWriter`);
when Spark commits the micro-batch, the driver stages the files under ``path`` and commits them,
the commit's metadata naming the stream (``lakectl_stream_id``, from the checkpoint location: the
same query restarted is the same stream) and the batch (``lakectl_batch_id``).

Exactly once: Spark replays a micro-batch whose end it did not record in its checkpoint, for
instance after a driver that died between the commit and the checkpoint. Before committing, the
sink looks back along the branch's first parents for the stream's last commit: a batch it already
committed is not committed again. The files of a batch have names fixed by the stream, the batch
and the task, so a replay after a death between staging and committing stages the same names
again, and what an earlier attempt of the batch staged under other names is dropped first.
Finding the stream's last commit costs the commits the branch made since (its whole history for
a stream's first batch). A batch with no rows makes no commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakectl.client.protocol import Backend
from lakectl.errors import InvalidArgument
from lakectl.spark.source import LakeFSDataSource
from lakectl.spark.streamsource import LakeFSStreamReader
from lakectl.spark.writing import LakeFSWriter, Written

STREAM_ID = "lakectl_stream_id"
BATCH_ID = "lakectl_batch_id"


def stream_id(checkpoint: str) -> str:
    """The stream a checkpoint location stands for: a query restarted on it is the same stream."""
    return hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


class LakeFSStreamingSource(LakeFSDataSource):
    """The ``lakefs`` source with streaming reads and writes: what :func:`lakectl.spark.register`
    registers."""

    def streamReader(self, schema: StructType) -> LakeFSStreamReader:
        """``readStream.format("lakefs")``: each new commit of the branch that changes the path, in
        commit order (:mod:`lakectl.spark.streamsource`)."""
        return LakeFSStreamReader(self, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakeFSStreamWriter:
        """``writeStream.format("lakefs")``: one commit per micro-batch, exactly once;
        ``append`` output mode."""
        if overwrite:
            raise InvalidArgument("a lakefs stream appends: use outputMode('append')")
        return LakeFSStreamWriter(self, schema)


class LakeFSStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("lakefs")``: see the module docstring. Options as a batch write's,
    ``commit_message`` the message of every batch's commit (the batch id appended)."""

    def __init__(self, source: LakeFSDataSource, schema: StructType) -> None:
        checkpoint = source.options.get("checkpointLocation")
        if not checkpoint:
            raise InvalidArgument(
                "a lakefs stream needs .option('checkpointLocation', …): it names the stream, so a "
                "restarted query commits each batch once"
            )
        self.tasks = LakeFSWriter(source, schema, overwrite=False)
        self.source = source
        self.stream = stream_id(str(checkpoint))
        self.message = str(source.options.get("commit_message") or "streaming batch")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return self.tasks.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from lakectl.core.blocks.manifest import Segment, format_manifest
        from lakectl.spark.lake import segments_of

        written = [m for m in messages if isinstance(m, Written)]
        rows = sum(m.rows for m in written)
        if rows == 0:
            return
        mark = f"{self.stream}-{batchId:010d}"
        files = {
            name.replace(self.tasks.job, mark): [Segment(*s) for s in segments_of(locators)]
            for m in written
            for name, locators, _ in m.files
        }
        t = self.source.target
        backend = self.source.lake.backend()
        try:
            if last_batch(backend, t.repo, t.ref, self.stream) >= batchId:
                return  # committed before Spark could record it: a replay
            stale = [c.path for c in backend.diff_uncommitted(t.repo, t.ref, t.prefix) if mark in c.path]
            stale = [p for p in stale if p.removeprefix(t.prefix) not in files]
            if stale:
                backend.delete_objects(t.repo, t.ref, stale)
            backend.import_manifest(t.repo, t.ref, t.prefix, format_manifest(files), False)
            metadata = {STREAM_ID: self.stream, BATCH_ID: str(batchId), "spark.rows": str(rows)}
            metadata.update(self.source.recorded())
            prefixes = [t.prefix] if t.prefix else []
            made = backend.commit(
                t.repo, t.ref, f"{self.message} (batch {batchId})", metadata, prefixes=prefixes
            )
            self.source.announce(made)
        finally:
            backend.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was staged; the blocks tasks wrote are garbage for ``gc run``."""


def last_batch(backend: Backend, repo: str, branch: str, stream: str) -> int:
    """The id of the last batch ``stream`` committed on the branch (-1: none), found by walking
    the branch's first parents back to the stream's last commit."""
    for commit in backend.log(repo, branch, first_parent=True):
        if commit.metadata.get(STREAM_ID) == stream:
            return int(commit.metadata.get(BATCH_ID, "-1"))
    return -1
