"""A real ``lakectl server run`` subprocess on 127.0.0.1 for the server benchmarks.

``lakectl server setup`` runs first on a fresh data directory (its ``--json`` output gives the
admin's access key); then ``lakectl server run`` serves that directory on a free loopback port with
the default configuration (SQLite + local blocks, text log at level info). Its log goes to a file
in the data directory, never to a pipe nobody reads. The process is stopped with SIGINT (then
SIGKILL) when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from _benchutil import lakectl_binary

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def process_cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a running process so far (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of the man page): utime and stime are fields 14 and 15.
    return int(fields[11]) / _clock_ticks(), int(fields[12]) / _clock_ticks()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process so far."""
    return sum(process_cpu_split(pid))


@dataclass
class LiveServer:
    url: str
    """Root URL (``http://127.0.0.1:<port>``); the API is under ``/api/v1``."""
    key_id: str
    secret: str
    data_dir: str
    log_path: str
    process: subprocess.Popen[bytes]
    s3_url: str
    """The S3 gateway of the same server (``http://127.0.0.1:<port>``)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def api(self) -> str:
        return self.url + "/api/v1"

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.api, auth=(self.key_id, self.secret), timeout=timeout)

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        return process_cpu_split(self.pid)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""


def _env(data_dir: str, port: int, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env["LAKECTL_SERVER_DATA_DIR"] = data_dir
    env["LAKECTL_SERVER_LISTEN_ADDRESS"] = f"127.0.0.1:{port}"
    # Its own free port: the default (the API's port + 1) may be taken by some client socket.
    env["LAKECTL_SERVER_GATEWAYS_S3_LISTEN_ADDRESS"] = f"127.0.0.1:{free_port()}"
    # An installed server has a bytecode cache; keep it out of the source tree.
    env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(os.path.dirname(data_dir), "pycache"))
    env.update(extra or {})
    return env


@contextlib.contextmanager
def live_server(
    work: str, env_extra: dict[str, str] | None = None, command: list[str] | None = None
) -> Iterator[LiveServer]:
    """Set up and start a server whose data lives under ``work`` (the caller removes ``work``).
    ``command`` replaces ``lakectl`` for both steps (e.g. a wrapper that patches the server for an
    experiment); the default is the real ``lakectl`` executable."""
    found = lakectl_binary()
    if command is None and found is None:
        raise SystemExit("no lakectl executable next to this Python or on PATH")
    lakectl = command or [str(found)]
    data_dir = os.path.join(work, "server")
    os.makedirs(data_dir, exist_ok=True)
    port = free_port()
    env = _env(data_dir, port, env_extra)
    setup = subprocess.run(
        [*lakectl, "server", "setup", "--json"], env=env, capture_output=True, timeout=120, check=False
    )
    if setup.returncode != 0:
        raise SystemExit(f"lakectl server setup failed ({setup.returncode}): {setup.stderr.decode()[-800:]}")
    creds = json.loads(setup.stdout)
    log_path = os.path.join(work, "server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*lakectl, "server", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    s3_url = "http://" + env["LAKECTL_SERVER_GATEWAYS_S3_LISTEN_ADDRESS"]
    server = LiveServer(
        url, creds["access_key_id"], creds["secret_access_key"], data_dir, log_path, proc, s3_url
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                if httpx.get(url + "/api/v1/healthcheck", timeout=2.0).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not answer within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        yield server
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def py_spy_binary() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(here, os.X_OK):
        return here
    import shutil

    return shutil.which("py-spy")
