"""The environment a command runs in, made hostile: every lakectl setting that comes from the
environment or the configuration file, given values a user's shell, a CI runner or a typo can
give. Each run must end in a documented exit code with one ``error:`` line (or succeed), never in
a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.contract.test_cli_fuzz import DOCUMENTED

COMMANDS = [
    ["repo", "list"],
    ["fs", "upload", "lakefs://envfuzz/main/a.csv", "--source", "-"],
    ["commit", "lakefs://envfuzz/main", "-m", "x"],
    ["log", "lakefs://envfuzz/main"],
    ["doctor"],
]


def cases(tmp: Path) -> dict[str, dict[str, str]]:
    afile = tmp / "a-file"
    afile.write_text("not a directory")
    configs = {
        "not yaml": "server: [unclosed\n",
        "a list": "- 1\n- 2\n",
        "binary": "\x00\x01\x02\udcff",
        "wrong types": "server: 7\ncredentials: [1]\nuser: {name: [x]}\n",
        "endpoint not a url": "server: {endpoint_url: 'not a url'}\n",
        "endpoint no host": "server: {endpoint_url: 'http://'}\n",
        "endpoint other scheme": "server: {endpoint_url: 'ftp://127.0.0.1:1/'}\n",
        "endpoint unreachable": (
            "server: {endpoint_url: 'http://127.0.0.1:9'}\n"
            "credentials: {access_key_id: AKIA, secret_access_key: s}\n"
        ),
    }
    out: dict[str, dict[str, str]] = {
        "home is a file": {"LAKECTL_HOME": str(afile)},
        "home under a file": {"LAKECTL_HOME": str(afile / "lake")},
        "home in /proc": {"LAKECTL_HOME": "/proc/self/no/such/lake"},
        "home not utf-8": {"LAKECTL_HOME": str(tmp / "h\udcffome")},
        "config is a directory": {"LAKECTL_CONFIG": str(tmp)},
        "committer huge": {"LAKECTL_COMMITTER": "c" * 70_000},
        "committer escapes": {"LAKECTL_COMMITTER": "a\x1b[2Jb\u202e"},
        "endpoint without credentials": {"LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"},
        "endpoint garbage": {
            "LAKECTL_SERVER_ENDPOINT_URL": "::::",
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "k",
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "s",
        },
        "credentials not utf-8": {
            "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9",
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "k\udcff",
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "s\x7f\n",
        },
    }
    for name, text in configs.items():
        path = tmp / f"config-{len(out)}.yaml"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        out[f"config {name}"] = {"LAKECTL_CONFIG": str(path)}
    return out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_hostile_environments_end_in_one_error_line(tmp_path: Path, command: list[str]) -> None:
    base = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "",
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "",
        "LAKECTL_COMMITTER": "tester",
    }
    failures = []
    for name, env in cases(tmp_path).items():
        result = CliRunner().invoke(app, command, env={**base, **env}, input=b"1,2\n")
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            failures.append(f"{name}: raised {result.exception!r}")
            continue
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        if result.exit_code not in DOCUMENTED | {9, 10}:  # the lake or the server unreachable
            failures.append(f"{name}: exit {result.exit_code}: {result.stderr[:300]!r}")
        elif result.exit_code and not (len(lines) == 1 and lines[0].startswith("error: ")):
            failures.append(f"{name}: exit {result.exit_code}, not one error line: {result.stderr[:300]!r}")
    assert not failures, "\n".join(failures)
