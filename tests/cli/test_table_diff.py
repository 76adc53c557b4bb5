"""``lakectl diff --table``, embedded and through a live server: what changed inside a Parquet
table between two refs (schema, rows by key, per partition), as JSON and as text; and the
refusals (no table, a missing key column, --table without its arguments)."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _put(cli: Cli, uri: str, table: pa.Table) -> None:
    cli("fs", "upload", uri, "--source", "-", input=_parquet(table))


def test_a_keyed_table_diff_between_two_branches(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    before = pa.table({"order_id": [1, 2, 3], "amount": [10.0, 20.0, 30.0], "region": ["eu", "us", "eu"]})
    _put(cli, "lakefs://R/main/tables/orders/date=2026-01-01/part-0.parquet", before)
    _put(cli, "lakefs://R/main/tables/orders/date=2026-01-02/part-0.parquet", before)
    cli("commit", "lakefs://R/main", "-m", "orders")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    after = pa.table(
        {
            "order_id": [1, 3, 4],
            "amount": [10.0, 33.0, 40.0],
            "region": ["eu", "eu", "us"],
            "discount_pct": [0.0, 5.0, 0.0],
        }
    )
    _put(cli, "lakefs://R/fix/tables/orders/date=2026-01-02/part-0.parquet", after)
    cli("commit", "lakefs://R/fix", "-m", "fix one day")

    found = cli("diff", "--table", "--key", "order_id", "lakefs://R/main", "lakefs://R/fix", "tables/orders/")
    assert (found["added"], found["removed"], found["changed"]) == (1, 1, 1)
    assert found["changed_columns"] == {"amount": 1}
    assert [(c["type"], c["name"]) for c in found["schema"]] == [("added", "discount_pct")]
    assert [p["partition"] for p in found["partitions"]] == ["date=2026-01-02"]
    assert found["files_unchanged"] == 1  # the other day was never read
    rows = {(r["type"], r["key"]["order_id"]) for r in found["rows"]}
    assert rows == {("removed", 2), ("changed", 3), ("added", 4)}

    text = cli(
        "diff",
        "--table",
        "--key",
        "order_id",
        "lakefs://R/main",
        "lakefs://R/fix",
        "tables/orders/",
        human=True,
    )
    assert "discount_pct" in text and "date=2026-01-02" in text and '~ {"order_id": 3} (amount)' in text

    page = cli(
        "diff",
        "--table",
        "--key",
        "order_id",
        "--amount",
        "2",
        "lakefs://R/main",
        "lakefs://R/fix",
        "tables/orders/",
    )
    assert len(page["rows"]) == 2 and page["next_offset"]
    rest = cli(
        "diff",
        "--table",
        "--key",
        "order_id",
        "--after",
        page["next_offset"],
        "lakefs://R/main",
        "lakefs://R/fix",
        "tables/orders/",
    )
    assert len(rest["rows"]) == 1 and not rest["next_offset"]


def test_one_baseline_the_merge_base_as_diff_and_two_way_on_request(cli: Cli) -> None:
    """``diff`` and ``diff --table`` on the same refs see the same changes: what RIGHT changed
    since its merge base with LEFT, not what LEFT changed since (``--two-way``: tree to tree)."""
    cli("repo", "create", "lakefs://mig")
    orders = pa.table({"order_id": [1, 2, 3], "status": ["new", "new", "new"]})
    _put(cli, "lakefs://mig/main/orders.parquet", orders)
    cli("commit", "lakefs://mig/main", "-m", "orders")
    cli("branch", "create", "lakefs://mig/fix-a", "--source", "lakefs://mig/main")
    fixed = pa.table({"order_id": [1, 2, 3], "status": ["new", "fixed", "new"]})
    _put(cli, "lakefs://mig/fix-a/orders.parquet", fixed)
    cli("commit", "lakefs://mig/fix-a", "-m", "fix order 2")
    shipped = pa.table({"order_id": [1, 2, 3], "status": ["shipped", "new", "new"]})
    _put(cli, "lakefs://mig/main/orders.parquet", shipped)  # main moves on after the split
    cli("commit", "lakefs://mig/main", "-m", "ship order 1")

    refs = ("lakefs://mig/main", "lakefs://mig/fix-a")
    assert [c["path"] for c in cli("diff", *refs)] == ["orders.parquet"]
    found = cli("diff", "--table", "--key", "order_id", *refs, "orders.parquet")
    assert [(r["type"], r["key"]["order_id"]) for r in found["rows"]] == [("changed", 2)]
    assert found["rows"][0]["old"]["status"] == "new" and found["rows"][0]["new"]["status"] == "fixed"
    both = cli("diff", "--table", "--two-way", "--key", "order_id", *refs, "orders.parquet")
    assert sorted(r["key"]["order_id"] for r in both["rows"]) == [1, 2]  # main's change shows too


def test_amount_zero_is_every_row_change_as_on_lists(cli: Cli) -> None:
    cli("repo", "create", "lakefs://many")
    _put(cli, "lakefs://many/main/t.parquet", pa.table({"id": range(1500), "v": [0] * 1500}))
    cli("commit", "lakefs://many/main", "-m", "v 0")
    _put(cli, "lakefs://many/main/t.parquet", pa.table({"id": range(1500), "v": [1] * 1500}))
    cli("commit", "lakefs://many/main", "-m", "v 1")
    refs = ("lakefs://many/main~1", "lakefs://many/main", "t.parquet")
    found = cli("diff", "--table", "--key", "id", "--amount", "0", *refs)
    assert [r["key"]["id"] for r in found["rows"]] == list(range(1500)) and found["next_offset"] == ""
    assert found["changed"] == 1500
    assert len(cli("diff", "--table", "--key", "id", *refs)["rows"]) == 100  # the default page


def test_refusals(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _put(cli, "lakefs://R/main/t.parquet", pa.table({"id": [1]}))
    cli("commit", "lakefs://R/main", "-m", "t")
    cli("branch", "create", "lakefs://R/b", "--source", "lakefs://R/main")
    _put(cli, "lakefs://R/b/t.parquet", pa.table({"id": [1, 2]}))
    cli("commit", "lakefs://R/b", "-m", "t2")
    args = ("lakefs://R/main", "lakefs://R/b")
    assert cli("diff", "--table", *args, "nothing/", code=3)["code"] == "not_found"
    assert cli("diff", "--table", "--key", "nope", *args, "t.parquet", code=2)["code"] == "invalid_argument"
    assert cli("diff", "--table", "lakefs://R/main", code=2)["code"] == "invalid_argument"
    assert cli("diff", *args, "t.parquet", code=2)["code"] == "invalid_argument"  # a path needs --table
