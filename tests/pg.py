"""A real, throwaway PostgreSQL server for the tests: found on this machine, started once per session.

``postgres_server`` (session) runs ``initdb`` into a temporary directory and starts ``postgres``
on 127.0.0.1 with a free port (as the ``postgres`` or ``nobody`` user when the tests run as root,
which PostgreSQL refuses), and removes it all at the end. ``pg_url`` (per test) is an empty
database at the alembic head, emptied (or dropped) after the test. When the binaries are missing
the tests skip, except under CI (``CI`` set), where they fail: ``scripts/ensure-postgres.sh``
(run by ``make test``) installs them.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core.kv.sqlite import HEAD_REVISION

BIN_DIRS = ("/usr/lib/postgresql/*/bin", "/usr/local/bin", "/usr/local/pgsql/bin")
"""Where the server binaries are looked for after PATH (Debian keeps them out of PATH)."""

# Durability is not under test: no fsync, no full-page writes, commits acknowledged before flushing.
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
TEMPLATE = "lakectl_at_head"


def find_bin_dir() -> str | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``: PATH first, newest version next."""
    found = shutil.which("initdb")
    candidates = [os.path.dirname(os.path.realpath(found))] if found else []
    versioned = sorted(glob.glob(BIN_DIRS[0]), key=_version, reverse=True)
    candidates += versioned + list(BIN_DIRS[1:])
    for d in candidates:
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def _version(path: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", path)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresServer:
    """One running server; databases are created and dropped through a superuser connection."""

    def __init__(self, bin_dir: str) -> None:
        self.bin_dir = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="lakectl-pg-"))
        self.data = self.dir / "data"
        self.port = 0
        self._names = itertools.count()
        self._pool: list[str] = []
        # PostgreSQL will not run as root: then run it as an unprivileged user owning the dir.
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = _user("postgres") or _user("nobody")
            if user is None:
                raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def _pg(self, tool: str, *args: str, timeout: float = 60) -> None:
        cmd = [os.path.join(self.bin_dir, tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **self._as)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def start(self) -> None:
        base = ["-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]
        try:
            # A default collation that is not byte order ("a" < "B"), so that the ordering tests
            # prove the kv table's COLLATE "C" rather than the server's default.
            self._pg("initdb", *base, "--locale=C", "--locale-provider=icu", "--icu-locale=en-US")
        except RuntimeError:  # a server without ICU (or older than 15)
            shutil.rmtree(self.data, ignore_errors=True)
            self._pg("initdb", *base)
        for attempt in range(3):  # the free port may be taken before the server binds it
            self.port = _free_port()
            settings = {**SERVER_SETTINGS, "port": str(self.port), "unix_socket_directories": str(self.dir)}
            opts = " ".join(f"-c {k}={v}" for k, v in settings.items())
            try:
                self._pg(
                    "pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", opts
                )
                return
            except RuntimeError:
                if attempt == 2:
                    raise RuntimeError((self.dir / "log").read_text()) from None

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._pg("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, at_head: bool = True) -> str:
        """A new database, migrated to head (a copy of a template) or empty; returns its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        template = f" TEMPLATE {TEMPLATE}" if at_head else ""
        self._admin(f"CREATE DATABASE {name}{template}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        self._admin(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")

    def take_database(self) -> str:
        """An empty database at head: a recycled one (~10 ms) or a new one (~0.2 s)."""
        return self._pool.pop() if self._pool else self.create_database()

    def give_back(self, url: str) -> None:
        """Empty the database for the next test (ending connections left open); drop it if that fails."""
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                conn.execute("TRUNCATE kv")
                at = conn.execute("SELECT version_num FROM alembic_version").fetchall()
            if at == [(HEAD_REVISION,)]:
                self._pool.append(url)
                return
        except psycopg.Error:
            pass
        self.drop_database(url)

    def make_template(self) -> None:
        from lakectl.core.kv.postgres import PostgresStore

        self._admin(f"CREATE DATABASE {TEMPLATE}")
        PostgresStore(self.url(TEMPLATE)).close()


def _user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = (
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in PATH or "
            f"{', '.join(BIN_DIRS)}: run scripts/ensure-postgres.sh (make test does)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {reason}", pytrace=False)
        pytest.skip(f"SKIPPING THE POSTGRESQL TESTS: {reason}")
    server = PostgresServer(bin_dir)
    try:
        server.start()
        server.make_template()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """An empty database at the alembic head, for this test alone (emptied or dropped after it)."""
    url = postgres_server.take_database()
    try:
        yield url
    finally:
        postgres_server.give_back(url)
