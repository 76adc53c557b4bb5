"""``lakectl local``: clone, edit, status, commit, pull, checkout, embedded and against a server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lakectl.client.workcopy.index import RACY_NS, Index
from tests.cli.both import Lakectl, both, live

__all__ = ["both", "live"]


def seed(cli: Lakectl) -> str:
    """main holds a/x.csv (the fixture's), a/y.csv, a/deep/z.csv and b/w.csv; returns its commit."""
    for path, data in {"a/y.csv": b"y\n", "a/deep/z.csv": b"z\n", "b/w.csv": b"w\n"}.items():
        cli("fs", "upload", f"lakefs://{cli.repo}/main/{path}", "-s", "-", input=data)
    return str(cli.js("commit", f"lakefs://{cli.repo}/main", "-m", "seed")["id"])


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".lakectl" not in p.parts and p.name != ".lakefs_ref.yaml"
    }


def changes(cli: Lakectl, directory: Path, *flags: str) -> list[tuple[str, str, str]]:
    out = cli.js("local", "status", str(directory), *flags)
    return [(c["source"], c["type"], c["path"]) for c in out["changes"]]


def ref_file(directory: Path) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load((directory / ".lakefs_ref.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_round_trip_clone_edit_status_commit_pull(both: Lakectl) -> None:
    cli = both
    head = seed(cli)
    one, two = cli.work / "one", cli.work / "two"
    out = cli.js("local", "clone", f"lakefs://{cli.repo}/main/a/", str(one))
    assert (out["operation"], out["at_head"], out["downloaded"]) == ("clone", head, 3)
    assert files(one) == {"x.csv": b"1,2\n", "y.csv": b"y\n", "deep/z.csv": b"z\n"}
    assert ref_file(one) == {"src": f"lakefs://{cli.repo}/main/a/", "at_head": head, "active_operation": ""}
    cli("local", "clone", f"lakefs://{cli.repo}/main/a", str(two))  # the prefix without its slash
    assert changes(cli, one) == []

    (one / "x.csv").write_bytes(b"changed\n")
    (one / "deep" / "z.csv").unlink()
    (one / "n" / "m").mkdir(parents=True)
    (one / "n" / "m" / "new.csv").write_bytes(b"new\n")
    assert changes(cli, one) == [
        ("local", "removed", "deep/z.csv"),
        ("local", "added", "n/m/new.csv"),
        ("local", "changed", "x.csv"),
    ]
    human = cli("local", "status", str(one)).stdout
    assert "modified" in human and "n/m/new.csv" in human

    done = cli.js("local", "commit", str(one), "-m", "edit", "--meta", "k=v")
    assert (done["uploaded"], done["removed"]) == (2, 1)
    assert done["commit"]["message"] == "edit" and done["commit"]["metadata"]["k"] == "v"
    assert done["commit"]["parents"] == [head]
    assert ref_file(one)["at_head"] == done["at_head"] == done["commit"]["id"]
    assert changes(cli, one) == []
    lake = cli("fs", "cat", f"lakefs://{cli.repo}/main/a/n/m/new.csv").stdout
    assert lake == "new\n"
    cli("fs", "stat", f"lakefs://{cli.repo}/main/a/deep/z.csv", code=3)
    assert cli("fs", "cat", f"lakefs://{cli.repo}/main/b/w.csv").stdout == "w\n"  # outside: untouched

    assert changes(cli, two, "--remote") == [
        ("remote", "removed", "deep/z.csv"),
        ("remote", "added", "n/m/new.csv"),
        ("remote", "changed", "x.csv"),
    ]
    pulled = cli.js("local", "pull", str(two))
    assert (pulled["downloaded"], pulled["removed"]) == (2, 1)
    assert files(two) == files(one)
    assert not (two / "deep").exists()  # the directory emptied by the pull went with its file
    assert ref_file(two)["at_head"] == done["at_head"]
    assert changes(cli, two, "--remote") == []
    nothing = cli.js("local", "commit", str(two), "-m", "nothing")
    assert nothing["commit"] is None
    assert "No changes" in cli("local", "commit", str(two), "-m", "nothing").stdout


def test_pull_refuses_to_overwrite_a_local_edit_unless_force(both: Lakectl) -> None:
    cli = both
    seed(cli)
    one, two = cli.work / "one", cli.work / "two"
    for d in (one, two):
        cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(d))
    (one / "y.csv").write_bytes(b"theirs\n")
    cli("local", "commit", str(one), "-m", "theirs")
    (two / "x.csv").write_bytes(b"mine\n")
    refused = cli("local", "pull", str(two), code=6)
    assert refused.stderr.startswith("error: there are 1 uncommitted changes")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert (two / "x.csv").read_bytes() == b"mine\n" and (two / "y.csv").read_bytes() == b"y\n"
    cli("local", "pull", str(two), "--force")
    assert files(two) == files(one)
    assert changes(cli, two) == []


def test_checkout_a_tag_and_back_touches_only_what_differs(both: Lakectl) -> None:
    cli = both
    seed(cli)
    cli("tag", "create", f"lakefs://{cli.repo}/seeded", f"lakefs://{cli.repo}/main")
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    (wc / "y.csv").write_bytes(b"y2\n")
    (wc / "deep" / "z.csv").unlink()
    second = cli.js("local", "commit", str(wc), "-m", "second")["at_head"]
    before = {p: os.stat(wc / p) for p in ("x.csv", "y.csv")}

    out = cli.js("local", "checkout", str(wc), "--ref", "seeded")
    assert (out["downloaded"], out["removed"]) == (2, 0)  # y.csv back, deep/z.csv back
    assert files(wc) == {"x.csv": b"1,2\n", "y.csv": b"y\n", "deep/z.csv": b"z\n"}
    x = os.stat(wc / "x.csv")
    assert (x.st_mtime_ns, x.st_ino) == (before["x.csv"].st_mtime_ns, before["x.csv"].st_ino)
    assert os.stat(wc / "y.csv").st_ino != before["y.csv"].st_ino
    ref = ref_file(wc)
    assert ref["src"] == f"lakefs://{cli.repo}/main/a/"  # lakeFS keeps the source; at_head moves
    assert ref["at_head"] == cli.js("show", "commit", f"lakefs://{cli.repo}/seeded")["id"]
    assert changes(cli, wc) == []

    back = cli.js("local", "checkout", str(wc), "-r", second)
    assert (back["downloaded"], back["removed"]) == (1, 1)
    assert files(wc) == {"x.csv": b"1,2\n", "y.csv": b"y2\n"}
    assert os.stat(wc / "x.csv").st_mtime_ns == before["x.csv"].st_mtime_ns

    # A local change is reverted by checkout, after asking (-y answers; no terminal: refused).
    (wc / "x.csv").write_bytes(b"oops\n")
    cli("local", "checkout", str(wc), code=2)
    assert (wc / "x.csv").read_bytes() == b"oops\n"
    cli("local", "checkout", str(wc), "-y")
    assert (wc / "x.csv").read_bytes() == b"1,2\n"


def test_commit_refused_when_the_branch_changed_the_same_file(both: Lakectl) -> None:
    cli = both
    seed(cli)
    one, two = cli.work / "one", cli.work / "two"
    for d in (one, two):
        cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(d))
    (one / "x.csv").write_bytes(b"one\n")
    cli("local", "commit", str(one), "-m", "one")
    head = cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"]
    (two / "x.csv").write_bytes(b"two\n")
    (two / "y.csv").write_bytes(b"two\n")
    refused = cli("local", "commit", str(two), "-m", "two", code=5)
    assert "x.csv" in refused.stderr and "y.csv" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"] == head
    assert cli.js("diff", f"lakefs://{cli.repo}/main") == []  # nothing uploaded, nothing staged

    # A change that does not touch the same file goes through, and brings the other one's.
    (two / "x.csv").write_bytes(b"one\n")  # the same bytes as the branch: no longer a change
    (two / "x.csv").unlink()
    cli("local", "checkout", str(two), "-y")
    (two / "y.csv").write_bytes(b"two\n")
    out = cli.js("local", "pull", str(two), code=6)
    assert out["code"] == "precondition_failed"
    done = cli.js("local", "commit", str(two), "-m", "two")
    assert done["commit"]["parents"] == [head]
    assert done["downloaded"] == 1  # x.csv as the branch has it
    assert files(two) == {"x.csv": b"one\n", "y.csv": b"two\n", "deep/z.csv": b"z\n"}
    assert changes(cli, two, "--remote") == []


def test_commit_refuses_uncommitted_changes_outside_the_prefix(both: Lakectl) -> None:
    cli = both
    seed(cli)
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    cli("fs", "upload", f"lakefs://{cli.repo}/main/b/staged.csv", "-s", "-", input=b"s\n")
    (wc / "x.csv").write_bytes(b"mine\n")
    refused = cli("local", "commit", str(wc), "-m", "mine", code=6)
    assert "outside of local path" in refused.stderr and "--force" in refused.stderr
    assert [c["path"] for c in cli.js("diff", f"lakefs://{cli.repo}/main")] == ["b/staged.csv"]
    done = cli.js("local", "commit", str(wc), "-m", "mine", "--force")
    assert cli.js("diff", f"lakefs://{cli.repo}/main") == []
    assert done["commit"]["id"] == cli.js("branch", "show", f"lakefs://{cli.repo}/main")["commit_id"]


def test_bad_input_is_one_error_line_with_its_exit_code(both: Lakectl) -> None:
    cli = both
    plain = cli.work / "plain"
    plain.mkdir()
    for verb in ("status", "commit", "pull", "checkout"):
        r = cli("local", verb, str(plain), code=3)
        assert r.stderr.startswith("error: ") and "not linked to a lakeFS path" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = cli("local", "clone", "s3://bucket/x", str(cli.work / "c1"), code=2)
    assert r.stderr.startswith("error: invalid URI")
    cli("local", "clone", f"lakefs://{cli.repo}/nosuch/", str(cli.work / "c2"), code=3)
    assert not (cli.work / "c2").exists()
    (plain / "f").write_bytes(b"x")
    r = cli("local", "clone", f"lakefs://{cli.repo}/main/", str(plain), code=4)
    assert "exists and is not empty" in r.stderr and not (plain / ".lakefs_ref.yaml").exists()
    r = cli("local", "clone", f"lakefs://{cli.repo}/main/a/x.csv", str(cli.work / "c3"), code=2)
    assert "is an existing object" in r.stderr
    cli("local", "init", f"lakefs://{cli.repo}/main/a/", str(plain))
    cli("local", "init", f"lakefs://{cli.repo}/main/a/", str(plain), code=4)
    cli("local", "init", f"lakefs://{cli.repo}/main/a/", str(plain), "--force")
    # init downloads nothing: the commit's file is missing here, and f is new
    assert changes(cli, plain) == [("local", "added", "f"), ("local", "removed", "x.csv")]
    cli("local", "commit", str(plain), code=2)  # no message
    cli("local", "status", str(plain), "--remote", "--local", code=2)


def test_index_reads_only_files_whose_stat_changed(both: Lakectl, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = both
    seed(cli)
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/", str(wc))
    # Files written within a clock tick of the index are read again (racily clean), until an
    # index written later records them: wait out the window, and let a status record them.
    time.sleep(RACY_NS / 1e9 * 2)
    cli("local", "status", str(wc))
    index = Index.load(str(wc))
    assert sorted(index.paths) == ["a/deep/z.csv", "a/x.csv", "a/y.csv", "b/w.csv"]
    from lakectl.core.blocks import data

    read: list[str] = []
    real = data.file_checksum
    monkeypatch.setattr(data, "file_checksum", lambda p, *a: read.append(p) or real(p, *a))
    assert changes(cli, wc) == []
    assert read == []
    os.utime(wc / "a" / "y.csv", ns=(1, 1))  # same bytes, another mtime: read once, found equal
    (wc / "b" / "w.csv").write_bytes(b"W\n")  # same size, other bytes: read, found changed
    assert changes(cli, wc) == [("local", "changed", "b/w.csv")]
    assert sorted(os.path.relpath(p, wc) for p in read) == ["a/y.csv", "b/w.csv"]
    read.clear()
    assert changes(cli, wc) == [("local", "changed", "b/w.csv")]
    assert [os.path.relpath(p, wc) for p in read] == ["b/w.csv"]  # y.csv's new stat was recorded


def test_nested_working_copies_and_list(both: Lakectl) -> None:
    cli = both
    seed(cli)
    outer = cli.work / "outer"
    cli("local", "clone", f"lakefs://{cli.repo}/main/b/", str(outer))
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(outer / "inner"))
    assert changes(cli, outer) == []  # the inner working copy is not the outer's data
    (outer / "inner" / "x.csv").write_bytes(b"inner\n")
    assert changes(cli, outer) == []
    assert changes(cli, outer / "inner" / "deep") == [("local", "changed", "x.csv")]  # its root found
    listed = cli.js("local", "list", str(outer))
    assert [(r["directory"], r["src"]) for r in listed] == [
        (".", f"lakefs://{cli.repo}/main/b/"),
        ("inner", f"lakefs://{cli.repo}/main/a/"),
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_gitignore_inside_a_git_repository(both: Lakectl) -> None:
    cli = both
    seed(cli)
    repo = cli.work / "code"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("*.pyc\n")
    r = cli("local", "init", f"lakefs://{cli.repo}/main/a/", str(repo), code=2)
    assert "is a git repository, please specify a sub-directory" in r.stderr
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(repo / "data" / "a"))
    cli("local", "init", f"lakefs://{cli.repo}/main/b/", str(repo / "b"))
    text = (repo / ".gitignore").read_text()
    assert text == (
        "*.pyc\n\n# ignored by lakectl local:\ndata/a/*\n!data/a/.lakefs_ref.yaml\nb/*\n!b/.lakefs_ref.yaml\n"
    )
    shown = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(p for p in shown if p != "??") == [
        ".gitignore",
        "b/.lakefs_ref.yaml",
        "data/a/.lakefs_ref.yaml",
    ]
    listed = cli.js("local", "list", str(repo))
    assert [r["directory"] for r in listed] == ["b", "data/a"]
    cli("local", "clone", f"lakefs://{cli.repo}/main/b/", str(cli.work / "nogit"), "--no-gitignore")


def test_a_directory_without_index_is_read_once_against_its_commit(both: Lakectl) -> None:
    """A working copy lakeFS's lakectl linked has only .lakefs_ref.yaml: the index is made from
    the commit's listing, and each file compared with its object's checksum."""
    cli = both
    seed(cli)
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    shutil.rmtree(wc / ".lakectl")
    (wc / "y.csv").write_bytes(b"Y\n")  # same size: only its checksum tells
    (wc / "deep" / "z.csv").unlink()
    assert changes(cli, wc) == [("local", "removed", "deep/z.csv"), ("local", "changed", "y.csv")]
    assert Index.load(str(wc)) is not None


def test_a_commit_the_lake_refuses_leaves_no_interrupted_operation(both: Lakectl) -> None:
    cli = both
    seed(cli)
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    cli("branch-protect", "add", f"lakefs://{cli.repo}", "main")
    (wc / "x.csv").write_bytes(b"mine\n")
    refused = cli("local", "commit", str(wc), "-m", "mine", code=8)
    assert len(refused.stderr.strip().splitlines()) == 1
    assert ref_file(wc)["active_operation"] == ""
    assert changes(cli, wc) == [("local", "changed", "x.csv")]
    cli("branch-protect", "delete", f"lakefs://{cli.repo}", "main")
    assert cli.js("local", "commit", str(wc), "-m", "mine")["uploaded"] == 1


def test_checkout_all_reverts_every_linked_directory(both: Lakectl) -> None:
    cli = both
    seed(cli)
    top = cli.work / "top"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(top / "one"))
    cli("local", "clone", f"lakefs://{cli.repo}/main/b/", str(top / "two"))
    (top / "one" / "x.csv").write_bytes(b"edit\n")
    (top / "two" / "extra.csv").write_bytes(b"extra\n")
    cli("local", "checkout", str(top), "--all", code=2)  # asks; no terminal to ask on
    cli("local", "checkout", str(top), "--all", "--ref", "main", code=2)
    outs = cli.js("local", "checkout", str(top), "--all", "-y")
    assert [(o["downloaded"], o["removed"]) for o in outs] == [(1, 0), (0, 1)]
    assert (top / "one" / "x.csv").read_bytes() == b"1,2\n" and not (top / "two" / "extra.csv").exists()


def test_objects_that_cannot_be_files_stay_out_of_the_directory(both: Lakectl) -> None:
    """``a//x.csv`` below the prefix ``a/`` would be ``/x.csv``: never written, anywhere."""
    cli = both
    cli("fs", "upload", f"lakefs://{cli.repo}/main/a//escape.csv", "-s", "-", input=b"e\n")
    cli("fs", "upload", f"lakefs://{cli.repo}/main/a/sub//twice.csv", "-s", "-", input=b"t\n")
    cli("commit", f"lakefs://{cli.repo}/main", "-m", "odd names")
    wc = cli.work / "wc"
    out = cli.js("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    assert out["downloaded"] == 1
    assert files(wc) == {"x.csv": b"1,2\n"}
    assert not Path("/escape.csv").exists()
    assert changes(cli, wc) == []


def test_a_racily_clean_entry_is_read_again(both: Lakectl) -> None:
    """A file rewritten in the clock tick its entry was recorded in keeps size, mtime and inode:
    entries whose mtime is that close to the index's own are hashed, so the change shows."""
    cli = both
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/a/", str(wc))
    target, index_file = wc / "x.csv", wc / ".lakectl" / "index"
    before = os.stat(target)
    os.utime(index_file, ns=(before.st_mtime_ns, before.st_mtime_ns))  # same tick as the entry
    with open(target, "r+b") as f:  # in place: same inode, same size
        f.write(b"9,9\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(target)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert changes(cli, wc) == [("local", "changed", "x.csv")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the monitor needs Linux (inotify)")
def test_a_monitored_directory_commits_and_reports_like_a_walked_one(both: Lakectl) -> None:
    cli = both
    seed(cli)
    wc = cli.work / "wc"
    cli("local", "clone", f"lakefs://{cli.repo}/main/", str(wc))
    assert cli.js("local", "monitor", "status", str(wc))["running"] is False
    started = cli.js("local", "monitor", "start", str(wc))
    try:
        assert (started["running"], started["started"], started["watched_directories"]) == (True, True, 5)
        assert "Monitor running for" in cli("local", "monitor", "start", str(wc)).stdout  # once
        assert changes(cli, wc) == []
        (wc / "a" / "x.csv").write_bytes(b"changed\n")
        (wc / "b" / "w.csv").unlink()
        (wc / "c" / "d").mkdir(parents=True)
        (wc / "c" / "d" / "new.csv").write_bytes(b"new\n")
        want = [
            ("local", "changed", "a/x.csv"),
            ("local", "removed", "b/w.csv"),
            ("local", "added", "c/d/new.csv"),
        ]
        assert sorted(changes(cli, wc), key=lambda c: c[2]) == want
        done = cli.js("local", "commit", str(wc), "-m", "monitored")
        assert (done["uploaded"], done["removed"]) == (2, 1)
        assert changes(cli, wc) == []
        assert cli("fs", "cat", f"lakefs://{cli.repo}/main/c/d/new.csv").stdout == "new\n"
        (wc / "c" / "d" / "new.csv").write_bytes(b"again\n")  # in a directory made while watched
        assert changes(cli, wc) == [("local", "changed", "c/d/new.csv")]
        shown = cli.js("local", "monitor", "status", str(wc))
        assert (shown["running"], shown["wanted"], shown["watched_directories"]) == (True, True, 7)  # c, c/d
    finally:
        stopped = cli.js("local", "monitor", "stop", str(wc))
    assert stopped == {"directory": str(wc), "running": False, "stopped": True}
    assert changes(cli, wc) == [("local", "changed", "c/d/new.csv")]  # walked again, same answer
    assert "No monitor ran for" in cli("local", "monitor", "stop", str(wc)).stdout
