"""No function or method of lakectl and server over 80 lines, but the known ones, each at its length.

STYLE.md's "long functions": a function that runs past a screen hides its steps; it is shortened
by extracting helpers along those steps, not by cramming lines. This test reads every file of
``lakectl/`` and ``server/`` with ``ast`` (nothing is imported) and measures each ``def`` and
``async def``, nested ones and methods included: from its ``def`` line to its last line, its
decorators left out (``end_lineno - lineno + 1``), its signature and docstring counted.

KNOWN_LONG lists functions allowed over the limit (none today), each by file and qualified name
with its length. The list stays exact: a known function
that grew fails, and so does one that shrank (write its new length down) or is gone or under the
limit (delete its entry), so that none can grow back unnoticed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakectl", "server")
LIMIT = 80

KNOWN_LONG: dict[tuple[str, str], int] = {}


@dataclass(frozen=True, slots=True)
class Function:
    path: str  # relative to the repository, with "/"
    name: str  # qualified: Class.method, outer.inner
    line: int
    length: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name} ({self.length} lines)"


def _functions() -> Iterator[Function]:
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            yield from _walk(ast.parse(file.read_text(encoding="utf-8"), path), path, "")


def _walk(node: ast.AST, path: str, outer: str) -> Iterator[Function]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{outer}{child.name}"
            if not isinstance(child, ast.ClassDef):
                assert child.end_lineno is not None
                yield Function(path, name, child.lineno, child.end_lineno - child.lineno + 1)
            yield from _walk(child, path, name + ".")
        else:
            yield from _walk(child, path, outer)


def test_no_function_over_the_limit() -> None:
    found = list(_functions())
    assert len(found) > 1000, "the walk found too few functions: are lakectl/ and server/ still there?"
    long = sorted(
        (f for f in found if f.length > LIMIT and (f.path, f.name) not in KNOWN_LONG),
        key=lambda f: -f.length,
    )
    listed = "\n".join(f"  {f}" for f in long)
    assert not long, f"functions over {LIMIT} lines (extract helpers along their steps):\n{listed}"


def test_known_long_functions_are_exact() -> None:
    lengths: dict[tuple[str, str], list[Function]] = {}
    for f in _functions():
        lengths.setdefault((f.path, f.name), []).append(f)
    wrong = []
    for (path, name), known in KNOWN_LONG.items():
        now = [f for f in lengths.get((path, name), []) if f.length > LIMIT]
        if not now:
            wrong.append(f"  {path} {name}: gone or at most {LIMIT} lines; delete its entry")
        for f in now:
            if f.length > known:
                wrong.append(f"  {f}: grew from {known}; shorten it")
            elif f.length < known:
                wrong.append(f"  {f}: shrank from {known}; write its new length down")
    assert not wrong, "KNOWN_LONG is not exact:\n" + "\n".join(wrong)
