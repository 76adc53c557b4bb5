"""No lost writes across two server processes sharing one PostgreSQL database and one block directory.

Two ``lakectl server run`` processes (each its own port and data directory, one shared auth secret)
serve one lake. Writer processes upload unique paths through both servers in turn, committer
processes commit through both in turn; then the lake is checked exactly as the embedded
scenario of test_concurrency.py checks it: every acknowledged upload (a 201) is in exactly one
commit's change set or still staged, and the branch shows every one with its content. Nothing
in either server guards metadata with an in-process lock, so this holds only if every
read-modify-write is a compare-and-swap in the database.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakectl.core import changes, listing
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.kv.postgres import PostgresStore
from lakectl.core.lake import Lake
from tests.integration.test_concurrency import (
    LEAST_WRITES,
    REPO,
    SPAWN_GRACE_S,
    _acked,
    _checksum,
    _content,
    _going,
    _run,
    _summary,
    _wait,
)

WRITERS = 2
COMMITTERS = 2
RUN_S = 8.0
START_TIMEOUT_S = 30.0
"""For both servers to answer their health check."""
STOP_TIMEOUT_S = 10.0
"""For a server to exit after SIGTERM before it is killed."""
HTTP_TIMEOUT_S = 15.0
CLI_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lakectl() -> list[str]:
    """The installed console script of this interpreter's environment, else the same entry point."""
    script = shutil.which("lakectl", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-c", "from lakectl.cli.app import main; main()"]


def _lakectl_json(*args: str, code: int = 0, **env: str) -> Any:
    """``lakectl <args> --json`` in a process of its own, with ``env`` added to the test's
    environment less its ``LAKECTL_SERVER*`` variables: it exits ``code``; what it printed."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER")}, **env}
    done = subprocess.run(
        [*_lakectl(), *args, "--json"], capture_output=True, env=env, timeout=CLI_TIMEOUT_S, check=False
    )
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def server_conf(tmp: Path, name: str, database: str, blocks: Path, secret: str) -> tuple[Path, str]:
    """A server's configuration file on free ports (``database``: the YAML of its ``database``
    key); return it and the server's API base URL."""
    port = _free_port()
    conf = tmp / f"{name}.yaml"
    conf.write_text(
        f"listen_address: 127.0.0.1:{port}\n"
        f"gateways: {{s3: {{listen_address: '127.0.0.1:{_free_port()}'}}}}\n"
        f"data_dir: {tmp / name}\n"
        "logging: {level: warn}\n"
        f"database: {database}\n"
        f"blockstore: {{type: local, local: {{path: {blocks}}}}}\n"
        f"auth: {{encrypt: {{secret_key: {secret}}}}}\n"
    )
    return conf, f"http://127.0.0.1:{port}/api/v1"


def _start(name: str, tmp: Path, pg_url: str, blocks: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start one ``lakectl server run`` on a free port; return the process and its API base URL."""
    database = f"{{type: postgres, connection_string: '{pg_url}'}}"
    conf, url = server_conf(tmp, name, database, blocks, "two-servers-share-this-secret")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    with open(tmp / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(
            [*_lakectl(), "server", "run", "--config", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return proc, url


def _wait_healthy(procs: list[tuple[subprocess.Popen[bytes], str]], tmp: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    for i, (proc, url) in enumerate(procs):
        while True:
            if proc.poll() is not None:
                log = (tmp / f"s{i}.log").read_text(errors="replace")
                pytest.fail(f"server s{i} exited with {proc.returncode}:\n{log}")
            try:
                if httpx.get(f"{url}/healthcheck", timeout=2.0).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"server s{i} did not answer within {START_TIMEOUT_S} s"
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


@pytest.fixture
def two_servers(tmp_path: Path, pg_url: str) -> Iterator[tuple[list[str], Path]]:
    """Two running servers on ``pg_url`` and ``<tmp>/blocks``: their API URLs and the block dir."""
    blocks = tmp_path / "blocks"
    procs: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for i in range(2):
            procs.append(_start(f"s{i}", tmp_path, pg_url, blocks))
        _wait_healthy(procs, tmp_path)
        yield [url for _, url in procs], blocks
    finally:
        for proc, _ in procs:
            _stop(proc)


# -- workers (spawned processes; they speak HTTP only) --------------------------------------


def _code(r: httpx.Response) -> str:
    try:
        return str(r.json().get("code", ""))
    except ValueError:
        return ""


def _clients(urls: list[str], auth: tuple[str, str]) -> list[httpx.Client]:
    return [httpx.Client(base_url=u, auth=auth, timeout=HTTP_TIMEOUT_S) for u in urls]


def _http_writer(
    urls: list[str], auth: tuple[str, str], out: str, idx: int, start_at: float, end_at: float
) -> dict[str, Any]:
    """Upload ``w<idx>/<n>`` through the servers in turn; a 201 is the acknowledgement."""
    clients = _clients(urls, auth)
    counts: Counter[str] = Counter()
    n = 0
    _wait(start_at)
    with open(Path(out, f"ack-w{idx}.txt"), "a") as ack:
        while _going(end_at, counts["acked_s0"] + counts["acked_s1"], LEAST_WRITES):
            path = f"w{idx}/{n:06d}"
            server = n % len(clients)
            n += 1
            r = clients[server].post(
                f"/repositories/{REPO}/branches/main/objects", params={"path": path}, content=_content(path)
            )
            if r.status_code == 201:
                ack.write(path + "\n")
                ack.flush()
                counts[f"acked_s{server}"] += 1
            elif r.status_code == 412 and _code(r) == "too_many_retries":
                counts["starved"] += 1  # not acknowledged: the writer may not count on it
            else:
                raise AssertionError(f"upload {path} via s{server}: {r.status_code} {r.text}")
    return {"attempts": n, **counts}


def _http_committer(
    urls: list[str], auth: tuple[str, str], out: str, idx: int, start_at: float, end_at: float
) -> dict[str, Any]:
    """Commit ``main`` through the servers in turn."""
    clients = _clients(urls, auth)
    counts: Counter[str] = Counter()
    n = idx  # the committers start on different servers
    _wait(start_at)
    while _going(end_at, min(counts["commits_s0"], counts["commits_s1"]), 1):  # through both
        server = n % len(clients)
        n += 1
        r = clients[server].post(
            f"/repositories/{REPO}/branches/main/commits", json={"message": f"committer {idx} via s{server}"}
        )
        if r.status_code == 201:
            counts[f"commits_s{server}"] += 1
        elif r.status_code == 412 and _code(r) == "nothing_to_commit":
            counts["nothing"] += 1
            time.sleep(0.01)
        elif r.status_code == 412 and _code(r) == "too_many_retries":
            counts["starved"] += 1
        else:
            raise AssertionError(f"commit via s{server}: {r.status_code} {r.text}")
    return dict(counts)


# -- the test ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_acknowledged_write_is_lost_across_two_servers(
    two_servers: tuple[list[str], Path], pg_url: str, tmp_path: Path
) -> None:
    urls, blocks = two_servers
    out = tmp_path / "out"
    out.mkdir()

    # One admin, set up through the first server, works on the second: one database, one secret.
    with httpx.Client(base_url=urls[0], timeout=HTTP_TIMEOUT_S) as anon:
        r = anon.post("/setup_lakefs", json={"username": "admin"})
        assert r.status_code == 200, r.text
    auth = (r.json()["access_key_id"], r.json()["secret_access_key"])
    with httpx.Client(base_url=urls[1], auth=auth, timeout=HTTP_TIMEOUT_S) as api:
        r = api.post("/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"})
        assert r.status_code == 201, r.text
        assert api.post("/setup_lakefs", json={"username": "again"}).status_code == 409

    start_at = time.time() + SPAWN_GRACE_S
    end_at = start_at + RUN_S
    args = (urls, auth, str(out))
    workers = [(_http_writer, f"w{i}", (*args, i, start_at, end_at)) for i in range(WRITERS)]
    workers += [(_http_committer, f"c{i}", (*args, i, start_at, end_at)) for i in range(COMMITTERS)]
    _run(out, workers)

    acked = _acked(out)
    writers = [_summary(out, f"w{i}") for i in range(WRITERS)]
    committers = [_summary(out, f"c{i}") for i in range(COMMITTERS)]
    assert len(acked) == len(set(acked))
    assert len(acked) > 50, writers  # the writers made progress
    for s in ("s0", "s1"):  # through both servers
        assert sum(w.get(f"acked_{s}", 0) for w in writers) > 10, writers
        assert sum(c.get(f"commits_{s}", 0) for c in committers) >= 2, committers

    lake = Lake(kv=PostgresStore(pg_url), blocks=LocalAdapter(blocks))
    try:
        # Every acknowledged path is in exactly one commit's change set, or still staged.
        in_commits: Counter[str] = Counter()
        log = list(changes.log(lake, REPO, "main"))
        for c in log:
            if c.parents:
                for change in changes.diff_refs(lake, REPO, c.parents[0], c.id, two_way=True):
                    in_commits[change.path] += 1
        assert all(len(c.parents) <= 1 for c in log)
        staged = Counter(c.path for c in changes.diff_uncommitted(lake, REPO, "main"))
        wrong = {p: (in_commits[p], staged[p]) for p in acked if in_commits[p] + staged[p] != 1}
        assert not wrong, (
            f"{len(wrong)} acknowledged paths not in exactly one place: {list(wrong.items())[:10]}"
        )
        assert all(n == 1 for n in in_commits.values())  # no path committed twice

        # The branch view holds every acknowledged path with its content.
        listed = {
            o.path: o.entry.checksum  # type: ignore[union-attr]
            for o in listing.list_objects(lake, REPO, "main", prefix="w")
        }
        assert {p: listed.get(p) for p in acked} == {p: _checksum(_content(p)) for p in acked}

        # Either server reads any of them back; a last commit moves everything staged into history.
        with httpx.Client(auth=auth, timeout=HTTP_TIMEOUT_S) as api:
            for i, path in enumerate(random.Random(0).sample(acked, 20)):
                r = api.get(f"{urls[i % 2]}/repositories/{REPO}/refs/main/objects", params={"path": path})
                assert (r.status_code, r.content) == (200, _content(path))
            if staged:
                r = api.post(
                    f"{urls[1]}/repositories/{REPO}/branches/main/commits", json={"message": "final"}
                )
                assert r.status_code == 201, r.text
        assert changes.diff_uncommitted(lake, REPO, "main") == []
        committed = {o.path for o in listing.list_objects(lake, REPO, "main@", prefix="w")}
        assert set(acked) <= committed
    finally:
        lake.close()
