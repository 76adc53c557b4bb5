"""Fixtures for the CLI tests: a fresh lake per test and a runner of the real ``lakectl`` app."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lakectl.cli.app import app

Run = Callable[..., Result]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty LAKECTL_HOME, and a fixed committer."""
    lake = tmp_path / "lake"
    monkeypatch.setenv("LAKECTL_HOME", str(lake))
    monkeypatch.setenv("LAKECTL_COMMITTER", "tester")
    # The embedded lake, whatever this machine's ~/.lakectl.yaml or environment says.
    monkeypatch.setenv("LAKECTL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.delenv("LAKECTL_SERVER_ENDPOINT_URL", raising=False)
    return lake


@pytest.fixture
def run(home: Path) -> Run:
    """``run("repo", "list", input=..., code=0)``: invoke lakectl in-process; assert the exit code
    (``code=None`` skips the check)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None, code: int | None = 0) -> Result:
        result = runner.invoke(app, list(args), input=input)
        if code is not None:
            assert result.exit_code == code, (
                f"lakectl {' '.join(args)} exited {result.exit_code}, wanted {code}\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}\nexception: {result.exception!r}"
            )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    return invoke


@pytest.fixture
def js(run: Run) -> Callable[..., Any]:
    """``js("repo", "list")``: run with --json and return the parsed stdout."""

    def invoke(*args: str, input: str | bytes | None = None, code: int = 0) -> Any:
        result = run(*args, "--json", input=input, code=code)
        return json.loads(result.stdout)

    return invoke


@pytest.fixture
def repo(run: Run, tmp_path: Path) -> str:
    """Repository ``demo`` with one commit holding ``a/x.csv``, ``a/y.csv`` and ``b/z.csv``."""
    run("repo", "create", "lakefs://demo")
    for path, data in {"a/x.csv": b"1,2,3\n", "a/y.csv": b"4,5,6\n", "b/z.csv": b"7,8,9\n"}.items():
        run("fs", "upload", f"lakefs://demo/main/{path}", "--source", "-", input=data)
    run("commit", "lakefs://demo/main", "-m", "first")
    return "demo"
