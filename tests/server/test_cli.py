"""``lakectl server setup`` and ``lakectl server run`` as a user runs them: the real console script."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import boto3
import httpx
import pytest

from tests.server.conftest import free_port

LAKECTL = Path(sys.executable).with_name("lakectl")
START_TIMEOUT_S = 20.0


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    return {**env, "LAKECTL_SERVER_DATA_DIR": str(data_dir), **extra}


def _lakectl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LAKECTL), *args], capture_output=True, text=True, env=env, timeout=60)


def test_setup_prints_the_key_once(tmp_path: Path) -> None:
    env = _env(tmp_path)
    out = _lakectl("server", "setup", "--json", env=env)
    assert out.returncode == 0, out.stderr
    creds = json.loads(out.stdout)
    assert creds["access_key_id"] and creds["secret_access_key"] and creds["user"]["role"] == "Admin"
    assert creds["data_dir"] == str(tmp_path)
    again = _lakectl("server", "setup", env=env)
    assert again.returncode == 4 and "already set up" in again.stderr
    assert creds["secret_access_key"] not in again.stdout + again.stderr
    human = _lakectl("server", "setup", "--data-dir", str(tmp_path / "other"), "--user-name", "ada", env=env)
    assert human.returncode == 0 and "secret_access_key: " in human.stdout and "'ada'" in human.stdout


def test_configuration_errors_exit_2_before_listening(tmp_path: Path) -> None:
    bad = _lakectl("server", "run", env=_env(tmp_path, LAKECTL_SERVER_LISTEN_ADDRESS="nowhere"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: listen_address")
    conf = tmp_path / "server.yaml"
    conf.write_text("databse: {type: sqlite}\n")
    typo = _lakectl("server", "run", "--config", str(conf), "--json", env=_env(tmp_path))
    assert typo.returncode == 2 and json.loads(typo.stdout)["code"] == "invalid_argument"


def test_a_taken_address_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        out = _lakectl("server", "run", env=_env(tmp_path, LAKECTL_SERVER_LISTEN_ADDRESS=address))
    assert out.returncode == 9 and f"error: cannot listen on {address}" in out.stderr


def _answer(
    proc: subprocess.Popen[str], url: str, ready: Callable[[httpx.Response], bool] = lambda r: True
) -> httpx.Response:
    """The first answer from ``url`` that is ``ready``, while the server ``proc`` starts (it must
    not exit, nor take longer than START_TIMEOUT_S)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert proc.poll() is None, proc.communicate(timeout=5)
        assert time.monotonic() < deadline, "the server did not answer in time"
        try:
            answer = httpx.get(url, timeout=1)
            if ready(answer):
                return answer
        except httpx.TransportError:
            time.sleep(0.05)


def test_run_serves_the_api(tmp_path: Path) -> None:
    port, s3_port = free_port(), free_port()
    conf = tmp_path / "server.yaml"
    conf.write_text(
        f"listen_address: 127.0.0.1:{port}\nlogging: {{format: json, output: '='}}\n"
        f"gateways: {{s3: {{listen_address: '127.0.0.1:{s3_port}'}}}}\n"
    )
    env = _env(tmp_path)
    creds = json.loads(_lakectl("server", "setup", "--config", str(conf), "--json", env=env).stdout)
    proc = subprocess.Popen(
        [str(LAKECTL), "server", "run", "--config", str(conf), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        _answer(proc, base + "/healthcheck", lambda r: r.status_code == 204)
        auth = (creds["access_key_id"], creds["secret_access_key"])
        with httpx.Client(base_url=base, auth=auth, timeout=10) as api:
            r = api.post("/repositories", json={"name": "served", "storage_namespace": "local://served"})
            assert r.status_code == 201, r.text
            assert api.get("/repositories").json()["results"][0]["id"] == "served"
        assert httpx.get(base + "/repositories", timeout=5).status_code == 401
        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{s3_port}",
            aws_access_key_id=auth[0],
            aws_secret_access_key=auth[1],
            region_name="us-east-1",
        )
        s3.put_object(Bucket="served", Key="main/hello.txt", Body=b"through the S3 gateway")
        with httpx.Client(base_url=base, auth=auth, timeout=10) as api:
            read = api.get("/repositories/served/refs/main/objects", params={"path": "hello.txt"})
            assert read.content == b"through the S3 gateway"
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    start = json.JSONDecoder().raw_decode(stdout)[0]  # the start-up record comes first
    assert start == {
        "listen_address": f"127.0.0.1:{port}",
        "s3_listen_address": f"127.0.0.1:{s3_port}",
        "ui_url": f"http://127.0.0.1:{port}/ui/",
        "data_dir": str(tmp_path),
        "database": "sqlite",
    }
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert logs and {"time", "level", "logger", "msg"} <= set(logs[0])
    assert creds["secret_access_key"] not in stdout + stderr
    assert (tmp_path / "lake.db").exists() and (tmp_path / "blocks").is_dir()


def test_accepted_connections_send_without_delay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Responses go out in two writes (head, body): with Nagle's algorithm on, the body waits for
    the client's delayed ACK, 40 ms per request. The listening socket turns it off for every
    connection it accepts."""
    from server.config import load_settings
    from server.main import listen

    monkeypatch.setenv("LAKECTL_SERVER_LISTEN_ADDRESS", f"127.0.0.1:{free_port()}")
    settings = load_settings(None, str(tmp_path))
    with listen(settings) as server, socket.create_connection(server.getsockname()[:2]):
        accepted, _ = server.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_the_start_line_names_the_web_ui_it_serves(tmp_path: Path) -> None:
    port, s3_port = free_port(), free_port()
    conf = tmp_path / "server.yaml"
    conf.write_text(
        f"listen_address: 127.0.0.1:{port}\ngateways: {{s3: {{listen_address: '127.0.0.1:{s3_port}'}}}}\n"
    )
    env = _env(tmp_path)
    _lakectl("server", "setup", "--config", str(conf), "--json", env=env)
    proc = subprocess.Popen(
        [str(LAKECTL), "server", "run", "--config", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    ui = f"http://127.0.0.1:{port}/ui/"
    try:
        page = _answer(proc, ui)
        assert page.status_code in (200, 303) and "/ui/" in str(page.headers.get("location", ui))
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    line = f"lakectl server on http://127.0.0.1:{port}/api/v1, web UI on {ui}, S3 gateway on http://127.0.0.1:{s3_port}"
    assert line in stdout + stderr
