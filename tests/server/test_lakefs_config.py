"""lakeFS configuration files start ``lakectl server run`` for real: the local layout and the 0.1 design's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
import httpx

from tests.server.conftest import free_port
from tests.server.test_cli import LAKECTL, START_TIMEOUT_S

CONFIGS = Path(__file__).parent / "configs"


def _env(home: Path, **extra: str) -> dict[str, str]:
    """The user's environment without server settings, with ``home`` as ``~`` (the files' paths)."""
    drop = ("LAKECTL_SERVER_", "LAKEFS_", "XDG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "HOME": str(home), **extra}


@contextmanager
def _running(config: Path | None, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``lakectl server run [--config <config>] --json`` until the block ends; yields the process
    and the API's base URL once it answers."""
    proc = subprocess.Popen(
        [str(LAKECTL), "server", "run", *(["--config", str(config)] if config else []), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    address = env.get("LAKEFS_LISTEN_ADDRESS") or env["LAKEFS_API_LISTEN_ADDRESS"]
    base = f"http://{address}/api/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, proc.communicate(timeout=5)
            assert time.monotonic() < deadline, "the server did not answer in time"
            try:
                if httpx.get(base + "/healthcheck", timeout=1).status_code == 204:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)


def _setup(config: Path, env: dict[str, str]) -> tuple[str, str]:
    out = subprocess.run(
        [str(LAKECTL), "server", "setup", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    creds = json.loads(out.stdout)
    return creds["access_key_id"], creds["secret_access_key"]


def _round_trip(base: str, auth: tuple[str, str], repo: str) -> None:
    """Create a repository, upload and commit an object, read it back."""
    with httpx.Client(base_url=base, auth=auth, timeout=10) as api:
        r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert r.status_code == 201, r.text
        path = {"path": "a.csv"}
        r = api.post(f"/repositories/{repo}/branches/main/objects", params=path, content=b"id\n1\n")
        assert r.status_code == 201, r.text
        r = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "add a.csv"})
        assert r.status_code == 201, r.text
        read = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "a.csv"})
        assert (read.status_code, read.content) == (200, b"id\n1\n")


def test_lakefs_local_configuration_runs_the_server(tmp_path: Path) -> None:
    config = CONFIGS / "lakefs-local.yaml"
    port, s3_port = free_port(), free_port()
    env = _env(
        tmp_path,
        LAKEFS_LISTEN_ADDRESS=f"127.0.0.1:{port}",
        LAKEFS_GATEWAYS_S3_LISTEN_ADDRESS=f"127.0.0.1:{s3_port}",
    )
    auth = _setup(config, env)
    with _running(config, env) as (proc, base):
        _round_trip(base, auth, "from-lakefs-config")
        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{s3_port}",
            aws_access_key_id=auth[0],
            aws_secret_access_key=auth[1],
            region_name="us-east-1",
        )
        s3.put_object(Bucket="from-lakefs-config", Key="main/b.txt", Body=b"via the gateway")
        got = s3.get_object(Bucket="from-lakefs-config", Key="main/b.txt")["Body"].read()
        assert got == b"via the gateway"
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    start = json.JSONDecoder().raw_decode(stdout)[0]
    assert start["listen_address"] == f"127.0.0.1:{port}" and start["database"] == "sqlite"
    # database.local.path is lakeFS's directory of embedded metadata: the SQLite lake lives in it.
    assert (tmp_path / "lakefs" / "metadata" / "lake.db").is_file()
    assert any((tmp_path / "lakefs" / "data").glob("*/*")), "no block in blockstore.local.path"
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: ignored database.local.sync_writes: SQLite syncs every commit to disk",
        "warning: ignored stats.enabled: lakectl collects and sends no usage data",
    ]
    # The secret key came from the file: no generated key was written beside the lake.
    assert not list(tmp_path.rglob("auth-secret"))


def test_lakefs_01_design_configuration_runs_the_server(tmp_path: Path) -> None:
    config = CONFIGS / "lakefs-0.1.yaml"
    port, s3_port = free_port(), free_port()
    env = _env(
        tmp_path,
        LAKEFS_API_LISTEN_ADDRESS=f"127.0.0.1:{port}",
        LAKEFS_GATEWAYS_S3_LISTEN_ADDRESS=f"127.0.0.1:{s3_port}",
    )
    auth = _setup(config, env)
    with _running(config, env) as (proc, base):
        _round_trip(base, auth, "from-01-config")
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    start = json.JSONDecoder().raw_decode(stdout)[0]
    assert (start["listen_address"], start["s3_listen_address"]) == (
        f"127.0.0.1:{port}",
        f"127.0.0.1:{s3_port}",
    )
    assert (tmp_path / "lakefs" / "metadata" / "lake.db").is_file()
    assert any((tmp_path / "lakefs" / "data").glob("*/*"))
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert logs and {"time", "level", "logger", "msg"} <= set(logs[0]), "logging.format json, output '='"
    assert not [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_badger_and_unknown_keys_stop_the_server_before_it_listens(tmp_path: Path) -> None:
    port = free_port()
    env = _env(tmp_path, LAKEFS_API_LISTEN_ADDRESS=f"127.0.0.1:{port}")
    cases = {
        "metadata: {db: {type: badger, path: ~/m}}\n": "error: metadata.db.type: badger is not supported",
        "blockstore: {type: gs, gs: {credentials_file: /k.json}}\n": "error: invalid configuration",
        "api: {listen_adress: '127.0.0.1:1'}\n": "unknown key 'api.listen_adress'",
    }
    for text, needle in cases.items():
        conf = tmp_path / "bad.yaml"
        conf.write_text(text)
        out = subprocess.run(
            [str(LAKECTL), "server", "run", "--config", str(conf)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert out.returncode == 2, (text, out.stderr)
        assert needle in out.stderr and len(out.stderr.splitlines()) == 1, (text, out.stderr)
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "lakefs").exists(), "nothing is created for a refused configuration"


def test_a_lakefs_containers_environment_alone_runs_the_server_set_up(tmp_path: Path) -> None:
    """The LAKEFS_ variables a lakeFS container is started with (its compose examples: embedded
    database, local blockstore, an installation user; no file, no set-up step), then the lakectl
    CLI against it with lakeFS's LAKECTL_ client variables."""
    port, s3_port = free_port(), free_port()
    key_id, secret = "AKIAEXAMPLEINSTALL01", "example/installation/secret"
    env = _env(
        tmp_path,
        LAKEFS_DATABASE_TYPE="local",
        LAKEFS_BLOCKSTORE_TYPE="local",
        LAKEFS_AUTH_ENCRYPT_SECRET_KEY="some long random string for the test",
        LAKEFS_LOGGING_LEVEL="INFO",
        LAKEFS_STATS_ENABLED="false",
        LAKEFS_INSTALLATION_USER_NAME="everything-bagel",
        LAKEFS_INSTALLATION_ACCESS_KEY_ID=key_id,
        LAKEFS_INSTALLATION_SECRET_ACCESS_KEY=secret,
        LAKEFS_LISTEN_ADDRESS=f"127.0.0.1:{port}",
        LAKEFS_GATEWAYS_S3_LISTEN_ADDRESS=f"127.0.0.1:{s3_port}",
    )
    with _running(None, env) as (proc, base):
        _round_trip(base, (key_id, secret), "installed")
        cli = {
            **env,
            "LAKECTL_HOME": str(tmp_path / "unused"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": key_id,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": secret,
        }

        def lakectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(LAKECTL), *args], capture_output=True, text=True, env=cli, timeout=60)

        listed = lakectl("repo", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == ["installed"]
        cat = lakectl("fs", "cat", "lakefs://installed/main/a.csv")
        assert (cat.returncode, cat.stdout) == (0, "id\n1\n"), cat.stderr
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert [line for line in stderr.splitlines() if line.startswith("warning:")] == [
        "warning: ignored LAKEFS_STATS_ENABLED: lakectl collects and sends no usage data"
    ]
    assert secret not in stdout + stderr


def test_setup_creates_the_installation_user_and_key(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        LAKECTL_SERVER_DATA_DIR=str(tmp_path / "server"),
        LAKEFS_INSTALLATION_USER_NAME="ops",
        LAKEFS_INSTALLATION_ACCESS_KEY_ID="AKIAEXAMPLESETUP0001",
        LAKEFS_INSTALLATION_SECRET_ACCESS_KEY="configured-secret",
    )
    conf = tmp_path / "empty.yaml"
    conf.write_text("---\n")
    assert _setup(conf, env) == ("AKIAEXAMPLESETUP0001", "configured-secret")
    half = {**env, "LAKEFS_INSTALLATION_SECRET_ACCESS_KEY": ""}
    argv = [str(LAKECTL), "server", "setup"]
    out = subprocess.run(argv, capture_output=True, text=True, env=half, timeout=60)
    assert out.returncode == 2
    assert out.stderr == (
        "error: installation.secret_access_key is required with installation.user_name, "
        "installation.access_key_id\n"
    )
