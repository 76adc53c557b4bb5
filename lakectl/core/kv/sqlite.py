"""SQLite KV store on the stdlib ``sqlite3`` module; alembic brings the schema to head on open.

Why not SQLAlchemy here: see docs/decisions/0001-sqlite-driver-on-stdlib.md. This is the only
module that imports ``sqlite3``; its errors leave it as :class:`~lakectl.errors.StorageError`.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from lakectl.core.kv import Then
from lakectl.errors import KeyNotFound, PredicateFailed, StorageError

if TYPE_CHECKING:
    from alembic.config import Config

HEAD_REVISION = "0001"
"""The alembic head this code expects; a test checks it against ``migrations/versions``."""

BUSY_TIMEOUT_S = 30.0
"""How long a writer waits for another process's write transaction before giving up."""

SCAN_PAGE = 5_000
"""Rows per scan query: each page is its own short read, so a long scan never pins the WAL."""

WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes the WAL file is truncated to after a checkpoint."""

_GET = "SELECT value FROM kv WHERE partition = ? AND key = ?"
_SCAN_FROM = "SELECT key, value FROM kv WHERE partition = ? AND key >= ? ORDER BY key LIMIT ?"
_SCAN_AFTER = "SELECT key, value FROM kv WHERE partition = ? AND key > ? ORDER BY key LIMIT ?"
_NEXT_PARTITION_FROM = "SELECT partition FROM kv WHERE partition >= ? ORDER BY partition LIMIT 1"
_NEXT_PARTITION_AFTER = "SELECT partition FROM kv WHERE partition > ? ORDER BY partition LIMIT 1"
_UPSERT = (
    "INSERT INTO kv (partition, key, value) VALUES (?, ?, ?)"
    " ON CONFLICT (partition, key) DO UPDATE SET value = excluded.value"
)
_INSERT_NEW = (
    "INSERT INTO kv (partition, key, value) VALUES (?, ?, ?) ON CONFLICT (partition, key) DO NOTHING"
)
_UPDATE_IF = "UPDATE kv SET value = ? WHERE partition = ? AND key = ? AND value = ?"
_DELETE = "DELETE FROM kv WHERE partition = ? AND key = ?"


class SQLiteStore:
    """A :class:`~lakectl.core.kv.KVStore` (and ``BatchWriter``) in one SQLite file.

    Safe to share between threads (one connection per thread) and between processes (WAL,
    busy timeout, compare-and-swap done by single conditional statements).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._writing = (os.getpid(), threading.Lock())
        """Held around every write of this process, all on one connection (:meth:`_writer`)."""
        self._write_conn: tuple[int, sqlite3.Connection] | None = None
        self._closed = False
        directory = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create directory {directory!r}: {e}", path=path) from e
        conn = self._conn()
        try:
            # WAL is a property of the file; set it outside any transaction, before migrating.
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            at_head = _schema_version(conn) == HEAD_REVISION
        except sqlite3.Error as e:
            self.close()
            raise _storage_error(e, path) from e
        if not at_head:
            try:
                _upgrade_to_head(os.path.abspath(path))
            except BaseException:
                self.close()
                raise

    def _conn(self) -> sqlite3.Connection:
        # One connection per thread and per process for reads: sqlite3 connections must not be
        # shared between threads mid-transaction, nor survive a fork.
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        pid = os.getpid()
        if conn is not None and local.pid == pid:
            return conn
        local.conn = conn = self._connect()
        local.pid = pid
        return conn

    def _writer(self) -> sqlite3.Connection:
        """The connection every write of this process goes through, under :meth:`_turn`.

        Threads writing on their own connections meet on SQLite's write lock, whose busy
        handler sleeps 1, 2, 5 ... 100 ms between looks, and each connection's page cache is
        invalidated by every other's commit, so that each write transaction re-reads its pages:
        a server's eight request threads spent 0.4-0.7 ms of CPU per extra write. One writing
        connection keeps its cache, and threads queue on a mutex instead. Other processes'
        writers still wait on the busy timeout."""
        found = self._write_conn
        if found is None or found[0] != os.getpid():
            found = self._write_conn = (os.getpid(), self._connect())
        return found[1]

    def _turn(self) -> threading.Lock:
        """This process's write mutex (a child forked while a thread of its parent held the
        parent's gets its own)."""
        if self._writing[0] != os.getpid():
            self._writing = (os.getpid(), threading.Lock())
        return self._writing[1]

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StorageError("the KV store is closed", path=self.path)
        try:
            # isolation_level=None: autocommit, so reads never hold a transaction open and
            # the transactions below are exactly the BEGIN ... COMMIT we write.
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            # NORMAL in WAL mode: a crash may lose the last commits but never corrupts the file;
            # FULL would cost an fsync per commit (~6x fewer commits per second here).
            conn.execute("PRAGMA synchronous = NORMAL")
            # A million-row batch grows the WAL to hundreds of MB; shrink it after checkpoints.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e
        with self._all_lock:
            self._all.append(conn)
        return conn

    def get(self, partition: str, key: str) -> bytes:
        try:
            row = self._conn().execute(_GET, (partition, key)).fetchone()
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e
        if row is None:
            raise KeyNotFound(f"no key {key!r} in partition {partition!r}", partition=partition, key=key)
        value: bytes = row[0]
        return value

    def partitions(self, prefix: str) -> list[str]:
        """One index probe per partition (a loose index scan), however many keys each holds."""
        found: list[str] = []
        query, bound = _NEXT_PARTITION_FROM, prefix
        while True:
            try:
                row = self._conn().execute(query, (bound,)).fetchone()
            except sqlite3.Error as e:
                raise _storage_error(e, self.path) from e
            if row is None or not row[0].startswith(prefix):
                return found
            found.append(row[0])
            query, bound = _NEXT_PARTITION_AFTER, row[0]

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        query, bound, left = _SCAN_FROM, start, limit
        while True:
            page = SCAN_PAGE if left is None else min(left, SCAN_PAGE)
            try:
                rows: list[tuple[str, bytes]] = (
                    self._conn().execute(query, (partition, bound, page)).fetchall()
                )
            except sqlite3.Error as e:
                raise _storage_error(e, self.path) from e
            yield from rows
            left = None if left is None else left - len(rows)
            if len(rows) < page or left == 0:
                return
            query, bound = _SCAN_AFTER, rows[-1][0]

    def set(self, partition: str, key: str, value: bytes) -> None:
        try:
            with self._turn():
                self._writer().execute(_UPSERT, (partition, key, value))
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e

    def delete(self, partition: str, key: str) -> None:
        try:
            with self._turn():
                self._writer().execute(_DELETE, (partition, key))
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        # One statement is one atomic write transaction, so the compare and the swap cannot
        # be split by another process; rowcount says whether the predicate held. With ``then``,
        # one explicit transaction holds the statement and the rows.
        swap: tuple[str, tuple[Any, ...]] = (
            (_INSERT_NEW, (partition, key, value))
            if expected is None
            else (_UPDATE_IF, (value, partition, key, expected))
        )
        try:
            with self._turn():
                conn = self._writer()
                held = conn.execute(*swap).rowcount == 1 if then is None else _swap_then(conn, swap, then)
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e
        if not held:
            raise PredicateFailed(
                f"value of {key!r} in partition {partition!r} changed",
                partition=partition,
                key=key,
            )

    def set_many(self, partition: str, items: list[tuple[str, bytes]], then: Then = None) -> None:
        # Key order makes the inserts append to the B-tree (several times faster than random
        # order); the sort is stable, so the last value of a repeated key still wins.
        ordered = sorted(items, key=itemgetter(0))
        self._in_transaction(_UPSERT, ((partition, k, v) for k, v in ordered), then)

    def delete_many(self, partition: str, keys: list[str]) -> None:
        self._in_transaction(_DELETE, ((partition, k) for k in sorted(keys)))

    def drop_partition(self, partition: str) -> None:
        try:
            # One statement in autocommit mode: one transaction, no Python loop over keys.
            with self._turn():
                self._writer().execute("DELETE FROM kv WHERE partition = ?", (partition,))
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e

    def _in_transaction(self, sql: str, rows: Iterator[tuple[Any, ...]], then: Then = None) -> None:
        try:
            with self._turn():
                conn = self._writer()
                # IMMEDIATE takes the write lock up front (waiting out other writers), instead
                # of failing halfway when a deferred transaction tries to upgrade its lock.
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, rows)
                    if then is not None:
                        conn.executemany(_UPSERT, then())
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # some errors already rolled it back
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as e:
            raise _storage_error(e, self.path) from e

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
            self._write_conn = None
        self._local = threading.local()
        for conn in conns:
            conn.close()


def _swap_then(
    conn: sqlite3.Connection,
    swap: tuple[str, tuple[Any, ...]],
    then: Callable[[], Sequence[tuple[str, str, bytes]]],
) -> bool:
    """Run the compare-and-swap statement and, if it held, store the rows ``then`` returns, in
    one transaction (IMMEDIATE: the write lock up front); whether it held."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        held = conn.execute(*swap).rowcount == 1
        if held:
            conn.executemany(_UPSERT, then())
        conn.execute("COMMIT" if held else "ROLLBACK")
        return held
    except BaseException:
        if conn.in_transaction:  # some errors already rolled it back
            conn.execute("ROLLBACK")
        raise


def _storage_error(e: sqlite3.Error, path: str) -> StorageError:
    return StorageError(f"SQLite error on {path!r}: {e}", path=path)


def _schema_version(conn: sqlite3.Connection) -> str | None:
    """The revision stamped in ``alembic_version``, or None for a database alembic never ran on."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if exists is None:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else str(row[0])


def migrations_dir() -> str:
    """The directory of the ``migrations`` package, installed or in a source checkout."""
    spec = importlib.util.find_spec("migrations")
    if spec is None or not spec.submodule_search_locations:
        raise StorageError("the 'migrations' package is not installed")
    return str(next(iter(spec.submodule_search_locations)))


def alembic_config() -> Config:
    """An alembic configuration built in code, so no alembic.ini has to be found at run time."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", migrations_dir())
    cfg.set_main_option("path_separator", "os")
    return cfg


def _upgrade_to_head(path: str) -> None:
    """Run ``alembic upgrade head`` on the file, serialised across processes.

    Everything happens in one ``BEGIN IMMEDIATE`` transaction (SQLite DDL is transactional):
    concurrent first opens queue on the write lock, and the ones that come second find the
    schema at head and do nothing. Imports are local: this is the slow path, taken once.
    """
    from alembic import command
    from sqlalchemy import create_engine, event
    from sqlalchemy.engine import URL
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    engine = create_engine(
        URL.create("sqlite", database=path),
        poolclass=NullPool,
        connect_args={"timeout": BUSY_TIMEOUT_S},
    )

    # SQLAlchemy's documented recipe for real SQLite transactions: stop pysqlite's implicit
    # BEGIN and emit our own, IMMEDIATE, so the version check and the DDL are one critical
    # section.
    @event.listens_for(engine, "connect")
    def _autocommit(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    cfg = alembic_config()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except (SQLAlchemyError, sqlite3.Error) as e:
        raise StorageError(f"cannot migrate {path!r} to {HEAD_REVISION}: {e}", path=path) from e
    finally:
        engine.dispose()
