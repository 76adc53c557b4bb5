"""The CLI run as a user at a terminal runs it: a whole ``lakectl`` process on a pseudo-terminal
(stdout and stderr both on it), read until it closes it, bounded in time."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest


def lakectl(*args: str) -> list[str]:
    """The command line of a ``lakectl`` process from this checkout (``PYTHONPATH`` names it)."""
    return [sys.executable, "-c", "from lakectl.cli.app import main; main()", *args]


def on_a_terminal(env: dict[str, str], *args: str, code: int | None = 0, timeout: float = 120) -> str:
    """What the command writes on a pseudo-terminal; its exit status is ``code`` (``None``: any).
    The command is killed, and the test fails, past ``timeout`` seconds."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(lakectl(*args), stdin=terminal, stdout=terminal, stderr=terminal, env=env)
    os.close(terminal)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                proc.kill()
                pytest.fail(f"lakectl {' '.join(args)} wrote for more than {timeout}s: {out[-500:]!r}")
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal: all read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(controller)
        status = proc.wait(timeout=timeout)
    assert code is None or status == code, out[-2000:]
    return out.decode(errors="replace")
