"""``lakectl log --graph``: the commit graph drawn in text beside the log, as ``git log --graph``.

One column per line of history the log is following, two characters apart: ``*`` is the commit
of the row, ``|`` a line passing by. A merge opens a column for each further parent (``|\\``);
two columns that reach the same commit join (``|/``, ``|_|/`` across a column between them); a
root commit's column ends. The log gives children before their parents (newest first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Row:
    """What :meth:`Graph.add` draws for one commit: lines before its row (joins), the prefix of
    its first line, lines after it (a merge's forks, a root's end), and the prefix of its
    further lines (each column's line passing by)."""

    before: list[str]
    prefix: str
    after: list[str]
    continuation: str


@dataclass
class Graph:
    columns: list[str] = field(default_factory=list)
    """The commit each column is heading for."""

    def add(self, commit_id: str, parents: Sequence[str]) -> Row:
        """Draw the row of the next commit of the log (newest first)."""
        positions = [i for i, c in enumerate(self.columns) if c == commit_id]
        if not positions:
            self.columns.append(commit_id)
            positions = [len(self.columns) - 1]
        at = positions[0]
        before = []
        for j in range(len(positions) - 1, 0, -1):  # each other line reaching it joins the next on its left
            before.append(self._join(positions[j - 1], positions[j]))
            del self.columns[positions[j]]
        prefix = self._cells(at)
        after = []
        if parents:
            self.columns[at] = parents[0]
            for n, parent in enumerate(parents[1:]):
                after.append(self._fork(at + n))
                self.columns.insert(at + n + 1, parent)
        else:
            if at < len(self.columns) - 1:
                after.append(self._end(at))
            del self.columns[at]
        return Row(before, prefix, after, self._cells(None))

    def _cells(self, mark: int | None) -> str:
        return " ".join("*" if i == mark else "|" for i in range(len(self.columns))) + " "

    def _join(self, into: int, k: int) -> str:
        """Column ``k`` joins column ``into`` (left of it); the columns right of it move left."""
        chars = [" "] * (2 * len(self.columns))
        for i in range(k):
            chars[2 * i] = "|"
        for i in range(into, k - 1):
            chars[2 * i + 1] = "_"
        for m in range(k, len(self.columns)):
            chars[2 * m - 1] = "/"
        return "".join(chars).rstrip()

    def _fork(self, at: int) -> str:
        """A column opens right of ``at``; the columns right of it move right."""
        chars = [" "] * (2 * len(self.columns) + 1)
        for i in range(at + 1):
            chars[2 * i] = "|"
        for m in range(at, len(self.columns)):
            chars[2 * m + 1] = "\\"
        return "".join(chars).rstrip()

    def _end(self, at: int) -> str:
        """Column ``at`` ends (a root commit); the columns right of it move left."""
        chars = [" "] * (2 * len(self.columns))
        for i in range(at):
            chars[2 * i] = "|"
        for m in range(at + 1, len(self.columns)):
            chars[2 * m - 1] = "/"
        return "".join(chars).rstrip()
