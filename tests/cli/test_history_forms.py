"""lakeFS's lakectl forms of history and merge, each run embedded and against a live server: log's
string-slice flags, paging, --since, --stop-at, --dot; --amount/--after on every list command;
revert and cherry-pick of a merge commit with -m; merge --squash; diff of ``ref@`` and ``ref$``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lakectl.cli.app import app
from tests.server.conftest import Live, live, unique

__all__ = ["live"]


class Lake:
    """One lake seen through the CLI: ``run`` returns the result, ``js`` the parsed --json output;
    ``r`` is this test's repository (unique, as the live server is shared by the session)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.r = unique("hist")

    def run(self, *args: str, input: bytes | None = None, code: int = 0) -> Result:
        argv = [a.replace("lakefs://R", f"lakefs://{self.r}") for a in args]
        result = CliRunner().invoke(app, argv, input=input, env=self.env)
        assert result.exit_code == code, (argv, result.stdout, result.stderr, result.exception)
        return result

    def js(self, *args: str, input: bytes | None = None, code: int = 0) -> Any:
        return json.loads(self.run(*args, "--json", input=input, code=code).stdout)

    def put(self, branch: str, path: str, data: bytes) -> None:
        self.run("fs", "upload", f"lakefs://R/{branch}/{path}", "--source", "-", input=data)


@pytest.fixture(params=["embedded", "remote"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lake]:
    if request.param == "embedded":
        env = {
            "LAKECTL_HOME": str(tmp_path / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "tester",
        }
    else:
        server: Live = request.getfixturevalue("live")
        env = server.cli_env(tmp_path)
    yield Lake(env)


def messages(commits: list[dict[str, Any]]) -> list[str]:
    return [c["message"] for c in commits]


@pytest.fixture
def history(lake: Lake) -> Lake:
    """R with commits c0..c3 on main, each adding log/<i>."""
    lake.run("repo", "create", "lakefs://R")
    for i in range(4):
        lake.put("main", f"log/{i}", str(i).encode())
        lake.run("commit", "lakefs://R/main", "-m", f"c{i}")
    return lake


# -- 1. log -------------------------------------------------------------------------------


def test_log_objects_and_prefixes_take_comma_lists(history: Lake) -> None:
    """lakeFS's --objects/--prefixes are string slices: `a,b` is two paths, as repeating is."""
    log: Callable[..., Any] = lambda *a: messages(history.js("log", "lakefs://R/main", *a))  # noqa: E731
    assert log("--objects", "log/1,log/3") == ["c3", "c1"]
    assert log("--objects", "log/1", "--objects", "log/3") == ["c3", "c1"]
    assert log("--objects", "log/0,log/9", "--objects", "log/2") == ["c2", "c0"]
    assert log("--prefixes", "log/1,log/2") == ["c2", "c1"]
    assert log("--objects", "log/1", "--prefixes", "log/3") == ["c3", "c1"]
    # --after and --stop-at place the page in the walk, as lakeFS's log: a commit the filter
    # leaves out (c2 changed log/2 only) still marks where the page starts or the walk ends.
    assert log("--objects", "log/1,log/3", "--after", "main~1") == ["c1"]
    assert log("--objects", "log/3,log/0", "--stop-at", "main~1") == ["c3"]
    # An empty item is refused, not read as "every path".
    for bad in ("log/1,", ",", ""):
        refused = history.js("log", "lakefs://R/main", "--objects", bad, code=2)
        assert refused["code"] == "invalid_argument" and "empty" in refused["message"]
    history.run("log", "lakefs://R/main", "--prefixes", "a,,b", code=2)
    # CSV, as pflag's string slices: a quoted item may hold a comma.
    history.put("main", "odd,name", b"x")
    history.run("commit", "lakefs://R/main", "-m", "odd")
    assert log("--objects", '"odd,name",log/0') == ["odd", "c0"]
    assert log("--objects", "odd,name") == []


def test_log_pages_with_amount_and_after(history: Lake) -> None:
    everything = history.js("log", "lakefs://R/main")
    assert messages(everything) == ["c3", "c2", "c1", "c0", "Repository created"]
    assert history.js("log", "lakefs://R/main", "--amount", "0") == everything  # lakeFS: 0 is all
    first = history.run("log", "lakefs://R/main", "--amount", "2", "--json")
    assert messages(json.loads(first.stdout)) == ["c3", "c2"]
    last_id = everything[1]["id"]
    assert f'--amount 2 --after "{last_id}"' in first.stderr
    second = history.run("log", "lakefs://R/main", "--amount", "2", "--after", last_id, "--json")
    assert messages(json.loads(second.stdout)) == ["c1", "c0"]
    assert everything[3]["id"] in second.stderr
    third = history.run("log", "lakefs://R/main", "--amount", "2", "--after", everything[3]["id"], "--json")
    assert messages(json.loads(third.stdout)) == ["Repository created"]
    assert "more results" not in third.stderr
    # --limit: just the page, no question whether more follow.
    limited = history.run("log", "lakefs://R/main", "--amount", "1", "--limit")
    lines = limited.stdout.splitlines()  # an id may begin with "c2": whole lines are compared
    assert everything[0]["id"] in limited.stdout and "    c3" in lines and "    c2" not in lines
    assert "more results" not in limited.stderr
    # --after takes any ref as well as an id: the page after main~1's commit.
    assert messages(history.js("log", "lakefs://R/main", "--after", "main~1", "-n", "1")) == ["c1"]
    # The note comes in human output too, under the page.
    human = history.run("log", "lakefs://R/main", "--amount", "1")
    assert "c3" in human.stdout and f'--after "{everything[0]["id"]}"' in human.stderr
    history.run("log", "lakefs://R/main", "--after", "nosuchref", code=3)


def test_log_since_stop_at_and_meta_range_id(history: Lake) -> None:
    everything = history.js("log", "lakefs://R/main")
    assert history.js("log", "lakefs://R/main", "--since", "2000-01-01T00:00:00Z") == everything
    assert history.js("log", "lakefs://R/main", "--since", "2999-01-01T00:00:00+02:00") == []
    # No offset: UTC; a date alone: its midnight (UTC), as lakeFS's API reads a date.
    assert history.js("log", "lakefs://R/main", "--since", "2000-01-01") == everything
    assert history.js("log", "lakefs://R/main", "--since", "2999-01-01T00:00:00") == []
    for bad in ("2024-13-01", "1714000000", "last tuesday"):  # yesterday is read as git reads it
        refused = history.js("log", "lakefs://R/main", "--since", bad, code=2)
        assert "RFC 3339" in refused["message"]
    assert messages(history.js("log", "lakefs://R/main", "--stop-at", "main~2")) == ["c3", "c2", "c1"]
    shown = history.run("log", "lakefs://R/main", "-n", "1", "--show-meta-range-id").stdout
    assert f"Meta Range ID: {everything[0]['meta_range_id']}" in shown
    assert "Meta Range ID" not in history.run("log", "lakefs://R/main", "-n", "1").stdout


def test_log_dot_draws_the_commit_graph(history: Lake) -> None:
    history.run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    history.put("dev", "d", b"d")
    history.run("commit", "lakefs://R/dev", "-m", "dev <work> & more")
    history.run("merge", "lakefs://R/dev", "lakefs://R/main")
    commits = history.js("log", "lakefs://R/main")
    out = history.run("log", "lakefs://R/main", "--dot").stdout
    assert out.startswith('digraph {\n\trankdir="BT"\n') and out.rstrip().endswith("}")
    for c in commits:
        assert f'\t"{c["id"]}" [shape=note label=< ' in out
        for parent in c["parents"]:
            assert f'\t"{parent}" -> "{c["id"]}";' in out
    assert "dev &lt;work&gt; &amp; more" in out
    merge = commits[0]
    assert f"<b>{merge['id'][:8]}<br/> " in out
    assert history.js("log", "lakefs://R/main", "--dot", code=2)["code"] == "invalid_argument"


# -- 2. paging of every list command ------------------------------------------------------


def pages(lake: Lake, *args: str, amount: int, key: str) -> list[list[str]]:
    """Walk a list command page by page as a user would: --amount, then --after the offset the
    note on stderr names; every page's JSON is a bare list."""
    out: list[list[str]] = []
    after: list[str] = []
    while True:
        result = lake.run(*args, "--amount", str(amount), *after, "--json")
        out.append([item[key] for item in json.loads(result.stdout)])
        if "for more results" not in result.stderr:
            return out
        offset = result.stderr.split('--after "', 1)[1].split('"', 1)[0]
        assert offset == out[-1][-1]
        after = ["--after", offset]


def test_every_list_command_pages_with_amount_and_after(lake: Lake) -> None:
    lake.run("repo", "create", "lakefs://R")
    for name in ("b1", "b2", "b3", "b4"):
        lake.run("branch", "create", f"lakefs://R/{name}", "--source", "lakefs://R/main")
        lake.run("tag", "create", f"lakefs://R/t-{name}", "lakefs://R/main")
    for path in ("a/1", "a/2", "b", "c/1", "d"):
        lake.put("main", path, b"x")

    assert pages(lake, "branch", "list", "lakefs://R", amount=2, key="id") == [
        ["b1", "b2"],
        ["b3", "b4"],
        ["main"],
    ]
    assert pages(lake, "tag", "list", "lakefs://R", amount=3, key="id") == [
        ["t-b1", "t-b2", "t-b3"],
        ["t-b4"],
    ]
    assert pages(lake, "fs", "ls", "lakefs://R/main/", amount=2, key="path") == [["a/", "b"], ["c/", "d"]]
    assert pages(lake, "fs", "ls", "-r", "lakefs://R/main/", amount=3, key="path") == [
        ["a/1", "a/2", "b"],
        ["c/1", "d"],
    ]
    assert pages(lake, "log", "lakefs://R/main", amount=5, key="message") == [["Repository created"]]
    # Repositories: the lake (or server) may hold others; this one's page starts after its
    # predecessor in name order.
    names = [r["id"] for r in lake.js("repo", "list")]
    assert lake.r in names
    assert [r["id"] for r in lake.js("repo", "list", "--after", lake.r)] == [n for n in names if n > lake.r]
    one = lake.js(
        "repo",
        "list",
        "--amount",
        "1",
        "--after",
        names[names.index(lake.r) - 1] if names.index(lake.r) else "",
    )
    assert [r["id"] for r in one] == [lake.r]
    # Without --amount, everything, and no note; --amount 0 is the same.
    everything = lake.run("branch", "list", "lakefs://R")
    assert "more results" not in everything.stderr and "b4" in everything.stdout
    assert lake.js("branch", "list", "lakefs://R", "--amount", "0") == lake.js("branch", "list", "lakefs://R")
    # Human output is a table of the page, the note on stderr.
    human = lake.run("tag", "list", "lakefs://R", "--amount", "1")
    assert "t-b1" in human.stdout and "t-b2" not in human.stdout
    assert 'for more results run with --amount 1 --after "t-b1"' in human.stderr
    lake.run("branch", "list", "lakefs://R", "--amount", "-1", code=2)
    # An offset no name could hold (not UTF-8) is one error, exit 2, embedded and remote alike.
    for cmd in (("repo", "list"), ("branch", "list", "lakefs://R"), ("fs", "ls", "lakefs://R/main/")):
        assert lake.js(*cmd, "--after", "b\udcff", code=2)["code"] == "invalid_argument"


# -- 3. revert and cherry-pick of a merge commit --------------------------------------------


@pytest.fixture
def merged(lake: Lake) -> Lake:
    """main: x=1, then (after `other` branched off) main-only; dev: x=2 and feature; dev merged
    into main as main's head, a merge commit whose parent 1 is main's former head."""
    lake.run("repo", "create", "lakefs://R")
    lake.put("main", "x", b"1")
    lake.run("commit", "lakefs://R/main", "-m", "x=1")
    lake.run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    lake.run("branch", "create", "lakefs://R/other", "--source", "lakefs://R/main")
    lake.put("main", "main-only", b"m")
    lake.run("commit", "lakefs://R/main", "-m", "main only")
    lake.put("dev", "x", b"2")
    lake.put("dev", "feature", b"f")
    lake.run("commit", "lakefs://R/dev", "-m", "feature")
    lake.run("merge", "lakefs://R/dev", "lakefs://R/main")
    return lake


def tree(lake: Lake, ref: str) -> dict[str, str]:
    paths = [o["path"] for o in lake.js("fs", "ls", "-r", f"lakefs://R/{ref}/")]
    return {p: lake.run("fs", "cat", f"lakefs://R/{ref}/{p}").stdout for p in paths}


def test_revert_of_a_merge_commit_needs_a_parent_number(merged: Lake) -> None:
    lake = merged
    head = lake.js("branch", "show", "lakefs://R/main")["commit_id"]
    for cmd in (("branch", "revert"), ("revert",)):
        refused = lake.js(*cmd, "lakefs://R/main", "main", code=2)
        assert refused["code"] == "invalid_argument" and "-m/--parent-number" in refused["message"]
    assert lake.js("branch", "revert", "lakefs://R/main", "main", "-m", "3", code=2)["code"] == (
        "invalid_argument"
    )
    assert lake.js("branch", "show", "lakefs://R/main")["commit_id"] == head  # nothing stored
    # -m 1: undo what the merge brought from dev, keep main's own line.
    done = lake.js("branch", "revert", "lakefs://R/main", "main", "-m", "1")
    assert [c["message"] for c in done] == ["Revert \"Merge 'dev' into 'main'\""]
    assert done[0]["parents"] == [head]
    assert tree(lake, "main") == {"main-only": "m", "x": "1"}


def test_revert_of_a_merge_commit_relative_to_its_second_parent(merged: Lake) -> None:
    # -m 2: relative to dev's side, the merge brought main-only: reverting removes it.
    merged.js("revert", "lakefs://R/main", "main", "--parent-number", "2")
    assert tree(merged, "main") == {"feature": "f", "x": "2"}


def test_cherry_pick_of_a_merge_commit_takes_commit_then_branch(merged: Lake) -> None:
    lake = merged
    merge = lake.js("show", "commit", "lakefs://R/main")
    assert len(merge["parents"]) == 2
    before = lake.js("branch", "show", "lakefs://R/other")["commit_id"]
    refused = lake.js("cherry-pick", f"lakefs://R/{merge['id']}", "lakefs://R/other", code=2)
    assert "-m/--parent-number" in refused["message"]
    assert lake.js("branch", "show", "lakefs://R/other")["commit_id"] == before
    picked = lake.js("cherry-pick", f"lakefs://R/{merge['id'][:16]}", "lakefs://R/other", "-m", "1")
    assert picked["parents"] == [before] and picked["message"] == merge["message"]
    assert tree(lake, "other") == {"feature": "f", "x": "2"}
    # The branch must be the second argument, as lakeFS's `cherry-pick <commit URI> <branch URI>`.
    lake.run("cherry-pick", "lakefs://R/other", f"lakefs://R/{merge['id']}", "-m", "1", code=2)


# -- 4. merge --squash --------------------------------------------------------------------


def test_merge_squash_makes_one_commit_with_one_parent(lake: Lake) -> None:
    lake.run("repo", "create", "lakefs://R")
    lake.put("main", "base", b"0")
    lake.run("commit", "lakefs://R/main", "-m", "base")
    lake.run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    for i in range(3):
        lake.put("dev", f"d/{i}", b"%d" % i)
        lake.run("commit", "lakefs://R/dev", "-m", f"dev {i}")
    head = lake.js("branch", "show", "lakefs://R/main")["commit_id"]
    result = lake.js("merge", "lakefs://R/dev", "lakefs://R/main", "--squash", "-m", "all of dev")
    assert result["changed"] is True and result["commit"]["parents"] == [head]
    assert result["commit"]["message"] == "all of dev"
    assert result["message"].startswith("Squash-merged 'dev' into 'main'")
    assert tree(lake, "main") == {"base": "0", "d/0": "0", "d/1": "1", "d/2": "2"}
    # History stays linear: the dev commits are not reachable from main.
    assert messages(lake.js("log", "lakefs://R/main")) == ["all of dev", "base", "Repository created"]
    # Merged again: dev's commits are not ancestors of main, so the same changes apply again
    # and meet no conflict (both sides made them), as git's squash merge.
    again = lake.js("merge", "lakefs://R/dev", "lakefs://R/main", "--squash")
    assert again["commit"]["parents"] == [result["reference"]]
    assert tree(lake, "main") == {"base": "0", "d/0": "0", "d/1": "1", "d/2": "2"}
    # Without --squash the merge commit has two parents, as before.
    lake.put("dev", "d/3", b"3")
    lake.run("commit", "lakefs://R/dev", "-m", "dev 3")
    plain = lake.js("merge", "lakefs://R/dev", "lakefs://R/main")
    assert len(plain["commit"]["parents"]) == 2


# -- 5. ref@ and ref$ ---------------------------------------------------------------------


def changes(lake: Lake, *args: str) -> list[str]:
    mark = {"added": "+", "removed": "-", "changed": "~"}
    return [f"{mark[c['type']]}{c['path']}" for c in lake.js("diff", *args)]


@pytest.fixture
def staged(lake: Lake) -> Lake:
    """main: a=1, b=1 committed, then staged: a=2, b deleted, c added; dev from main's commit
    with d committed."""
    lake.run("repo", "create", "lakefs://R")
    lake.put("main", "a", b"1")
    lake.put("main", "b", b"1")
    lake.run("commit", "lakefs://R/main", "-m", "a b")
    lake.run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    lake.put("dev", "d", b"1")
    lake.run("commit", "lakefs://R/dev", "-m", "d")
    lake.put("main", "a", b"2")
    lake.run("fs", "rm", "lakefs://R/main/b")
    lake.put("main", "c", b"1")
    return lake


def test_diff_of_a_branch_staging_area_with_dollar(staged: Lake) -> None:
    lake = staged
    uncommitted = ["~a", "-b", "+c"]
    assert changes(lake, "lakefs://R/main") == uncommitted
    # main$ is the staging area (uncommitted changes included); main and main@ its last commit.
    assert changes(lake, "lakefs://R/main@", "lakefs://R/main$", "--two-way") == uncommitted
    assert changes(lake, "lakefs://R/main", "lakefs://R/main$", "--two-way") == uncommitted
    assert changes(lake, "lakefs://R/main$", "lakefs://R/main@", "--two-way") == ["~a", "+b", "-c"]
    assert changes(lake, "lakefs://R/main@", "lakefs://R/main", "--two-way") == []
    assert changes(lake, "lakefs://R/main@", "lakefs://R/main$", "--two-way", "--prefix", "b") == ["-b"]
    # Three-dot: the right side's changes since the merge base, its staging area included.
    assert changes(lake, "lakefs://R/dev", "lakefs://R/main$") == uncommitted
    assert changes(lake, "lakefs://R/dev", "lakefs://R/main") == []
    assert changes(lake, "lakefs://R/main$", "lakefs://R/dev") == ["+d"]
    # Both sides staged: the two staging areas compared, path by path, with the committed diff.
    lake.put("dev", "e", b"1")
    lake.put("dev", "a", b"2")  # staged on both sides alike: no change between them
    assert changes(lake, "lakefs://R/main$", "lakefs://R/dev$", "--two-way") == ["+b", "-c", "+d", "+e"]
    assert changes(lake, "lakefs://R/main@", "lakefs://R/dev$", "--two-way") == ["~a", "+d", "+e"]
    # Human output renders the same lines.
    assert lake.run("diff", "lakefs://R/main@", "lakefs://R/main$", "--two-way").stdout.splitlines() == [
        "~ a",
        "- b",
        "+ c",
    ]


def test_at_and_dollar_wherever_a_ref_is_accepted(staged: Lake) -> None:
    lake = staged
    assert lake.run("fs", "cat", "lakefs://R/main@/a").stdout == "1"
    assert lake.run("fs", "cat", "lakefs://R/main$/a").stdout == "2"
    assert lake.run("fs", "cat", "lakefs://R/main/a").stdout == "2"
    assert [o["path"] for o in lake.js("fs", "ls", "lakefs://R/main@/")] == ["a", "b"]
    assert [o["path"] for o in lake.js("fs", "ls", "lakefs://R/main$/")] == ["a", "c"]
    assert lake.js("log", "lakefs://R/main$") == lake.js("log", "lakefs://R/main@")
    head = lake.js("branch", "show", "lakefs://R/main")["commit_id"]
    made = lake.js("branch", "create", "lakefs://R/from-staging", "--source", "lakefs://R/main$")
    assert made["commit_id"] == head
    # Refused, with nothing stored: '$' on a tag or with steps, and writes to an expression.
    lake.run("tag", "create", "lakefs://R/v1", "lakefs://R/main")
    for bad in ("v1$", "main$~1", "main$^2", "nope$", "main$$", "main@$"):
        refused = lake.js("diff", "lakefs://R/main", f"lakefs://R/{bad}", code=2)
        assert refused["code"] == "invalid_ref", (bad, refused)
    lake.run("fs", "upload", "lakefs://R/main$/z", "--source", "-", input=b"z", code=2)
    lake.run("fs", "stat", "lakefs://R/main/z", code=3)
