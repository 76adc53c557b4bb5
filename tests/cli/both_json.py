"""The ``cli`` fixture: one CLI test run embedded and against a live server (RemoteBackend)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.server.conftest import Live, live, unique

__all__ = ["Cli", "cli", "live"]

Cli = Callable[..., Any]


@pytest.fixture(params=["embedded", "remote"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    """``cli("fs", "ls", ..., code=0)``: lakectl with ``--json``, its parsed output (None when it
    printed nothing; with ``human=True`` no ``--json`` and the text printed), embedded or against
    the live server (``cli.mode``: "embedded" or "remote"); ``lakefs://R`` in arguments names a
    fresh repository."""
    if request.param == "embedded":
        env = {
            "LAKECTL_HOME": str(tmp_path / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "tester",
            "LAKECTL_BASE_URI": "",
        }
    else:
        server: Live = request.getfixturevalue("live")
        env = {**server.cli_env(tmp_path), "LAKECTL_BASE_URI": ""}
    repo = unique("cli")

    def run(*args: str, input: bytes | None = None, code: int = 0, human: bool = False) -> Any:
        argv = [a.replace("lakefs://R", f"lakefs://{repo}") for a in args] + ([] if human else ["--json"])
        result = CliRunner().invoke(app, argv, input=input, env=env)
        assert result.exit_code == code, f"{argv}: {result.exit_code}\n{result.stdout}\n{result.stderr}"
        if human:
            return result.stdout
        return json.loads(result.stdout) if result.stdout.strip() else None

    run.mode = request.param  # type: ignore[attr-defined]
    yield run
