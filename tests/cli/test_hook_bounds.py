"""Hooks a server can run for anyone who may write an action file: a command hook's output is
bounded while it is read, and its whole process group dies at the timeout.

Each test runs embedded and against a live server (``both``) unless it measures a process;
command hooks are real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core.hooks import MAX_OUTPUT
from server.config import load_settings
from tests.cli.both import Lakectl, both
from tests.cli.test_actions import command, put_action, runs
from tests.server.conftest import Live, serve

__all__ = ["both"]

SLOW_S = 10.0
"""How long the slow programs below would hold a hook if nothing cut them short."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The server of ``both``: command hooks enabled."""
    env = {"LAKECTL_SERVER_ACTIONS_COMMAND_ENABLED": "true"}
    with serve(load_settings(None, str(tmp_path_factory.mktemp("server-bounds")), environ=env)) as server:
        yield server


def gate(cli: Lakectl, hook: dict[str, Any]) -> tuple[str, str]:
    """Run ``hook`` as the pre-commit hook of a commit to ``feat``: the commit's stderr (empty
    when it passed) and the hook's stored output."""
    put_action(cli, "feat", "gate", {"on": {"pre-commit": None}, "hooks": [hook]}, commit=False)
    done = cli("commit", f"lakefs://{cli.repo}/feat", "-m", "gated", code=None)
    (run, *_) = runs(cli, "--branch", "feat")
    out = cli("cat-hook-output", f"lakefs://{cli.repo}", run["run_id"], "0000_0000").stdout
    return (done.stderr if done.exit_code else ""), out


def longest(char: str, text: str) -> int:
    """The length of the longest run of ``char`` in ``text``."""
    return max(map(len, re.findall(f"{re.escape(char)}+", text)), default=0)


# -- command hooks ---------------------------------------------------------------------------------


def test_a_commands_output_is_cut_at_the_cap_and_the_program_runs_to_its_end(both: Lakectl) -> None:
    code = "import sys\nfor _ in range(48): sys.stdout.write('y' * 65536)\nsys.exit(3)"
    stderr, out = gate(both, command("loud", code))
    assert longest("y", out) == MAX_OUTPUT
    assert f"output cut at its first {MAX_OUTPUT} bytes ({48 * 65536 - MAX_OUTPUT} more dropped)" in out
    assert "exit status 3" in out and "aborted" in stderr  # read to its end: its status decides


def test_a_timed_out_command_leaves_no_process_behind(both: Lakectl, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"echo $$ > {pids}; sleep {SLOW_S * 4:g} & echo $! >> {pids}; sleep {SLOW_S * 4 - 5:g}"
    hook = {
        "id": "linger",
        "type": "command",
        "properties": {"command": ["sh", "-c", script], "timeout": "1s"},
    }
    stderr, out = gate(both, hook)
    assert "timed out after 1s" in out and "aborted" in stderr
    shell, background = (int(p) for p in pids.read_text().split())
    for pid in (shell, background):
        assert gone(pid), f"process {pid} outlived its hook"


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (reaped, or a zombie waiting for its parent), waiting a while."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    return False


def test_a_loud_commands_output_does_not_fill_the_memory_of_the_lake(tmp_path: Path) -> None:
    """A pre-commit command printing 200 MB, run by the ``lakectl`` command (an embedded lake):
    the peak memory of every process of the run stays far below what the hook printed."""
    size = 200 << 20
    code = (
        f"import sys\nblock = b'z' * (1 << 20)\nfor _ in range({size >> 20}): sys.stdout.buffer.write(block)"
    )
    env = {
        **os.environ,
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
        "LAKECTL_BASE_URI": "",
    }
    cli = Lakectl("embedded", env, tmp_path, repo="loud")
    cli("repo", "create", "lakefs://loud")
    put_action(
        cli, "main", "gate", {"on": {"pre-commit": None}, "hooks": [command("loud", code)]}, commit=False
    )
    # A process of its own runs lakectl, and reports the peak resident size of its children
    # (lakectl, and the hook lakectl ran) in KiB.
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    lakectl = str(Path(sys.executable).with_name("lakectl"))
    argv = [sys.executable, "-c", measure, lakectl, "commit", "lakefs://loud/main", "-m", "loud"]
    status, peak_kib = subprocess.run(
        argv, env=env, capture_output=True, check=True, text=True
    ).stdout.split()
    assert status == "0"
    assert int(peak_kib) * 1024 < size / 2, f"peak {int(peak_kib) >> 10} MiB for a {size >> 20} MiB output"
    (run,) = runs(cli, "--branch", "main")
    out = cli("cat-hook-output", "lakefs://loud", run["run_id"], "0000_0000").stdout
    assert longest("z", out) == MAX_OUTPUT and f"({size - MAX_OUTPUT} more dropped)" in out
