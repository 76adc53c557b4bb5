"""A pipeline step on Spark, the lakectl way: branch, transform, validate, commit, diff, merge.

    python examples/pipeline.py                 # a good run: the mart lands on main
    python examples/pipeline.py --break-it      # a bad run: validation fails, main is untouched

Raw orders live on ``main`` under ``raw/orders/day=<n>/``. The step builds ``marts/daily_revenue``
(one row per day) on a branch of its own. If the output passes validation (row count, schema,
no negative revenue), the branch is committed and merged into ``main``; if not, the branch is
deleted and ``main`` never saw a byte of it. Works on the embedded lake ($LAKECTL_HOME) or a
lakectl server (``server.endpoint_url`` configured), like the CLI, through lakectl's public
Python API (docs/python.md). Needs PySpark (``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakectl
import lakectl.spark
from lakectl.exceptions import NotFoundException

REPO = "analytics"
DAYS = 7
ORDERS_PER_DAY = 1_000
EXPECTED_SCHEMA = [("day", "bigint"), ("orders", "bigint"), ("revenue", "double")]


class ValidationFailed(Exception):
    pass


def seed(client: lakectl.Client, repo: str = REPO) -> None:
    """The raw data on main, once: a week of orders, one Parquet file a day."""
    repository = lakectl.Repository(repo, client=client)
    try:
        repository.properties  # noqa: B018 - there already
        return
    except NotFoundException:
        repository.create(default_branch="main")
    main = repository.branch("main")
    for day in range(1, DAYS + 1):
        table = pa.table(
            {
                "order_id": pa.array(range(day * 100_000, day * 100_000 + ORDERS_PER_DAY), pa.int64()),
                "amount": pa.array([(i % 97) * 1.5 for i in range(ORDERS_PER_DAY)], pa.float64()),
            }
        )
        out = io.BytesIO()
        pq.write_table(table, out)
        main.object(f"raw/orders/day={day}/part-0.parquet").upload(out.getvalue())
    main.commit("raw orders: one week")


def transform(spark: Any, repo: str, branch: str, break_it: bool = False) -> None:
    """Daily revenue from main's raw orders, written onto ``branch`` (staged, not committed)."""
    orders = spark.read.format("lakefs").load(f"lakefs://{repo}/main/raw/orders")
    if break_it:  # a bug in the job: refunds counted as negative orders
        orders = orders.selectExpr("order_id", "-amount AS amount", "day")
    daily = orders.groupBy("day").agg({"order_id": "count", "amount": "sum"})
    daily = daily.selectExpr("day", "`count(order_id)` AS orders", "`sum(amount)` AS revenue").coalesce(1)
    daily.write.format("lakefs").mode("overwrite").save(f"lakefs://{repo}/{branch}/marts/daily_revenue")


def validate(spark: Any, repo: str, branch: str) -> int:
    """Read the output back from the branch and check it; return its row count."""
    mart = spark.read.format("lakefs").load(f"lakefs://{repo}/{branch}/marts/daily_revenue")
    schema = [(f.name, f.dataType.simpleString()) for f in mart.schema.fields]
    if schema != EXPECTED_SCHEMA:
        raise ValidationFailed(f"schema is {schema}, expected {EXPECTED_SCHEMA}")
    rows = mart.count()
    if rows != DAYS:
        raise ValidationFailed(f"{rows} rows, expected one per day ({DAYS})")
    negative = mart.filter("revenue < 0").count()
    if negative:
        raise ValidationFailed(f"{negative} day(s) with negative revenue")
    return rows


def run(spark: Any, client: lakectl.Client, repo: str = REPO, break_it: bool = False) -> bool:
    """One pipeline step; True when it was merged into main."""
    seed(client, repo)
    repository = lakectl.Repository(repo, client=client)
    name = f"etl-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 1000:03d}"
    branch = repository.branch(name).create(source_reference="main")
    print(f"branch {name} created from main")
    transform(spark, repo, name, break_it)
    try:
        rows = validate(spark, repo, name)
    except ValidationFailed as e:
        branch.delete()
        print(f"validation failed: {e}; branch {name} deleted, main untouched")
        return False
    commit = branch.commit("daily revenue mart", metadata={"rows": str(rows)}).get_commit()
    print(f"validated {rows} rows; committed {commit.id[:12]} on {name}")
    for change in repository.branch("main").diff(branch):
        print(f"  {change.type:8} {change.path}")
    merged = branch.merge_into("main", message=f"Merge {name}: daily revenue mart")
    branch.delete()
    print(f"merged into main as {merged[:12]}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--break-it", action="store_true", help="inject a bug the validation catches")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)
    from lakectl.spark.session import session

    try:
        spark = session(args.master, "lakectl-pipeline")
    except Exception as e:  # no pyspark, or no Java: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return int(getattr(e, "exit_code", 1))
    lakectl.spark.register(spark)
    client = lakectl.Client()
    try:
        return 0 if run(spark, client, break_it=args.break_it) else 1
    finally:
        client.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
