"""The ``rows`` merge strategy on a lake: two branches that changed different rows of the same
Parquet object merge without a conflict, the objects only one side changed keep their blocks,
conflicting rows come back as data with nothing changed, a winner resolves them, and the merged
object is written like the destination's (compression, row groups)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakectl.core import listing as lake_listing
from lakectl.core import merging, opening, tablemerge, writes
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument, MergeConflict

RULE = "t/**=rows:key=id"


def parquet(ids: list[int], amounts: list[float], compression: str = "zstd") -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": ids, "amount": amounts}), out, compression=compression, row_group_size=2)
    return out.getvalue()


def read(lake: Lake, ref: str, path: str) -> dict[int, float]:
    data = b"".join(p.read(lake, "rep", ref, path))
    table = pq.read_table(io.BytesIO(data))
    return dict(zip(table["id"].to_pylist(), table["amount"].to_pylist(), strict=True))


def put(lake: Lake, branch: str, path: str, data: bytes) -> None:
    writes.upload(lake, "rep", branch, path, io.BytesIO(data))


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, "rep")
    put(opened, "main", "t/day=1/p.parquet", parquet([1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0]))
    put(opened, "main", "t/day=2/p.parquet", parquet([5, 6], [5.0, 6.0]))
    put(opened, "main", "t/day=3/p.parquet", parquet([7, 8], [7.0, 8.0]))
    p.commit(opened, "rep", "main", "three days")
    p.create_branch(opened, "rep", "fix", "main")
    yield opened
    opened.close()


def test_different_rows_of_one_object_merge(lake: Lake) -> None:
    put(lake, "fix", "t/day=1/p.parquet", parquet([1, 2, 3, 4, 9], [10.0, 2.0, 3.0, 4.0, 9.0]))
    put(lake, "fix", "t/day=2/p.parquet", parquet([5, 6], [5.0, 60.0]))  # only the source: taken whole
    p.commit(lake, "rep", "fix", "fix row 1, add 9; fix day 2")
    put(lake, "main", "t/day=1/p.parquet", parquet([1, 2, 3], [1.0, 20.0, 3.0]))  # row 2 changed, 4 deleted
    p.commit(lake, "rep", "main", "fix row 2, drop 4")
    day3 = p.stat(lake, "rep", "main", "t/day=3/p.parquet").entry
    fix_day2 = p.stat(lake, "rep", "fix", "t/day=2/p.parquet").entry

    with pytest.raises(MergeConflict) as refused:  # as whole objects, they conflict
        merging.merge(lake, "rep", "fix", "main")
    assert refused.value.paths == ["t/day=1/p.parquet"]

    merged = merging.merge(lake, "rep", "fix", "main", [RULE])
    assert read(lake, "main", "t/day=1/p.parquet") == {1: 10.0, 2: 20.0, 3: 3.0, 9: 9.0}
    assert merged.commit.metadata[tablemerge.NOTE] == "t/day=1/p.parquet"
    assert p.stat(lake, "rep", "main", "t/day=3/p.parquet").entry == day3  # the same blocks
    assert p.stat(lake, "rep", "main", "t/day=2/p.parquet").entry.locators == fix_day2.locators
    data = b"".join(p.read(lake, "rep", "main", "t/day=1/p.parquet"))
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD" and meta.row_group(0).num_rows == 2


def test_conflicting_rows_are_data_and_change_nothing(lake: Lake) -> None:
    put(lake, "fix", "t/day=1/p.parquet", parquet([1, 2, 3, 4], [1.0, 2.0, 30.0, 4.0]))
    p.commit(lake, "rep", "fix", "row 3 to 30")
    put(lake, "main", "t/day=1/p.parquet", parquet([1, 2, 3, 4], [1.0, 2.0, 33.0, 4.0]))
    head = p.commit(lake, "rep", "main", "row 3 to 33").id
    with pytest.raises(MergeConflict) as refused:
        merging.merge(lake, "rep", "fix", "main", [RULE])
    details = refused.value.details["rows"]["t/day=1/p.parquet"]
    assert details["count"] == 1
    (row,) = details["rows"]
    assert (row["key"], row["columns"], row["kind"]) == ({"id": 3}, ["amount"], "both-changed")
    assert p.get_commit(lake, "rep", "main").id == head

    merging.merge(lake, "rep", "fix", "main", ["t/**=rows:key=id;winner=source"])
    assert read(lake, "main", "t/day=1/p.parquet")[3] == 30.0


def test_bad_strategies_are_refused(lake: Lake) -> None:
    for bad in ("=rows:key=id", "t/**=rows:", "t/**=rows:key=", "t/**=rows:key=id;winner=me", "t/**=rows:id"):
        with pytest.raises(InvalidArgument):
            merging.merge(lake, "rep", "fix", "main", [bad])
    assert tablemerge.split_strategies(["dest-wins", "a/**=rows:key=x,y;winner=dest"]) == (
        [tablemerge.RowRule("a/**", ("x", "y"), "dest")],
        ["dest-wins"],
    )


def listing(lake: Lake, ref: str, prefix: str) -> list[str]:
    return [o.path for o in lake_listing.list_objects(lake, "rep", ref, prefix)]


def rows_under(lake: Lake, ref: str, prefix: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for path in listing(lake, ref, prefix):
        for k, v in read(lake, ref, path).items():
            assert k not in out, f"row {k} twice under {prefix}"
            out[k] = v
    return out


def test_partitions_both_sides_rewrote_merge_as_wholes(lake: Lake) -> None:
    """Spark's writers name their objects anew on each write: the directory is the unit, not the
    object, or two rewrites of one partition would merge into duplicated rows."""
    day3 = p.stat(lake, "rep", "main", "t/day=3/p.parquet").entry
    writes.delete_objects(lake, "rep", "fix", ["t/day=1/p.parquet"])
    put(lake, "fix", "t/day=1/part-00000-aaa.parquet", parquet([1, 2], [10.0, 2.0]))
    put(lake, "fix", "t/day=1/part-00001-aaa.parquet", parquet([3, 4], [3.0, 4.0]))
    p.commit(lake, "rep", "fix", "a job rewrote day 1: row 1 fixed")
    writes.delete_objects(lake, "rep", "main", ["t/day=1/p.parquet"])
    put(lake, "main", "t/day=1/part-00000-bbb.parquet", parquet([1, 2, 3, 4, 9], [1.0, 2.0, 30.0, 4.0, 9.0]))
    p.commit(lake, "rep", "main", "another job rewrote day 1: row 3 fixed, row 9 added")

    merged = merging.merge(lake, "rep", "fix", "main", [RULE])
    assert rows_under(lake, "main", "t/day=1/") == {1: 10.0, 2: 2.0, 3: 30.0, 4: 4.0, 9: 9.0}
    assert listing(lake, "main", "t/day=1/") == ["t/day=1/part-00000-bbb.parquet"]  # dest's name
    assert merged.commit.metadata[tablemerge.NOTE] == "t/day=1/"
    assert p.stat(lake, "rep", "main", "t/day=3/p.parquet").entry == day3


def test_a_rewrite_against_an_append_merges_every_row_once(lake: Lake) -> None:
    put(lake, "fix", "t/day=2/p.parquet", parquet([5, 6], [50.0, 6.0]))  # in place
    p.commit(lake, "rep", "fix", "row 5 fixed")
    put(lake, "main", "t/day=2/more.parquet", parquet([7, 10], [7.5, 10.0]))  # an append
    p.commit(lake, "rep", "main", "rows appended")
    merging.merge(lake, "rep", "fix", "main", [RULE])
    assert rows_under(lake, "main", "t/day=2/") == {5: 50.0, 6: 6.0, 7: 7.5, 10: 10.0}


def test_a_partition_one_side_emptied_goes_when_no_row_is_left(lake: Lake) -> None:
    writes.delete_objects(lake, "rep", "fix", ["t/day=2/p.parquet"])
    p.commit(lake, "rep", "fix", "day 2 dropped")
    put(lake, "main", "t/day=2/p.parquet", parquet([5, 6], [5.0, 66.0]))
    p.commit(lake, "rep", "main", "row 6 fixed")
    with pytest.raises(MergeConflict) as refused:
        merging.merge(lake, "rep", "fix", "main", [RULE])
    details = refused.value.details["rows"]["t/day=2/"]
    assert [(r["key"], r["kind"]) for r in details["rows"]] == [({"id": 6}, "deleted-and-changed")]
    merging.merge(lake, "rep", "fix", "main", ["t/**=rows:key=id;winner=source"])
    assert listing(lake, "main", "t/day=2/") == []


def test_objects_of_one_partition_with_other_schemas_are_refused(lake: Lake) -> None:
    writes.delete_objects(lake, "rep", "fix", ["t/day=2/p.parquet"])
    put(lake, "fix", "t/day=2/a.parquet", parquet([5, 6], [5.0, 6.5]))
    p.commit(lake, "rep", "fix", "day 2 rewritten")
    odd = io.BytesIO()
    pq.write_table(pa.table({"id": [11], "amount": ["eleven"]}), odd)
    put(lake, "main", "t/day=2/odd.parquet", odd.getvalue())
    head = p.commit(lake, "rep", "main", "an object of another schema").id
    with pytest.raises(InvalidArgument, match=r"t/day=2.*schemas differ"):
        merging.merge(lake, "rep", "fix", "main", [RULE])
    assert p.get_commit(lake, "rep", "main").id == head


def test_a_partition_both_sides_removed_alike_is_no_merge_by_rows(lake: Lake) -> None:
    for branch in ("fix", "main"):
        writes.delete_objects(lake, "rep", branch, ["t/day=3/p.parquet"])
    put(lake, "fix", "t/day=2/p.parquet", parquet([5, 6], [5.0, 60.0]))
    p.commit(lake, "rep", "fix", "day 3 dropped, row 6 fixed")
    p.commit(lake, "rep", "main", "day 3 dropped")
    merged = merging.merge(lake, "rep", "fix", "main", [RULE])
    assert tablemerge.NOTE not in merged.commit.metadata
    assert listing(lake, "main", "t/day=3/") == [] and read(lake, "main", "t/day=2/p.parquet")[6] == 60.0
