"""A table's key declared once (``lakectl tables declare``, the committed file
``_lakectl/tables.yaml``) and used where none is given: ``diff --table``, ``pr show`` and the
rows merge strategy; embedded and through a live server."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def _put(cli: Cli, uri: str, table: pa.Table) -> None:
    out = io.BytesIO()
    pq.write_table(table, out)
    cli("fs", "upload", uri, "--source", "-", input=out.getvalue())


def _orders(status: list[str]) -> pa.Table:
    return pa.table({"order_id": [1, 2, 3], "status": status})


def test_declared_once_used_by_the_table_diff_and_pull_requests(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/tables/orders/part-0.parquet", _orders(["new", "new", "new"]))
    declared = cli("tables", "declare", "lakefs://R/main/tables/orders/", "--key", "order_id")
    assert (declared["table"], declared["key"]) == ("tables/orders", ["order_id"])
    assert cli("tables", "list", "lakefs://R/main") == [{"table": "tables/orders", "key": ["order_id"]}]
    assert "_lakectl/tables.yaml" in [c["path"] for c in cli("diff", "lakefs://R/main")]  # a change to commit
    cli("commit", "lakefs://R/main", "-m", "orders, keyed")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    _put(cli, "lakefs://R/fix/tables/orders/part-0.parquet", _orders(["new", "paid", "shipped"]))
    cli("commit", "lakefs://R/fix", "-m", "two orders move on")

    refs = ("lakefs://R/main", "lakefs://R/fix", "tables/orders/")
    found = cli("diff", "--table", *refs)
    assert (found["added"], found["removed"], found["changed"]) == (0, 0, 2)
    assert found["key"] == ["order_id"] and found["key_declared"] is True
    assert [r["key"] for r in found["rows"]] == [{"order_id": 2}, {"order_id": 3}]
    text = cli("diff", "--table", *refs, human=True)
    assert '~ {"order_id": 2} (status)' in text
    whole = cli("diff", "--table", "--no-key", *refs)  # whole rows on request
    assert (whole["added"], whole["removed"], whole["changed"], whole["key"]) == (2, 2, 0, [])
    given = cli("diff", "--table", "--key", "order_id,status", *refs)  # a key given wins
    assert given["key"] == ["order_id", "status"] and given["key_declared"] is False

    cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "orders")
    shown = cli("pr", "show", "lakefs://R", "1")
    assert shown["tables"] == [
        {
            "table": "tables/orders/",
            "summary": "orders: +0 rows, \u22120, 2 changed (status)",
            "key": ["order_id"],
        }
    ]
    assert "(by key order_id)" in cli("pr", "show", "lakefs://R", "1", human=True)


def test_the_right_side_declares_and_redeclaring_replaces(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/o.parquet", _orders(["new", "new", "new"]))
    cli("commit", "lakefs://R/main", "-m", "orders")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    _put(cli, "lakefs://R/fix/o.parquet", _orders(["new", "paid", "new"]))
    cli("tables", "declare", "lakefs://R/fix/o.parquet", "--key", "status")
    cli("tables", "declare", "lakefs://R/fix/o.parquet", "--key", "order_id")  # replaces
    assert cli("tables", "list", "lakefs://R/fix") == [{"table": "o.parquet", "key": ["order_id"]}]
    assert cli("tables", "list", "lakefs://R/main") == []
    found = cli("diff", "--table", "lakefs://R/main", "lakefs://R/fix$", "o.parquet")  # uncommitted: fix$
    assert (found["changed"], found["key_declared"]) == (1, True)
    cli("tables", "undeclare", "lakefs://R/fix/o.parquet")
    assert cli("diff", "--table", "lakefs://R/main", "lakefs://R/fix$", "o.parquet")["key"] == []


def test_the_rows_strategy_takes_the_declared_key(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/t/p.parquet", _orders(["new", "new", "new"]))
    cli("commit", "lakefs://R/main", "-m", "base")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    _put(cli, "lakefs://R/fix/t/p.parquet", _orders(["paid", "new", "new"]))
    cli("commit", "lakefs://R/fix", "-m", "order 1")
    _put(cli, "lakefs://R/main/t/p.parquet", _orders(["new", "new", "shipped"]))
    head = cli("commit", "lakefs://R/main", "-m", "order 3")["id"]

    refused = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "t/**=rows", code=2)
    assert "names no key, and _lakectl/tables.yaml declares no table" in refused["message"]
    refused = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "rows", code=2)
    assert "declares none" in refused["message"]
    cli("tables", "declare", "lakefs://R/fix/elsewhere", "--key", "id")
    cli("commit", "lakefs://R/fix", "-m", "another table keyed")
    refused = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "t/**=rows", code=2)
    assert "no table in _lakectl/tables.yaml declares one for t/" in refused["message"]
    assert cli("branch", "show", "lakefs://R/main")["commit_id"] == head

    cli("tables", "declare", "lakefs://R/fix/t", "--key", "order_id")
    cli("commit", "lakefs://R/fix", "-m", "t keyed by order_id")  # the source's declaration counts
    done = cli("merge", "lakefs://R/fix", "lakefs://R/main", "--strategy", "rows")
    assert done["commit"]["metadata"]["lakectl_merged_by_rows"] == "t/p.parquet"
    merged = cli("diff", "--table", f"lakefs://R/{head}", "lakefs://R/main", "t/p.parquet")
    assert [(r["key"], r["new"]["status"]) for r in merged["rows"]] == [({"order_id": 1}, "paid")]


def test_refusals(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    root = cli("tables", "declare", "lakefs://R/main/", "--key", "id", code=2)
    assert "invalid URI" in root["message"] or "root" in root["message"]
    assert "named twice" in cli("tables", "declare", "lakefs://R/main/t", "--key", "a,a", code=2)["message"]
    assert "column names" in cli("tables", "declare", "lakefs://R/main/t", "--key", "a,,b", code=2)["message"]
    assert cli("tables", "undeclare", "lakefs://R/main/t", code=3)["code"] == "object_not_found"
    both = cli("diff", "--table", "--key", "a", "--no-key", "lakefs://R/main", "lakefs://R/main", "t", code=2)
    assert "--no-key" in both["message"]
    cli("fs", "upload", "lakefs://R/main/_lakectl/tables.yaml", "--source", "-", input=b"tables: [t]\n")
    _put(cli, "lakefs://R/main/o.parquet", _orders(["new", "new", "new"]))
    broken = cli("diff", "--table", "lakefs://R/main", "lakefs://R/main$", "o.parquet", code=2)
    assert "_lakectl/tables.yaml at main$: expected `tables:`" in broken["message"]
    assert cli("tables", "list", "lakefs://R/main", code=2)["message"] == broken["message"].replace(
        "main$", "main"
    )
