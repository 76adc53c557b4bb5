"""A pipeline step on Spark, the lakectl way: branch, transform, validate, commit, diff, merge.

    python examples/pipeline.py                 # a good run: the mart lands on main
    python examples/pipeline.py --break-it      # a bad run: validation fails, main is untouched

Raw orders live on ``main`` under ``raw/orders/day=<n>/``. The step builds ``marts/daily_revenue``
(one row per day) on a branch of its own. If the output passes validation (row count, schema,
no negative revenue), the branch is committed and merged into ``main``; if not, the branch is
deleted and ``main`` never saw a byte of it. Works on the embedded lake ($LAKECTL_HOME) or a
lakectl server (``server.endpoint_url`` configured), like the CLI. Needs PySpark
(``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakectl.spark
from lakectl.client import Backend, get_backend
from lakectl.errors import LakectlError, NotFound

REPO = "analytics"
DAYS = 7
ORDERS_PER_DAY = 1_000
EXPECTED_SCHEMA = [("day", "bigint"), ("orders", "bigint"), ("revenue", "double")]


class ValidationFailed(Exception):
    pass


def seed(backend: Backend, repo: str = REPO) -> None:
    """The raw data on main, once: a week of orders, one Parquet file a day."""
    try:
        backend.get_repo(repo)
        return
    except NotFound:
        backend.create_repo(repo)
    for day in range(1, DAYS + 1):
        table = pa.table(
            {
                "order_id": pa.array(range(day * 100_000, day * 100_000 + ORDERS_PER_DAY), pa.int64()),
                "amount": pa.array([(i % 97) * 1.5 for i in range(ORDERS_PER_DAY)], pa.float64()),
            }
        )
        out = io.BytesIO()
        pq.write_table(table, out)
        backend.upload(repo, "main", f"raw/orders/day={day}/part-0.parquet", out.getvalue())
    backend.commit(repo, "main", "raw orders: one week")


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


def run(spark: Any, backend: Backend, repo: str = REPO, break_it: bool = False) -> bool:
    """One pipeline step; True when it was merged into main."""
    seed(backend, repo)
    branch = f"etl-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 1000:03d}"
    backend.create_branch(repo, branch, "main")
    print(f"branch {branch} created from main")
    transform(spark, repo, branch, break_it)
    try:
        rows = validate(spark, repo, branch)
    except ValidationFailed as e:
        backend.delete_branch(repo, branch)
        print(f"validation failed: {e}; branch {branch} deleted, main untouched")
        return False
    commit = backend.commit(repo, branch, "daily revenue mart", {"rows": str(rows)})
    print(f"validated {rows} rows; committed {commit.id[:12]} on {branch}")
    for change in backend.diff_refs(repo, "main", branch):
        print(f"  {change.type.value:8} {change.path}")
    merged = backend.merge(repo, branch, "main", message=f"Merge {branch}: daily revenue mart")
    backend.delete_branch(repo, branch)
    print(f"merged into main as {merged.commit.id[:12]}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--break-it", action="store_true", help="inject a bug the validation catches")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)
    from lakectl.spark.session import session

    try:
        spark = session(args.master, "lakectl-pipeline")
    except LakectlError as e:  # no pyspark, or no Java: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    lakectl.spark.register(spark)
    backend = get_backend()
    try:
        return 0 if run(spark, backend, break_it=args.break_it) else 1
    finally:
        backend.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
