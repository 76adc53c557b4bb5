"""The ``lakefs`` source's change feed (``since``) on a real local[2] Spark, embedded and against
a live server: what a range of commits changed under a prefix, insert and delete rows with the
commit and the path of each object, appended objects as their appended lines only."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakectl.spark.source import FEED_COLUMNS
from tests.server.conftest import unique
from tests.spark.test_source import Lake, events, parquet, read
from tests.spark.test_source import lake as lake  # the fixture: embedded, and against a live server


def feed(spark: Any, uri: str, since: str, **options: str) -> Any:
    return read(spark, uri, since=since, **options)


def test_inserts_and_deletes_over_commits_with_their_commit_and_path(spark: Any, lake: Lake) -> None:
    name = unique("feed")
    b = lake.backend
    b.create_repo(name)
    for day in (1, 2, 3):
        b.upload(name, "main", f"t/day={day}/part-0.parquet", parquet(events(day, 10)))
    b.upload(name, "main", "other/x.parquet", parquet(events(9, 10)))
    start = b.commit(name, "main", "three days").id
    b.upload(name, "main", "t/day=4/part-0.parquet", parquet(events(4, 5)))
    added = b.commit(name, "main", "a fourth day").id
    b.upload(name, "main", "t/day=2/part-0.parquet", parquet(events(2, 3)))  # rewritten: 3 rows
    b.delete_objects(name, "main", ["t/day=1/part-0.parquet"])
    b.upload(name, "main", "other/x.parquet", parquet(events(8, 1)))  # not under t/
    changed = b.commit(name, "main", "day 2 redone, day 1 gone").id
    lake.register(spark)
    df = feed(spark, f"lakefs://{name}/main/t", start)
    assert [f.name for f in df.schema.fields] == [
        "id",
        "name",
        "score",
        "day",
        "_change_type",
        "_commit_id",
        "_path",
    ]
    rows = {(r._path, r._change_type, r._commit_id, r.day) for r in df.collect()}
    assert rows == {
        ("t/day=1/part-0.parquet", "delete", changed, 1),
        ("t/day=2/part-0.parquet", "insert", changed, 2),
        ("t/day=4/part-0.parquet", "insert", added, 4),
    }
    counts = {r._path: r["count"] for r in df.groupBy("_path").count().collect()}
    assert counts == {"t/day=1/part-0.parquet": 10, "t/day=2/part-0.parquet": 3, "t/day=4/part-0.parquet": 5}
    one_commit = feed(spark, f"lakefs://{name}/main/t", added)
    assert {r._commit_id for r in one_commit.collect()} == {changed}


def test_appended_lines_alone_for_json_lines_and_text(spark: Any, lake: Lake) -> None:
    name = unique("feedappend")
    b = lake.backend
    b.create_repo(name)
    b.upload(name, "main", "logs/a.json", b'{"n": 1}\n{"n": 2}\n')
    b.upload(name, "main", "text/a.txt", b"old line\n")
    start = b.commit(name, "main", "start").id
    b.append(name, "main", "logs/a.json", b'{"n": 3}\n')
    b.append(name, "main", "text/a.txt", b"new line\n")
    first = b.commit(name, "main", "appended").id
    b.append(name, "main", "logs/a.json", b'{"n": 4}\n')
    second = b.commit(name, "main", "appended again").id
    lake.register(spark)
    docs = feed(spark, f"lakefs://{name}/main/logs", start, format="json")
    assert sorted((r.n, r._change_type, r._commit_id) for r in docs.collect()) == [
        (3, "insert", second),
        (4, "insert", second),
    ]
    lines = feed(spark, f"lakefs://{name}/main/text/a.txt", start, format="text")
    assert [(r.value, r._commit_id, r._path) for r in lines.collect()] == [("new line", first, "text/a.txt")]


def test_from_not_an_ancestor_and_an_empty_feed(spark: Any, lake: Lake) -> None:
    name = unique("feedbad")
    b = lake.backend
    b.create_repo(name)
    b.upload(name, "main", "t/a.txt", b"a\n")
    first = b.commit(name, "main", "first").id
    b.create_branch(name, "dev", "main")
    b.upload(name, "dev", "t/a.txt", b"b\n")
    on_dev = b.commit(name, "dev", "on dev").id
    lake.register(spark)
    with pytest.raises(Exception, match="is not an ancestor of 'main': a change feed reads a range"):
        feed(spark, f"lakefs://{name}/main/t", on_dev, format="text").count()
    with pytest.raises(Exception, match="nothing changed under"):
        feed(spark, f"lakefs://{name}/main/t", first, format="text").count()
    empty = spark.read.format("lakefs").schema("value string, _change_type string")
    assert empty.options(since=first, format="text").load(f"lakefs://{name}/main/t").count() == 0


def table(rows: list[tuple[int, str, float]]) -> bytes:
    ids, names, scores = zip(*rows, strict=True) if rows else ((), (), ())
    return parquet(
        pa.table(
            {"id": pa.array(ids, pa.int64()), "name": list(names), "score": pa.array(scores, pa.float64())}
        )
    )


def test_rows_by_key_commit_by_commit_with_delta_change_types(spark: Any, lake: Lake) -> None:
    name = unique("feedkey")
    b = lake.backend
    b.create_repo(name)
    b.upload(name, "main", "t/part-0.parquet", table([(1, "a", 1.0), (2, "b", 2.0), (3, "c", 3.0)]))
    b.upload(name, "main", "t/part-1.parquet", table([(10, "x", 0.0), (11, "y", 0.0)]))
    start = b.commit(name, "main", "start").id
    b.upload(name, "main", "t/part-0.parquet", table([(1, "a", 1.5), (3, "c", 3.0), (6, "f", 6.0)]))
    edited = b.commit(name, "main", "1 changed, 2 gone, 6 new").id
    b.upload(name, "main", "t/part-0.parquet", table([(1, "a", 1.5), (6, "f", 6.0)]))
    b.upload(name, "main", "t/part-2.parquet", table([(3, "c", 3.0), (7, "g", 7.0)]))  # 3 moved, unchanged
    b.delete_objects(name, "main", ["t/part-1.parquet"])
    moved = b.commit(name, "main", "3 moved, 7 new, part-1 gone").id
    lake.register(spark)
    df = feed(spark, f"lakefs://{name}/main/t", start, key="id")
    assert [f.name for f in df.schema.fields] == ["id", "name", "score", *FEED_COLUMNS]
    rows = sorted((r._commit_id == moved, r.id, r._change_type, r.score, r._path) for r in df.collect())
    assert rows == [
        (False, 1, "update_postimage", 1.5, "t/part-0.parquet"),
        (False, 1, "update_preimage", 1.0, "t/part-0.parquet"),
        (False, 2, "delete", 2.0, "t/part-0.parquet"),
        (False, 6, "insert", 6.0, "t/part-0.parquet"),
        (True, 7, "insert", 7.0, "t/part-2.parquet"),
        (True, 10, "delete", 0.0, "t/part-1.parquet"),
        (True, 11, "delete", 0.0, "t/part-1.parquet"),
    ]
    assert {r._commit_id for r in df.collect() if r.id < 7} == {edited}

    b.upload(name, "main", "c/a.csv", b"id,v\n1,one\n2,two\n")
    csv_start = b.commit(name, "main", "csv").id
    b.upload(name, "main", "c/a.csv", b"id,v\n1,uno\n2,two\n")
    b.commit(name, "main", "csv edited")
    edits = feed(spark, f"lakefs://{name}/main/c", csv_start, key="id", format="csv", header="true")
    assert sorted((r.id, r.v, r._change_type) for r in edits.collect()) == [
        (1, "one", "update_preimage"),
        (1, "uno", "update_postimage"),
    ]

    b.upload(name, "main", "t/part-3.parquet", table([(8, "h", 0.0), (8, "again", 0.0)]))
    b.commit(name, "main", "a duplicate key")
    with pytest.raises(Exception, match="key is not unique"):
        feed(spark, f"lakefs://{name}/main/t", moved, key="id").count()
    with pytest.raises(Exception, match="key column 'nope' is not a column"):
        feed(spark, f"lakefs://{name}/main/t", start, key="nope").count()
    with pytest.raises(Exception, match="key matches the rows of a change feed: give since"):
        read(spark, f"lakefs://{name}/main/t", key="id").count()
