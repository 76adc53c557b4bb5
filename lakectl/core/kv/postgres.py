"""PostgreSQL KV store on psycopg 3; alembic brings the schema to head on open, under an advisory lock.

The table is the one of ``migrations/`` (``key`` is ``TEXT COLLATE "C"``, so ``ORDER BY key`` is
code-point order whatever the database's locale). PostgreSQL text cannot hold NUL, so keys and
partitions are stored through an order-preserving escape (see :func:`escape`). This is the only
module that imports ``psycopg``; its errors leave it as :class:`~lakectl.errors.StorageError`.
See docs/decisions/0004-postgres.md.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo

from lakectl.core.kv import Then
from lakectl.core.kv.sqlite import HEAD_REVISION, alembic_config
from lakectl.errors import InvalidArgument, KeyNotFound, PredicateFailed, StorageError

SCAN_PAGE = 5_000
"""Rows per scan query: each page is its own statement (and snapshot), so a scan holds nothing open."""

BATCH_ROWS = 10_000
"""Rows per statement in ``set_many``/``delete_many`` (all statements of a call share one transaction)."""

CONNECT_TIMEOUT_S = 10
"""Seconds to wait for the server when the URL does not say (``connect_timeout=``)."""

MIGRATION_LOCK = 0x6C616B65_6B76_0001
"""Advisory lock key taken around ``alembic upgrade``: concurrent first opens migrate one at a time."""

_GET = "SELECT value FROM kv WHERE partition = %s AND key = %s"
_SCAN_FROM = "SELECT key, value FROM kv WHERE partition = %s AND key >= %s ORDER BY key LIMIT %s"
_SCAN_AFTER = "SELECT key, value FROM kv WHERE partition = %s AND key > %s ORDER BY key LIMIT %s"
_UPSERT = (
    "INSERT INTO kv (partition, key, value) VALUES (%s, %s, %s)"
    " ON CONFLICT (partition, key) DO UPDATE SET value = EXCLUDED.value"
)
_UPSERT_MANY = (
    "INSERT INTO kv (partition, key, value)"
    " SELECT %s, k, v FROM unnest(%s::text[], %s::bytea[]) AS t (k, v)"
    " ON CONFLICT (partition, key) DO UPDATE SET value = EXCLUDED.value"
)
_INSERT_NEW = (
    "INSERT INTO kv (partition, key, value) VALUES (%s, %s, %s) ON CONFLICT (partition, key) DO NOTHING"
)
_UPDATE_IF = "UPDATE kv SET value = %s WHERE partition = %s AND key = %s AND value = %s"
_DELETE = "DELETE FROM kv WHERE partition = %s AND key = %s"
_DELETE_MANY = "DELETE FROM kv WHERE partition = %s AND key = ANY(%s::text[])"
_DROP = "DELETE FROM kv WHERE partition = %s"
_NEXT_PARTITION_FROM = "SELECT partition FROM kv WHERE partition >= %s ORDER BY partition LIMIT 1"
_NEXT_PARTITION_AFTER = "SELECT partition FROM kv WHERE partition > %s ORDER BY partition LIMIT 1"
_VERSION = "SELECT version_num FROM alembic_version"


# -- keys: PostgreSQL text cannot contain NUL -------------------------------------------------

_ESCAPES = str.maketrans({"\x00": "\x01\x01", "\x01": "\x01\x02"})
_ESCAPED = re.compile("\x01([\x01\x02])")


def escape(s: str) -> str:
    """Map ``s`` to a NUL-free string, preserving code-point order and equality.

    U+0000 becomes U+0001 U+0001 and U+0001 becomes U+0001 U+0002; every other character is
    itself. Both escapes sort below any other character, in the order of what they stand for,
    so comparing escaped strings compares the originals. Keys without U+0000/U+0001 (all real
    ones) are stored as they are.
    """
    return s.translate(_ESCAPES) if "\x00" in s or "\x01" in s else s


def unescape(s: str) -> str:
    """The inverse of :func:`escape`."""
    if "\x01" not in s:
        return s
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "\x01" else "\x01", s)


def redact(url: str) -> str:
    """The URL without its password, for messages and error details."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class PostgresStore:
    """A :class:`~lakectl.core.kv.KVStore` (and ``BatchWriter``) in a PostgreSQL database.

    ``url`` is any libpq connection string (``postgresql://user:pw@host:5432/db?sslmode=...``).
    One autocommit connection per thread and per process; compare-and-swap is one conditional
    statement, so any number of processes may share the database.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redact(url)
        try:
            params = pg_conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise InvalidArgument(f"invalid PostgreSQL URL {self.where!r}", url=self.where) from e
        params.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        params.setdefault("application_name", "lakectl")
        self._conninfo = pg_conninfo.make_conninfo("", **params)
        self._local = threading.local()
        self._all: list[tuple[int, psycopg.Connection[Any]]] = []
        self._all_lock = threading.Lock()
        self._closed = False
        try:
            at_head = self._schema_version() == HEAD_REVISION
            if not at_head:
                self._upgrade_to_head()
        except BaseException:
            self.close()
            raise

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            raise self._error(e) from e

    def _conn(self) -> psycopg.Connection[Any]:
        # Per thread: a connection runs one statement at a time. Per process: a connection
        # inherited through fork shares its socket with the parent and must not be used.
        local = self._local
        conn: psycopg.Connection[Any] | None = getattr(local, "conn", None)
        pid = os.getpid()
        if conn is not None and local.pid == pid and not conn.closed:
            return conn
        if self._closed:
            raise StorageError("the KV store is closed", url=self.where)
        # A connection the server dropped (restart, idle timeout) is replaced on next use.
        conn = self._connect()
        local.conn = conn
        local.pid = pid
        with self._all_lock:
            self._all.append((pid, conn))
        return conn

    def _run(self, sql: str, params: tuple[Any, ...]) -> psycopg.Cursor[Any]:
        """Execute one statement (its own transaction); results are fetched before it returns."""
        try:
            return self._conn().execute(sql, params)
        except psycopg.Error as e:
            raise self._error(e) from e

    def _error(self, e: psycopg.Error) -> StorageError:
        return StorageError(f"PostgreSQL error on {self.where!r}: {e}", url=self.where)

    # -- the protocol --------------------------------------------------------------------------

    def get(self, partition: str, key: str) -> bytes:
        row = self._run(_GET, (escape(partition), escape(key))).fetchone()
        if row is None:
            raise KeyNotFound(f"no key {key!r} in partition {partition!r}", partition=partition, key=key)
        value: bytes = row[0]
        return value

    def partitions(self, prefix: str) -> list[str]:
        """One index probe per partition (a loose index scan), however many keys each holds."""
        found: list[str] = []
        query, bound = _NEXT_PARTITION_FROM, escape(prefix)
        while True:
            row = self._run(query, (bound,)).fetchone()
            if row is None or not unescape(row[0]).startswith(prefix):
                return found
            found.append(unescape(row[0]))
            query, bound = _NEXT_PARTITION_AFTER, row[0]

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        part = escape(partition)
        query, bound, left = _SCAN_FROM, escape(start), limit
        while True:
            page = SCAN_PAGE if left is None else min(left, SCAN_PAGE)
            rows: list[tuple[str, bytes]] = self._run(query, (part, bound, page)).fetchall()
            for key, value in rows:
                yield unescape(key), value
            left = None if left is None else left - len(rows)
            if len(rows) < page or left == 0:
                return
            query, bound = _SCAN_AFTER, rows[-1][0]

    def set(self, partition: str, key: str, value: bytes) -> None:
        self._run(_UPSERT, (escape(partition), escape(key), value))

    def delete(self, partition: str, key: str) -> None:
        self._run(_DELETE, (escape(partition), escape(key)))

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        # One statement, so the compare and the swap cannot be split: an UPDATE that waited
        # for a concurrent writer re-checks its WHERE on the row that writer left, and of two
        # racing INSERTs the second finds the conflict. rowcount says whether the predicate held.
        # With ``then``, one transaction holds the statement and the rows.
        part, k = escape(partition), escape(key)
        swap: tuple[str, tuple[Any, ...]] = (
            (_INSERT_NEW, (part, k, value)) if expected is None else (_UPDATE_IF, (value, part, k, expected))
        )
        if then is None:
            held = self._run(*swap).rowcount == 1
        else:
            held = self._swap_then(swap, then)
        if not held:
            raise PredicateFailed(
                f"value of {key!r} in partition {partition!r} changed",
                partition=partition,
                key=key,
            )

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
        self._local = threading.local()
        pid = os.getpid()
        for owner, conn in conns:
            if owner == pid:  # closing a parent's connection would end it for the parent too
                conn.close()

    # -- BatchWriter ---------------------------------------------------------------------------

    def set_many(self, partition: str, items: list[tuple[str, bytes]], then: Then = None) -> None:
        self._in_transaction(
            _UPSERT_MANY,
            _upserts([(partition, k, v) for k, v in items]),
            (lambda: _upserts(then())) if then is not None else None,
        )

    def delete_many(self, partition: str, keys: list[str]) -> None:
        part = escape(partition)
        ordered = sorted({escape(k) for k in keys})
        self._in_transaction(_DELETE_MANY, [(part, chunk) for chunk in _chunks(ordered, BATCH_ROWS)])

    def drop_partition(self, partition: str) -> None:
        self._run(_DROP, (escape(partition),))

    def _swap_then(
        self, swap: tuple[str, tuple[Any, ...]], then: Callable[[], Sequence[tuple[str, str, bytes]]]
    ) -> bool:
        """Run the compare-and-swap statement and, if it held, upsert the rows ``then`` returns,
        in one transaction; whether it held (if not, the transaction stored nothing)."""
        conn = self._conn()
        try:
            with conn.transaction():
                if conn.execute(*swap).rowcount != 1:
                    return False
                for params in _upserts(then()):
                    conn.execute(_UPSERT_MANY, params)
                return True
        except psycopg.Error as e:
            raise self._error(e) from e

    def _in_transaction(
        self,
        sql: str,
        batches: list[tuple[Any, ...]],
        then: Callable[[], list[tuple[Any, ...]]] | None = None,
    ) -> None:
        if not batches and then is None:
            return
        conn = self._conn()
        try:
            with conn.transaction():
                for params in batches:
                    conn.execute(sql, params)
                for params in then() if then is not None else ():
                    conn.execute(sql, params)
        except psycopg.Error as e:
            raise self._error(e) from e

    # -- schema --------------------------------------------------------------------------------

    def _schema_version(self) -> str | None:
        """The revision stamped in ``alembic_version``; None for a database alembic never ran on."""
        try:
            row = self._conn().execute(_VERSION).fetchone()
        except psycopg.errors.UndefinedTable:
            return None
        except psycopg.Error as e:
            raise self._error(e) from e
        return None if row is None else str(row[0])

    def _upgrade_to_head(self) -> None:
        """Run ``alembic upgrade head`` in one transaction that holds :data:`MIGRATION_LOCK`.

        PostgreSQL DDL is transactional: a concurrent first open waits on the lock, then finds
        the schema at head and does nothing. Imports are local: this is the slow path, taken once
        per database.
        """
        from alembic import command
        from sqlalchemy import create_engine
        from sqlalchemy.exc import SQLAlchemyError
        from sqlalchemy.pool import NullPool

        conninfo = self._conninfo
        # The creator makes SQLAlchemy connect exactly as the store does, whatever form the URL has.
        engine = create_engine(
            "postgresql+psycopg://", poolclass=NullPool, creator=lambda: psycopg.connect(conninfo)
        )
        cfg = alembic_config()
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except (SQLAlchemyError, psycopg.Error) as e:
            raise StorageError(
                f"cannot migrate {self.where!r} to {HEAD_REVISION}: {e}", url=self.where
            ) from e
        finally:
            engine.dispose()


Params = list[tuple[Any, ...]]


def _upserts(rows: Iterable[tuple[str, str, bytes]]) -> Params:
    """The statements' parameters that upsert ``(partition, key, value)`` rows: one row per key
    (the last value wins, as if set one by one: a single INSERT may not touch a row twice), in
    partition and key order, so that concurrent batches lock rows in the same order and cannot
    deadlock."""
    by_partition: dict[str, dict[str, bytes]] = {}
    for name, key, value in rows:
        by_partition.setdefault(name, {})[escape(key)] = value
    batches: Params = []
    for name in sorted(by_partition):
        ordered = sorted(by_partition[name].items(), key=itemgetter(0))
        part = escape(name)
        batches.extend(
            (part, [k for k, _ in chunk], [v for _, v in chunk]) for chunk in _chunks(ordered, BATCH_ROWS)
        )
    return batches


def _chunks(seq: list[Any], n: int) -> Iterator[list[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]
