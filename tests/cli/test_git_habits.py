"""git's habits at the terminal, embedded and through a live server: ``log --oneline``,
``log --graph``, relative times in ``log --since`` (``yesterday``, ``2.weeks``, ``3 days ago``),
``diff --stat``."""

from __future__ import annotations

import re

import pytest

from lakectl.cli.common import since_time
from lakectl.errors import InvalidArgument
from tests.cli.both_json import Cli, cli, live
from tests.cli.conftest import Run

__all__ = ["cli", "live"]

NOW = 1_800_000_000  # 2027-01-15T08:00:00Z


def test_log_oneline_is_the_short_id_and_the_first_line(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakefs://R/main", "-m", "load a\n\nwith a body line")
    ids = [c["id"] for c in cli("log", "lakefs://R/main")]
    text = cli("log", "--oneline", "lakefs://R/main", human=True)
    assert text.splitlines() == [f"{ids[0][:12]} load a", f"{ids[1][:12]} Repository created"]
    assert cli("log", "--oneline", "--amount", "1", "lakefs://R/main", human=True).splitlines() == [
        f"{ids[0][:12]} load a"
    ]
    cli("log", "--oneline", "--dot", "lakefs://R/main", human=True, code=2)


def _commit(cli: Cli, branch: str, path: str, message: str) -> None:
    cli("fs", "upload", f"lakefs://R/{branch}/{path}", "--source", "-", input=message.encode())
    cli("commit", f"lakefs://R/{branch}", "-m", message)


def test_log_graph_draws_merges_and_where_lines_meet(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    _commit(cli, "main", "a", "base")
    for branch in ("f", "h"):
        cli("branch", "create", f"lakefs://R/{branch}", "--source", "lakefs://R/main")
    _commit(cli, "f", "b", "f one")
    _commit(cli, "main", "c", "main one")
    _commit(cli, "h", "d", "h one")
    _commit(cli, "f", "b", "f two")
    cli("merge", "lakefs://R/f", "lakefs://R/main")
    _commit(cli, "main", "e", "after")
    cli("merge", "lakefs://R/h", "lakefs://R/main")
    plain = cli("log", "--oneline", "lakefs://R/main", human=True).splitlines()
    drawn = cli("log", "--graph", "--oneline", "lakefs://R/main", human=True).splitlines()
    rows = [line for line in drawn if "*" in line]
    # the log's commits in the log's order, each after the drawing of its line of history
    assert [re.sub(r"^[*| ]+", "", row) for row in rows] == plain
    assert {row.index("*") for row in rows} == {0, 2, 4}  # three lines of history at the widest
    for merge in (r for r in rows if "Merge '" in r):  # a merge opens a line for its second parent
        assert drawn[drawn.index(merge) + 1].startswith(merge[: merge.index("*")] + "|\\")
    assert drawn[-2].startswith("* ") and drawn[-3] == "|/"  # the lines meet again at the base
    assert set("".join(line for line in drawn if "*" not in line)) <= set("|/\\_ ")
    full = cli("log", "--graph", "lakefs://R/main", human=True).splitlines()
    assert (
        full[0].startswith("*   ID:")
        and full[1].startswith("|\\  Author:")
        and full[2].startswith("| | Date:")
    )
    cli("log", "--graph", "--dot", "lakefs://R/main", human=True, code=2)


def test_log_since_takes_git_relative_times(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("commit", "lakefs://R/main", "-m", "empty", "--allow-empty")
    assert len(cli("log", "--since", "1.hour.ago", "lakefs://R/main")) == 2
    assert len(cli("log", "--since", "yesterday", "lakefs://R/main")) == 2
    assert cli("log", "--since", "2099-01-01T00:00:00Z", "lakefs://R/main") == []
    cli("log", "--since", "last tuesday", "lakefs://R/main", code=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yesterday", "2027-01-14T08:00:00Z"),
        ("2.weeks", "2027-01-01T08:00:00Z"),
        ("3 days ago", "2027-01-12T08:00:00Z"),
        ("1.month.ago", "2026-12-16T08:00:00Z"),
        ("90 minutes", "2027-01-15T06:30:00Z"),
        ("now", "2027-01-15T08:00:00Z"),
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00Z"),
        ("", ""),
    ],
)
def test_relative_times_count_back_from_now(text: str, expected: str) -> None:
    assert since_time(text, NOW) == expected


def test_a_time_git_would_not_read_is_refused_with_the_forms_it_takes() -> None:
    with pytest.raises(InvalidArgument, match=r"yesterday, 2\.weeks, 3 days ago"):
        since_time("fortnight", NOW)


def test_diff_stat_lists_each_path_with_its_size_then_the_counts(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    for name, body in (("keep.txt", b"k"), ("gone.txt", b"g"), ("edit.txt", b"e")):
        cli("fs", "upload", f"lakefs://R/main/{name}", "--source", "-", input=body)
    cli("commit", "lakefs://R/main", "-m", "three")
    cli("fs", "rm", "lakefs://R/main/gone.txt")
    cli("fs", "upload", "lakefs://R/main/edit.txt", "--source", "-", input=b"e" * 2048)
    cli("fs", "upload", "lakefs://R/main/new.txt", "--source", "-", input=b"n" * 10)
    text = cli("diff", "--stat", "lakefs://R/main", human=True)
    assert text.splitlines() == [
        " ~ edit.txt | 2.0 KiB",
        " - gone.txt | 1 B",
        " + new.txt  | 10 B",
        "3 objects changed: 1 added, 1 removed, 1 changed",
    ]
    found = cli("diff", "--stat", "lakefs://R/main")
    assert (found["added"], found["removed"], found["changed"], len(found["changes"])) == (1, 1, 1, 3)
    cli("commit", "lakefs://R/main", "-m", "edits")
    since = cli("diff", "--stat", "--since", "main~1", "lakefs://R/main", human=True)
    assert since.splitlines()[-1] == "3 objects changed: 1 added, 1 removed, 1 changed"


@pytest.mark.parametrize(
    ("argv", "nearest"),
    [
        (["log", "lakefs://R/main", "--onelin"], "--oneline"),
        (["log", "lakefs://R/main", "--grph"], "--graph"),
        (["diff", "lakefs://R/main", "--stats"], "--stat"),
        (["fs", "ls", "lakefs://R/main/", "--recursiv"], "--recursive"),
    ],
)
def test_an_unknown_option_suggests_the_nearest_real_one(run: Run, argv: list[str], nearest: str) -> None:
    said = run(*argv, code=2).stderr
    assert f"No such option: {argv[-1]} (Possible options: {nearest})" in said
