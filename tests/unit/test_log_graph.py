"""``log --graph``'s drawing (:mod:`lakectl.cli.graph`), commit by commit, newest first."""

from __future__ import annotations

from collections.abc import Sequence

from lakectl.cli.graph import Graph


def _draw(commits: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    graph, out = Graph(), []
    for cid, parents in commits:
        row = graph.add(cid, parents)
        out += [*row.before, row.prefix + cid, *row.after]
    return out


def test_two_merges_over_three_lines_of_history() -> None:
    commits = [
        ("M2", ["A", "H1"]),
        ("A", ["M1"]),
        ("M1", ["C", "F2"]),
        ("F2", ["F1"]),
        ("H1", ["B"]),
        ("F1", ["B"]),
        ("C", ["B"]),
        ("B", ["R"]),
        ("R", []),
    ]
    assert _draw(commits) == [
        "* M2",
        "|\\",
        "* | A",
        "* | M1",
        "|\\ \\",
        "| * | F2",
        "| | * H1",
        "| * | F1",
        "* | | C",
        "| |/",
        "|/",
        "* B",
        "* R",
    ]


def test_a_root_ends_its_line() -> None:
    # unrelated histories merged: Y's line ends at its root
    commits = [("M", ["N", "Y"]), ("N", ["X", "Z"]), ("Y", []), ("X", ["B"]), ("Z", ["B"]), ("B", [])]
    assert _draw(commits) == ["* M", "|\\", "* | N", "|\\ \\", "| | * Y", "* | X", "| * Z", "|/", "* B"]


def test_a_line_crosses_another_to_join_and_the_lines_right_of_an_ended_one_move_left() -> None:
    commits = [("M", ["A", "P"]), ("P", ["Q", "B"]), ("A", ["B"]), ("B", []), ("Q", [])]
    assert _draw(commits) == ["* M", "|\\", "| * P", "| |\\", "* | | A", "|_|/", "* | B", " /", "* Q"]
