"""A live server for the API tests: uvicorn in a thread on 127.0.0.1 (a free port), a fresh data
directory, set up once with an admin user; httpx clients with and without its credentials.
``live`` keeps its metadata in SQLite, ``live_pg`` in the test PostgreSQL server (tests/pg.py)."""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn

from lakectl.core import keys
from lakectl.core.journal import log as journallog
from lakectl.core.journal import sealed
from lakectl.core.lake import Lake
from server.app import Dispatch, create_app, create_gateway, open_lake
from server.config import Settings, load_settings
from tests.pg import PostgresServer

START_TIMEOUT_S = 15.0
ALLOWED_EXTERNAL_PREFIXES = "LAKECTL_SERVER_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES"
LOOPBACK_HOOKS = {"LAKECTL_SERVER_ACTIONS_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}
"""The test servers' webhooks may call the tests' receivers, on 127.0.0.1 (tests/hookd.py)."""
_names = itertools.count()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if TYPE_CHECKING:
    import lakefs_sdk


@dataclass(frozen=True)
class Live:
    url: str
    """Base URL of the API (``http://127.0.0.1:<port>/api/v1``)."""
    key_id: str
    secret: str
    data_dir: Path
    s3_endpoint: str = ""
    """The S3 gateway of the same server (``http://127.0.0.1:<port>``)."""

    def client(self, auth: tuple[str, str] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=auth, timeout=30.0)

    def s3(self) -> Any:
        """A boto3 client of the S3 gateway, as admin, path-style and without retries."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def cli_env(self, work: Path) -> dict[str, str]:
        """The environment of a ``lakectl`` CLI in remote mode against this server, as admin
        (``work``: a scratch directory; no embedded lake or config file is used from it)."""
        return {
            "LAKECTL_HOME": str(work / "unused"),
            "LAKECTL_CONFIG": str(work / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": self.url.removesuffix("/api/v1"),
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": self.key_id,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": self.secret,
            "LAKECTL_COMMITTER": "admin",
        }


def _bound() -> socket.socket:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@contextmanager
def serve(settings: Settings) -> Iterator[Live]:
    """The server for ``settings`` as ``lakectl server run`` serves it (the REST API and the S3
    gateway, one uvicorn server on two sockets of 127.0.0.1) in a thread, set up with an admin."""
    app = create_app(settings)
    api_sock, s3_sock = _bound(), _bound()
    s3_port = s3_sock.getsockname()[1]
    dispatch = Dispatch(app, create_gateway(app), {s3_port})
    server = uvicorn.Server(uvicorn.Config(dispatch, log_level="warning", lifespan="on"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [api_sock, s3_sock]}, name="lakectl-test-server", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive(), "the test server died while starting"
            assert time.monotonic() < deadline, "the test server did not start in time"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{api_sock.getsockname()[1]}/api/v1"
        with httpx.Client(base_url=url, timeout=30.0) as anon:
            creds = anon.post("/setup_lakefs", json={"username": "admin"}).json()
        yield Live(
            url,
            creds["access_key_id"],
            creds["secret_access_key"],
            Path(settings.data_dir),
            f"http://127.0.0.1:{s3_port}",
        )
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        api_sock.close()
        s3_sock.close()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A live server on the default settings, but that webhooks may call 127.0.0.1 and import may
    read the tests' temporary directories (but its own data directory there): SQLite metadata and
    blocks under its data directory."""
    data_dir = tmp_path_factory.mktemp("server")
    env = {ALLOWED_EXTERNAL_PREFIXES: str(tmp_path_factory.getbasetemp()), **LOOPBACK_HOOKS}
    with serve(load_settings(None, str(data_dir), environ=env)) as server:
        without_journal(server)
        yield server


def without_journal(server: Live) -> None:
    """The shared servers run with the journal off (a new lake has it on): their tests compare
    snapshots of the data directory, which the journal's sealing would change under them. The
    journal's tests start servers of their own."""
    with server.client((server.key_id, server.secret)) as api:
        api.post("/journal/disable").raise_for_status()


@pytest.fixture(scope="session")
def live_pg(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer) -> Iterator[Live]:
    """A live server whose metadata database is PostgreSQL (a database of its own)."""
    data_dir = tmp_path_factory.mktemp("server-pg")
    url = postgres_server.create_database()
    env = {"LAKECTL_SERVER_DATABASE_TYPE": "postgres", "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": url}
    env.update(LOOPBACK_HOOKS)
    try:
        with serve(load_settings(None, str(data_dir), environ=env)) as server:
            without_journal(server)
            yield server
    finally:
        postgres_server.drop_database(url)


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    """A client authenticated as the admin user."""
    with live.client((live.key_id, live.secret)) as c:
        yield c


@pytest.fixture
def sdk(live: Live) -> lakefs_sdk.ApiClient:
    """The lakeFS SDK's client, authenticated as the admin user."""
    import lakefs_sdk

    config = lakefs_sdk.Configuration(host=live.url, username=live.key_id, password=live.secret)
    return lakefs_sdk.ApiClient(config)


@pytest.fixture
def anon(live: Live) -> Iterator[httpx.Client]:
    """A client without credentials."""
    with live.client() as c:
        yield c


def unique(stem: str) -> str:
    return f"{stem}-{next(_names)}-{int(time.time() * 1000) % 100000}"


@pytest.fixture
def repo(api: httpx.Client) -> str:
    """A new, empty repository (default branch ``main``) for one test."""
    name = unique("repo")
    r = api.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    return name


def upload(api: httpx.Client, repo: str, branch: str, path: str, data: bytes, **headers: str) -> dict:
    r = api.post(
        f"/repositories/{repo}/branches/{branch}/objects",
        params={"path": path},
        content=data,
        headers=headers or None,
    )
    assert r.status_code == 201, r.text
    return r.json()


def commit(api: httpx.Client, repo: str, branch: str, message: str, **metadata: str) -> dict:
    r = api.post(
        f"/repositories/{repo}/branches/{branch}/commits", json={"message": message, "metadata": metadata}
    )
    assert r.status_code == 201, r.text
    return r.json()


Snapshot = tuple[list[tuple[str, str, bytes]], list[tuple[str, int]], int]


def snapshot(data_dir: Path) -> Snapshot:
    """Every KV row of a server's SQLite database, every file of its data directory (but the
    database's own) and the number of journal entries, to show that a refused request stored
    nothing. The journal's own rows and files are left out, as its keeper seals what earlier
    requests did and renews its heartbeat whenever it likes; what counts is that no entry was
    added (a sealed entry leaves the writer's partition for a batch: the sum stays)."""
    files = data_files(data_dir)  # before the rows: a batch's block is put before it is published
    with closing(sqlite3.connect(f"file:{data_dir / 'lake.db'}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT partition, key, value FROM kv ORDER BY partition, key").fetchall()
    journal = [r for r in rows if _of_journal(r[0])]
    batches = {json.loads(v)["locator"].split("+")[0] for _, k, v in journal if k.startswith("batch/")}
    cursor = _cursor(journal)
    if cursor.get("batch"):
        batches.add(cursor["batch"]["locator"].split("+")[0])
    files = [
        (name, size)
        for name, size in files
        if not name.startswith(f"blocks/{journallog.LOG_DIRECTORY}/")
        and Path(name).name not in batches
        and not _sealed_batch(data_dir / name)
    ]
    return [r for r in rows if not _of_journal(r[0])], files, journal_entries(journal)


def _sealed_batch(path: Path) -> bool:
    """Whether a block is one of the journal's sealed batches, by the mark its Parquet footer
    carries: a seal puts its block before it publishes the batch's row, and a compaction deletes
    old batches' rows before their blocks, so the rows read a moment later can miss one."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 256 * 1024))
            return sealed.BATCH in f.read()
    except FileNotFoundError:  # a batch a compaction has just deleted
        return True


def _of_journal(partition: str) -> bool:
    return partition == keys.JOURNAL or partition.startswith(keys.journal_live_partition(""))


def _cursor(rows: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    found = (json.loads(v) for p, k, v in rows if (p, k) == (keys.JOURNAL, keys.JOURNAL_CURSOR))
    return next(found, {"next": 1})


def journal_entries(rows: list[tuple[str, str, bytes]]) -> int:
    """How many entries the journal holds, sealed or not, by the KV rows (a redone write's
    attempts are one entry)."""
    live = {(p, k.split(".")[0]) for p, k, _ in rows if p.startswith(keys.journal_live_partition(""))}
    return int(_cursor(rows)["next"]) - 1 + len(live)


def data_files(data_dir: Path) -> list[tuple[str, int]]:
    """Every file of a server's data directory (but the database's own) with its size."""
    return sorted(
        (str(f.relative_to(data_dir)), f.stat().st_size)
        for f in data_dir.rglob("*")
        if f.is_file() and not f.name.startswith("lake.db")
    )


def changes(before: Snapshot, after: Snapshot) -> str:
    rows = {r[:2] for r in set(before[0]) ^ set(after[0])}
    files = set(before[1]) ^ set(after[1])
    entries = f"journal entries: {before[2]} then {after[2]}"
    return f"KV rows changed: {sorted(rows)[:5]}; files changed: {sorted(files)[:5]}; {entries}"


@contextmanager
def plumbing(data_dir: Path) -> Iterator[Lake]:
    """A second handle on the lake of a live server's data directory (its SQLite file and block
    directory), for writing what the API would refuse: records stored before its checks, or by
    other tools."""
    lake = open_lake(load_settings(None, str(data_dir), environ={}))
    try:
        yield lake
    finally:
        lake.close()
