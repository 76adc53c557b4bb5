"""Garbage collection as a Spark job: ``lakectl.core.upkeep.gc``'s mark and sweep, with the big sets in Spark.

The driver does what is small: it aborts stale multipart uploads and computes the roots of the
mark from the KV store (:func:`lakectl.core.upkeep.gc.roots`: the metaranges of the commits that stay,
and the blocks staged entries and uploads in flight reference). Everything that grows with the
lake is a DataFrame, built on the executors (docs/decisions/0008):

- the live set: executors read the metaranges for their range ids, then the ranges' ``locators``
  column for their entries' blocks, each block through the lake's adapter (its md5 is verified,
  as in-process), and the live set is their union, made distinct;
- the stored set: the 4,096 directories of the block directory, listed in parallel;
- the sweep: stored left-joined with live, partitioned by locator; each task applies the
  in-process rule (:class:`lakectl.core.upkeep.gc.Tally`) to its blocks, deleting in parallel, and
  returns its counts, which the driver adds up; the temporary files killed writers left are
  swept the same way, directory by directory.

So the report, and the blocks left, are those of :func:`lakectl.core.upkeep.gc.run` on the same lake.
Blocks must be in a local block directory (``LocalAdapter``, the embedded default) that every
executor sees at the same path, and executors need lakectl installed (with ``local[N]`` they
run this interpreter).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lakectl.core.blocks.local import PREFIXES
from lakectl.core.graph.ranges import RangeStore
from lakectl.core.lake import Lake
from lakectl.core.model import MetaRangeId, RangeId
from lakectl.core.upkeep import gc
from lakectl.errors import BlockNotFound
from lakectl.sparkjobs.session import executor_blocks, local_root, shared, translate

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

TASKS_PER_CORE = 4
"""Tasks per core of the cluster for listing and sweeping: small enough tasks to balance load."""

_LOCATOR_SCHEMA = "locator string"
_TALLY_FIELDS = tuple(f.name for f in dataclasses.fields(gc.Tally))
_TALLY_SCHEMA = ", ".join(f"{name} long" for name in _TALLY_FIELDS)


def run(
    lake: Lake,
    repo: str,
    dry_run: bool = False,
    grace_seconds: float = gc.GRACE_SECONDS,
    now: float | None = None,
    master: str = "local[2]",
    allow_preexisting_blocks: bool = False,
) -> gc.Report:
    """:func:`lakectl.core.upkeep.gc.run` with its mark and sweep as a Spark job on ``master``: the same
    checks, hooks and journal entry, the same uploads aborted, the same blocks deleted, the
    same report. An active Spark session (a notebook's, a test's) is used as it is; otherwise
    one is started on ``master`` once the checks passed, and stopped when the last collection
    using it ends (a server may run several at once).

    ``InvalidArgument`` when the lake's blocks are not in a local block directory;
    ``PreconditionFailed`` for a lake created over existing blocks, unless
    ``allow_preexisting_blocks`` (:func:`lakectl.core.upkeep.gc.check_preexisting`, as in-process).
    """
    root = local_root(lake, "gc run --spark collects blocks", "run gc without --spark")
    return gc.run(
        lake,
        repo,
        dry_run,
        grace_seconds,
        now,
        allow_preexisting_blocks,
        collector=functools.partial(_collect, master, root),
    )


def _collect(master: str, root: str, lake: Lake, start: gc.Roots, cutoff: float, dry_run: bool) -> gc.Tally:
    with shared(master) as spark:
        return _mark_and_sweep(spark, root, start, cutoff, dry_run)


def _mark_and_sweep(
    spark: SparkSession, root: str, start: gc.Roots, cutoff: float, dry_run: bool
) -> gc.Tally:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    tasks = max(1, spark.sparkContext.defaultParallelism * TASKS_PER_CORE)
    metaranges = sorted(start.metaranges)
    page_ids = (
        _frame(spark, metaranges, tasks)
        .mapInArrow(functools.partial(_pages_of_metaranges, root), _LOCATOR_SCHEMA)
        .repartition(tasks, "locator")
        .distinct()  # a page shared by many commits is read once
    )
    range_ids = (
        page_ids.mapInArrow(functools.partial(_ranges_of_pages, root), _LOCATOR_SCHEMA)
        .repartition(tasks, "locator")
        .distinct()  # and so is a range
    )
    entries = range_ids.mapInArrow(functools.partial(_blocks_of_ranges, root), _LOCATOR_SCHEMA)
    entries = entries.unionByName(page_ids).unionByName(_tree_files(spark, root, start, tasks))
    # Both sides of the join hash-partitioned by locator into `tasks` parts: the join needs no
    # other exchange, and adaptive execution does not coalesce the sweep into one task.
    live = (
        _frame(spark, [*start.locators, *metaranges, *start.trees], tasks)
        .unionByName(entries)
        .repartition(tasks, "locator")
        .distinct()
        .withColumn("live", F.lit(True))
    )
    stored = (
        spark.range(0, len(PREFIXES), 1, tasks)
        .mapInArrow(functools.partial(_list_blocks, root), _LOCATOR_SCHEMA)
        .repartition(tasks, "locator")
    )
    swept = stored.join(live, "locator", "left").mapInArrow(
        functools.partial(_sweep_blocks, root, cutoff, dry_run), _TALLY_SCHEMA
    )
    temporaries = spark.range(0, len(PREFIXES), 1, tasks).mapInArrow(
        functools.partial(_sweep_temporaries, root, cutoff, dry_run), _TALLY_SCHEMA
    )
    swept = swept.unionByName(temporaries)
    spark.sparkContext.setJobDescription(f"lakectl gc {'dry run ' if dry_run else ''}of {root}")
    try:
        rows = swept.collect()
    except (PySparkException, Py4JError) as exc:
        raise translate(exc, "the Spark garbage-collection job") from exc
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    total = gc.Tally()
    for row in rows:
        total.add(gc.Tally(**row.asDict()))
    return total


def _tree_files(spark: SparkSession, root: str, start: gc.Roots, tasks: int) -> DataFrame:
    """The pages and ranges of the trees of commits past their retention, which stay (their
    entries' blocks are not read: they may go)."""
    pages = (
        _frame(spark, sorted(start.trees), tasks)
        .mapInArrow(functools.partial(_pages_of_metaranges, root, gone_ok=True), _LOCATOR_SCHEMA)
        .repartition(tasks, "locator")
        .distinct()
    )
    ranges = pages.mapInArrow(functools.partial(_ranges_of_pages, root, gone_ok=True), _LOCATOR_SCHEMA)
    return pages.unionByName(ranges)


def _frame(spark: SparkSession, locators: Sequence[str], tasks: int) -> DataFrame:
    """A one-column DataFrame of locators known to the driver, spread over up to ``tasks`` parts."""
    rows = spark.sparkContext.parallelize([(b,) for b in locators], max(1, min(tasks, len(locators))))
    return spark.createDataFrame(rows, _LOCATOR_SCHEMA)


# -- on the executors --------------------------------------------------------------------------


def _column(values: list[str]) -> pa.RecordBatch:
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=["locator"])


def _pages_of_metaranges(
    root: str, batches: Iterator[pa.RecordBatch], gone_ok: bool = False
) -> Iterator[pa.RecordBatch]:
    """The page ids of each metarange (a metarange of the flat format is its own page); with
    ``gone_ok``, none for a metarange no longer stored (an expired tree collected before)."""
    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        for mid in batch.column(0).to_pylist():
            with _passed_over(gone_ok):
                yield _column([page.id for page in store.pages(MetaRangeId(mid))])


def _ranges_of_pages(
    root: str, batches: Iterator[pa.RecordBatch], gone_ok: bool = False
) -> Iterator[pa.RecordBatch]:
    """The range ids of each page (with ``gone_ok``, none for a page no longer stored)."""
    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        for pid in batch.column(0).to_pylist():
            with _passed_over(gone_ok):
                yield _column([info.id for info in store.page_ranges(RangeId(pid))])


def _passed_over(gone_ok: bool) -> contextlib.AbstractContextManager[object]:
    return contextlib.suppress(BlockNotFound) if gone_ok else contextlib.nullcontext()


def _blocks_of_ranges(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each range's own block, and the bare locators of its entries (one batch per range)."""
    store = RangeStore(executor_blocks(root), cache_size=0)
    for batch in batches:
        for rid in batch.column(0).to_pylist():
            found = [rid]
            for tokens in store.read_locators(RangeId(rid)):
                found.extend(gc.bare_locators(tokens))
            yield _column(found)


def _list_blocks(root: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The stored blocks of the prefix directories numbered in the batches."""
    adapter = executor_blocks(root)
    for batch in batches:
        for number in batch.column(0).to_pylist():
            found = adapter.list_prefix(PREFIXES[number])
            if found:
                yield _column(list(found))


def _sweep_blocks(
    root: str, cutoff: float, dry_run: bool, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The in-process sweep of this task's blocks; one row of counts."""
    import pyarrow as pa

    adapter = executor_blocks(root)
    tally = gc.Tally()
    for batch in batches:
        locators, live = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for locator, marked in zip(locators, live, strict=True):
            tally.sweep(adapter, locator, bool(marked), cutoff, dry_run)
    yield pa.RecordBatch.from_pylist([dataclasses.asdict(tally)], schema=_tally_arrow_schema())


def _sweep_temporaries(
    root: str, cutoff: float, dry_run: bool, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The in-process sweep of the temporary files of the prefix directories numbered in the
    batches; one row of counts."""
    import pyarrow as pa

    adapter = executor_blocks(root)
    tally = gc.Tally()
    for batch in batches:
        for number in batch.column(0).to_pylist():
            for temporary in adapter.temporaries(PREFIXES[number]):
                tally.sweep_temporary(adapter, temporary, cutoff, dry_run)
    yield pa.RecordBatch.from_pylist([dataclasses.asdict(tally)], schema=_tally_arrow_schema())


@functools.cache
def _tally_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(name, pa.int64()) for name in _TALLY_FIELDS])
