"""Structured Streaming from a branch on a real local[2] Spark, embedded and against a live server:
each new commit that changes the loaded path is input, in commit order; offsets are commit ids,
so a query restarted on its checkpoint reads each commit once; ``startingCommit``,
``maxCommitsPerTrigger``, ``readChangeFeed``; a branch moved back fails the query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles
from pyspark.sql.types import LongType, StructField, StructType

from lakectl.spark.source import LakeFSDataSource
from lakectl.spark.streamsource import LakeFSStreamReader, offset
from tests.server.conftest import unique
from tests.spark.test_source import Lake
from tests.spark.test_source import lake as lake  # the fixture: embedded, and against a live server

Batches = list[tuple[int, list[Any]]]


def lines(ids: range) -> bytes:
    return "".join(json.dumps({"n": i}) + "\n" for i in ids).encode()


def put(lake: Lake, repo: str, path: str, ids: range, branch: str = "main") -> str:
    """Upload one JSON Lines object and commit it: the commit's id."""
    lake.backend.upload(repo, branch, path, lines(ids))
    return lake.backend.commit(repo, branch, f"put {path}").id


def run(
    spark: Any, uri: str, checkpoint: Path, schema: str = "", once: bool = False, **options: str
) -> Batches:
    """One run of a stream of ``uri`` to its end (``availableNow``, or ``once``): each batch with
    rows, as its id and its rows."""
    got: Batches = []
    reader = spark.readStream.format("lakefs").options(format="json", **options)
    stream = (reader.schema(schema) if schema else reader).load(uri)
    writer = stream.writeStream.option("checkpointLocation", str(checkpoint))
    writer = writer.foreachBatch(lambda df, batch: got.append((batch, df.collect())))
    query = (writer.trigger(once=True) if once else writer.trigger(availableNow=True)).start()
    assert query.awaitTermination(180), "the stream did not end"
    return [(batch, rows) for batch, rows in got if rows]


def numbers(batches: Batches) -> list[int]:
    return sorted(r.n for _, rows in batches for r in rows)


def by_batch(batches: Batches) -> list[tuple[int, set[str]]]:
    return [(batch, {r._commit_id for r in rows}) for batch, rows in batches]


@pytest.fixture
def repo(lake: Lake, spark: Any) -> str:
    name = unique("streamin")
    lake.backend.create_repo(name)
    lake.register(spark)
    return name


def test_only_commits_after_the_start_that_change_the_path_in_commit_order(
    spark: Any, lake: Lake, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}/main/t"
    with pytest.raises(Exception, match=r"needs a schema: \.schema"):  # nothing under t/ yet
        spark.readStream.format("lakefs").option("format", "json").load(uri)
    put(lake, repo, "t/old.json", range(100, 102))  # before the query starts: not read
    schema = "n long, _commit_id string"  # a feed column named in a schema is filled
    assert run(spark, uri, tmp_path, schema) == []  # started (latest): its start is the head now
    first = put(lake, repo, "t/a.json", range(0, 3))
    put(lake, repo, "other/x.json", range(100, 103))
    second = put(lake, repo, "t/b.json", range(3, 5))
    batches = run(spark, uri, tmp_path, schema, maxCommitsPerTrigger="1")
    assert by_batch(batches) == [(1, {first}), (2, {second})]
    assert numbers(batches) == list(range(5))


def test_a_restarted_query_reads_each_commit_once(spark: Any, lake: Lake, repo: str, tmp_path: Path) -> None:
    uri = f"lakefs://{repo}/main/t"
    put(lake, repo, "t/a.json", range(0, 5))
    assert numbers(run(spark, uri, tmp_path, startingCommit="earliest")) == list(range(5))
    put(lake, repo, "t/b.json", range(5, 9))
    put(lake, repo, "t/c.json", range(9, 10))
    assert numbers(run(spark, uri, tmp_path, startingCommit="earliest")) == list(range(5, 10))
    assert run(spark, uri, tmp_path) == []
    put(lake, repo, "t/d.json", range(10, 12))
    assert numbers(run(spark, uri, tmp_path)) == [10, 11]


def test_starting_commit_an_id_a_ref_or_earliest(spark: Any, lake: Lake, repo: str, tmp_path: Path) -> None:
    uri = f"lakefs://{repo}/main/t"
    first = put(lake, repo, "t/a.json", range(0, 2))
    put(lake, repo, "t/b.json", range(2, 4))
    put(lake, repo, "t/c.json", range(4, 6))
    assert numbers(run(spark, uri, tmp_path / "1", startingCommit=first)) == [2, 3, 4, 5]
    assert numbers(run(spark, uri, tmp_path / "2", startingCommit="main~1")) == [4, 5]
    assert numbers(run(spark, uri, tmp_path / "3", startingCommit="earliest")) == list(range(6))


def test_max_commits_per_trigger_under_available_now_and_none_under_once(
    spark: Any, lake: Lake, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}/main/t"
    start = put(lake, repo, "t/a.json", range(0, 1))
    made = [put(lake, repo, f"t/{i}.json", range(i, i + 1)) for i in (1, 2, 3)]
    options = {"startingCommit": start, "maxCommitsPerTrigger": "1", "readChangeFeed": "true"}
    batches = run(spark, uri, tmp_path, **options)
    assert by_batch(batches) == [(0, {made[0]}), (1, {made[1]}), (2, {made[2]})]
    more = [put(lake, repo, f"t/{i}.json", range(i, i + 1)) for i in (4, 5)]
    assert by_batch(run(spark, uri, tmp_path, once=True, **options)) == [(3, set(more))]


def test_deletes_with_read_change_feed_skipped_without_and_appended_lines_alone(
    spark: Any, lake: Lake, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}/main/t"
    b = lake.backend
    b.upload(repo, "main", "t/gone.json", lines(range(10, 12)))
    start = put(lake, repo, "t/log.json", range(0, 2))
    b.append(repo, "main", "t/log.json", lines(range(2, 3)))
    b.delete_objects(repo, "main", ["t/gone.json"])
    changed = b.commit(repo, "main", "appended, removed").id
    feed = run(spark, uri, tmp_path / "feed", startingCommit=start, readChangeFeed="true")
    assert sorted((r.n, r._change_type, r._commit_id, r._path) for _, rows in feed for r in rows) == [
        (2, "insert", changed, "t/log.json"),
        (10, "delete", changed, "t/gone.json"),
        (11, "delete", changed, "t/gone.json"),
    ]
    plain = run(spark, uri, tmp_path / "plain", startingCommit=start)
    assert [r.asDict() for _, rows in plain for r in rows] == [{"n": 2}]
    log = run(spark, f"{uri}/log.json", tmp_path / "log", startingCommit=start)  # one object
    assert [r.asDict() for _, rows in log for r in rows] == [{"n": 2}]
    with pytest.raises(Exception, match="readChangeFeed reads a range of commits: give since"):
        spark.read.format("lakefs").options(format="json", readChangeFeed="true").load(uri).count()


def test_a_branch_moved_back_past_the_last_commit_read_fails_the_query(
    spark: Any, lake: Lake, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}/feed/t"
    base = put(lake, repo, "t/a.json", range(0, 1))
    lake.backend.create_branch(repo, "feed", "main")
    put(lake, repo, "t/b.json", range(1, 2), branch="feed")
    assert numbers(run(spark, uri, tmp_path, startingCommit=base)) == [1]
    lake.backend.delete_branch(repo, "feed")
    lake.backend.create_branch(repo, "feed", base)
    put(lake, repo, "t/c.json", range(2, 3), branch="feed")
    with pytest.raises(Exception, match=r"is not an ancestor of 'feed'.*the branch was moved back"):
        run(spark, uri, tmp_path)


def test_a_branch_created_again_at_a_merge_of_the_last_commit_read_goes_on_from_the_merge(
    lake: Lake, repo: str
) -> None:
    """No Spark: the offsets alone, for a branch whose first-parent line reaches the last commit
    read only through a merge's second parent."""
    put(lake, repo, "t/a.json", range(0, 1))
    lake.backend.create_branch(repo, "side", "main")
    read = put(lake, repo, "t/b.json", range(1, 2))  # main: the stream has read up to here
    put(lake, repo, "t/c.json", range(2, 3), branch="side")  # not after ``read``: side's own line
    merge = lake.backend.merge(repo, "main", "side").commit.id  # main's line joins side's
    after = put(lake, repo, "t/d.json", range(3, 4), branch="side")
    connect = {"path": f"lakefs://{repo}/side/t", **lake.connect}
    reader = LakeFSStreamReader(LakeFSDataSource(connect), StructType([StructField("n", LongType())]))
    assert reader.latestOffset(offset(read), ReadMaxFiles(1)) == offset(merge)
    assert reader.latestOffset(offset(merge), ReadMaxFiles(1)) == offset(after)
    assert reader.latestOffset(offset(after), ReadAllAvailable()) == offset(after)


def keyed(rows: list[tuple[int, str]]) -> bytes:
    return "".join(json.dumps({"n": n, "v": v}) + "\n" for n, v in rows).encode()


def test_rows_by_key_each_commit_of_a_batch_against_its_first_parent(
    spark: Any, lake: Lake, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}/main/t"
    b = lake.backend
    b.upload(repo, "main", "t/a.json", keyed([(1, "a"), (2, "b")]))
    start = b.commit(repo, "main", "start").id
    b.upload(repo, "main", "t/a.json", keyed([(1, "A"), (3, "c")]))
    first = b.commit(repo, "main", "1 changed, 2 gone, 3 new").id
    b.upload(repo, "main", "t/a.json", keyed([(1, "AA"), (3, "c")]))
    second = b.commit(repo, "main", "1 changed again").id
    batches = run(spark, uri, tmp_path, startingCommit=start, key="n")
    got = sorted((r._commit_id == second, r.n, r._change_type, r.v) for _, rows in batches for r in rows)
    assert got == [
        (False, 1, "update_postimage", "A"),
        (False, 1, "update_preimage", "a"),
        (False, 2, "delete", "b"),
        (False, 3, "insert", "c"),
        (True, 1, "update_postimage", "AA"),
        (True, 1, "update_preimage", "A"),
    ]
    assert {r._commit_id for _, rows in batches for r in rows} == {first, second}
