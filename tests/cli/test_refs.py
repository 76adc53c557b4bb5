"""Repositories, branches and tags from the command line: human and JSON output, exit codes."""

from __future__ import annotations

from pathlib import Path

from lakectl.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound
from tests.cli.conftest import Run


def test_init_prints_the_lake_home(run: Run, js, home: Path) -> None:
    assert str(home) in run("init").stdout
    assert js("init")["home"] == str(home)
    assert (home / "lake.db").exists()


def test_repo_create_list_show_delete(run: Run, js) -> None:
    out = run("repo", "create", "lakefs://sales").stdout
    assert "sales" in out and "main" in out
    created = js("repo", "create", "lakefs://other", "--default-branch", "trunk")
    assert created["id"] == "other" and created["default_branch"] == "trunk"
    assert set(created) == {"id", "creation_date", "default_branch", "storage_namespace"}

    listed = js("repo", "list")
    assert [r["id"] for r in listed] == ["other", "sales"]
    table = run("repo", "list").stdout.splitlines()
    assert table[0].split()[0] == "REPOSITORY" and len(table) == 3
    assert all(line == line.rstrip() for line in table)

    assert js("repo", "show", "lakefs://sales/")["default_branch"] == "main"
    assert "Default branch" in run("repo", "show", "lakefs://sales").stdout

    run("repo", "delete", "lakefs://sales", "--yes")
    assert [r["id"] for r in js("repo", "list")] == ["other"]


def test_repo_delete_asks_first(run: Run, js) -> None:
    """Asked on a terminal (tests/cli/test_rough_edges.py drives one); a stdin that is not a
    terminal is never waited on, whatever it holds: -y is how a script confirms."""
    run("repo", "create", "lakefs://sales")
    refused = run("repo", "delete", "lakefs://sales", input="y\n", code=2)
    assert "pass -y" in refused.stderr
    assert [r["id"] for r in js("repo", "list")] == ["sales"]
    run("repo", "delete", "lakefs://sales", "-y")
    assert js("repo", "list") == []


def test_repo_errors_have_their_exit_codes(run: Run, js) -> None:
    run("repo", "create", "lakefs://sales")
    bad = run("repo", "create", "lakefs://No_Such", code=InvalidArgument.exit_code)
    assert bad.stderr.startswith("error: invalid repository name") and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1
    dup = js("repo", "create", "lakefs://sales", code=AlreadyExists.exit_code)
    assert dup["code"] == "already_exists" and "sales" in dup["message"]
    run("repo", "create", "lakefs://sales", "--default-branch", "trunk", code=4)
    assert [b["id"] for b in js("branch", "list", "lakefs://sales")] == ["main"]
    missing = js("repo", "show", "lakefs://nothing", code=NotFound.exit_code)
    assert missing == {"code": "repository_not_found", "message": missing["message"], "details": {}}
    run("repo", "delete", "lakefs://nothing", "--yes", code=NotFound.exit_code)


def test_invalid_uris_exit_2(run: Run) -> None:
    for args in (
        ("repo", "create", "s3://bucket"),
        ("repo", "create", "lakefs://demo/main"),
        ("branch", "list", "lakefs://"),
        ("log", "lakefs://demo"),
        ("log", "lakefs://demo/main/some/path"),
        ("fs", "cat", "lakefs://demo/main"),
        ("fs", "stat", "demo/main/x"),
    ):
        result = run(*args, code=2)
        assert result.stderr.startswith("error: invalid URI"), (args, result.stderr)


def test_branches(run: Run, js, repo: str) -> None:
    main = js("branch", "show", "lakefs://demo/main")
    assert set(main) == {"id", "commit_id"}
    created = js("branch", "create", "lakefs://demo/dev", "--source", "lakefs://demo/main")
    assert created == {"id": "dev", "commit_id": main["commit_id"]}
    run("branch", "create", "lakefs://demo/old", "-s", "lakefs://demo/main~1")
    assert [b["id"] for b in js("branch", "list", "lakefs://demo")] == ["dev", "main", "old"]
    assert js("branch", "show", "lakefs://demo/old")["commit_id"] != main["commit_id"]
    listing = run("branch", "list", "lakefs://demo").stdout
    assert "dev" in listing and main["commit_id"] in listing
    assert main["commit_id"] in run("branch", "show", "lakefs://demo/main").stdout

    run("branch", "delete", "lakefs://demo/dev", "--yes")
    run("branch", "delete", "lakefs://demo/old", input="y\n", code=2)
    run("branch", "delete", "lakefs://demo/old", "-y")
    assert [b["id"] for b in js("branch", "list", "lakefs://demo")] == ["main"]


def test_branch_errors(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "--source", "lakefs://demo/main")
    assert js("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main", code=4)["code"] == (
        "already_exists"
    )
    assert js("branch", "create", "lakefs://demo/-x", "-s", "lakefs://demo/main", code=2)["code"] == (
        "invalid_name"
    )
    assert js("branch", "create", "lakefs://demo/x", "-s", "lakefs://demo/nope", code=3)["code"] == (
        "ref_not_found"
    )
    assert js("branch", "create", "lakefs://demo/x", "-s", "lakefs://other/main", code=2)["code"] == (
        "invalid_argument"
    )
    assert js("branch", "show", "lakefs://demo/nope", code=3)["code"] == "branch_not_found"
    protected = js("branch", "delete", "lakefs://demo/main", "--yes", code=Forbidden.exit_code)
    assert protected["code"] == "protected_branch"
    assert "main" in [b["id"] for b in js("branch", "list", "lakefs://demo")]
    # A missing --source is a usage error.
    assert run("branch", "create", "lakefs://demo/x", code=2).exit_code == 2


def test_tags(run: Run, js, repo: str) -> None:
    head = js("show", "commit", "lakefs://demo/main")["id"]
    assert js("tag", "create", "lakefs://demo/v1.0", "lakefs://demo/main") == {
        "id": "v1.0",
        "commit_id": head,
    }
    assert "v0" in run("tag", "create", "lakefs://demo/v0", "lakefs://demo/main~1").stdout
    assert [t["id"] for t in js("tag", "list", "lakefs://demo")] == ["v0", "v1.0"]
    assert js("tag", "show", "lakefs://demo/v1.0")["commit_id"] == head
    assert head in run("tag", "show", "lakefs://demo/v1.0").stdout
    assert js("fs", "stat", "lakefs://demo/v1.0/a/x.csv")["size_bytes"] == 6
    run("fs", "stat", "lakefs://demo/v0/a/x.csv", code=3)

    assert js("tag", "create", "lakefs://demo/v1.0", "lakefs://demo/main", code=4)["code"] == "already_exists"
    assert js("tag", "show", "lakefs://demo/nope", code=3)["code"] == "tag_not_found"
    assert js("tag", "show", "lakefs://demo/..bad", code=2)["code"] == "invalid_name"
    assert js("tag", "delete", "lakefs://demo/v0") == {
        "type": "tag",
        "deleted": ["v0"],
        "message": "Tag 'v0' deleted",
    }
    run("tag", "delete", "lakefs://demo/v1.0")
    assert js("tag", "list", "lakefs://demo") == []
    run("tag", "delete", "lakefs://demo/v1.0", code=3)
