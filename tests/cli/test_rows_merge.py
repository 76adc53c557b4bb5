"""``lakectl merge --strategy 'GLOB=rows:key=…'``, embedded and through a live server: rows
merged, conflicting rows reported as data (exit 5) with nothing changed."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def _put(cli: Cli, uri: str, amounts: list[float]) -> None:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3], "amount": amounts}), out)
    cli("fs", "upload", uri, "--source", "-", input=out.getvalue())


def test_rows_merge_and_row_conflicts(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/t/p.parquet", [1.0, 2.0, 3.0])
    cli("commit", "lakefs://R/main", "-m", "base")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    _put(cli, "lakefs://R/fix/t/p.parquet", [10.0, 2.0, 30.0])
    cli("commit", "lakefs://R/fix", "-m", "rows 1 and 3")
    _put(cli, "lakefs://R/main/t/p.parquet", [1.0, 20.0, 33.0])
    head = cli("commit", "lakefs://R/main", "-m", "rows 2 and 3")["id"]

    refused = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "t/**=rows:key=id", code=5)
    assert refused["code"] == "merge_conflict"
    rows = refused["details"]["rows"]["t/p.parquet"]["rows"]
    assert [(r["key"], r["columns"]) for r in rows] == [({"id": 3}, ["amount"])]
    assert cli("branch", "show", "lakefs://R/main")["commit_id"] == head

    done = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "t/**=rows:key=id;winner=dest")
    assert done["commit"]["metadata"]["lakectl_merged_by_rows"] == "t/p.parquet"
    diff = cli("diff", "--table", "--key", "id", f"lakefs://R/{head}", "lakefs://R/main", "t/p.parquet")
    assert (diff["changed"], diff["changed_columns"]) == (1, {"amount": 1})  # row 1 from fix; 2 and 3 kept


def test_spark_needs_a_rows_strategy_and_an_embedded_lake(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/t/p.parquet", [1.0, 2.0, 3.0])
    cli("commit", "lakefs://R/main", "-m", "base")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    head = cli("branch", "show", "lakefs://R/main")["commit_id"]
    plain = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--spark", "local[2]", code=2)
    assert "GLOB=rows" in plain["message"]
    if cli.mode == "remote":  # a server's blocks are not the client's to read
        refused = cli(
            "merge",
            "lakefs://R/fix",
            "lakefs://R/main",
            "--strategy",
            "t/**=rows:key=id",
            "--spark",
            "x",
            code=2,
        )
        assert "embedded lake" in refused["message"]
    assert cli("branch", "show", "lakefs://R/main")["commit_id"] == head
