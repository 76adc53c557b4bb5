"""The keyed table diff of :mod:`lakectl.core.tablediff` as a Spark job: the changed objects read
on executors, the full outer join on the key and every count computed in Spark SQL.

The driver finds the objects whose locators differ (:func:`lakectl.core.tables.parts.locate`),
opens their footers for the schema comparison, exactly as in-process; executors read the objects
from the local block directory (``mapInArrow`` over the parts, as :mod:`lakectl.spark.fsck`
reads blocks); Spark checks the key is unique on each side, joins, counts added, removed and
changed rows, per column and per partition, and hands the driver one page of changes (the first
``amount`` by key after ``after``), which it turns into the same :class:`TableDiff`.

Keyed diffs only: a diff without a key (a multiset of whole rows) runs in-process.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakectl.core import porcelain, tablediff
from lakectl.core.model import Entry
from lakectl.core.tables import parts
from lakectl.core.tables.records import RowChange, RowChangeType, TableDiff, json_safe
from lakectl.core.tables.rows import Compared, _changed_columns, _parse_after, _rows
from lakectl.errors import InvalidArgument
from lakectl.spark import fsck as spark_fsck
from lakectl.spark import gc as spark_gc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_KINDS = (RowChangeType.ADDED, RowChangeType.REMOVED, RowChangeType.CHANGED)


def diff_table(
    lake: porcelain.Lake,
    repo: str,
    left: str,
    right: str,
    path: str,
    key: Sequence[str] = (),
    amount: int = 100,
    after: str = "",
    master: str = "local[2]",
) -> TableDiff:
    """:func:`lakectl.core.tablediff.diff_table` with ``key`` as a Spark job on ``master``: the
    same answer. The session is shared as the garbage collection's (:func:`lakectl.spark.gc.run`).

    ``InvalidArgument`` without a key, for an imported object (its bytes are not in the block
    directory), when the blocks are not in a local block directory, and as in-process."""
    key = tuple(key)
    if not key:
        raise InvalidArgument("--spark needs --key: a diff of whole rows without a key runs in-process")
    root = spark_fsck._local_root(lake)

    def on_spark(
        located: parts.Located,
        sides: tuple[parts.Side, parts.Side],
        bases: tuple[pa.Schema, pa.Schema],
        pairs: Sequence[tuple[str, str]],
        key: tuple[str, ...],
        amount: int,
        after: str,
    ) -> Compared:
        for part, entry in (*located.left, *located.right):
            if entry.external is not None:
                raise InvalidArgument(
                    f"{part.path} is imported (its bytes are at its source): diff it without --spark",
                    path=part.path,
                )
        refs = (sides[0].ref, sides[1].ref)
        with spark_gc._spark(master) as spark:
            return _compare(spark, root, located, bases[0], bases[1], pairs, key, refs, amount, after)

    # The driver's part (which objects differ, their schemas, the report) is the core's own.
    return tablediff.diff_table(lake, repo, left, right, path, key, amount, after, keyed=on_spark)


def _compare(
    spark: SparkSession,
    root: str,
    located: parts.Located,
    lbase: pa.Schema,
    rbase: pa.Schema,
    pairs: Sequence[tuple[str, str]],
    key: tuple[str, ...],
    refs: tuple[str, str],
    amount: int,
    after: str,
) -> Compared:
    """:func:`lakectl.core.tables.rows.compare_keyed` in Spark SQL. Columns travel under
    positional names (``l3``, ``r0``): Spark resolves names without regard to case."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    lmap = {rn: ln for ln, rn in pairs}
    lpos = {n: i for i, n in enumerate(lbase.names)}
    rpos = {n: i for i, n in enumerate(rbase.names)}
    ktypes = [rbase.field(k).type for k in key]
    lkeys = [(lpos[lmap[k]], t) for k, t in zip(key, ktypes, strict=True)]
    ltable = _side(spark, root, located.left, lbase, "l", lkeys)
    rtable = _side(spark, root, located.right, rbase, "r", [])
    lk = [f"lk{i}" for i in range(len(key))]
    rk = [f"r{rpos[k]}" for k in key]
    compared = [(ln, rn) for ln, rn in pairs if rn not in key]

    def differs(ln: str, rn: str) -> Column:
        lcol, rcol = F.col(f"l{lpos[ln]}"), F.col(f"r{rpos[rn]}")
        if lbase.field(ln).type != rbase.field(rn).type:
            lcol = lcol.cast(rtable.schema[f"r{rpos[rn]}"].dataType)
        return ~lcol.eqNullSafe(rcol)

    joined = ltable.withColumn("lin", F.lit(True)).join(
        rtable.withColumn("rin", F.lit(True)),
        functools.reduce(lambda a, b: a & b, [F.col(a) == F.col(b) for a, b in zip(lk, rk, strict=True)]),
        "full",
    )
    flags = [differs(ln, rn).alias(f"d{i}") for i, (ln, rn) in enumerate(compared)]
    kind = (
        F.when(F.col("lin").isNull(), 0)
        .when(F.col("rin").isNull(), 1)
        .when(
            functools.reduce(
                lambda a, b: a | b, [F.col(f"d{i}") for i in range(len(compared))], F.lit(False)
            ),
            2,
        )
    )
    keys = [
        F.coalesce(F.col(a), F.col(b)).alias(f"k{i}") for i, (a, b) in enumerate(zip(lk, rk, strict=True))
    ]
    diff = (
        joined.select("*", *keys, *flags)
        .withColumn("kind", kind)
        .where(F.col("kind").isNotNull())
        .withColumn("part", F.coalesce(F.col("rp"), F.col("lp")))
    )
    spark.sparkContext.setJobDescription(f"lakectl diff --table {located.path}")
    try:
        for table, names, ref in ((ltable, lk, refs[0]), (rtable, rk, refs[1])):
            _check_unique(table, names, key, ref)
        diff = diff.persist()
        out = Compared()
        for row in diff.groupBy("part", "kind").count().collect():
            out.partitions.setdefault(row["part"], Counter())[_KINDS[row["kind"]]] += row["count"]
        totals = Counter[RowChangeType]()
        for counts in out.partitions.values():
            totals.update(counts)
        out.added, out.removed, out.changed = (totals[k] for k in _KINDS)
        if compared:
            sums = diff.where(F.col("kind") == 2).agg(
                *[F.sum(F.col(f"d{i}").cast("long")).alias(f"d{i}") for i in range(len(compared))]
            )
            found = sums.collect()[0]
            for i, (_, rn) in enumerate(compared):
                if found[f"d{i}"]:
                    out.changed_columns[rn] = found[f"d{i}"]
        if amount and (out.added or out.removed or out.changed):
            _page(out, diff, lbase, rbase, compared, key, ktypes, amount, after)
        diff.unpersist()
    except (PySparkException, Py4JError) as exc:
        raise spark_gc._translate(exc) from exc
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return out


def _check_unique(table: DataFrame, names: Sequence[str], key: Sequence[str], ref: str) -> None:
    from pyspark.sql import functions as F

    dups = table.groupBy(*names).count().where(F.col("count") > 1).limit(1).toArrow()
    if dups.num_rows:
        row = dups.to_pylist()[0]
        value = {k: json_safe(row[n]) for k, n in zip(key, names, strict=True)}
        raise InvalidArgument(
            f"key is not unique at {ref}: {json.dumps(value)} is on {row['count']} rows", key=value
        )


def _after(key: Sequence[str], types: Sequence[pa.DataType], after: str) -> Column | None:
    """Rows whose key sorts after ``after`` in Arrow's order (NaN, then nulls, last: Spark's too)."""
    from pyspark.sql import functions as F

    bound = _parse_after(after, key, types)
    if bound is None:
        return None
    later = F.lit(False)
    for i in reversed(range(len(key))):
        col, value = F.col(f"k{i}"), bound[i]
        if value is None:  # nothing sorts after null; only an equal null goes on to the next column
            greater, equal = F.lit(False), col.isNull()
        else:
            greater, equal = col.isNull() | (col > F.lit(value)), col == F.lit(value)
        later = greater | (equal & later)
    return later


def _page(
    out: Compared,
    diff: DataFrame,
    lbase: pa.Schema,
    rbase: pa.Schema,
    compared: Sequence[tuple[str, str]],
    key: Sequence[str],
    ktypes: Sequence[pa.DataType],
    amount: int,
    after: str,
) -> None:
    """The first ``amount`` changes by key after ``after``, as compare_keyed shapes them."""
    from pyspark.sql import functions as F

    later = _after(key, ktypes, after)
    if later is not None:
        diff = diff.where(later)
    order = [F.col(f"k{i}").asc_nulls_last() for i in range(len(key))]
    lnames = [f"l{i}" for i in range(len(lbase))]
    rnames = [f"r{i}" for i in range(len(rbase))]
    knames = [f"k{i}" for i in range(len(key))]
    got = (
        diff.orderBy(*order).limit(amount + 1).select("kind", *knames, *lnames, "lp", *rnames, "rp").toArrow()
    )
    more = got.num_rows > amount
    got = got.slice(0, amount)
    n = got.num_rows
    if not n:
        return
    part = pa.field(parts.PART_COLUMN, pa.string())
    lpage = _restore(got, [*lnames, "lp"], pa.schema([*lbase, part]))
    rpage = _restore(got, [*rnames, "rp"], pa.schema([*rbase, part]))
    keys = _restore(got, knames, pa.schema([pa.field(k, t) for k, t in zip(key, ktypes, strict=True)]))
    kinds = [_KINDS[k] for k in got["kind"].to_pylist()]
    lidx = [None if k is RowChangeType.ADDED else i for i, k in enumerate(kinds)]
    ridx = [None if k is RowChangeType.REMOVED else i for i, k in enumerate(kinds)]
    olds, news = _rows(lpage, lidx), _rows(rpage, ridx)
    columns = _changed_columns(lpage, rpage, compared, lidx, ridx, kinds)
    values = keys.to_pylist()
    out.rows = tuple(RowChange(kind, values[i], columns[i], olds[i], news[i]) for i, kind in enumerate(kinds))
    if more:
        out.next_offset = json.dumps([json_safe(values[-1][k]) for k in key])


def _restore(table: pa.Table, names: Sequence[str], schema: pa.Schema) -> pa.Table:
    """Columns of a collected page under their own names and Arrow types again."""
    return pa.table([table[n] for n in names], names=schema.names).cast(schema)


def _side(
    spark: SparkSession,
    root: str,
    located: Sequence[tuple[parts.Part, Entry]],
    base: pa.Schema,
    prefix: str,
    keys: Sequence[tuple[int, pa.DataType]],
) -> DataFrame:
    """The rows of one side's parts as a DataFrame: ``{prefix}0..`` in ``base``'s columns,
    ``{prefix}p`` the partition, and ``lk0..`` the key columns cast to the right side's types."""
    from pyspark.sql.pandas.types import from_arrow_schema

    target = _target(base, prefix, keys)
    work = [(p, list(e.locators)) for p, e in located]
    tasks = max(1, min(len(work), spark.sparkContext.defaultParallelism * spark_gc.TASKS_PER_CORE))
    rdd = spark.sparkContext.parallelize([(i,) for i in range(len(work))], tasks)
    frame = spark.createDataFrame(rdd, "part long")
    read = functools.partial(_read_parts, root, work, base, target, keys)
    return frame.mapInArrow(read, from_arrow_schema(target))


def _target(base: pa.Schema, prefix: str, keys: Sequence[tuple[int, pa.DataType]]) -> pa.Schema:
    fields = [pa.field(f"{prefix}{i}", f.type) for i, f in enumerate(base)]
    fields.append(pa.field(f"{prefix}p", pa.string()))
    fields.extend(pa.field(f"lk{j}", t) for j, (_, t) in enumerate(keys))
    return pa.schema(fields)


# -- on the executors --------------------------------------------------------------------------


def _read_parts(
    root: str,
    work: Sequence[tuple[parts.Part, list[str]]],
    base: pa.Schema,
    target: pa.Schema,
    keys: Sequence[tuple[int, pa.DataType]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The rows of the parts numbered in the batches, read whole from the block directory."""
    import io

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from lakectl.core.blocks.data import read_object

    adapter = spark_gc._adapter(root)
    for batch in batches:
        for number in batch.column(0).to_pylist():
            part, locators = work[number]
            data = b"".join(read_object(adapter, locators))
            try:
                if part.format is parts.Format.PARQUET:
                    pf = pq.ParquetFile(io.BytesIO(data))
                    opened = parts.Opened(part, None, pf.schema_arrow, parquet=pf)  # type: ignore[arg-type]
                else:
                    delimiter = "\t" if part.format is parts.Format.TSV else ","
                    options = pacsv.ParseOptions(delimiter=delimiter)
                    csv = pacsv.read_csv(io.BytesIO(data), parse_options=options)
                    opened = parts.Opened(part, None, csv.schema, csv=csv)  # type: ignore[arg-type]
            except parts._ARROW_ERRORS as e:
                raise InvalidArgument(f"cannot read {part.path} as {part.format.value}: {e}") from e
            table = parts._read(opened, base.names)
            columns = []
            for f in base:
                if f.name in table.column_names:
                    columns.append(table[f.name].cast(f.type))
                else:  # a part without the column: nulls, as concatenating the parts gives
                    columns.append(pa.nulls(table.num_rows, f.type))
            columns.append(table[parts.PART_COLUMN])
            columns.extend(columns[i].cast(t) for i, t in keys)
            yield from pa.table(columns, schema=target).to_batches()
