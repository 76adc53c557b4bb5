"""The ``rows`` merge strategy on a lake against a model of dicts: a random partitioned table
(``t/day=<d>/p.parquet``, rows ``id -> (a, b)`` with nulls) committed on main, random row edits on
a branch and on main after it (cells updated, rows deleted, rows added, an added id sometimes
colliding with the other side's in the same partition; a partition's object sometimes deleted,
or rewritten under a new name as Spark's writers do), then the branch merged into main by rows
(with no winner, or either). The model predicts, per partition directory, from the rows and names
alone: kept by locators (changed on one side or alike on both), or merged by rows (the directory
as a whole when a side renamed or deleted its object, else the object in place), or the
conflicts (key, kind, columns) that refuse the merge and leave main's head where it was."""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakectl.core import listing as lake_listing
from lakectl.core import merging, opening, tablemerge, writes
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.errors import MergeConflict

REPO = "rep"
SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.string())])
COLUMNS = ("a", "b")
WINNERS = ("none", "source", "dest")

Row = tuple[int | None, str | None]
Rows = dict[int, Row]
Part = Rows | None
"""A partition object's rows; None: no object (a side deleted it)."""
Conflict = tuple[int, str, tuple[str, ...]]
"""Key, kind, columns."""

# small value domains, so that both sides often write the same value to the same cell
cells = (st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.sampled_from(["x", "y"])))
rows_of = st.tuples(*cells)


def path(day: int, name: str = "p") -> str:
    return f"t/day={day}/{name}.parquet"


def directory(day: int) -> str:
    return f"t/day={day}/"


def base_ids(day: int) -> list[int]:
    return [10 * day + i for i in range(8)]


def new_ids(day: int, side: int, mode: str) -> list[int]:
    """Ids a side may add to the partition: unique across the table on each side; shared between
    the sides (``free`` edits) so that the same id is sometimes added on both."""
    start = 1000 + 10 * day
    return [start + i for i in range(3)] if mode == "free" else [start + 3 * side + i for i in range(3)]


class Mode:
    """How the two sides' edits may meet: ``free`` (anywhere: conflicts are likely), ``rows``
    (each side updates and deletes only its own half of the rows), ``columns`` (the source
    updates only ``a``, dest only ``b``, no deletes: cell-level merges)."""

    ALL = ("free", "rows", "columns")


@st.composite
def edited(draw: st.DrawFn, rows: Rows, day: int, side: int, mode: str) -> Part:
    """The partition as one side (0: source, 1: dest) leaves it: untouched, or some cells updated
    (maybe to the value they had), some rows deleted, some new ids added; now and then (``free``)
    the object deleted."""
    how = draw(st.integers(0, 9))  # 0 (what hypothesis draws most) is an edit
    if how in (7, 8):
        return dict(rows)
    if how == 9 and mode == "free":
        return None
    out = dict(rows)
    ids = sorted(out)
    if mode == "rows":
        ids = ids[side::2]
    columns = [side] if mode == "columns" else [0, 1]
    if ids:
        for k, (i, v) in draw(
            st.lists(
                st.tuples(
                    st.sampled_from(ids), st.one_of(*(st.tuples(st.just(i), cells[i]) for i in columns))
                ),
                min_size=1,
                max_size=4,
            )
        ):
            a, b = out[k]
            out[k] = (v, b) if i == 0 else (a, v)  # type: ignore[assignment]
        if mode != "columns":
            for k in draw(st.lists(st.sampled_from(ids), unique=True, max_size=2)):
                del out[k]
    pool = new_ids(day, side, mode)
    for k in draw(st.lists(st.sampled_from(pool), unique=True, min_size=0 if ids else 1, max_size=2)):
        out[k] = draw(rows_of)
    return out


@dataclass(frozen=True)
class Scenario:
    base: tuple[Rows, ...]
    """Per partition (day = index)."""
    source: tuple[Part, ...]
    """The branch ``fix``."""
    dest: tuple[Part, ...]
    """``main`` after the branch."""
    winner: str
    mode: str
    renamed: tuple[tuple[bool, bool], ...]
    """Per partition, whether the source and dest write their edit under a new name."""

    def name(self, day: int, side: int) -> str:
        """The object name a side leaves the partition with (when it has one)."""
        after = (self.source, self.dest)[side][day]
        changed = after != self.base[day]
        return f"r{side}" if changed and self.renamed[day][side] else "p"


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    days = draw(st.integers(2, 4))
    base = tuple(
        draw(st.dictionaries(st.sampled_from(base_ids(d)), rows_of, min_size=1, max_size=6))
        for d in range(days)
    )
    mode = draw(st.sampled_from(Mode.ALL))
    source = tuple(draw(edited(base[d], d, 0, mode)) for d in range(days))
    dest = tuple(draw(edited(base[d], d, 1, mode)) for d in range(days))
    renamed = tuple((draw(st.booleans()), draw(st.booleans())) for _ in range(days))
    return Scenario(base, source, dest, draw(st.sampled_from(WINNERS)), mode, renamed)


# -- the model ---------------------------------------------------------------------------------


def merge_model(base: Rows, source: Part, dest: Part, winner: str) -> tuple[Rows, list[Conflict]]:
    """The three-way row merge from the rules: the merged rows, or the conflicts (no winner). A
    deleted object is a table with no rows."""
    source, dest = source or {}, dest or {}
    merged: Rows = {}
    conflicts: list[Conflict] = []
    for k in sorted(set(base) | set(source) | set(dest)):
        b, s, d = base.get(k), source.get(k), dest.get(k)
        result: Row | None
        conflict: tuple[str, tuple[str, ...]] | None = None
        if s == b:  # the source left it: dest's version (null equals null in tuples too)
            result = d
        elif d == b or s == d:  # dest left it, or the same change on both
            result = s
        elif b is None:
            assert s is not None and d is not None
            differ = tuple(c for i, c in enumerate(COLUMNS) if s[i] != d[i])
            conflict, result = ("both-added", differ), None
        elif s is None or d is None:
            changer = s if s is not None else d
            assert changer is not None
            changed = tuple(c for i, c in enumerate(COLUMNS) if changer[i] != b[i])
            conflict, result = ("deleted-and-changed", changed), None
        else:
            cell: list[Any] = []
            clash: list[str] = []
            for i, c in enumerate(COLUMNS):
                s_changed, d_changed = s[i] != b[i], d[i] != b[i]
                if s_changed and d_changed and s[i] != d[i]:
                    clash.append(c)
                cell.append(s[i] if s_changed else d[i])
            if clash:
                conflict, result = ("both-changed", tuple(clash)), None
            else:
                result = (cell[0], cell[1])
        if conflict is not None:
            if winner == "none":
                conflicts.append((k, *conflict))
                continue
            result = s if winner == "source" else d
        if result is not None:
            merged[k] = result
    return merged, conflicts


@dataclass(frozen=True)
class Expected:
    """Per partition directory: which version main ends with (``source``, ``dest`` by locators,
    or ``rows`` merged), the object it holds then (name and rows; None: no object), the row
    conflicts of the units that have some (keyed by object path, or by the directory when the
    directory is the unit), and the units merged by rows."""

    kept: dict[int, str]
    objects: dict[int, tuple[str, Rows] | None]
    conflicts: dict[str, list[Conflict]]
    by_rows: list[str]


def expect(sc: Scenario) -> Expected:
    kept: dict[int, str] = {}
    objects: dict[int, tuple[str, Rows] | None] = {}
    conflicts: dict[str, list[Conflict]] = {}
    by_rows: list[str] = []
    for day, (b, s, d) in enumerate(zip(sc.base, sc.source, sc.dest, strict=True)):
        sname, dname = sc.name(day, 0), sc.name(day, 1)
        # equal rows are equal bytes (sorted, one schema, one writer): the tree merge sees no
        # change on a side that left the rows as the base had them, and the same change on two
        # sides that wrote the same rows under the same name, or removed the partition both (a
        # side's name means nothing then: it only deleted the base's object)
        if s == b or (s == d and (s is None or sname == dname)):
            kept[day], objects[day] = "dest", None if d is None else (dname, d)
            continue
        if d == b:
            kept[day], objects[day] = "source", None if s is None else (sname, s)
            continue
        kept[day] = "rows"
        whole = s is None or d is None or sname != "p" or dname != "p"
        unit = directory(day) if whole else path(day)
        by_rows.append(unit)
        rows, found = merge_model(b, s, d, sc.winner)
        if found:
            conflicts[unit] = found
        name = dname if d is not None else sname if s is not None else "p"
        # a whole partition with no rows left keeps no object when a side removed its object
        objects[day] = None if whole and not rows and (s is None or d is None) else (name, rows)
    return Expected(kept, objects, conflicts, sorted(by_rows))


# -- the lake ----------------------------------------------------------------------------------


def parquet(rows: Rows) -> bytes:
    out = io.BytesIO()
    table = pa.Table.from_pylist([{"id": k, "a": a, "b": b} for k, (a, b) in sorted(rows.items())], SCHEMA)
    pq.write_table(table, out)
    return out.getvalue()


def read(lake: Lake, ref: str, q: str) -> tuple[list[int], Rows]:
    table = pq.read_table(io.BytesIO(b"".join(p.read(lake, REPO, ref, q))))
    got = table.to_pylist()
    return [r["id"] for r in got], {r["id"]: (r["a"], r["b"]) for r in got}


def write_side(lake: Lake, branch: str, sc: Scenario, side: int) -> bool:
    """Upload the partitions whose rows changed (under the side's name, the old object deleted
    when renamed) and commit them; whether there was a commit. Unchanged partitions are not
    re-uploaded: a staged entry equal to the committed one is a known core hazard
    (tests/property/test_graph_model.py), not what this test is about."""
    after = (sc.source, sc.dest)[side]
    changed = [d for d in range(len(after)) if after[d] != sc.base[d]]
    for d in changed:
        rows, name = after[d], sc.name(d, side)
        if rows is None or name != "p":
            writes.delete_objects(lake, REPO, branch, [path(d)])
        if rows is not None:
            writes.upload(lake, REPO, branch, path(d, name), parquet(rows))
    if changed:
        p.commit(lake, REPO, branch, f"edit {len(changed)} partition(s) on {branch}")
    return bool(changed)


def listing(lake: Lake, ref: str, day: int) -> dict[str, tuple[str, ...]]:
    """The partition directory's objects and their locators."""
    return {
        o.path: o.entry.locators
        for o in lake_listing.list_objects(lake, REPO, ref, directory(day))
        if o.entry is not None
    }


def full(k: int, row: Row | None) -> dict[str, Any] | None:
    return None if row is None else {"id": k, "a": row[0], "b": row[1]}


counter = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sc=scenarios())
def test_rows_merge_on_a_lake_matches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sc: Scenario
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    want = expect(sc)
    lake = opening.open_lake(str(tmp_path / f"lake-{next(counter)}"))
    try:
        p.create_repo(lake, REPO)
        for d, rows in enumerate(sc.base):
            writes.upload(lake, REPO, "main", path(d), parquet(rows))
        p.commit(lake, REPO, "main", "base")
        p.create_branch(lake, REPO, "fix", "main")
        fix_moved = write_side(lake, "fix", sc, 0)
        write_side(lake, "main", sc, 1)
        listings = {
            side: {day: listing(lake, branch, day) for day in want.kept}
            for side, branch in (("source", "fix"), ("dest", "main"))
        }
        head = p.get_commit(lake, REPO, "main").id
        rule = "t/**=rows:key=id" + ("" if sc.winner == "none" else f";winner={sc.winner}")

        if want.conflicts:
            event(f"refused: row conflicts, {sc.mode} edits")
            with pytest.raises(MergeConflict) as refused:
                merging.merge(lake, REPO, "fix", "main", [rule])
            assert sorted(refused.value.paths) == sorted(want.conflicts)
            details = refused.value.details["rows"]
            assert sorted(details) == sorted(want.conflicts)
            for q, conflicts in want.conflicts.items():
                got = details[q]
                assert got["count"] == len(conflicts) and got["schema"] == []
                assert [(c["key"]["id"], c["kind"], tuple(c["columns"])) for c in got["rows"]] == conflicts
                day = int(q.split("=")[1].split("/")[0])
                for c in got["rows"]:
                    k = c["key"]["id"]
                    assert c["base"] == full(k, sc.base[day].get(k))
                    assert c["source"] == full(k, (sc.source[day] or {}).get(k))
                    assert c["dest"] == full(k, (sc.dest[day] or {}).get(k))
            assert p.get_commit(lake, REPO, "main").id == head
            return

        merged = merging.merge(lake, REPO, "fix", "main", [rule])
        assert merged.changed == fix_moved
        renames = sum(n != "p" for day in range(len(sc.base)) for n in (sc.name(day, 0), sc.name(day, 1)))
        event(f"merged, {len(want.by_rows)} unit(s) by rows, {renames} renamed, winner {sc.winner}")
        for day, how in want.kept.items():
            now = listing(lake, "main", day)
            if how != "rows":
                assert now == listings[how][day], day
            found = want.objects[day]
            if found is None:
                assert now == {}, day
                continue
            name, rows_wanted = found
            assert list(now) == [path(day, name)], day
            ids, rows = read(lake, "main", path(day, name))
            assert ids == sorted(ids), day
            assert rows == rows_wanted, day
        if not fix_moved:
            assert p.get_commit(lake, REPO, "main").id == head
            return
        note = merged.commit.metadata.get(tablemerge.NOTE)
        assert note == (",".join(want.by_rows) if want.by_rows else None)
    finally:
        lake.close()
