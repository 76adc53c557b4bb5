"""The ``lakefs`` Spark data source on a real local[2] Spark, against both an embedded lake and a
live server: reads of any version, partition columns, formats, and writes that become visible only
when the Spark job commits."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakectl.spark
from lakectl.client import Backend
from lakectl.client.local import LocalBackend
from lakectl.client.remote import RemoteBackend
from server.config import load_settings
from tests.server.conftest import serve, unique


def parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def events(day: int, rows: int = 100) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(day * 1000, day * 1000 + rows), pa.int64()),
            "name": [f"event-{i}" for i in range(rows)],
            "score": pa.array([i / 4 for i in range(rows)], pa.float64()),
        }
    )


class Lake:
    """One lake the tests write through a Backend and Spark reads through the data source."""

    def __init__(self, kind: str, backend: Backend, connect: dict[str, Any]) -> None:
        self.kind = kind
        self.backend = backend
        self.connect = connect

    def register(self, spark: Any) -> None:
        lakectl.spark.register(spark, **self.connect)

    def paths(self, repo: str, ref: str, prefix: str = "") -> list[str]:
        return [o.path for o in self.backend.list_objects(repo, ref, prefix)]


@pytest.fixture(scope="module", params=["embedded", "remote"])
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    if request.param == "embedded":
        home = tmp_path_factory.mktemp("lake")
        backend = LocalBackend(str(home))
        yield Lake("embedded", backend, {"home": str(home)})
        backend.close()
        return
    data_dir = tmp_path_factory.mktemp("server")
    with serve(load_settings(None, str(data_dir), environ={})) as live:
        endpoint = live.url.removesuffix("/api/v1")
        remote = RemoteBackend(endpoint, live.key_id, live.secret)
        connect = {"endpoint": endpoint, "access_key_id": live.key_id, "secret_access_key": live.secret}
        yield Lake("remote", remote, connect)
        remote.close()


@pytest.fixture
def repo(lake: Lake, spark: Any) -> str:
    """A repository with three days of events committed on main (one Parquet file a day)."""
    name = unique("spark")
    lake.backend.create_repo(name)
    for day in (1, 2, 3):
        lake.backend.upload(name, "main", f"events/day={day}/part-0.parquet", parquet(events(day)))
    lake.backend.upload(name, "main", "events/_SUCCESS", b"")
    lake.backend.commit(name, "main", "three days of events")
    lake.register(spark)
    return name


def read(spark: Any, uri: str, **options: str) -> Any:
    return spark.read.format("lakefs").options(**options).load(uri)


# -- reading -------------------------------------------------------------------------------------


def test_reads_parquet_with_the_schema_of_the_files_and_partition_columns(
    spark: Any, lake: Lake, repo: str
) -> None:
    df = read(spark, f"lakefs://{repo}/main/events")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "bigint"),
        ("name", "string"),
        ("score", "double"),
        ("day", "bigint"),
    ]
    rows = df.collect()
    assert len(rows) == 300
    assert sorted({(r.day, r.id // 1000) for r in rows}) == [(1, 1), (2, 2), (3, 3)]
    assert sum(r.score for r in rows) == 3 * sum(i / 4 for i in range(100))


def test_reads_any_version_commit_tag_and_branch(spark: Any, lake: Lake, repo: str) -> None:
    first = lake.backend.get_commit(repo, "main").id
    lake.backend.create_tag(repo, "v1", "main")
    lake.backend.upload(repo, "main", "events/day=4/part-0.parquet", parquet(events(4, 10)))
    lake.backend.commit(repo, "main", "a fourth day")
    lake.backend.upload(repo, "main", "events/day=5/part-0.parquet", parquet(events(5, 1)))  # staged
    assert read(spark, f"lakefs://{repo}/{first}/events").count() == 300
    assert read(spark, f"lakefs://{repo}/v1/events").count() == 300
    assert read(spark, f"lakefs://{repo}/main~1/events").count() == 300
    assert read(spark, f"lakefs://{repo}/main/events").count() == 311  # a branch: staged included


def test_a_filtered_query_does_not_change_what_the_next_query_of_the_same_dataframe_reads(
    spark: Any, lake: Lake, repo: str
) -> None:
    # Spark 4.3 reuses the reader a filter pushdown planned with for the next query of the same
    # DataFrame; a source that pruned files there would lose them here.
    df = read(spark, f"lakefs://{repo}/main/events")
    assert df.filter("day = 2").count() == 100
    assert df.filter("id > 3050").count() == 49
    assert df.count() == 300


def test_path_filters_choose_files_before_any_is_read(spark: Any, lake: Lake, repo: str) -> None:
    one_day = read(spark, f"lakefs://{repo}/main/events/day=2", basePath=f"lakefs://{repo}/main/events")
    assert {r.day for r in one_day.select("day").distinct().collect()} == {2}
    assert one_day.count() == 100
    without_base = read(spark, f"lakefs://{repo}/main/events/day=2")
    assert "day" not in without_base.columns
    lake.backend.upload(repo, "main", "events/day=1/notes.csv", b"a,b\n")
    globbed = read(spark, f"lakefs://{repo}/main/events", pathGlobFilter="*.parquet")
    assert globbed.count() == 300
    one_object = read(spark, f"lakefs://{repo}/main/events/day=3/part-0.parquet")
    assert one_object.count() == 100 and "day" not in one_object.columns


def test_a_user_schema_reads_only_its_columns(spark: Any, lake: Lake, repo: str) -> None:
    df = spark.read.format("lakefs").schema("score double, day bigint").load(f"lakefs://{repo}/main/events")
    assert df.columns == ["score", "day"]
    assert df.filter("day = 3").agg({"score": "sum"}).collect()[0][0] == sum(i / 4 for i in range(100))


def test_one_spark_partition_per_group_of_objects(spark: Any, lake: Lake) -> None:
    name = unique("parts")
    lake.backend.create_repo(name)
    for i in range(12):
        lake.backend.upload(name, "main", f"t/f{i:02d}.parquet", parquet(events(i, 10)))
    lake.register(spark)
    df = read(spark, f"lakefs://{name}/main/t")
    partitions = df.rdd.getNumPartitions()
    assert 2 <= partitions < 12  # small objects grouped, and every core has work
    assert df.count() == 120
    assert read(spark, f"lakefs://{name}/main/t", maxPartitionBytes="1").rdd.getNumPartitions() == 12


def test_csv_json_and_text(spark: Any, lake: Lake) -> None:
    name = unique("formats")
    lake.backend.create_repo(name)
    lake.backend.upload(name, "main", "csv/a.csv", b"id,city\n1,Oslo\n2,Lima\n")
    lake.backend.upload(name, "main", "csv/b.csv", b"id,city\n3,Pune\n")
    lake.backend.upload(name, "main", "json/a.json", b'{"id": 1, "tags": "x"}\n{"id": 2, "tags": "y"}\n')
    lake.backend.upload(name, "main", "text/a.txt", b"first line\nsecond line\n")
    lake.register(spark)
    cities = read(spark, f"lakefs://{name}/main/csv", format="csv", header="true")
    assert sorted((r.id, r.city) for r in cities.collect()) == [(1, "Oslo"), (2, "Lima"), (3, "Pune")]
    no_header = read(spark, f"lakefs://{name}/main/csv", format="csv")
    assert no_header.columns == ["_c0", "_c1"] and no_header.count() == 5
    docs = read(spark, f"lakefs://{name}/main/json", format="json")
    assert sorted((r.id, r.tags) for r in docs.collect()) == [(1, "x"), (2, "y")]
    lines = read(spark, f"lakefs://{name}/main/text", format="text")
    assert [r.value for r in lines.collect()] == ["first line", "second line"]


def test_bad_reads_are_clear_errors(spark: Any, lake: Lake, repo: str) -> None:
    with pytest.raises(Exception, match="no objects to read"):
        read(spark, f"lakefs://{repo}/main/nothing-here").count()
    with pytest.raises(Exception, match="unknown format"):
        read(spark, f"lakefs://{repo}/main/events", format="orc").count()
    with pytest.raises(Exception, match="invalid URI"):
        read(spark, "s3://bucket/events").count()
    with pytest.raises(Exception, match="not found"):
        read(spark, f"lakefs://{repo}/no-such-branch/events").count()


# -- writing -------------------------------------------------------------------------------------


def write(df: Any, uri: str, mode: str = "overwrite", **options: str) -> None:
    df.write.format("lakefs").mode(mode).options(**options).save(uri)


def test_a_job_output_is_staged_on_the_branch_when_the_job_commits(spark: Any, lake: Lake, repo: str) -> None:
    lake.backend.create_branch(repo, "etl", "main")
    df = read(spark, f"lakefs://{repo}/main/events").repartition(3)
    write(df.selectExpr("id", "score * 2 AS doubled"), f"lakefs://{repo}/etl/out")
    staged = lake.backend.diff_uncommitted(repo, "etl")
    assert len(staged) == 3 and all(c.type.value == "added" for c in staged)
    assert all(c.path.startswith("out/part-") and c.path.endswith(".parquet") for c in staged)
    back = read(spark, f"lakefs://{repo}/etl/out")
    assert back.count() == 300
    assert back.agg({"doubled": "sum"}).collect()[0][0] == 3 * sum(i / 2 for i in range(100))
    assert lake.paths(repo, "main", "out/") == []  # main untouched


def test_commit_message_commits_the_branch_and_overwrite_replaces_the_prefix(
    spark: Any, lake: Lake, repo: str
) -> None:
    lake.backend.create_branch(repo, "etl", "main")
    df = read(spark, f"lakefs://{repo}/main/events")
    write(df.coalesce(2), f"lakefs://{repo}/etl/out", commit_message="first run")
    first = set(lake.paths(repo, "etl", "out/"))
    head = lake.backend.get_commit(repo, "etl")
    assert head.message == "first run"
    assert head.metadata["spark.rows"] == "300" and head.metadata["spark.files"] == "2"
    assert lake.backend.diff_uncommitted(repo, "etl") == []
    write(df.filter("day = 1").coalesce(1), f"lakefs://{repo}/etl/out", commit_message="second run")
    second = set(lake.paths(repo, "etl", "out/"))
    assert len(second) == 1 and not second & first
    assert read(spark, f"lakefs://{repo}/etl/out").count() == 100
    assert read(spark, f"lakefs://{repo}/etl~1/out").count() == 300  # the first run, by its commit
    write(df.filter("day = 2").coalesce(1), f"lakefs://{repo}/etl/out", mode="append")
    assert len(lake.paths(repo, "etl", "out/")) == 2
    assert read(spark, f"lakefs://{repo}/etl/out").count() == 200


def test_commit_message_commits_only_the_jobs_own_prefix(spark: Any, lake: Lake, repo: str) -> None:
    lake.backend.create_branch(repo, "etl", "main")
    lake.backend.upload(repo, "etl", "other/by-someone-else.csv", b"staged elsewhere\n")
    lake.backend.upload(repo, "etl", "out_archive/x.csv", b"not under out/\n")
    df = read(spark, f"lakefs://{repo}/main/events")
    write(df.coalesce(1), f"lakefs://{repo}/etl/out", commit_message="orders job")
    head = lake.backend.get_commit(repo, "etl")
    assert head.message == "orders job"
    still = sorted(c.path for c in lake.backend.diff_uncommitted(repo, "etl"))
    assert still == ["other/by-someone-else.csv", "out_archive/x.csv"]
    assert lake.paths(repo, head.id, "other/") == [] and len(lake.paths(repo, head.id, "out/")) == 1


def test_a_failing_job_leaves_the_branch_exactly_as_before(spark: Any, lake: Lake, repo: str) -> None:
    from pyspark.sql.functions import udf

    lake.backend.create_branch(repo, "etl", "main")
    df = read(spark, f"lakefs://{repo}/main/events")
    write(df, f"lakefs://{repo}/etl/out", commit_message="good run")
    before = {o.path: o.entry.checksum for o in lake.backend.list_objects(repo, "etl") if o.entry}
    head = lake.backend.get_commit(repo, "etl").id

    @udf("bigint")
    def explode_on_day_three(day: int) -> int:
        if day == 3:
            raise ValueError("bad input on day 3")
        return day

    broken = df.repartition(3, "day").withColumn("day", explode_on_day_three("day"))
    with pytest.raises(Exception, match="bad input on day 3"):
        write(broken, f"lakefs://{repo}/etl/out", commit_message="bad run")
    assert {o.path: o.entry.checksum for o in lake.backend.list_objects(repo, "etl") if o.entry} == before
    assert lake.backend.diff_uncommitted(repo, "etl") == []
    assert lake.backend.get_commit(repo, "etl").id == head


def test_writes_csv_json_and_text_that_read_back(spark: Any, lake: Lake, repo: str) -> None:
    df = read(spark, f"lakefs://{repo}/main/events").filter("day = 1").select("id", "name").coalesce(1)
    write(df, f"lakefs://{repo}/main/csv", format="csv", header="true")
    back = read(spark, f"lakefs://{repo}/main/csv", format="csv", header="true")
    assert sorted(tuple(r) for r in back.collect()) == sorted(tuple(r) for r in df.collect())
    write(df, f"lakefs://{repo}/main/json", format="json")
    (path,) = lake.paths(repo, "main", "json/")
    first = json.loads(b"".join(lake.backend.read(repo, "main", path)).splitlines()[0])
    assert set(first) == {"id", "name"}
    write(df.selectExpr("name AS value"), f"lakefs://{repo}/main/text", format="text")
    assert read(spark, f"lakefs://{repo}/main/text", format="text").count() == 100


def test_writes_refuse_a_ref_that_is_not_a_branch(spark: Any, lake: Lake, repo: str) -> None:
    lake.backend.create_tag(repo, "v1", "main")
    df = read(spark, f"lakefs://{repo}/main/events")
    with pytest.raises(Exception, match=r"branch .*not found|not a branch"):
        write(df, f"lakefs://{repo}/v1/out")
    with pytest.raises(Exception, match=r"branch .*not found|not a branch"):
        write(df, f"lakefs://{repo}/no-such-branch/out")
    assert lake.paths(repo, "main", "out/") == []
