"""Partial commits: `lakectl commit --prefix P` commits only the staged changes under P, and
everything else staged on the branch stays staged, untouched; embedded and through the REST
API's `prefixes` extension."""

from __future__ import annotations

from typing import Any

from tests.cli.both import Lakectl, both, live

__all__ = ["both", "live"]


def put(cli: Lakectl, path: str, data: bytes) -> None:
    cli("fs", "upload", f"lakefs://{cli.repo}/main/{path}", "-s", "-", input=data)


def staged(cli: Lakectl) -> list[tuple[str, str]]:
    return sorted((d["path"], d["type"]) for d in cli.js("diff", f"lakefs://{cli.repo}/main"))


def committed(cli: Lakectl, ref: str) -> dict[str, Any]:
    listing = cli.js("fs", "ls", f"lakefs://{cli.repo}/{ref}/", "--recursive")
    return {o["path"]: o["checksum"] for o in listing}


def test_a_partial_commit_takes_only_its_prefixes(both: Lakectl) -> None:
    cli = both
    put(cli, "tables/orders/part-0.csv", b"o0\n")
    put(cli, "tables/orders/part-1.csv", b"o1\n")
    put(cli, "tables/orders_archive/x.csv", b"not under tables/orders/\n")
    put(cli, "tables/users/part-0.csv", b"u0\n")
    put(cli, "readme.txt", b"r\n")
    cli("fs", "rm", f"lakefs://{cli.repo}/main/a/x.csv")
    before = cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"]

    made = cli.js("commit", f"lakefs://{cli.repo}/main", "-m", "orders only", "--prefix", "tables/orders/")
    assert made["parents"] == [before] and made["message"] == "orders only"
    at_commit = committed(cli, made["id"])
    assert {p for p in at_commit if p.startswith("tables/")} == {
        "tables/orders/part-0.csv",
        "tables/orders/part-1.csv",
    }
    assert "a/x.csv" in at_commit  # its deletion is outside the prefix: still staged, not committed
    assert staged(cli) == [
        ("a/x.csv", "removed"),
        ("readme.txt", "added"),
        ("tables/orders_archive/x.csv", "added"),
        ("tables/users/part-0.csv", "added"),
    ]
    # What stayed staged reads back byte for byte, and commits later as usual.
    assert cli("fs", "cat", f"lakefs://{cli.repo}/main/tables/users/part-0.csv").stdout == "u0\n"
    rest = cli.js("commit", f"lakefs://{cli.repo}/main", "-m", "the rest")
    assert set(committed(cli, rest["id"])) == {
        "readme.txt",
        "tables/orders/part-0.csv",
        "tables/orders/part-1.csv",
        "tables/orders_archive/x.csv",
        "tables/users/part-0.csv",
    }
    assert staged(cli) == []


def test_prefixes_repeat_and_deletions_under_them_are_committed(both: Lakectl) -> None:
    cli = both
    put(cli, "t1/a.csv", b"1\n")
    put(cli, "t2/b.csv", b"2\n")
    put(cli, "t3/c.csv", b"3\n")
    cli("fs", "rm", f"lakefs://{cli.repo}/main/a/x.csv")
    made = cli.js("commit", f"lakefs://{cli.repo}/main", "-m", "two", "--prefix", "t1/", "--prefix", "a/")
    assert set(committed(cli, made["id"])) == {"t1/a.csv"}  # a/x.csv deleted by the commit
    assert staged(cli) == [("t2/b.csv", "added"), ("t3/c.csv", "added")]


def test_nothing_under_the_prefix_refuses_and_changes_nothing(both: Lakectl) -> None:
    cli = both
    put(cli, "elsewhere/a.csv", b"1\n")
    head = cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"]
    refused = cli("commit", f"lakefs://{cli.repo}/main", "-m", "m", "--prefix", "tables/", code=6)
    assert refused.stderr.startswith("error: nothing to commit under 'tables/'")
    assert cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"] == head
    assert staged(cli) == [("elsewhere/a.csv", "added")]


def test_bad_prefixes_are_one_error_line(both: Lakectl) -> None:
    cli = both
    put(cli, "t/a.csv", b"1\n")
    for bad in ("", "t/\x00"):
        refused = cli("commit", f"lakefs://{cli.repo}/main", "-m", "m", "--prefix", bad, code=2)
        assert refused.stderr.startswith("error:") and len(refused.stderr.strip().splitlines()) == 1
    empty = cli("commit", f"lakefs://{cli.repo}/main", "-m", "m", "--prefix", "t/", "--allow-empty", code=2)
    assert "cannot be empty" in empty.stderr
    assert staged(cli) == [("t/a.csv", "added")]
