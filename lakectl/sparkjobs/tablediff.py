"""The table diff of :mod:`lakectl.core.tablediff` as a Spark job: the changed objects read on
executors, the comparison of their rows and every count computed in Spark SQL.

The driver finds the objects whose locators differ (:func:`lakectl.core.tables.parts.locate`),
opens their footers for the schema comparison, exactly as in-process; executors read the objects
from the local block directory (``mapInArrow`` over the parts, as :mod:`lakectl.sparkjobs.fsck`
reads blocks). The core injects the comparison (:class:`lakectl.core.tablediff.KeyedCompare`,
:class:`~lakectl.core.tablediff.MultisetCompare`) and builds the same :class:`TableDiff` from it:

- with a key, Spark checks the key is unique on each side, joins, counts added, removed and
  changed rows, per column and per partition, and hands the driver one page of changes (the
  first ``amount`` by key after ``after``);
- without one, Spark groups the whole rows of both sides by their values and partition, counts
  each side's copies (:func:`lakectl.core.tables.rows.compare_multiset`), and hands the driver
  one page of the rows added or removed, by row values after ``after``. A column whose type
  differs between the sides is compared in the type the in-process diff picks from all its
  values (a first pass: do the left values all convert?). Values cross Spark so that Arrow's
  equality and order survive: floats are grouped by their bits (Arrow tells 0.0 from -0.0 and
  NaNs apart by bits, Spark by value), and types Spark holds in another form (timestamps, times,
  durations, unsigned integers) travel as integers.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakectl.core import tablediff
from lakectl.core.lake import Lake
from lakectl.core.model import Entry
from lakectl.core.tables import parts
from lakectl.core.tables.records import RowChange, RowChangeType, TableDiff, json_safe
from lakectl.core.tables.rows import (
    ARROW_ERRORS,
    Compared,
    changed_columns,
    compare_multiset,
    parse_after,
    rows_at,
)
from lakectl.errors import InvalidArgument
from lakectl.sparkjobs import gc as spark_gc
from lakectl.sparkjobs.session import executor_blocks, local_root, shared, translate

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_KINDS = (RowChangeType.ADDED, RowChangeType.REMOVED, RowChangeType.CHANGED)

Shape = Callable[[int, pa.Table], pa.Table]
"""On the executors: the rows of one part (its number on its side; its rows in the side's base
columns, with :data:`~lakectl.core.tables.parts.PART_COLUMN`) as the job's DataFrame holds them."""


def diff_table(
    lake: Lake,
    repo: str,
    left: str,
    right: str,
    path: str,
    key: Sequence[str] = (),
    amount: int = 100,
    after: str = "",
    master: str = "local[2]",
    two_way: bool = False,
    declared: bool = True,
) -> TableDiff:
    """:func:`lakectl.core.tablediff.diff_table` as a Spark job on ``master``, with a key or
    without: the same answer. The session is shared as the garbage collection's
    (:func:`lakectl.sparkjobs.gc.run`).

    ``InvalidArgument`` for an imported object (its bytes are not in the block directory), when
    the blocks are not in a local block directory, for a column of a type Spark cannot carry,
    and as in-process."""
    root = local_root(lake, "diff --table --spark reads the table's blocks", "diff without --spark")

    def keyed(
        located: parts.Located,
        sides: tuple[parts.Side, parts.Side],
        bases: tuple[pa.Schema, pa.Schema],
        pairs: Sequence[tuple[str, str]],
        key: tuple[str, ...],
        amount: int,
        after: str,
    ) -> Compared:
        _check_stored(located)
        refs = (sides[0].ref, sides[1].ref)
        with shared(master) as spark:
            return _compare(spark, root, located, bases[0], bases[1], pairs, key, refs, amount, after)

    def multiset(
        located: parts.Located,
        sides: tuple[parts.Side, parts.Side],
        bases: tuple[pa.Schema, pa.Schema],
        pairs: Sequence[tuple[str, str]],
        amount: int,
        after: str,
    ) -> Compared:
        _check_stored(located)
        lbase, rbase = bases
        kinds = [rbase.field(rn).type for _, rn in pairs]
        retyped = [i for i, (ln, _) in enumerate(pairs) if lbase.field(ln).type != kinds[i]]
        if not retyped:  # the in-process errors (no column in common...) before Spark starts
            _check_comparable(pairs, kinds)
        with shared(master) as spark:
            return _compare_multiset(spark, root, located, bases, pairs, kinds, retyped, amount, after)

    # The driver's part (which objects differ, their schemas, the report) is the core's own.
    return tablediff.diff_table(
        lake,
        repo,
        left,
        right,
        path,
        key,
        amount,
        after,
        keyed=keyed,
        multiset=multiset,
        two_way=two_way,
        use_declared=declared,
    )


def _check_stored(located: parts.Located) -> None:
    for part, entry in (*located.left, *located.right):
        if entry.external is not None:
            raise InvalidArgument(
                f"{part.path} is imported (its bytes are at its source): diff it without --spark",
                path=part.path,
            )


# -- by key ------------------------------------------------------------------------------------


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

    lmap = {rn: ln for ln, rn in pairs}
    lpos = {n: i for i, n in enumerate(lbase.names)}
    rpos = {n: i for i, n in enumerate(rbase.names)}
    ktypes = [rbase.field(k).type for k in key]
    lkeys = [(lpos[lmap[k]], t) for k, t in zip(key, ktypes, strict=True)]
    ltarget, rtarget = _keyed_target(lbase, "l", lkeys), _keyed_target(rbase, "r", [])
    ltable = _side(spark, root, located.left, lbase, ltarget, functools.partial(_keyed_rows, ltarget, lkeys))
    rtable = _side(spark, root, located.right, rbase, rtarget, functools.partial(_keyed_rows, rtarget, []))
    lk = [f"lk{i}" for i in range(len(key))]
    rk = [f"r{rpos[k]}" for k in key]
    compared = [(ln, rn) for ln, rn in pairs if rn not in key]
    diff = _keyed_diff(ltable, rtable, (lbase, rbase), (lpos, rpos), (lk, rk), compared)
    spark.sparkContext.setJobDescription(f"lakectl diff --table {located.path}")
    try:
        for table, names, ref in ((ltable, lk, refs[0]), (rtable, rk, refs[1])):
            _check_unique(table, names, key, ref)
        diff = diff.persist()
        try:
            out = _keyed_counts(diff, compared)
            if amount and (out.added or out.removed or out.changed):
                _page(out, diff, lbase, rbase, compared, key, ktypes, amount, after)
        finally:
            diff.unpersist()
    except (PySparkException, Py4JError) as exc:
        raise translate(exc, "the Spark table diff job") from exc
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return out


def _keyed_diff(
    ltable: DataFrame,
    rtable: DataFrame,
    bases: tuple[pa.Schema, pa.Schema],
    positions: tuple[dict[str, int], dict[str, int]],
    keys: tuple[Sequence[str], Sequence[str]],
    compared: Sequence[tuple[str, str]],
) -> DataFrame:
    """The two sides joined by key (``keys``: each side's key columns), one row per key that
    differs: its ``kind`` (an index of :data:`_KINDS`), its key ``k0..``, a flag ``d{i}`` for
    each ``compared`` column that differs, and its partition ``part`` (the right side's first)."""
    from pyspark.sql import functions as F

    (lbase, rbase), (lpos, rpos), (lk, rk) = bases, positions, keys

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
    keyed = [
        F.coalesce(F.col(a), F.col(b)).alias(f"k{i}") for i, (a, b) in enumerate(zip(lk, rk, strict=True))
    ]
    return (
        joined.select("*", *keyed, *flags)
        .withColumn("kind", kind)
        .where(F.col("kind").isNotNull())
        .withColumn("part", F.coalesce(F.col("rp"), F.col("lp")))
    )


def _keyed_counts(diff: DataFrame, compared: Sequence[tuple[str, str]]) -> Compared:
    """The counts of a keyed diff (from :func:`_keyed_diff`): per partition and kind, in all,
    and per ``compared`` column of the rows changed."""
    from pyspark.sql import functions as F

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


def _later(columns: Sequence[str], bound: Sequence[Any] | None) -> Column | None:
    """Rows whose ``columns`` sort after ``bound`` (a parsed ``after``) in Arrow's order (NaN,
    then nulls, last: Spark's too); None for no bound."""
    from pyspark.sql import functions as F

    if bound is None:
        return None
    later = F.lit(False)
    for name, value in reversed(list(zip(columns, bound, strict=True))):
        col = F.col(name)
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

    knames = [f"k{i}" for i in range(len(key))]
    later = _later(knames, parse_after(after, key, ktypes))
    if later is not None:
        diff = diff.where(later)
    order = [F.col(k).asc_nulls_last() for k in knames]
    lnames = [f"l{i}" for i in range(len(lbase))]
    rnames = [f"r{i}" for i in range(len(rbase))]
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
    olds, news = rows_at(lpage, lidx), rows_at(rpage, ridx)
    columns = changed_columns(lpage, rpage, compared, lidx, ridx, kinds)
    values = keys.to_pylist()
    out.rows = tuple(RowChange(kind, values[i], columns[i], olds[i], news[i]) for i, kind in enumerate(kinds))
    if more:
        out.next_offset = json.dumps([json_safe(values[-1][k]) for k in key])


def _restore(table: pa.Table, names: Sequence[str], schema: pa.Schema) -> pa.Table:
    """Columns of a collected page under their own names and Arrow types again."""
    return pa.table([table[n] for n in names], names=schema.names).cast(schema)


def _keyed_target(base: pa.Schema, prefix: str, keys: Sequence[tuple[int, pa.DataType]]) -> pa.Schema:
    """One side's rows in a keyed diff: ``{prefix}0..`` in ``base``'s columns, ``{prefix}p`` the
    partition, and ``lk0..`` the key columns cast to the right side's types."""
    fields = [pa.field(f"{prefix}{i}", f.type) for i, f in enumerate(base)]
    fields.append(pa.field(f"{prefix}p", pa.string()))
    fields.extend(pa.field(f"lk{j}", t) for j, (_, t) in enumerate(keys))
    return pa.schema(fields)


# -- without a key -----------------------------------------------------------------------------


def _check_comparable(pairs: Sequence[tuple[str, str]], kinds: Sequence[pa.DataType]) -> None:
    """Raise what :func:`~lakectl.core.tables.rows.compare_multiset` raises for rows it cannot
    compare (no column in common, a type Arrow cannot group by): it runs on no rows of the types
    compared."""
    names = [rn for _, rn in pairs]
    fields = [pa.field(n, k) for n, k in zip(names, kinds, strict=True)]
    empty = pa.schema([*fields, pa.field(parts.PART_COLUMN, pa.string())]).empty_table()
    compare_multiset(empty, empty, [(n, n) for n in names], 0, "")


def _check_carried(names: Sequence[str], kinds: Sequence[pa.DataType]) -> None:
    """``InvalidArgument`` for a column of a type Spark has no form of."""
    from pyspark.sql.pandas.types import from_arrow_type

    for name, kind in zip(names, kinds, strict=True):
        carried = _carrier(kind)
        try:
            if pa.types.is_decimal(carried) and carried.precision > 38:
                raise ValueError("Spark's decimals hold 38 digits")
            from_arrow_type(carried)
        except (TypeError, ValueError) as e:  # PySparkTypeError is a TypeError
            raise InvalidArgument(
                f"column {name!r} is {kind}, which Spark cannot carry: diff without --spark", column=name
            ) from e


def _compare_multiset(
    spark: SparkSession,
    root: str,
    located: parts.Located,
    bases: tuple[pa.Schema, pa.Schema],
    pairs: Sequence[tuple[str, str]],
    kinds: list[pa.DataType],
    retyped: Sequence[int],
    amount: int,
    after: str,
) -> Compared:
    """:func:`lakectl.core.tables.rows.compare_multiset` in Spark SQL: ``kinds`` are the right
    side's types of the compared columns, ``retyped`` the columns whose left type differs.

    Each distinct row (its values and its partition) is one group: ``delta`` its right copies
    less its left ones, ``first`` where its first copy is read (side, part, row). A page is in
    the order of the values, then the partition (as in-process); ``first`` orders what ties on
    both (floats equal but for their bits, 0.0 and -0.0, in one partition) as Arrow's grouping
    numbers them when their first copies are in different objects."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    spark.sparkContext.setJobDescription(f"lakectl diff --table {located.path}")
    try:
        if retyped:
            kinds = _common_types(spark, root, located, bases, pairs, kinds, retyped)
            _check_comparable(pairs, kinds)
        _check_carried([rn for _, rn in pairs], kinds)
        target = _multiset_target(kinds)
        sides = (
            (located.left, bases[0], [ln for ln, _ in pairs]),
            (located.right, bases[1], [rn for _, rn in pairs]),
        )
        rows = functools.reduce(
            lambda a, b: a.unionByName(b),
            [
                _side(
                    spark, root, work, base, target, functools.partial(_multiset_rows, target, s, cols, kinds)
                )
                for s, (work, base, cols) in enumerate(sides)
            ],
        )
        values = [f"c{i}" for i in range(len(kinds))]
        bits = [f"b{i}" for i, k in enumerate(kinds) if pa.types.is_floating(k)]
        grouped = (
            rows.groupBy(*values, *bits, "part")
            .agg(
                F.sum(F.when(F.col("side") == 1, 1).otherwise(-1)).cast("long").alias("delta"),
                F.min(F.struct("side", "number", "row")).alias("first"),
            )
            .where(F.col("delta") != 0)
            .persist()
        )
        try:
            out = Compared()
            counted = grouped.groupBy("part").agg(
                F.sum(F.greatest(F.col("delta"), F.lit(0))).alias("added"),
                F.sum(F.greatest(-F.col("delta"), F.lit(0))).alias("removed"),
            )
            for row in counted.collect():
                counts = Counter({RowChangeType.ADDED: row["added"], RowChangeType.REMOVED: row["removed"]})
                out.partitions[row["part"]] = +counts  # the kinds with changes
                out.added += row["added"]
                out.removed += row["removed"]
            if out.added or out.removed:  # as in-process, a bad ``after`` fails only a diff with rows
                bound = _multiset_bound([rn for _, rn in pairs], kinds, after)
                if amount:
                    _multiset_page(out, grouped, [rn for _, rn in pairs], kinds, bound, amount)
        finally:
            grouped.unpersist()
    except (PySparkException, Py4JError) as exc:
        raise translate(exc, "the Spark table diff job") from exc
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return out


def _common_types(
    spark: SparkSession,
    root: str,
    located: parts.Located,
    bases: tuple[pa.Schema, pa.Schema],
    pairs: Sequence[tuple[str, str]],
    kinds: Sequence[pa.DataType],
    retyped: Sequence[int],
) -> list[pa.DataType]:
    """The type each column is compared in, as :func:`~lakectl.core.tables.rows.compare_multiset`
    picks it from all the values of both sides: the right type when every left value converts to
    it, else text when both sides' values convert to text; else ``InvalidArgument``. A first
    pass reads the retyped columns and tells, part by part, which conversions succeed."""
    from pyspark.sql import functions as F

    flags = pa.schema(
        [pa.field("side", pa.int8())]
        + [pa.field(f"{what}{j}", pa.bool_()) for j in range(len(retyped)) for what in ("cast", "text")]
    )
    frames = []
    for s, (work, base) in enumerate(((located.left, bases[0]), (located.right, bases[1]))):
        columns = [pairs[i][s] for i in retyped]
        targets = [kinds[i] if s == 0 else None for i in retyped]
        shape = functools.partial(_convertible, flags, s, columns, targets)
        frames.append(_side(spark, root, work, base, flags, shape))
    aggs = [F.min(F.col(c)).alias(c) for c in flags.names[1:]]
    found = {
        row["side"]: row for row in frames[0].unionByName(frames[1]).groupBy("side").agg(*aggs).collect()
    }
    out = list(kinds)
    for j, i in enumerate(retyped):
        ln, rn = pairs[i]

        def ok(side: int, what: str, j: int = j) -> bool:
            row = found.get(side)
            return row is None or row[f"{what}{j}"] is not False  # no values: nothing fails

        if ok(0, "cast"):
            continue
        if not (ok(0, "text") and ok(1, "text")):
            raise InvalidArgument(
                f"cannot compare column {rn!r}: {bases[0].field(ln).type} on the left, "
                f"{kinds[i]} on the right"
            )
        out[i] = pa.string()
    return out


def _multiset_target(kinds: Sequence[pa.DataType]) -> pa.Schema:
    """The rows of both sides in a diff without a key: ``c0..`` the compared columns (as they
    cross Spark, :func:`_carrier`), ``b{i}`` the bits of a float column ``c{i}``, the partition,
    and where each row was read (side, part number, row number)."""
    fields = []
    for i, kind in enumerate(kinds):
        fields.append(pa.field(f"c{i}", _carrier(kind)))
        if pa.types.is_floating(kind):
            fields.append(pa.field(f"b{i}", pa.int64()))
    fields.extend(
        [
            pa.field("part", pa.string()),
            pa.field("side", pa.int8()),
            pa.field("number", pa.int64()),
            pa.field("row", pa.int64()),
        ]
    )
    return pa.schema(fields)


def _multiset_bound(names: Sequence[str], kinds: Sequence[pa.DataType], after: str) -> list[Any] | None:
    """``after`` parsed as in-process (the row's values, then its partition), its values as
    they cross Spark."""
    bound = parse_after(after, [*names, parts.PART_COLUMN], [*kinds, pa.string()])
    if bound is None:
        return None
    out = []
    for value, kind in zip(bound, kinds, strict=False):
        if value is not None and _carrier(kind) != kind:
            try:
                value = _carry(pa.array([value], kind))[0].as_py()
            except ARROW_ERRORS as e:
                raise InvalidArgument(
                    f"bad offset {after!r}: its values do not compare with the key's"
                ) from e
        out.append(value)
    return [*out, bound[-1]]


def _multiset_page(
    out: Compared,
    grouped: DataFrame,
    names: Sequence[str],
    kinds: Sequence[pa.DataType],
    bound: Sequence[Any] | None,
    amount: int,
) -> None:
    """The first ``amount`` rows added or removed by row values after ``bound``, as
    compare_multiset shapes them."""
    from pyspark.sql import functions as F

    values = [f"c{i}" for i in range(len(kinds))]
    later = _later([*values, "part"], bound)
    if later is not None:
        grouped = grouped.where(later)
    columns = [f"b{i}" if pa.types.is_floating(k) else f"c{i}" for i, k in enumerate(kinds)]
    got = (
        grouped.orderBy(*[F.col(c).asc_nulls_last() for c in values], F.col("part"), F.col("first"))
        .limit(amount + 1)
        .select(*columns, "part", "delta")
        .toArrow()
    )
    more = got.num_rows > amount
    got = got.slice(0, amount)
    if not got.num_rows:
        return
    restored = pa.table(
        [_uncarry(got[c].combine_chunks(), k) for c, k in zip(columns, kinds, strict=True)], names=list(names)
    )
    rows = restored.to_pylist()
    deltas = got["delta"].to_pylist()
    out.rows = tuple(
        RowChange(
            RowChangeType.ADDED if delta > 0 else RowChangeType.REMOVED,
            {},
            (),
            None if delta > 0 else row,
            row if delta > 0 else None,
            abs(delta),
        )
        for row, delta in zip(rows, deltas, strict=True)
    )
    if more:
        out.next_offset = json.dumps([*(json_safe(rows[-1][n]) for n in names), got["part"][-1].as_py()])


# -- how values cross Spark ----------------------------------------------------------------------

_INTS = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def _as_integers(kind: pa.DataType) -> bool:
    """Types Spark holds in another form (another unit, a time zone) that keep Arrow's order
    as their integers: timestamps, times, durations, date64."""
    return any(
        test(kind)
        for test in (pa.types.is_timestamp, pa.types.is_time, pa.types.is_duration, pa.types.is_date64)
    )


def _carrier(kind: pa.DataType) -> pa.DataType:
    """The type values of ``kind`` cross Spark in, with Arrow's equality and order (a float's
    equality is its bits, carried beside it)."""
    if pa.types.is_dictionary(kind):
        return _carrier(kind.value_type)
    if _as_integers(kind):
        return pa.int64()
    if pa.types.is_float16(kind):
        return pa.float32()
    if pa.types.is_uint64(kind):
        return pa.decimal128(20, 0)
    if pa.types.is_unsigned_integer(kind):
        return pa.int64()
    if pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_binary_view(kind):
        return pa.binary()
    return kind


def _carry(array: pa.Array) -> pa.Array:
    """``array`` in its :func:`_carrier` type."""
    if pa.types.is_dictionary(array.type):
        return _carry(array.dictionary_decode())
    if _as_integers(array.type):
        return array.view(_INTS[array.type.bit_width]).cast(pa.int64())
    carried = _carrier(array.type)
    return array if carried == array.type else array.cast(carried)


def _bits(array: pa.Array) -> pa.Array:
    """A float array's bits, as int64."""
    return array.view(_INTS[array.type.bit_width]).cast(pa.int64())


def _uncarry(array: pa.Array, kind: pa.DataType) -> pa.Array:
    """The values of ``kind`` back from what crossed Spark: a float from its bits, the rest
    from its :func:`_carrier` type."""
    if pa.types.is_floating(kind) or _as_integers(kind):
        return array.cast(_INTS[kind.bit_width]).view(kind)
    if pa.types.is_dictionary(kind):
        return _uncarry(array, kind.value_type).cast(kind)
    return array.cast(kind)


# -- reading the parts ---------------------------------------------------------------------------


def _side(
    spark: SparkSession,
    root: str,
    located: Sequence[tuple[parts.Part, Entry]],
    base: pa.Schema,
    target: pa.Schema,
    shape: Shape,
) -> DataFrame:
    """The rows of one side's parts as a DataFrame of ``target``'s columns: each part read on an
    executor in ``base``'s columns, then shaped by ``shape``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    work = [(p, list(e.locators)) for p, e in located]
    tasks = max(1, min(len(work), spark.sparkContext.defaultParallelism * spark_gc.TASKS_PER_CORE))
    rdd = spark.sparkContext.parallelize([(i,) for i in range(len(work))], tasks)
    frame = spark.createDataFrame(rdd, "part long")
    read = functools.partial(_read_parts, root, work, base, shape)
    return frame.mapInArrow(read, from_arrow_schema(target))


# -- on the executors --------------------------------------------------------------------------


def _read_parts(
    root: str,
    work: Sequence[tuple[parts.Part, list[str]]],
    base: pa.Schema,
    shape: Shape,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The rows of the parts numbered in the batches, read whole from the block directory."""
    adapter = executor_blocks(root)
    for batch in batches:
        for number in batch.column(0).to_pylist():
            part, locators = work[number]
            yield from shape(number, _read_part(adapter, part, locators, base)).to_batches()


def _read_part(adapter: Any, part: parts.Part, locators: Sequence[str], base: pa.Schema) -> pa.Table:
    """One part's rows in ``base``'s columns (nulls for a column it lacks, as concatenating the
    parts gives), with :data:`~lakectl.core.tables.parts.PART_COLUMN`."""
    import io

    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from lakectl.core.blocks.data import read_object

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
    except parts.ARROW_ERRORS as e:
        raise InvalidArgument(f"cannot read {part.path} as {part.format.value}: {e}") from e
    table = parts.read_columns(opened, base.names)
    columns = []
    for f in base:
        if f.name in table.column_names:
            columns.append(table[f.name].cast(f.type))
        else:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, f.type)]))
    columns.append(table[parts.PART_COLUMN])
    return pa.table(columns, schema=pa.schema([*base, pa.field(parts.PART_COLUMN, pa.string())]))


def _keyed_rows(
    target: pa.Schema, keys: Sequence[tuple[int, pa.DataType]], number: int, table: pa.Table
) -> pa.Table:
    """A :data:`Shape` of a keyed diff: the columns and partition, then the key columns cast."""
    columns = list(table.columns)
    columns.extend(columns[i].cast(t) for i, t in keys)
    return pa.table(columns, schema=target)


def _multiset_rows(
    target: pa.Schema,
    side: int,
    names: Sequence[str],
    kinds: Sequence[pa.DataType],
    number: int,
    table: pa.Table,
) -> pa.Table:
    """A :data:`Shape` of a diff without a key: the compared columns converted to the types
    compared in (as :func:`~lakectl.core.tables.rows.compare_multiset` converts them), as they
    cross Spark, then the partition and where each row was read."""
    n = table.num_rows
    columns: list[Any] = []
    for name, kind in zip(names, kinds, strict=True):
        column = table[name].combine_chunks()
        if column.type != kind:
            column = column.cast(kind)
        columns.append(_carry(column))
        if pa.types.is_floating(kind):
            columns.append(_bits(column))
    columns.append(table[parts.PART_COLUMN])
    columns.append(pa.repeat(pa.scalar(side, pa.int8()), n))
    columns.append(pa.repeat(pa.scalar(number, pa.int64()), n))
    columns.append(pa.array(range(n), pa.int64()))
    return pa.table(columns, schema=target)


def _convertible(
    flags: pa.Schema,
    side: int,
    names: Sequence[str],
    targets: Sequence[pa.DataType | None],
    number: int,
    table: pa.Table,
) -> pa.Table:
    """A :data:`Shape` of the first pass over retyped columns: one row per part, whether each
    column's values all convert to its target type (``cast{j}``; null without one) and to text."""

    def converts(column: Any, kind: pa.DataType) -> bool:
        try:
            column.cast(kind)
        except ARROW_ERRORS:
            return False
        return True

    row: dict[str, Any] = {"side": side}
    for j, (name, kind) in enumerate(zip(names, targets, strict=True)):
        column = table[name]
        row[f"cast{j}"] = None if kind is None else converts(column, kind)
        row[f"text{j}"] = converts(column, pa.string())
    return pa.Table.from_pylist([row], schema=flags)
