"""The ``rows`` merge strategy: the Parquet objects of a table that both sides of a merge changed,
under a glob the strategy names, are merged row by row by key instead of as whole objects.

``--strategy 'tables/orders/**=rows:key=order_id'`` (``key=a,b`` for a composite key, and
``;winner=source`` or ``;winner=dest`` to resolve the row conflicts too). Without ``key=``
(``'tables/**=rows'``), each table takes the key the repository declares for it
(:mod:`lakectl.core.tables.declared`); the strategy ``rows`` alone merges every declared table
by rows with its key. The unit of the merge
is the partition directory (:func:`plan_units`): one both sides changed is read (base, source and
destination versions of its objects, through the block layer) and merged by rows into one object
(:func:`lakectl.core.tables.merge.merge_rows`), written with the destination version's content
type, compression and row-group size; when both sides only changed objects in place, each object
they both changed is merged on its own, under its name. Every directory one side changed keeps
that side's objects, and every untouched one its locators. Row and schema conflicts are returned
as data, per object or directory, for :class:`~lakectl.errors.MergeConflict`. The units run
in-process, or on Spark (:mod:`lakectl.sparkjobs.tablemerge`), with the same result.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lakectl.core.graph.merge import MergePlan, glob_matches, join_changes
from lakectl.core.model import Entry, MetaRangeId, Row, same_row
from lakectl.errors import InvalidArgument, MergeConflict

if TYPE_CHECKING:
    import pyarrow as pa

    from lakectl.core.hostpaths import Confinement
    from lakectl.core.lake import Lake

MARK = "=rows"
ROWS = "rows"
"""The strategy that merges every declared table by rows, with its declared key."""
NOTE = "lakectl_merged_by_rows"
"""The merge commit's metadata key listing the objects merged by rows."""
MAX_REPORTED = 100
"""Row conflicts reported per object (the count is always whole)."""


@dataclass(frozen=True, slots=True)
class RowRule:
    """One ``GLOB=rows:key=...`` strategy."""

    pattern: str
    key: tuple[str, ...]
    winner: str = "none"
    """``none``, ``source`` or ``dest`` (:class:`~lakectl.core.tables.merge.RowWinner`)."""
    declared: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Without ``key``: the declared tables and their keys, one of which each path takes."""

    def key_of(self, path: str) -> tuple[str, ...]:
        """The key the rows of ``path`` (an object, or a directory as ``dir/``) merge by."""
        from lakectl.core.tables.declared import PATH, key_for

        key = self.key or key_for(dict(self.declared), path)
        if not key:
            raise InvalidArgument(
                f"strategy {self.pattern}=rows names no key, and no table in {PATH} declares one for "
                f"{path}: declare it (lakectl tables declare) or name it (rows:key=col[,col])",
                path=path,
            )
        return key


def is_rows(value: str) -> bool:
    """Whether a merge strategy is a rows strategy (``GLOB=rows[:...]``, or ``rows``)."""
    pattern, mark, spec = value.partition(MARK)
    return value == ROWS or bool(mark and pattern and (not spec or spec.startswith(":")))


Declarations = Callable[[], Mapping[str, tuple[str, ...]]]
"""The tables the merge's sides declare, with their keys, read when a strategy needs them."""


def split_strategies(values: Sequence[str], declared: Declarations = dict) -> tuple[list[RowRule], list[str]]:
    """The ``rows`` rules among merge strategies, and the other strategies as they were."""
    rules: list[RowRule] = []
    rest: list[str] = []
    for value in values:
        if not is_rows(value):
            rest.append(value)
        elif value == ROWS:
            rules += _every_declared(declared())
        else:
            rules.append(_rule(value, declared))
    return rules, rest


def _every_declared(tables: Mapping[str, tuple[str, ...]]) -> list[RowRule]:
    """The strategy ``rows``: each declared table (the longest first) merged by its key."""
    from lakectl.core.tables.declared import PATH

    if not tables:
        raise InvalidArgument(
            f"strategy 'rows' merges the declared tables by rows, and {PATH} declares none: "
            "declare them (lakectl tables declare) or give GLOB=rows:key=col"
        )
    ordered = sorted(tables, key=lambda t: (-len(t), t))
    return [RowRule(t if t.endswith(".parquet") else f"{t}/**", tables[t]) for t in ordered]


def _rule(value: str, declared: Declarations) -> RowRule:
    pattern, _, spec = value.partition(MARK)
    options: dict[str, str] = {}
    for item in spec[1:].split(";") if spec[1:] else ():
        name, eq, text = item.partition("=")
        if not eq or name.strip() not in ("key", "winner") or name.strip() in options:
            raise InvalidArgument(
                f"strategy {value!r}: expected GLOB=rows[:key=col[,col]][;winner=source|dest]"
            )
        options[name.strip()] = text.strip()
    if "key" in options and not options["key"].strip(" ,"):
        raise InvalidArgument(f"strategy {value!r} names no key column (rows:key=col[,col])")
    key = tuple(c.strip() for c in options.get("key", "").split(",") if c.strip())
    winner = options.get("winner", "none")
    if winner not in ("none", "source", "dest"):
        raise InvalidArgument(f"strategy {value!r}: winner is source or dest, not {winner!r}")
    tables = {} if key else declared()
    if not key and not tables:
        from lakectl.core.tables.declared import PATH

        raise InvalidArgument(
            f"strategy {value!r} names no key, and {PATH} declares no table: declare the table's "
            "key (lakectl tables declare) or name it (rows:key=col[,col])"
        )
    return RowRule(pattern, key, winner, tuple(tables.items()))


@dataclass(frozen=True, slots=True)
class Unit:
    """Rows merged as one table: a partition directory's Parquet objects (``whole``), or one
    object both sides changed in place. ``sides`` holds the base's, the source's and the
    destination's objects in it, ``(path, row)`` by path; the merged rows go to ``output``."""

    directory: str
    key: tuple[str, ...]
    winner: str
    sides: tuple[tuple[tuple[str, Row], ...], tuple[tuple[str, Row], ...], tuple[tuple[str, Row], ...]]
    output: str
    whole: bool

    @property
    def paths(self) -> set[str]:
        return {path for side in self.sides for path, _ in side}


Outcome = Row | None | dict[str, Any]
"""A unit's merged object (None: no object, the merge left no rows where a side has none), or
its conflicts as data (``{"rows": [...], "schema": [...], "count": N}``)."""


class UnitRunner(Protocol):
    """What merges the units by rows: in-process by default (:func:`run_in_process`), or on
    Spark's executors (:mod:`lakectl.sparkjobs.tablemerge`); each outcome as :func:`merge_unit`'s."""

    def __call__(self, lake: Lake, units: Sequence[Unit]) -> list[Outcome]: ...


@dataclass
class Resolution:
    """The merge's updates once the rows strategy has run, and what stops it."""

    updates: list[tuple[str, Row | None]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Paths still in conflict (no rule, no Parquet, or conflicting rows)."""
    row_conflicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per path (a merged object, or a partition directory): ``{"rows", "schema", "count"}``."""
    merged: list[str] = field(default_factory=list)
    """What was merged by rows: objects, and partition directories as ``dir/``."""


def _rule_for(rules: Sequence[RowRule], path: str) -> int | None:
    if not path.endswith(".parquet"):
        return None
    return next((i for i, r in enumerate(rules) if glob_matches(r.pattern, path)), None)


def plan_units(
    lake: Lake,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    conflicts: Sequence[str],
    rules: Sequence[RowRule],
    skip: Collection[str] = (),
) -> list[Unit]:
    """The units to merge by rows, from the two sides' changes since ``base`` (cost follows the
    changes). A directory (under one rule) both sides changed is a unit of its own when a side
    added or removed an object in it (a rewrite, as Spark's writers make: their object names
    change each time); when both only changed objects in place, each object in ``conflicts`` is
    one. A directory one side changed, or both alike, keeps those objects, as the tree merge
    left them. Nothing under a prefix in ``skip`` is a unit (the Delta tables, whose logs say
    which of their files hold rows: :mod:`lakectl.core.tables.deltamerge`)."""
    changed: dict[tuple[str, int], list[tuple[bool, bool, bool, bool]]] = {}
    skipped = tuple(skip)
    for path, src, dst in join_changes(lake.trees.diff(base, source), lake.trees.diff(base, dest)):
        index = _rule_for(rules, path)
        if index is None or (skipped and path.startswith(skipped)):
            continue
        in_place = all(c is None or (c.old is not None and c.new is not None) for c in (src, dst))
        alike = src is not None and dst is not None and same_row(src.new, dst.new)
        changed.setdefault((path.rpartition("/")[0], index), []).append(
            (src is not None, dst is not None, in_place, alike)
        )
    units: list[Unit] = []
    wanted = set(conflicts)
    for (directory, index), marks in sorted(changed.items()):
        if not (any(m[0] for m in marks) and any(m[1] for m in marks)) or all(m[3] for m in marks):
            continue  # one side's changes, or the same changes on both: the tree merge's
        rule = rules[index]
        if all(m[2] for m in marks):
            for path in sorted(p for p in wanted if p.rpartition("/")[0] == directory):
                if _rule_for(rules, path) == index:
                    rows = [lake.trees.lookup(mid, path) for mid in (base, source, dest)]
                    one = tuple(((path, r),) if r is not None else () for r in rows)
                    units.append(Unit(directory, rule.key_of(path), rule.winner, one, path, False))  # type: ignore[arg-type]
            continue
        sides = tuple(tuple(_objects(lake, mid, directory, rules, index)) for mid in (base, source, dest))
        named = sides[2] or sides[1] or sides[0]
        units.append(Unit(directory, rule.key_of(f"{directory}/"), rule.winner, sides, named[0][0], True))  # type: ignore[arg-type]
    return units


def _objects(
    lake: Lake, mid: MetaRangeId, directory: str, rules: Sequence[RowRule], index: int
) -> list[tuple[str, Row]]:
    """The objects directly in ``directory`` the rule ``index`` merges (first rule wins)."""
    prefix = f"{directory}/" if directory else ""
    return [
        (path, row)
        for path, row in lake.trees.iter(mid, prefix=prefix)
        if "/" not in path[len(prefix) :] and _rule_for(rules, path) == index
    ]


def resolve(
    lake: Lake,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    plan: MergePlan,
    rules: Sequence[RowRule],
    runner: UnitRunner | None = None,
    skip: Collection[str] = (),
) -> Resolution:
    """The tree merge's ``plan`` with the units merged by rows (:func:`plan_units`): a
    whole-directory unit's objects on the destination are replaced by its merged object, and
    what the tree merge took from the source in it is dropped; an in-place unit's merged object
    takes its path. Blocks written are synced before this returns."""
    units = plan_units(lake, base, source, dest, plan.conflicts, rules, skip)
    outcomes = (runner or run_in_process)(lake, units) if units else []
    if units:
        lake.blocks.sync()  # the merged objects' blocks, before the commit names them
    out = Resolution()
    covered: set[str] = set()
    replaced: dict[str, Row | None] = {}
    for unit, outcome in zip(units, outcomes, strict=True):
        covered |= unit.paths | {unit.output}
        name = f"{unit.directory}/" if unit.whole else unit.output
        if isinstance(outcome, dict):
            out.row_conflicts[name] = outcome
            out.conflicts.append(name)
            continue
        out.merged.append(name)
        for path, _ in unit.sides[2]:
            replaced[path] = None
        if outcome is not None:
            replaced[unit.output] = outcome
    out.conflicts = sorted({*out.conflicts, *(p for p in plan.conflicts if p not in covered)})
    out.updates = sorted(
        [(p, r) for p, r in plan.updates if p not in covered] + list(replaced.items()), key=lambda u: u[0]
    )
    return out


def settle(
    lake: Lake,
    base: MetaRangeId,
    source: MetaRangeId,
    dest: MetaRangeId,
    plan: MergePlan,
    rules: Sequence[RowRule],
    runner: UnitRunner | None,
    what: str,
    skip: Collection[str] = (),
) -> dict[str, str]:
    """The tree merge's ``plan`` settled by the rows ``rules`` (:func:`resolve`): its updates
    replaced and its conflicts cleared, and the merge commit's metadata to add (:data:`NOTE`).
    ``MergeConflict`` (the paths, and ``details.rows``) when conflicts remain: ``what`` names
    the merge in its message."""
    found = resolve(lake, base, source, dest, plan, rules, runner, skip)
    if found.conflicts:
        rows = f", {len(found.row_conflicts)} with conflicting rows" if found.row_conflicts else ""
        raise MergeConflict(
            f"{what} has {len(found.conflicts)} conflicting path(s){rows}",
            paths=found.conflicts,
            rows=found.row_conflicts,
        )
    plan.updates, plan.conflicts = found.updates, []
    return {NOTE: record(found.merged)} if found.merged else {}


def run_in_process(lake: Lake, units: Sequence[Unit]) -> list[Outcome]:
    return [merge_unit(lake.blocks, unit, lake.confinement) for unit in units]


def merge_unit(blocks: Any, unit: Unit, confinement: Confinement | None = None) -> Outcome:
    """One unit merged by rows (:func:`lakectl.core.tables.merge.merge_rows`) with the blocks of
    ``blocks``; the merged object written like the destination's version (else the source's):
    its content type, compression and row-group size. Nothing is synced here."""
    from lakectl.core.tables.merge import RowWinner, merge_rows

    read = [
        _read(blocks, path, side, confinement)
        for path, side in zip((unit.output,) * 3, unit.sides, strict=True)
    ]
    result = merge_rows(read[0][0], read[1][0], read[2][0], unit.key, RowWinner(unit.winner))
    if result.table is None:
        return {
            "rows": [c.to_dict() for c in result.conflicts[:MAX_REPORTED]],
            "schema": [c.to_dict() for c in result.schema_conflicts],
            "count": len(result.conflicts) + len(result.schema_conflicts),
        }
    if unit.whole and result.table.num_rows == 0 and not (unit.sides[1] and unit.sides[2]):
        return None  # a side removed the partition's objects, and no row is left to keep
    like = unit.sides[2] or unit.sides[1]
    meta = read[2][1] if unit.sides[2] else read[1][1]
    return _write(blocks, result.table, like[0][1] if like else None, meta)


def _read(
    blocks: Any, where: str, objects: Sequence[tuple[str, Row]], confinement: Confinement | None
) -> tuple[pa.Table | None, Any]:
    """A side's rows in the unit (None when it has no object there) and its first object's
    Parquet metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakectl.core.blocks.data import read_object
    from lakectl.core.importing.sources import read_external

    tables, meta = [], None
    for path, row in objects:
        entry = Entry.from_row(row)
        chunks = (
            read_external(entry, 0, None, blocks, confinement)
            if entry.external is not None
            else read_object(blocks, entry.locators, checksum=entry.checksum)
        )
        try:
            f = pq.ParquetFile(io.BytesIO(b"".join(chunks)))
            tables.append(_without_views(f.read()))
        except Exception as e:  # pyarrow raises several kinds for a file that is no Parquet
            raise InvalidArgument(
                f"cannot merge {path} by rows: it is not readable as Parquet: {e}", path=path
            ) from e
        meta = meta if meta is not None else f.metadata
    if not tables:
        return None, None
    try:
        return pa.concat_tables(tables, promote_options="default"), meta
    except (pa.ArrowException, ValueError) as e:
        raise InvalidArgument(
            f"cannot merge {where} by rows: its objects' schemas differ: {e}", path=where
        ) from e


def _without_views(table: pa.Table) -> pa.Table:
    """``table`` with its view columns (``string_view``, ``binary_view``, as some writers store
    strings, Delta's among them) as plain strings and binaries: one writer's file and another's
    hold the same column."""
    import pyarrow as pa

    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    if not any(f.type in plain for f in table.schema):
        return table
    return table.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in table.schema]))


def _write(blocks: Any, table: pa.Table, like: Row | None, meta: Any) -> Row:
    """``table`` as a new Parquet object written like ``like``, with ``meta``'s compression and
    row-group size."""
    import pyarrow.parquet as pq

    from lakectl.core.blocks.data import write_object
    from lakectl.core.writes import entry_for

    compression, group_rows = "snappy", None
    if meta is not None and meta.num_row_groups and meta.num_columns:
        compression = str(meta.row_group(0).column(0).compression).lower()
        group_rows = meta.row_group(0).num_rows or None
    content_type = Entry.from_row(like).content_type if like is not None else None
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression, row_group_size=group_rows)
    out.seek(0)
    written = write_object(blocks, out)
    return entry_for(written.size, written.checksum, written.locators, content_type or None, None).to_row()


def record(paths: Sequence[str], limit: int = 3000) -> str:
    """The merge commit's note of the objects merged by rows (:data:`NOTE`), kept within the
    metadata value limit."""
    text = ",".join(paths)
    if len(text) <= limit:
        return text
    shown: list[str] = []
    for p in paths:
        if len(",".join([*shown, p])) > limit - 40:
            break
        shown.append(p)
    return ",".join(shown) + f",…(+{len(paths) - len(shown)} more)"
