"""Structured Streaming from a branch: each new commit that changes the loaded path is input, in commit order.

``spark.readStream.format("lakefs").load("lakefs://repo/BRANCH/path")``. An offset is a commit id,
``{"commit": id}``: the last commit of the branch already read. A micro-batch reads the commits
after its start up to its end: what they changed under the path, from the change feed of that
range (:mod:`lakectl.core.feed`), planned and read as a batch read with ``since`` is
(:class:`~lakectl.spark.source.LakeFSReader`). A query restarted on its checkpoint goes on from
the commit its checkpoint recorded: nothing is read twice or skipped.

Which commits: those along the branch's first parents after the start (as ``git log
--first-parent start..BRANCH`` lists them) that changed something under the path, each against
its first parent (``backend.log`` with ``since_commit`` and the path as its filter: one tree diff
under the path per new commit, never the history before the start). A micro-batch ends on such
a commit; with ``maxCommitsPerTrigger`` it holds at most that many. A branch moved so that the
last commit read is no longer its ancestor (deleted and created again at an older commit, its
refs restored) cannot go on: ``InvalidArgument``.

Rows: without ``readChangeFeed``, the rows of objects added or changed (of an object only
appended to, its appended lines alone in the line formats), removed objects skipped, as Spark's
file stream source reads only new files; with ``readChangeFeed``, every row labelled with the
change feed's columns (:data:`~lakectl.spark.source.FEED_COLUMNS`), deletes included.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakectl.client.protocol import Backend
from lakectl.core.graph.inputs import Input
from lakectl.core.model import CommitId, FeedKind, RepositoryId
from lakectl.errors import InvalidArgument
from lakectl.spark.lake import LakeFile
from lakectl.spark.source import FEED_COLUMNS, FilePartition, LakeFSDataSource, LakeFSReader, Listing

LATEST = "latest"
EARLIEST = "earliest"
"""``startingCommit``'s words: the branch's head when the query starts (the default), or its
first commit (a repository's first commit, "Repository created", holds nothing to read)."""


def offset(commit: str) -> dict[str, str]:
    """The offset of a stream that has read up to ``commit``."""
    return {"commit": commit}


def commit_of(position: dict[str, Any]) -> str:
    """The commit an offset names (``InvalidArgument`` for what no lakefs stream wrote)."""
    commit = position.get("commit") if isinstance(position, dict) else None
    if not isinstance(commit, str) or not commit:
        raise InvalidArgument(f"not an offset of a lakefs stream: {position!r}")
    return commit


@contextmanager
def opened(source: LakeFSDataSource) -> Iterator[Backend]:
    backend = source.lake.backend()
    try:
        yield backend
    finally:
        backend.close()


class LakeFSStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("lakefs")``: see the module docstring. Options: a batch read's (but
    ``since``), ``startingCommit`` (a commit id or ref, ``latest`` or ``earliest``),
    ``maxCommitsPerTrigger`` and ``readChangeFeed``.

    Spark keeps one instance for the query's planning (offsets and partitions), in a Python
    process of its own on the driver, and pickles another to the tasks, which only ``read``."""

    def __init__(self, source: LakeFSDataSource, schema: StructType) -> None:
        if source.since:
            raise InvalidArgument("a lakefs stream starts at startingCommit: since is for batch reads")
        self.source = source
        self.most = _max_commits(source.options.get("maxCommitsPerTrigger"))
        self.starting = str(source.options.get("startingCommit") or LATEST)
        self.feed = ObjectFeed(source, schema)
        self.target: str | None = None
        """Under ``Trigger.AvailableNow``: the branch's head when the query started, the last
        commit it reads."""

    def initialOffset(self) -> dict[str, str]:
        t = self.source.target
        with opened(self.source) as backend:
            head = self.target or _head(backend, t.repo, t.ref)
            if self.starting == LATEST:
                return offset(head)
            if self.starting == EARLIEST:
                root = head
                for commit in backend.log(t.repo, head, first_parent=True):
                    root = commit.id
                return offset(root)
            start = backend.get_commit(t.repo, self.starting).id
            if backend.find_merge_base(t.repo, start, head) != start:
                raise InvalidArgument(
                    f"startingCommit {self.starting!r} is not an ancestor of {t.ref!r}: a lakefs "
                    "stream reads the commits of the branch after it"
                )
        return offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark passes only its own read limits: the number of commits travels as "files".
        return ReadMaxFiles(self.most) if self.most else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        t = self.source.target
        with opened(self.source) as backend:
            self.target = _head(backend, t.repo, t.ref)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, str]:
        """The offset after the next commits to read, at most ``limit``'s number (Spark passes
        ``ReadAllAvailable`` for ``Trigger.Once``: no limit); ``start`` when there are none."""
        since = commit_of(start)
        most = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        t = self.source.target
        with opened(self.source) as backend:
            head = self.target or _head(backend, t.repo, t.ref)
            if head == since:
                return start
            new = _commits_after(backend, self.source, since, head)
        return offset(new[: most or len(new)][-1]) if new else start

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        since, until = commit_of(start), commit_of(end)
        if since == until:
            return []
        self._note_read(until)
        return self.feed.partitions(since, until)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.feed.read(partition)

    def _note_read(self, commit: str) -> None:
        """Add a batch's read, up to its last commit, to the application's provenance record."""
        recorder = type(self.source).provenance
        if recorder is not None:
            t = self.source.target
            recorder.read(Input(RepositoryId(t.repo), CommitId(commit), t.prefix.rstrip("/")))


def _max_commits(value: Any) -> int | None:
    if value is None or value == "":
        return None
    text = str(value)
    if not text.isdigit() or int(text) < 1:
        raise InvalidArgument(f"maxCommitsPerTrigger must be a positive integer, got {text!r}")
    return int(text)


def _head(backend: Backend, repo: str, branch: str) -> str:
    """The branch's head commit (``NotFound`` unless ``branch`` names a branch: a tag or a commit
    never gets new commits to stream)."""
    return backend.get_branch(repo, branch).commit_id


def _commits_after(backend: Backend, source: LakeFSDataSource, since: str, head: str) -> list[str]:
    """The commits along ``head``'s first parents after ``since`` that changed the path, oldest
    first; ``InvalidArgument`` unless ``since`` is an ancestor of ``head``."""
    t = source.target
    if backend.find_merge_base(t.repo, since, head) != since:
        raise InvalidArgument(
            f"the stream's last commit read, {since}, is not an ancestor of {t.ref!r} (at {head}): "
            "the branch was moved back or to another line; start the query again on a new "
            "checkpoint location (startingCommit says where to start)"
        )
    # The loaded path names a directory, or one object (an appended log, say).
    filters: dict[str, Any] = {"objects": [t.prefix[:-1]], "prefixes": [t.prefix]} if t.prefix else {}
    new: list[str] = [
        c.id for c in backend.log(t.repo, head, first_parent=True, since_commit=since, **filters)
    ]
    new.reverse()
    if new and backend.find_merge_base(t.repo, since, new[0]) != since:
        return _descendants(backend, t.repo, since, head, new)
    return new


def _descendants(backend: Backend, repo: str, since: str, head: str, touching: list[str]) -> list[str]:
    """``touching`` (oldest first) from the first commit ``since`` is an ancestor of, for a branch
    whose first-parent line reaches ``since`` only through a merge's other parent (created again
    at such a merge): the line's commits before that merge are not after ``since``, and the
    first batch ends on the merge, which brings in all they changed."""
    line = [c.id for c in backend.log(repo, head, first_parent=True, since_commit=since)][::-1]

    def descends(i: int) -> bool:
        return backend.find_merge_base(repo, since, line[i]) == since

    joined = bisect.bisect_left(range(len(line)), True, key=descends)
    later = set(line[joined + 1 :])
    return [line[joined], *(c for c in touching if c in later)]


# -- planning a batch -------------------------------------------------------------------------


class BatchPartition(FilePartition):
    """The objects one task reads of a micro-batch, with the batch's partition columns."""

    def __init__(self, index: int, files: list[LakeFile], columns: list[tuple[str, pa.DataType]]) -> None:
        super().__init__(index, files)
        self.columns = columns


class ObjectFeed:
    """A micro-batch object by object: what the commits of a range changed under the path, packed
    and read as a batch read packs and reads objects. The one place that turns a range into
    partitions and reads them: a row-level feed would be another such class."""

    def __init__(self, source: LakeFSDataSource, schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.source = source
        self.schema = schema
        self.types = {f.name: f.type for f in to_arrow_schema(schema, timezone="UTC")}

    def partitions(self, since: str, until: str) -> list[InputPartition]:
        listing = Listing.changed(self.source, since, until)
        files = listing.files
        if not self.source.read_change_feed:
            deleted = ("_change_type", FeedKind.DELETE.value)
            files = [f for f in files if deleted not in f.labels]
        # Partition columns as the query's schema types them (not as this batch's paths would
        # be inferred): every batch gives the same columns the same types.
        keys = dict.fromkeys(k for f in files for k, _ in f.partition if k in self.types)
        columns = [(k, self.types[k]) for k in keys]
        files = [
            dataclasses.replace(f, partition=tuple((k, v) for k, v in f.partition if k in keys))
            for f in files
        ]
        packed = LakeFSReader(self.source, self.schema, Listing(files, columns, FEED_COLUMNS)).partitions()
        groups = [p.files for p in packed if isinstance(p, FilePartition) and p.files]
        return [BatchPartition(i, group, columns) for i, group in enumerate(groups)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BatchPartition)
        reader = LakeFSReader(self.source, self.schema, Listing([], partition.columns, FEED_COLUMNS))
        return reader.read(partition)
