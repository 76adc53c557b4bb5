"""A fixture running the CLI against the embedded lake and against a live server, one test each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lakectl.cli.app import app
from tests.server.conftest import Live, live, unique

__all__ = ["Lakectl", "both", "live"]


@dataclass
class Lakectl:
    """``cli("repo", "list", code=0)``: lakectl in-process under :attr:`env`; ``cli.js(...)`` with
    --json, parsed. ``repo`` is a repository with ``a/x.csv`` committed on main, a branch ``feat``
    and a tag ``v1``."""

    mode: str
    env: dict[str, str]
    work: Path
    repo: str = ""
    live: Live | None = field(default=None, repr=False)

    def __call__(
        self,
        *args: str,
        input: str | bytes | None = None,
        code: int | None = 0,
        env: dict[str, str] | None = None,
    ) -> Result:
        result = CliRunner().invoke(app, list(args), input=input, env={**self.env, **(env or {})})
        if code is not None:
            assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    def js(self, *args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
        return json.loads(self(*args, "--json", code=code, env=env).stdout)


@pytest.fixture(params=["embedded", "remote"])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lakectl]:
    if request.param == "embedded":
        env = {
            "LAKECTL_HOME": str(tmp_path / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "tester",
            "LAKECTL_BASE_URI": "",
        }
        cli = Lakectl("embedded", env, tmp_path)
    else:
        server: Live = request.getfixturevalue("live")
        cli = Lakectl("remote", {**server.cli_env(tmp_path), "LAKECTL_BASE_URI": ""}, tmp_path, live=server)
    cli.repo = unique("g")
    cli("repo", "create", f"lakefs://{cli.repo}")
    cli("fs", "upload", f"lakefs://{cli.repo}/main/a/x.csv", "-s", "-", input=b"1,2\n")
    cli("commit", f"lakefs://{cli.repo}/main", "-m", "first")
    cli("branch", "create", f"lakefs://{cli.repo}/feat", "--source", f"lakefs://{cli.repo}/main")
    cli("tag", "create", f"lakefs://{cli.repo}/v1", f"lakefs://{cli.repo}/main")
    yield cli
