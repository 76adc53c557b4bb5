"""A data migration in Python, the lakectl way: a legacy CSV tree becomes partitioned Parquet in
one transaction, validated before it lands, with a table diff of what it changed.

    python examples/migration.py                 # the migration lands on main
    python examples/migration.py --break-it      # a bad conversion: validation fails, main untouched

The legacy export lives on ``main`` under ``legacy/customers/<region>.csv`` (seeded on the first
run). The migration reads every CSV, writes ``tables/customers/region=<region>/part-0.parquet``
on a transaction's branch, then reads the Parquet back and checks its row counts and schema
against the CSVs. Only if they match does the transaction merge into ``main``; if anything
raises, its branch is dropped and ``main`` never saw a byte. Last, a table diff of
``tables/customers/`` by ``customer_id`` says what the migration added.

Written against lakectl's public Python API only (docs/python.md), so it runs on the embedded
lake ($LAKECTL_HOME) or a lakectl server, as the CLI decides, and reads as a script for
lakeFS's own Python wrapper would.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import lakectl
from lakectl.exceptions import LakeFSException, NotFoundException

REPO = "crm"
REGIONS = {"emea": 1200, "apac": 800, "amer": 1500}
SCHEMA = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("signup_day", pa.int64())])


class ValidationFailed(Exception):
    pass


def seed(client: lakectl.Client, repo: str = REPO) -> None:
    """The legacy export on main, once: one CSV of customers per region."""
    repository = lakectl.Repository(repo, client=client)
    try:
        repository.properties  # noqa: B018 - there already
        return
    except NotFoundException:
        repository.create(default_branch="main")
    main = repository.branch("main")
    first = 0
    for region, count in REGIONS.items():
        lines = ["customer_id,name,signup_day"]
        lines += [f"{i},customer {i},{i % 365}" for i in range(first, first + count)]
        main.object(f"legacy/customers/{region}.csv").upload("\n".join(lines) + "\n", content_type="text/csv")
        first += count
    main.commit("legacy customer export", metadata={"source": "crm-v1"})


def convert(tx: lakectl.Branch, region: str, break_it: bool) -> int:
    """One region's CSV as Parquet on the transaction's branch; its row count."""
    with tx.object(f"legacy/customers/{region}.csv").reader() as f:
        table = pacsv.read_csv(f, convert_options=pacsv.ConvertOptions(column_types=SCHEMA))
    if break_it:  # a bug in the migration: the last row of every region dropped
        table = table.slice(0, table.num_rows - 1)
    with tx.object(f"tables/customers/region={region}/part-0.parquet").writer("wb") as out:
        pq.write_table(table, out)
    return int(table.num_rows)


def validate(tx: lakectl.Branch, expected: dict[str, int]) -> int:
    """Read the Parquet back from the branch: every region's rows and the schema; the total."""
    total = 0
    for region, rows in expected.items():
        with tx.object(f"tables/customers/region={region}/part-0.parquet").reader() as f:
            table = pq.read_table(f)
        if table.schema.remove_metadata() != SCHEMA:
            raise ValidationFailed(f"{region}: schema {table.schema} is not {SCHEMA}")
        if table.num_rows != rows:
            raise ValidationFailed(f"{region}: {table.num_rows} rows in Parquet, {rows} in the CSV")
        total += table.num_rows
    return total


def csv_rows(tx: lakectl.Branch) -> dict[str, int]:
    """Rows of each region's legacy CSV (its lines but the header)."""
    counts = {}
    for obj in tx.objects(prefix="legacy/customers/"):
        region = obj.path.rsplit("/", 1)[1].removesuffix(".csv")
        with tx.object(obj.path).reader("r") as f:
            counts[region] = sum(1 for _ in f) - 1
    return counts


def run(client: lakectl.Client, repo: str = REPO, break_it: bool = False) -> dict[str, Any] | None:
    """The migration; the table diff of what it landed on main, or None when it did not land."""
    seed(client, repo)
    repository = lakectl.Repository(repo, client=client)
    main = repository.branch("main")
    before = main.get_commit().id
    try:
        with main.transact(
            commit_message="migrate customers to Parquet", commit_metadata={"from": "csv"}
        ) as tx:
            expected = csv_rows(tx)
            written = {region: convert(tx, region, break_it) for region in sorted(expected)}
            print(f"converted {sum(written.values())} rows in {len(written)} partitions on {tx.id}")
            total = validate(tx, expected)
            print(f"validated {total} rows against the CSVs")
    except (ValidationFailed, LakeFSException) as e:
        print(f"migration failed: {e}; main untouched at {before[:12]}")
        return None
    diff = repository.ref(before).diff_table(main, "tables/customers/", key=["customer_id"])
    print(
        f"merged into main: {diff['added']} rows added, {diff['removed']} removed, {diff['changed']} changed"
    )
    for part in diff["partitions"]:
        print(f"  {part['partition'] or '(none)':14} +{part['added']}")
    return diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--break-it", action="store_true", help="inject a bug the validation catches")
    args = parser.parse_args(argv)
    with lakectl.Client() as client:
        return 0 if run(client, break_it=args.break_it) is not None else 1


if __name__ == "__main__":
    sys.exit(main())
