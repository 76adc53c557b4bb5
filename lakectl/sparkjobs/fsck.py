"""fsck as a Spark job: the check of ``lakectl.core.upkeep.fsck``, its walk and md5 verification on executors.

The driver computes the roots (:func:`lakectl.core.upkeep.fsck.start`: every commit's metarange, the
blocks of staged entries and uploads in flight), then everything that grows with the lake is a
DataFrame, as in the Spark garbage collection (:mod:`lakectl.sparkjobs.gc`):

- the links: executors read the metaranges for their ranges, then the ranges' ``locators``
  column for their entries' blocks; each block keeps its least ``(parent, root)`` link, the rule
  of :func:`lakectl.core.upkeep.fsck.references` (a metarange or range that cannot be read names
  nothing, as in-process);
- the verification: the referenced blocks (lake-wide: full-outer-joined with the blocks the 4,096
  directories of the block directory hold, listed in parallel) partitioned by locator; each task
  reads its blocks through the adapter (:func:`lakectl.core.upkeep.fsck.verify`: md5 checked) and
  returns its damaged and orphaned blocks and its counts;
- the temporary files, listed directory by directory.

The driver attributes the findings and builds the report with :func:`lakectl.core.upkeep.fsck.conclude`,
as in-process: on the same lake, the same report. Blocks must be in a local block directory that
every executor sees at the same path (a volume set is checked in-process, copy by copy).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lakectl.core.blocks import Temporary
from lakectl.core.blocks.local import PREFIXES
from lakectl.core.graph.ranges import RangeStore
from lakectl.core.lake import Lake
from lakectl.core.model import MetaRangeId, RangeId
from lakectl.core.upkeep import fsck
from lakectl.errors import BlockNotFound, CorruptBlock
from lakectl.sparkjobs import gc as spark_gc
from lakectl.sparkjobs.session import executor_blocks, local_root, shared, translate

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_LINK_SCHEMA = "locator string, parent string, root string"
_RESULT_SCHEMA = "status string, locator string, parent string, root string, blocks long, bytes long"
_TEMPORARY_SCHEMA = "name string, size long, modified double"
_COUNTED, _ORPHANED = "counted", "orphaned"


def check(lake: Lake, repo: str | None = None, repair: bool = False, master: str = "local[2]") -> fsck.Report:
    """:func:`lakectl.core.upkeep.fsck.check` as a Spark job on ``master``: the same report. The session
    is shared as the garbage collection's (:func:`lakectl.sparkjobs.gc.run`). With one block
    directory there is no other copy to repair from: ``repair`` reports damage as unrepaired.

    ``InvalidArgument`` when the lake's blocks are not in a local block directory."""
    root = local_root(lake, "fsck --spark verifies blocks", "run fsck without --spark")
    begin = fsck.start(lake, repo)  # an unknown repository fails before Spark starts
    with shared(master) as spark:
        rows, temporaries = _verify(spark, root, begin, lake_wide=repo is None)
    findings: list[fsck.Finding] = []
    orphaned: list[str] = []
    blocks = size = 0
    for status, locator, parent, link_root, count, total in rows:
        if status == _COUNTED:
            blocks, size = blocks + count, size + total
        elif status == _ORPHANED:
            orphaned.append(locator)
        else:
            findings.append(fsck.Finding(locator, (parent, link_root), fsck.Problem(status)))
    return fsck.conclude(
        lake,
        begin,
        blocks,
        size,
        findings,
        orphaned if repo is None else None,
        temporaries if repo is None else None,
        repair,
    )


def _verify(
    spark: SparkSession, root: str, begin: fsck.Start, lake_wide: bool
) -> tuple[list[tuple[Any, ...]], list[Temporary]]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    tasks = max(1, spark.sparkContext.defaultParallelism * spark_gc.TASKS_PER_CORE)
    metaranges = sorted(begin.metaranges)
    page_links = _frame(spark, metaranges, tasks).mapInArrow(
        functools.partial(_pages_of_metaranges, root), _LINK_SCHEMA
    )
    pages = page_links.groupBy("locator").agg(F.min("parent").alias("root"))  # read once each
    range_links = pages.repartition(tasks, "locator").mapInArrow(
        functools.partial(_ranges_of_pages, root), _LINK_SCHEMA
    )
    ranges = range_links.groupBy("locator").agg(F.min("parent").alias("root"))
    entry_links = ranges.repartition(tasks, "locator").mapInArrow(
        functools.partial(_entries_of_ranges, root), _LINK_SCHEMA
    )
    roots = _frame(spark, sorted({*begin.direct, *metaranges}), tasks).select(
        "locator", F.lit("").alias("parent"), F.lit("").alias("root")
    )
    least = F.min(F.struct("parent", "root")).alias("link")
    referenced = (
        roots.unionByName(page_links)
        .unionByName(range_links)
        .unionByName(entry_links)
        .groupBy("locator")
        .agg(least)
        .select("locator", "link.parent", "link.root")
    )
    if lake_wide:
        stored = (
            spark.range(0, len(PREFIXES), 1, tasks)
            .mapInArrow(functools.partial(spark_gc._list_blocks, root), "locator string")
            .withColumn("stored", F.lit(True))
        )
        checked = referenced.join(stored, "locator", "full")
    else:
        checked = referenced.withColumn("stored", F.lit(None).cast("boolean"))
    results = (
        checked.select("locator", "parent", "root")
        .repartition(tasks, "locator")
        .mapInArrow(functools.partial(_verify_blocks, root), _RESULT_SCHEMA)
    )
    listed = spark.range(0, len(PREFIXES), 1, tasks).mapInArrow(
        functools.partial(_list_temporaries, root), _TEMPORARY_SCHEMA
    )
    spark.sparkContext.setJobDescription(f"lakectl fsck of {root}")
    try:
        rows = [tuple(row) for row in results.collect()]
        temporaries = [Temporary(r.name, r.size, r.modified) for r in listed.collect()] if lake_wide else []
    except (PySparkException, Py4JError) as exc:
        raise translate(exc, "the Spark fsck job") from exc
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return rows, temporaries


def _frame(spark: SparkSession, locators: list[str], tasks: int) -> DataFrame:
    return spark_gc._frame(spark, locators, tasks)


# -- on the executors --------------------------------------------------------------------------


def _links(rows: list[tuple[str, str, str]]) -> pa.RecordBatch:
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), pa.string()) for c in columns], names=["locator", "parent", "root"]
    )


def _pages_of_metaranges(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``(page, metarange, metarange)`` for each page of each readable metarange (a metarange
    of the flat format is its own page)."""
    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        for mid in batch.column(0).to_pylist():
            try:
                pages = store.pages(MetaRangeId(mid))
            except (BlockNotFound, CorruptBlock):
                continue  # found damaged by the verification
            yield _links([(page.id, mid, mid) for page in pages])


def _ranges_of_pages(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``(range, metarange, metarange)`` for each range of each readable page, the metarange
    the page's least link came from: ranges, like pages, are reported under their tree."""
    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        pids, roots = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for pid, link_root in zip(pids, roots, strict=True):
            try:
                infos = store.page_ranges(RangeId(pid))
            except (BlockNotFound, CorruptBlock):
                continue
            yield _links([(info.id, link_root, link_root) for info in infos])


def _entries_of_ranges(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``(block, range, the range's root)`` for each entry's block of each readable range."""
    from lakectl.core.upkeep.gc import bare_locators

    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        rids, roots = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for rid, link_root in zip(rids, roots, strict=True):
            try:
                column = store.read_locators(RangeId(rid))
            except (BlockNotFound, CorruptBlock):
                continue
            yield _links([(b, rid, link_root) for tokens in column for b in bare_locators(tokens)])


def _verify_blocks(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The verification of this task's blocks: a row per damaged or orphaned block, and one of
    counts (blocks verified, their bytes)."""
    import pyarrow as pa

    adapter = executor_blocks(root)
    rows: list[tuple[str, str, str | None, str | None, int, int]] = []
    blocks = size = 0
    for batch in batches:
        locators, parents, roots = (batch.column(i).to_pylist() for i in range(3))
        for locator, parent, link_root in zip(locators, parents, roots, strict=True):
            if parent is None:
                rows.append((_ORPHANED, locator, None, None, 0, 0))
                continue
            for finding in fsck.verify(adapter, locator, (parent, link_root)):
                rows.append((finding.problem.value, locator, parent, link_root, 0, 0))
            blocks += 1
            size += int(locator.rsplit("+", 1)[1])
    rows.append((_COUNTED, "", None, None, blocks, size))
    names = ["status", "locator", "parent", "root", "blocks", "bytes"]
    types = [pa.string()] * 4 + [pa.int64()] * 2
    columns = list(zip(*rows, strict=True))
    yield pa.RecordBatch.from_arrays(
        [pa.array(list(c), t) for c, t in zip(columns, types, strict=True)], names=names
    )


def _list_temporaries(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The temporary files of the prefix directories numbered in the batches."""
    import pyarrow as pa

    adapter = executor_blocks(root)
    found: list[Temporary] = []
    for batch in batches:
        for number in batch.column(0).to_pylist():
            found.extend(adapter.temporaries(PREFIXES[number]))
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([t.name for t in found], pa.string()),
            pa.array([t.size for t in found], pa.int64()),
            pa.array([t.modified for t in found], pa.float64()),
        ],
        names=["name", "size", "modified"],
    )
