"""``lakectl config`` (interactive on a terminal as lakeFS's, by options or --stdin in scripts, and
never waiting on a standard input that is not a terminal) and ``lakectl doctor``'s one line per
check; the file config writes is the one every command then reads, embedded and remote."""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.cli.both import Lakectl, both, live
from tests.server.conftest import Live

__all__ = ["both", "live"]

ROOT = Path(__file__).resolve().parents[2]
NO_SERVER = {
    "LAKECTL_SERVER_ENDPOINT_URL": "",
    "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "",
    "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "",
}
"""The environment of a run that takes the server from the configuration file alone."""


def test_config_by_options_writes_lakefs_layout_privately_and_keeps_other_keys(both: Lakectl) -> None:
    path = both.work / "lakectl.yaml"
    path.write_text("user:\n  name: Ada\nserver:\n  endpoint_url: http://old:8000\n")
    endpoint = both.live.url if both.live else "http://127.0.0.1:8000"
    key_id, secret = (both.live.key_id, both.live.secret) if both.live else ("AKIAEXAMPLE", "s3cr3t")
    written = both.js(
        "-c",
        str(path),
        "config",
        "--access-key-id",
        key_id,
        "--secret-access-key",
        secret,
        "--endpoint-url",
        endpoint,
    )
    assert written == {"config_file": str(path), "access_key_id": key_id, "endpoint_url": endpoint}
    assert yaml.safe_load(path.read_text()) == {
        "credentials": {"access_key_id": key_id, "secret_access_key": secret},
        "server": {"endpoint_url": endpoint},
        "user": {"name": "Ada"},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the file holds a secret"
    if both.live:  # the file alone now takes the CLI to the server
        repos = both.js("-c", str(path), "repo", "list", env=NO_SERVER)
        assert both.repo in [r["id"] for r in repos]
    # One option: that value changes, the others stay.
    both("-c", str(path), "config", "--endpoint-url", "https://lake.example.com/api/v1")
    after = yaml.safe_load(path.read_text())
    assert after["server"]["endpoint_url"] == "https://lake.example.com/api/v1"
    assert after["credentials"] == {"access_key_id": key_id, "secret_access_key": secret}
    human = both("-c", str(path), "config", "--access-key-id", "AKIA2")
    assert human.stdout == f"Config file {path} written\n"


def test_config_reads_stdin_only_when_asked(both: Lakectl, tmp_path: Path) -> None:
    path = tmp_path / "piped.yaml"
    env = {"LAKECTL_CONFIG": str(path)}
    both("config", "--stdin", input="AKIAPIPED\nsecret piped\nhttp://127.0.0.1:8000\n", env=env)
    assert yaml.safe_load(path.read_text()) == {
        "credentials": {"access_key_id": "AKIAPIPED", "secret_access_key": "secret piped"},
        "server": {"endpoint_url": "http://127.0.0.1:8000"},
    }
    # Options first, then the lines for the rest, in the prompts' order.
    both("config", "--stdin", "--access-key-id", "AKIA3", input="only the secret\nhttp://h:1\n", env=env)
    assert yaml.safe_load(path.read_text())["credentials"] == {
        "access_key_id": "AKIA3",
        "secret_access_key": "only the secret",
    }
    short = both("config", "--stdin", input="AKIA4\n", env=env, code=2)
    assert short.stderr == (
        "error: standard input ended before the secret access key (--stdin reads one value a line)\n"
    )
    assert yaml.safe_load(path.read_text())["credentials"]["access_key_id"] == "AKIA3", "nothing stored"


def test_config_never_waits_on_a_stdin_that_is_not_a_terminal(tmp_path: Path) -> None:
    """A real process whose stdin is an open pipe nobody writes to: it must answer at once."""
    path = tmp_path / "never.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LAKECTL_CONFIG": str(path), **NO_SERVER}
    code = "from lakectl.cli.app import main; main()"
    reader, writer = os.pipe()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, "config"],
            stdin=reader,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
    finally:
        os.close(reader)
        os.close(writer)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: standard input is not a terminal: give --access-key-id, --secret-access-key and "
        "--endpoint-url, or --stdin with those values one per line\n"
    )
    assert not path.exists()


def test_config_refuses_bad_values_and_stores_nothing(both: Lakectl, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    env = {"LAKECTL_CONFIG": str(path)}
    cases = [
        (
            ["--endpoint-url", "localhost:8000"],
            "error: invalid server endpoint URL 'localhost:8000': expected http(s)",
        ),
        (["--endpoint-url", "ftp://x"], "error: invalid server endpoint URL 'ftp://x'"),
        (["--access-key-id", ""], "error: the access key ID must not be empty"),
        (
            ["--access-key-id", "AKIA\x1b[2J"],
            "error: invalid access key ID 'AKIA\\x1b[2J': contains the control",
        ),
        (["--secret-access-key", "x" * 3000], "error: secret access key 'xxxx"),
        (["--access-key-id", "AKIA\udcff"], "error: invalid access key ID"),
    ]
    for args, message in cases:
        result = both("config", *args, env=env, code=2)
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, (args, result.stderr)
    assert not path.exists()


def _converse(argv: list[str], env: dict[str, str], answers: list[tuple[str, str]]) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal, typing each answer once its prompt appears; the exit
    code and everything the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    shown = b""
    pending = list(answers)
    answered = 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            if pending and pending[0][0].encode() in shown[answered:]:
                # getpass flushes what was typed before it turned echo off: let it get there.
                time.sleep(0.3)
                os.write(master, pending.pop(0)[1].encode() + b"\r")
                answered = len(shown)
            if proc.poll() is not None and not ready:
                break
        return proc.wait(timeout=30), shown.decode(errors="replace").replace("\r\n", "\n")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_config_prompts_on_a_terminal_as_lakefs_does(tmp_path: Path) -> None:
    path = tmp_path / "tty.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LAKECTL_CONFIG": str(path), **NO_SERVER}
    argv = [sys.executable, "-c", "from lakectl.cli.app import main; main()", "config"]
    code, shown = _converse(
        argv,
        env,
        [
            ("Access key ID", "AKIATTY"),
            ("Secret access key", "hidden-secret"),
            ("Server endpoint URL", "not a url"),  # asked again, as lakeFS's prompt validates
            ("Server endpoint URL", "http://127.0.0.1:8000"),
        ],
    )
    assert code == 0, shown
    assert f"Config file {path} will be used" in shown
    assert "hidden-secret" not in shown, "the secret is not echoed"
    assert "error: invalid server endpoint URL 'not a url'" in shown
    assert yaml.safe_load(path.read_text()) == {
        "credentials": {"access_key_id": "AKIATTY", "secret_access_key": "hidden-secret"},
        "server": {"endpoint_url": "http://127.0.0.1:8000"},
    }
    # Enter keeps each current value (the secret's default is shown masked).
    code, shown = _converse(
        argv, env, [("Access key ID [AKIATTY]", ""), ("Secret access key [********]", ""), ("URL [http", "")]
    )
    assert code == 0, shown
    assert "hidden-secret" not in shown, "nor shown as a default"
    assert yaml.safe_load(path.read_text())["credentials"]["secret_access_key"] == "hidden-secret"


def test_doctor_prints_one_line_per_check(both: Lakectl) -> None:
    lines = both("doctor").stdout.splitlines()
    config_file = both.env["LAKECTL_CONFIG"]
    assert (
        lines[0] == f"ok      config file: {config_file} not found (the defaults and the environment apply)"
    )
    if both.live:
        endpoint = both.live.url.removesuffix("/api/v1")
        assert lines[1:4] == [
            f"ok      endpoint reachable: {endpoint} answers",
            f"ok      credentials accepted: access key {both.live.key_id}",
            lines[3],
        ]
        assert lines[3].startswith("ok      repositories readable: ")
    else:
        assert lines[1:4] == [
            f"ok      lake opens: {both.env['LAKECTL_HOME']}",
            "skipped credentials accepted: the embedded lake needs none",
            "ok      repositories readable: 1 repository",
        ]
    assert lines[4:] == ["skipped blocks verified: --verify reads every block back"]
    verified = both("doctor", "--verify").stdout.splitlines()
    assert verified[-1].startswith("ok      blocks verified: ") and "blocks, " in verified[-1]

    both.work.joinpath("broken.yaml").write_text("server: [\n")
    broken = both("doctor", env={"LAKECTL_CONFIG": str(both.work / "broken.yaml")}, code=2)
    assert broken.stdout.startswith(
        f"failed  config file: invalid configuration {both.work / 'broken.yaml'}: "
    )
    assert broken.stdout.count("\n") == 1 and broken.stderr.startswith("error: invalid configuration ")
    missing = both.work / "missing.yaml"
    absent = both("-c", str(missing), "doctor", code=3)
    assert absent.stdout == (
        f"failed  config file: config file {missing} not found: "
        f"run 'lakectl -c {missing} config' to create it\n"
    )


def test_doctor_names_the_check_that_failed_remotely(live: Live, tmp_path: Path) -> None:
    cli = Lakectl("remote", live.cli_env(tmp_path), tmp_path, live=live)
    endpoint = live.url.removesuffix("/api/v1")
    wrong = cli("doctor", env={"LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "x" * 40}, code=10)
    lines = wrong.stdout.splitlines()
    assert lines[1] == f"ok      endpoint reachable: {endpoint} answers"
    assert lines[2].startswith("failed  credentials accepted: ") and len(lines) == 3
    assert wrong.stderr.startswith("error: ") and wrong.stderr.count("\n") == 1

    gone = cli("doctor", env={"LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}, code=9)
    assert gone.stdout.splitlines()[1].startswith(
        "failed  endpoint reachable: cannot reach the lakectl server at http://127.0.0.1:9"
    )
    # The file `lakectl config` writes is what doctor then checks.
    path = tmp_path / "written.yaml"
    cli(
        "-c",
        str(path),
        "config",
        "--access-key-id",
        live.key_id,
        "--secret-access-key",
        live.secret,
        "--endpoint-url",
        live.url,
    )
    checked = cli("-c", str(path), "doctor", env=NO_SERVER).stdout.splitlines()
    assert checked[0] == f"ok      config file: {path} found and parsed"
    assert checked[2] == f"ok      credentials accepted: access key {live.key_id}"
    assert cli.js("-c", str(path), "doctor", env=NO_SERVER)["backend"] == "remote"
