"""docs/coming-from-lakefs.md stays true: every lakeFS command it says works here exists, with
every flag its row names; every command it says is not here is absent."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli import docgen

DOC = (Path(__file__).resolve().parents[2] / "docs" / "coming-from-lakefs.md").read_text()


def rows() -> list[tuple[list[tuple[str, list[str]]], str]]:
    """``([(command path, flags its form names)], status)`` of each row of the command table."""
    out = []
    for line in DOC.splitlines():
        match = re.match(r"^\| (`[^|]*(?:\\\|[^|]*)*`[^|]*) \| (same|extended|differs|not here) \|", line)
        if not match:
            continue
        cell, status = match.group(1).replace("\\|", "|"), match.group(2)
        forms: list[tuple[str, list[str]]] = []
        for code in re.findall(r"`([^`]*)`", cell):
            command: list[str] = []
            for word in code.split():
                if word.startswith(("<", "[", "-", "…")) or word == "...":
                    break
                command.append(word)
            flags = re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", code)
            for alternative in command[-1].split("|") if command else []:
                forms.append((" ".join([*command[:-1], alternative]), flags))
        out.append((forms, status))
    return out


def test_the_table_covers_lakefs_commands() -> None:
    found = rows()
    assert len(found) > 30
    assert {"same", "extended", "differs", "not here"} == {status for _, status in found}


def test_what_the_doc_says_works_exists_with_its_flags() -> None:
    ours = {path.removeprefix("lakectl "): command for path, command, _ in docgen.commands()}
    for forms, status in rows():
        for path, flags in forms:
            if status == "not here":
                assert path not in ours, f"docs/coming-from-lakefs.md says `{path}` is not here"
                continue
            if path.startswith("("):
                continue
            if path not in ours and path.rsplit(" ", 1)[0] in ours:
                path = path.rsplit(" ", 1)[0]  # `completion bash|zsh|fish`: the choices are an argument
            assert path in ours, f"docs/coming-from-lakefs.md: `{path}` is not a lakectl command"
            command = ours[path]
            names = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
            for flag in flags:
                if flag in ("-d", "--direct", "--pre-sign"):
                    continue  # named as not accepted
                assert flag in names, f"docs/coming-from-lakefs.md: `{path}` has no {flag}"
