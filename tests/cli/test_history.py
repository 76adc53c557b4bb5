"""Commits and history from the command line: commit, log, show, diff, merge, cherry-pick,
revert, reset."""

from __future__ import annotations

from lakectl.errors import Conflict, DirtyBranch, NothingToCommit
from tests.cli.conftest import Run

COMMIT_FIELDS = {
    "id",
    "parents",
    "committer",
    "message",
    "creation_date",
    "meta_range_id",
    "metadata",
    "generation",
}


def _put(run: Run, uri: str, data: bytes) -> None:
    run("fs", "upload", uri, "--source", "-", input=data)


def test_commit_with_metadata(run: Run, js, repo: str) -> None:
    _put(run, "lakefs://demo/main/c.csv", b"c")
    c = js("commit", "lakefs://demo/main", "-m", "add c", "--meta", "owner=ada", "--meta", "ticket=7=x")
    assert set(c) == COMMIT_FIELDS
    assert c["message"] == "add c" and c["committer"] == "tester"
    assert c["metadata"] == {"owner": "ada", "ticket": "7=x"} and c["generation"] == 3
    human = run("commit", "lakefs://demo/main", "-m", "nothing", "--allow-empty").stdout
    assert human.startswith("ID:") and "    nothing" in human and "Author:        tester" in human


def test_commit_errors(run: Run, js, repo: str) -> None:
    assert js("commit", "lakefs://demo/main", "-m", "x", code=NothingToCommit.exit_code)["code"] == (
        "nothing_to_commit"
    )
    assert js("commit", "lakefs://demo/main", code=2)["code"] == "invalid_argument"  # no message
    assert js("commit", "lakefs://demo/main", "-m", "x", "--meta", "novalue", code=2)["code"] == (
        "invalid_argument"
    )
    assert js("commit", "lakefs://demo/nope", "-m", "x", code=3)["code"] == "branch_not_found"


def test_log_and_show(run: Run, js, repo: str) -> None:
    for i in range(3):
        _put(run, f"lakefs://demo/main/log/{i}", str(i).encode())
        run("commit", "lakefs://demo/main", "-m", f"c{i}")
    log = js("log", "lakefs://demo/main")
    assert [c["message"] for c in log] == ["c2", "c1", "c0", "first", "Repository created"]
    assert all(set(c) == COMMIT_FIELDS for c in log)
    assert [c["message"] for c in js("log", "lakefs://demo/main", "--amount", "2")] == ["c2", "c1"]
    assert [c["message"] for c in js("log", "lakefs://demo/main~2", "-n", "1")] == ["c0"]
    assert [c["message"] for c in js("log", "lakefs://demo/main", "--objects", "log/1")] == ["c1"]
    assert [c["message"] for c in js("log", "lakefs://demo/main", "--prefixes", "a/")] == ["first"]
    assert [
        c["message"] for c in js("log", "lakefs://demo/main", "--prefixes", "log/0", "--prefixes", "log/2")
    ] == [
        "c2",
        "c0",
    ]
    human = run("log", "lakefs://demo/main", "--amount", "2").stdout
    assert human.count("ID:") == 2 and "    c2" in human and "    c1" in human
    assert js("log", "lakefs://demo/main", "--amount", "0") == log  # lakeFS: 0 means all
    run("log", "lakefs://demo/main", "--amount", "-1", code=2)
    run("log", "lakefs://demo/main", "--amount", "many", code=2)

    shown = js("show", "commit", f"lakefs://demo/{log[1]['id'][:10]}")
    assert shown == log[1]
    text = run("show", "commit", "lakefs://demo/main", "--show-meta-range-id").stdout
    assert log[0]["id"] in text and log[0]["meta_range_id"] in text and log[1]["id"] in text
    assert js("show", "commit", "lakefs://demo/main~9", code=3)["code"] == "ref_not_found"
    assert js("show", "commit", "lakefs://demo/main~x", code=2)["code"] == "invalid_ref"


def test_log_merges(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main")
    _put(run, "lakefs://demo/dev/d", b"d")
    run("commit", "lakefs://demo/dev", "-m", "on dev")
    _put(run, "lakefs://demo/main/m", b"m")
    run("commit", "lakefs://demo/main", "-m", "on main")
    run("merge", "lakefs://demo/dev", "lakefs://demo/main")
    no_merges = [c["message"] for c in js("log", "lakefs://demo/main", "--no-merges")]
    assert sorted(no_merges) == sorted(["on main", "on dev", "first", "Repository created"])
    first_parent = [c["message"] for c in js("log", "lakefs://demo/main", "--first-parent")]
    assert first_parent == ["Merge 'dev' into 'main'", "on main", "first", "Repository created"]
    assert "Merge:" in run("log", "lakefs://demo/main", "-n", "1").stdout


def test_diff(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main")
    _put(run, "lakefs://demo/dev/a/x.csv", b"changed")
    _put(run, "lakefs://demo/dev/c/new.csv", b"new")
    run("fs", "rm", "lakefs://demo/dev/a/y.csv")
    expected = [
        {"type": "changed", "path": "a/x.csv", "path_type": "object", "size_bytes": 7},
        {"type": "removed", "path": "a/y.csv", "path_type": "object", "size_bytes": 6},
        {"type": "added", "path": "c/new.csv", "path_type": "object", "size_bytes": 3},
    ]
    assert js("diff", "lakefs://demo/dev") == expected
    assert run("diff", "lakefs://demo/dev").stdout == "~ a/x.csv\n- a/y.csv\n+ c/new.csv\n"
    assert js("diff", "lakefs://demo/dev", "--prefix", "c/") == expected[2:]
    assert js("diff", "lakefs://demo/main", "lakefs://demo/dev") == []  # nothing committed yet
    run("commit", "lakefs://demo/dev", "-m", "dev work")
    assert js("diff", "lakefs://demo/dev") == []
    assert "no changes" in run("diff", "lakefs://demo/dev").stderr
    assert js("diff", "lakefs://demo/main", "lakefs://demo/dev") == expected
    assert js("diff", "lakefs://demo/main", "lakefs://demo/dev", "--prefix", "a/") == expected[:2]
    # Three-dot by default: main's own later changes do not show; --two-way compares the trees.
    _put(run, "lakefs://demo/main/only-main", b"m")
    run("commit", "lakefs://demo/main", "-m", "main work")
    assert js("diff", "lakefs://demo/main", "lakefs://demo/dev") == expected
    two_way = js("diff", "lakefs://demo/main", "lakefs://demo/dev", "--two-way")
    assert {"type": "removed", "path": "only-main", "path_type": "object", "size_bytes": 1} in two_way
    assert js("diff", "lakefs://demo/main", "lakefs://other/dev", code=2)["code"] == "invalid_argument"
    run("diff", "lakefs://demo/main", "--two-way", code=2)


def test_merge_and_conflicts(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main")
    _put(run, "lakefs://demo/dev/a/x.csv", b"dev")
    _put(run, "lakefs://demo/dev/b/z.csv", b"dev z")
    run("commit", "lakefs://demo/dev", "-m", "dev")
    _put(run, "lakefs://demo/main/a/x.csv", b"main")
    _put(run, "lakefs://demo/main/b/z.csv", b"main z")
    head_before = js("show", "commit", "lakefs://demo/main")["id"]

    # Dirty destination: refused, exit 6.
    dirty = js("merge", "lakefs://demo/dev", "lakefs://demo/main", code=DirtyBranch.exit_code)
    assert dirty["code"] == "dirty_branch"
    run("commit", "lakefs://demo/main", "-m", "main")
    head_before = js("show", "commit", "lakefs://demo/main")["id"]

    conflict = js("merge", "lakefs://demo/dev", "lakefs://demo/main", code=Conflict.exit_code)
    assert conflict["code"] == "merge_conflict"
    assert conflict["details"]["conflicts"] == ["a/x.csv", "b/z.csv"]
    human = run("merge", "lakefs://demo/dev", "lakefs://demo/main", code=5)
    assert human.stdout == ""
    assert human.stderr.startswith("error: merge of 'dev' into 'main'")
    assert human.stderr.rstrip().endswith("a/x.csv, b/z.csv") and human.stderr.count("\n") == 1
    assert js("show", "commit", "lakefs://demo/main")["id"] == head_before  # nothing changed

    merged = js(
        "merge",
        "lakefs://demo/dev",
        "lakefs://demo/main",
        "--strategy",
        "dest-wins",
        "--strategy",
        "b/**=source-wins",
        "-m",
        "resolved",
    )
    assert merged["changed"] is True and merged["reference"] == merged["commit"]["id"]
    assert merged["commit"]["message"] == "resolved"
    assert merged["commit"]["parents"] == [head_before, js("show", "commit", "lakefs://demo/dev")["id"]]
    assert run("fs", "cat", "lakefs://demo/main/a/x.csv").stdout == "main"
    assert run("fs", "cat", "lakefs://demo/main/b/z.csv").stdout == "dev z"

    again = js("merge", "lakefs://demo/dev", "lakefs://demo/main")
    assert again["changed"] is False
    assert "Nothing to merge" in run("merge", "lakefs://demo/dev", "lakefs://demo/main").stdout
    assert js("merge", "lakefs://demo/dev", "lakefs://demo/main", "--strategy", "theirs", code=2)["code"] == (
        "invalid_argument"
    )


def test_merge_fast_case_human(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main")
    _put(run, "lakefs://demo/dev/new", b"n")
    run("commit", "lakefs://demo/dev", "-m", "dev")
    out = run("merge", "lakefs://demo/dev", "lakefs://demo/main").stdout
    assert out.startswith("Merged 'dev' into 'main': commit ")
    assert run("fs", "cat", "lakefs://demo/main/new").stdout == "n"


def test_cherry_pick_and_revert(run: Run, js, repo: str) -> None:
    run("branch", "create", "lakefs://demo/dev", "-s", "lakefs://demo/main")
    _put(run, "lakefs://demo/dev/p1", b"1")
    pick = js("commit", "lakefs://demo/dev", "-m", "pick me", "--meta", "k=v")
    _put(run, "lakefs://demo/dev/p2", b"2")
    run("commit", "lakefs://demo/dev", "-m", "not me")

    picked = js("cherry-pick", f"lakefs://demo/{pick['id']}", "lakefs://demo/main")
    assert picked["message"] == "pick me" and picked["metadata"] == {"k": "v"}
    assert [o["path"] for o in js("fs", "ls", "lakefs://demo/main", "-r")] == [
        "a/x.csv",
        "a/y.csv",
        "b/z.csv",
        "p1",
    ]

    reverted = js("revert", "lakefs://demo/main", "main")
    assert len(reverted) == 1 and reverted[0]["message"] == 'Revert "pick me"'
    run("fs", "stat", "lakefs://demo/main/p1", code=3)
    # branch revert: the same command; several commits in order.
    both = js("branch", "revert", "lakefs://demo/dev", "dev", "dev~1")
    assert [c["message"] for c in both] == ['Revert "not me"', 'Revert "pick me"']
    assert "Revert" in run("revert", "lakefs://demo/main", "main~2").stdout

    run("merge", "lakefs://demo/dev", "lakefs://demo/main")
    merge_commit = "main"
    assert js("revert", "lakefs://demo/main", merge_commit, code=2)["code"] == "invalid_argument"
    assert js("revert", "lakefs://demo/main", merge_commit, "--parent-number", "1")[0]["message"].startswith(
        "Revert"
    )
    assert js("cherry-pick", "lakefs://demo/nope", "lakefs://demo/main", code=3)["code"] == "ref_not_found"
    _put(run, "lakefs://demo/main/dirty", b"d")
    assert js("revert", "lakefs://demo/main", "main", "-p", "1", code=6)["code"] == "dirty_branch"


def test_reset(run: Run, js, repo: str) -> None:
    def staged() -> list[str]:
        return [c["path"] for c in js("diff", "lakefs://demo/main")]

    def change_all() -> None:
        _put(run, "lakefs://demo/main/a/x.csv", b"changed")
        _put(run, "lakefs://demo/main/a/new", b"n")
        _put(run, "lakefs://demo/main/c/new", b"n")

    change_all()
    assert staged() == ["a/new", "a/x.csv", "c/new"]
    assert js("reset", "lakefs://demo/main/a/x.csv") == {
        "type": "object",
        "path": "a/x.csv",
        "discarded": 1,
        "message": "Discarded 1 uncommitted change(s) of 'a/x.csv' on 'main'",
    }
    assert run("fs", "cat", "lakefs://demo/main/a/x.csv").stdout == "1,2,3\n"
    assert js("reset", "lakefs://demo/main/a/", "--prefix")["discarded"] == 1
    assert staged() == ["c/new"]
    assert "Discarded 1" in run("reset", "lakefs://demo/main").stdout
    assert staged() == []

    change_all()
    assert js("branch", "reset", "lakefs://demo/main", "--object", "a/new")["discarded"] == 1
    assert js("branch", "reset", "lakefs://demo/main", "--prefix", "c/")["type"] == "common_prefix"
    assert staged() == ["a/x.csv"]
    assert js("branch", "reset", "lakefs://demo/main")["type"] == "reset"
    assert staged() == []
    run("branch", "reset", "lakefs://demo/main", "--prefix", "a/", "--object", "a/x", code=2)
    run("reset", "lakefs://demo/main", "--prefix", code=2)
    assert js("reset", "lakefs://demo/nope", code=3)["code"] == "branch_not_found"
    assert js("reset", "lakefs://demo/main/../x", code=2)["code"] == "invalid_path"
