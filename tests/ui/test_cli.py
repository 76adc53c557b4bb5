"""``lakectl ui`` as a user runs it: the real console script over an embedded lake, its one-time
sign-in link followed with an HTTP client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

LAKECTL = Path(sys.executable).with_name("lakectl")
START_TIMEOUT_S = 30


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    return {**env, "LAKECTL_HOME": str(home), "LAKECTL_CONFIG": str(home / "none.yaml")}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """``lakectl ui --json`` over a lake that holds one repository made by the CLI (embedded)."""
    env = _env(tmp_path / "lake")
    made = subprocess.run(
        [str(LAKECTL), "repo", "create", "lakefs://from-the-cli"], env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    proc = subprocess.Popen(
        [str(LAKECTL), "ui", "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or lines[-1] != "}\n":  # the start-up record: one JSON object
            line = proc.stdout.readline()
            assert line, f"lakectl ui ended: {proc.communicate(timeout=5)}"
            lines.append(line)
        yield json.loads("".join(lines)), proc
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        _, stderr = proc.communicate(timeout=START_TIMEOUT_S)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_lakectl_ui_signs_in_once_by_its_link(served: tuple[dict[str, str], subprocess.Popen[str]]) -> None:
    started, _ = served
    link = urlsplit(started["url"])
    assert link.scheme == "http" and link.hostname == "127.0.0.1" and link.path == "/ui/login"
    assert link.query.startswith("token=") and len(link.query) > 40
    base = f"http://{link.netloc}"
    with httpx.Client(base_url=base, timeout=30.0) as browser:
        signed = browser.get(started["url"])
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/"
        assert "lakectl_session" in browser.cookies
        home = browser.get("/ui/")
        assert home.status_code == 200
        assert 'Signed in as <strong class="user">admin</strong>' in home.text
        assert 'href="/ui/repos/from-the-cli"' in home.text  # the CLI's embedded lake
    with httpx.Client(base_url=base, timeout=30.0) as someone_else:
        again = someone_else.get(started["url"])
        assert again.status_code == 401 and "already used" in again.text
        assert "lakectl_session" not in someone_else.cookies
        assert someone_else.get("/ui/").status_code == 303  # to the sign-in page


def test_lakectl_ui_listens_on_loopback_only(served: tuple[dict[str, str], subprocess.Popen[str]]) -> None:
    started, proc = served
    port = urlsplit(started["url"]).port
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local = [line.split()[1] for line in listening if line.split()[3] == "0A"]  # LISTEN
    assert f"0100007F:{port:04X}" in local  # 127.0.0.1
    assert f"00000000:{port:04X}" not in local  # not 0.0.0.0
    assert proc.poll() is None
