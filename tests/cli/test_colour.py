"""Colour at a terminal, as git colours: diff lines by their mark, commit ids, ``error:``. Driven
through a real pseudo-terminal (lakectl sees ``isatty()``), and through pipes, where no escape
code may appear; ``NO_COLOR``, ``--no-color`` and ``TERM=dumb`` turn it off on a terminal too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cli import terminal
from tests.cli.terminal import lakectl

ROOT = Path(__file__).resolve().parents[2]
ESC = "\x1b["


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    out = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "LAKECTL_SERVER_ENDPOINT_URL")}
    out.update(PYTHONPATH=path, LAKECTL_HOME=str(tmp_path / "lake"), TERM="xterm-256color")
    out.update(LAKECTL_CONFIG=str(tmp_path / "none.yaml"), LAKECTL_COMMITTER="tester")
    return out


def piped(env: dict[str, str], *args: str, code: int = 0) -> str:
    done = subprocess.run(lakectl(*args), capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == code, done.stderr
    return done.stdout + done.stderr


def on_a_terminal(env: dict[str, str], *args: str) -> str:
    """What the command writes to a pseudo-terminal, whatever its exit status, lines as text."""
    return terminal.on_a_terminal(env, *args, code=None).replace("\r\n", "\n")


def test_diff_log_and_errors_in_colour_on_a_terminal_only(env: dict[str, str]) -> None:
    piped(env, "repo", "create", "lakefs://paint")
    piped(env, "fs", "upload", "lakefs://paint/main/a.txt", "--source", "/dev/null")
    piped(env, "commit", "lakefs://paint/main", "-m", "a")
    commit = piped(env, "log", "--oneline", "lakefs://paint/main").split()[0]
    piped(env, "fs", "upload", "lakefs://paint/main/new.txt", "--source", "/dev/null")
    piped(env, "fs", "rm", "lakefs://paint/main/a.txt")

    diff = on_a_terminal(env, "diff", "lakefs://paint/main")
    assert f"{ESC}32m+ new.txt{ESC}0m" in diff and f"{ESC}31m- a.txt{ESC}0m" in diff
    log = on_a_terminal(env, "log", "lakefs://paint/main")
    assert f"ID:            {ESC}33m{commit}" in log
    error = on_a_terminal(env, "branch", "delete", "lakefs://paint/nope", "--yes")
    assert f"{ESC}1;31merror:{ESC}0m " in error

    for plain in (
        piped(env, "diff", "lakefs://paint/main"),
        piped(env, "log", "lakefs://paint/main"),
        piped(env, "branch", "delete", "lakefs://paint/nope", "--yes", code=3),
        on_a_terminal({**env, "NO_COLOR": "1"}, "diff", "lakefs://paint/main"),
        on_a_terminal(env, "--no-color", "log", "lakefs://paint/main"),
        on_a_terminal({**env, "TERM": "dumb"}, "diff", "lakefs://paint/main"),
    ):
        assert ESC not in plain and ("new.txt" in plain or "ID:" in plain or "error:" in plain)


def test_an_escape_code_in_a_value_stays_escaped_inside_colour(env: dict[str, str]) -> None:
    piped(env, "repo", "create", "lakefs://paint2")
    error = on_a_terminal(env, "branch", "delete", "lakefs://paint2/no\x1b[2Jpe", "--yes")
    assert "\\x1b[2J" in error and error.count(ESC) == 2  # only the colour's own: on, then off
