"""The KV conformance suite: every driver, same behaviour; then what only the SQLite or the
PostgreSQL driver adds. PostgreSQL runs on a real server (tests/pg.py), an empty database per test."""

from __future__ import annotations

import os
import random
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakectl.core.kv import KVStore, Then
from lakectl.core.kv import helpers as kvh
from lakectl.core.kv import postgres as pg
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.kv.postgres import PostgresStore
from lakectl.core.kv.retry import RetryPolicy
from lakectl.core.kv.sqlite import HEAD_REVISION, SCAN_PAGE, SQLiteStore, migrations_dir
from lakectl.core.kv.stores import open_store
from lakectl.errors import (
    InvalidArgument,
    KeyNotFound,
    PredicateFailed,
    StorageError,
    TooManyRetries,
)
from tests.pg import PostgresServer

REPO_ROOT = Path(__file__).resolve().parents[2]

# Code-point order = UTF-8 byte order, which differs from UTF-16 order (U+FB01 < U+1F600 here,
# the other way round in UTF-16) and from any locale collation ("B" < "a", "é" after "z").
# U+0000 and U+0001 are escaped by the PostgreSQL driver (text cannot hold NUL); order must survive.
UNICODE_KEYS = ["", "B", "a", "a/b", "a-b", "a0", "z", "é", "ÿ", "Ā", "中", "\ufb01", "😀", "a\x00"]
UNICODE_KEYS += ["\x00", "\x01", "\x02", "a\x01", "a\x00\x01", "a\x01\x00", "a\x01\x01", "a\x02"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KVStore]:
    """A fresh, empty store of each driver: every test above the driver-only parts runs on all."""
    s: KVStore
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "lake.db"))
    else:  # requested only here, so that memory and SQLite runs never wait for a server
        s = PostgresStore(request.getfixturevalue("pg_url"))
    try:
        yield s
    finally:
        s.close()


def _all(store: KVStore, partition: str, start: str = "") -> list[tuple[str, bytes]]:
    return list(store.scan(partition, start))


def _fill(store: KVStore, partition: str, n: int) -> list[str]:
    keys = [f"data/part-{i:06d}/file.parquet" for i in range(n)]
    kvh.set_many(store, partition, [(k, k.encode()) for k in keys])
    return keys


# --- the five methods --------------------------------------------------------------------


def test_drivers_satisfy_the_protocol(store: KVStore) -> None:
    assert isinstance(store, KVStore)


def test_get_of_an_absent_key_raises_key_not_found(store: KVStore) -> None:
    with pytest.raises(KeyNotFound):
        store.get("p", "nope")


def test_set_get_overwrite_and_empty_value(store: KVStore) -> None:
    store.set("p", "k", b"one")
    assert store.get("p", "k") == b"one"
    store.set("p", "k", b"two")
    assert store.get("p", "k") == b"two"
    store.set("p", "empty", b"")
    assert store.get("p", "empty") == b""
    assert isinstance(store.get("p", "empty"), bytes)
    store.set("p", "bin", bytes(range(256)))
    assert store.get("p", "bin") == bytes(range(256))


def test_delete_and_delete_of_an_absent_key(store: KVStore) -> None:
    store.set("p", "k", b"v")
    store.delete("p", "k")
    with pytest.raises(KeyNotFound):
        store.get("p", "k")
    store.delete("p", "k")
    store.delete("never", "k")
    assert _all(store, "p") == []


def test_scan_is_in_utf8_byte_order(store: KVStore) -> None:
    shuffled = UNICODE_KEYS[:]
    random.Random(7).shuffle(shuffled)
    for k in shuffled:
        store.set("p", k, k.encode())
    expected = sorted(UNICODE_KEYS, key=lambda k: k.encode("utf-8"))
    assert [k for k, _ in store.scan("p")] == expected
    assert all(v == k.encode() for k, v in store.scan("p"))


def test_scan_start_is_inclusive(store: KVStore) -> None:
    for k in ["a", "b", "c", "d"]:
        store.set("p", k, b"")
    assert [k for k, _ in store.scan("p", "b")] == ["b", "c", "d"]
    assert [k for k, _ in store.scan("p", "bb")] == ["c", "d"]
    assert [k for k, _ in store.scan("p", "e")] == []
    assert _all(store, "empty") == []


def test_partitions_are_isolated(store: KVStore) -> None:
    store.set("p", "k", b"p")
    store.set("p2", "k", b"p2")
    store.set("q", "j", b"q")
    assert store.get("p", "k") == b"p"
    assert _all(store, "p") == [("k", b"p")]
    store.delete("p", "k")
    assert store.get("p2", "k") == b"p2"
    assert _all(store, "p") == []
    assert _all(store, "q") == [("j", b"q")]


def test_scan_crosses_page_boundaries(store: KVStore) -> None:
    n = 2 * SCAN_PAGE + 345
    keys = _fill(store, "p", n)
    assert [k for k, _ in store.scan("p")] == keys
    middle = keys[SCAN_PAGE - 1]
    assert [k for k, _ in store.scan("p", middle)] == keys[SCAN_PAGE - 1 :]


def test_a_scan_with_a_limit_yields_at_most_that_many(store: KVStore, small_pages: int) -> None:
    keys = _fill(store, "p", 3 * small_pages + 5)
    assert [k for k, _ in store.scan("p", keys[4], limit=1)] == [keys[4]]
    assert [k for k, _ in store.scan("p", keys[1], limit=2 * small_pages + 3)] == keys[
        1 : 2 * small_pages + 4
    ]
    assert [k for k, _ in store.scan("p", keys[-3], limit=10)] == keys[-3:]
    assert [k for k, _ in store.scan("p", "", limit=len(keys))] == keys


SMALL_PAGE = 97


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Scan pages of :data:`SMALL_PAGE` rows in every driver: many page boundaries, few rows."""
    from lakectl.core.kv import memory, sqlite

    for module, name in ((memory, "_PAGE"), (sqlite, "SCAN_PAGE"), (pg, "SCAN_PAGE")):
        monkeypatch.setattr(module, name, SMALL_PAGE)
    return SMALL_PAGE


def test_writes_during_a_scan_do_not_break_it(store: KVStore, small_pages: int) -> None:
    n = 10 * small_pages + 10
    keys = _fill(store, "p", n)
    rng = random.Random(1)
    deleted: set[str] = set()
    seen: list[str] = []
    for key, _ in store.scan("p"):
        seen.append(key)
        store.delete("p", key)  # behind the cursor
        ahead = keys[rng.randrange(n)]
        if ahead > key:  # ahead of it: may or may not be seen, depending on the page
            store.delete("p", ahead)
            deleted.add(ahead)
        store.set("p", key + "~new", b"")  # inserted just after the cursor
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert {k for k in keys if k not in deleted} <= set(seen)


def test_set_if_none_means_must_not_exist(store: KVStore) -> None:
    store.set_if("p", "k", b"first", None)
    assert store.get("p", "k") == b"first"
    with pytest.raises(PredicateFailed):
        store.set_if("p", "k", b"second", None)
    assert store.get("p", "k") == b"first"


def test_set_if_swaps_only_on_a_match(store: KVStore) -> None:
    store.set("p", "k", b"v1")
    store.set_if("p", "k", b"v2", b"v1")
    assert store.get("p", "k") == b"v2"
    with pytest.raises(PredicateFailed):
        store.set_if("p", "k", b"v3", b"v1")
    assert store.get("p", "k") == b"v2"
    store.set_if("p", "k", b"v2", b"v2")  # same value: still a successful swap
    with pytest.raises(PredicateFailed):
        store.set_if("p", "absent", b"x", b"v2")
    with pytest.raises(KeyNotFound):
        store.get("p", "absent")
    with pytest.raises(PredicateFailed):
        store.set_if("other", "k", b"x", b"v2")  # same key, other partition


@pytest.mark.parametrize("expected", [None, b"old"])
def test_set_if_stores_the_rows_then_gives_with_the_swap_or_nothing(
    store: KVStore, expected: bytes | None
) -> None:
    """The rows ``then`` returns (an append's journal entry) land in the swap's transaction when
    its predicate holds, in any partition, and neither they nor the value when it does not."""
    if expected is not None:
        store.set("p", "k", expected)
    store.set_if("p", "k", b"new", expected, lambda: [("log", "e1", b"entry"), ("p", "other", b"o")])
    assert store.get("p", "k") == b"new"
    assert _all(store, "log") == [("e1", b"entry")]
    assert store.get("p", "other") == b"o"
    with pytest.raises(PredicateFailed):
        store.set_if("p", "k", b"newer", expected, lambda: [("log", "e2", b"entry")])
    assert store.get("p", "k") == b"new"
    assert _all(store, "log") == [("e1", b"entry")]


def test_set_if_distinguishes_empty_from_absent(store: KVStore) -> None:
    with pytest.raises(PredicateFailed):
        store.set_if("p", "k", b"x", b"")
    store.set("p", "k", b"")
    with pytest.raises(PredicateFailed):
        store.set_if("p", "k", b"x", None)
    store.set_if("p", "k", b"x", b"")
    assert store.get("p", "k") == b"x"


# --- batches and helpers ---------------------------------------------------------------


def test_set_many_and_delete_many(store: KVStore) -> None:
    kvh.set_many(store, "p", [("b", b"1"), ("a", b"2"), ("b", b"3")])  # last value wins
    assert _all(store, "p") == [("a", b"2"), ("b", b"3")]
    kvh.delete_many(store, "p", ["b", "absent"])
    assert _all(store, "p") == [("a", b"2")]
    kvh.set_many(store, "p", [])
    kvh.delete_many(store, "p", [])
    assert _all(store, "p") == [("a", b"2")]


def test_set_many_stores_what_then_returns_last_in_the_same_transaction(store: KVStore) -> None:
    calls: list[int] = []

    def then() -> list[tuple[str, str, bytes]]:
        calls.append(1)
        return [("journal", "e1", b"entry"), ("staging", "x", b"1"), ("staging", "k", b"then's")]

    kvh.set_many(store, "staging", [("k", b"row")], then)
    assert calls == [1]
    assert _all(store, "staging") == [("k", b"then's"), ("x", b"1")]  # stored after the batch
    assert _all(store, "journal") == [("e1", b"entry")]
    if isinstance(store, MemoryStore):
        return  # the in-memory store offers no transactions to roll back

    def failing() -> list[tuple[str, str, bytes]]:
        raise RuntimeError("the entry cannot be made")

    with pytest.raises(RuntimeError):
        kvh.set_many(store, "staging", [("k2", b"row")], failing)
    with pytest.raises(Exception):  # noqa: B017 - the driver's own error for a value it cannot store
        kvh.set_many(store, "staging", [("k3", b"row")], lambda: [("journal", "e2", object())])  # type: ignore[list-item]
    assert _all(store, "staging") == [("k", b"then's"), ("x", b"1")]
    assert _all(store, "journal") == [("e1", b"entry")]


def test_scan_prefix(store: KVStore) -> None:
    for k in ["a", "a/", "a/b", "a/c/d", "a0", "a-b", "b/x", "é/1", "é/2", "éa"]:
        store.set("p", k, b"")
    assert [k for k, _ in kvh.scan_prefix(store, "p", "a/")] == ["a/", "a/b", "a/c/d"]
    assert [k for k, _ in kvh.scan_prefix(store, "p", "é/")] == ["é/1", "é/2"]
    assert [k for k, _ in kvh.scan_prefix(store, "p", "zz")] == []
    assert len(list(kvh.scan_prefix(store, "p", ""))) == 10


def test_drop_partition(store: KVStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvh, "DROP_CHUNK", 7)
    _fill(store, "p", 50)
    store.set("other", "k", b"v")
    kvh.drop_partition(store, "p")
    assert _all(store, "p") == []
    assert _all(store, "other") == [("k", b"v")]


def test_partitions_by_prefix_only_non_empty_in_order(store: KVStore) -> None:
    for name in ("staging/r/t2", "staging/r/t1", "staging/r2/t9", "staging/r/\x00odd", "repo/r"):
        _fill(store, name, 3)
    store.set("staging/r/gone", "k", b"v")
    store.delete("staging/r/gone", "k")
    kvh.drop_partition(store, "staging/r2/t9")
    assert kvh.partitions(store, "staging/r/") == ["staging/r/\x00odd", "staging/r/t1", "staging/r/t2"]
    assert kvh.partitions(store, "staging/") == ["staging/r/\x00odd", "staging/r/t1", "staging/r/t2"]
    assert kvh.partitions(store, "") == ["repo/r", "staging/r/\x00odd", "staging/r/t1", "staging/r/t2"]
    assert kvh.partitions(store, "nothing/") == []


def _incr(old: bytes | None) -> bytes:
    return str(int(old or b"0") + 1).encode()


def test_update_with_retries_creates_then_updates(store: KVStore) -> None:
    assert kvh.update_with_retries(store, "p", "n", _incr) == b"1"
    assert kvh.update_with_retries(store, "p", "n", _incr) == b"2"
    assert store.get("p", "n") == b"2"


def test_update_with_retries_gives_up(store: KVStore) -> None:
    calls = 0

    def always_raced(old: bytes | None) -> bytes:
        nonlocal calls
        calls += 1
        store.set("p", "n", f"other-{calls}".encode())  # a writer that always wins
        return b"mine"

    with pytest.raises(TooManyRetries):
        kvh.update_with_retries(store, "p", "n", always_raced, RetryPolicy(attempts=3))
    assert calls == 3
    assert store.get("p", "n") == b"other-3"


CONTENDED = RetryPolicy(attempts=200, base_delay=0.0005, max_delay=0.2)
"""Every thread or process hammers one key: enough attempts that none gives up."""


def test_compare_and_swap_from_worker_threads(store: KVStore) -> None:
    def work() -> None:
        for _ in range(50):
            kvh.update_with_retries(store, "p", "n", _incr, CONTENDED)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert store.get("p", "n") == b"200"


class _ProtocolOnly:
    """A store with the five methods and nothing else: exercises the helpers' fallbacks."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def get(self, partition: str, key: str) -> bytes:
        return self._inner.get(partition, key)

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        return self._inner.scan(partition, start, limit)

    def set(self, partition: str, key: str, value: bytes) -> None:
        self._inner.set(partition, key, value)

    def delete(self, partition: str, key: str) -> None:
        self._inner.delete(partition, key)

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        self._inner.set_if(partition, key, value, expected, then)

    def close(self) -> None:
        self._inner.close()


def test_helpers_fall_back_to_the_protocol() -> None:
    store = _ProtocolOnly()
    assert isinstance(store, KVStore)
    kvh.set_many(store, "p", [(f"k{i}", b"v") for i in range(5)])
    kvh.delete_many(store, "p", ["k0", "k1"])
    assert [k for k, _ in store.scan("p")] == ["k2", "k3", "k4"]
    kvh.drop_partition(store, "p")
    assert list(store.scan("p")) == []


def test_open_store_by_url(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), MemoryStore)
    s = open_store(f"sqlite:///{tmp_path}/lake.db")
    assert isinstance(s, SQLiteStore)
    s.close()
    with pytest.raises(InvalidArgument):
        open_store("mysql://nope")


# --- SQLite only -------------------------------------------------------------------------


def _db_state(path: Path) -> tuple[list[str], list[tuple[str]]]:
    conn = sqlite3.connect(path)
    try:
        ddl = [r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'kv'")]
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        return ddl, version
    finally:
        conn.close()


def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "deep" / "er" / "lake.db")  # missing directories are created
    s = SQLiteStore(path)
    kvh.set_many(s, "p", [("a", b"1"), ("b", b"2")])
    s.close()
    with pytest.raises(StorageError):
        s.get("p", "a")  # closed
    s = SQLiteStore(path)
    assert list(s.scan("p")) == [("a", b"1"), ("b", b"2")]
    s.close()


def test_sqlite_head_revision_is_the_alembic_head() -> None:
    from alembic.script import ScriptDirectory

    assert ScriptDirectory(migrations_dir()).get_current_head() == HEAD_REVISION


def test_sqlite_migrates_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "lake.db"
    path.touch()
    SQLiteStore(str(path)).close()
    ddl, version = _db_state(path)
    assert "WITHOUT ROWID" in ddl[0]
    assert version == [(HEAD_REVISION,)]


def test_sqlite_adopts_a_kv_table_older_than_alembic(tmp_path: Path) -> None:
    path = tmp_path / "lake.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE kv (partition TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (partition, key)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO kv VALUES ('p', 'k', x'01')")
    conn.commit()
    conn.close()
    s = SQLiteStore(str(path))
    assert s.get("p", "k") == b"\x01"
    s.close()
    assert _db_state(path)[1] == [(HEAD_REVISION,)]


def test_sqlite_open_at_head_stays_off_sqlalchemy(tmp_path: Path) -> None:
    path = str(tmp_path / "lake.db")
    SQLiteStore(path).close()
    code = (
        "import sys; from lakectl.core.kv.sqlite import SQLiteStore;"
        f"SQLiteStore({path!r}).close();"
        "sys.exit(any(m in sys.modules for m in ('sqlalchemy', 'alembic')))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def test_sqlite_schema_by_hand_with_the_alembic_cli(tmp_path: Path) -> None:
    path = tmp_path / "lake.db"
    subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url=sqlite:///{path}", "upgrade", "head"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    ddl, version = _db_state(path)
    assert "WITHOUT ROWID" in ddl[0] and version == [(HEAD_REVISION,)]
    s = SQLiteStore(str(path))
    s.set("p", "k", b"v")
    s.close()


def test_sqlite_unusable_paths_raise_storage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_bytes(b"not a directory")
    with pytest.raises(StorageError):
        SQLiteStore(str(a_file / "lake.db"))
    with pytest.raises(StorageError):
        SQLiteStore(str(tmp_path))  # a directory
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(StorageError) as info:
        SQLiteStore(str(garbage))
    assert isinstance(info.value.__cause__, sqlite3.Error)


# --- across processes (SQLite and PostgreSQL) ---------------------------------------------

_CHILD = """
import sys
from lakectl.core.kv.stores import open_store
from lakectl.core.kv.helpers import update_with_retries
from lakectl.core.kv.retry import RetryPolicy

store = open_store(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
incr = lambda old: str(int(old or b"0") + 1).encode()
for _ in range(int(sys.argv[2])):
    update_with_retries(store, "p", "counter", incr, RetryPolicy(200, 0.0005, 0.2))
store.close()
"""


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store nobody opened yet: a missing SQLite file, an empty PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lake.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    url = server.create_database(at_head=False)
    try:
        yield url
    finally:
        server.drop_database(url)


def race(scripts: list[list[str]]) -> None:
    """Run each ``[script, *args]`` in a process of its own, all released at once once every one
    has opened the store; each must exit 0 within a bounded time (a livelock fails here)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for argv in scripts
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.wait(timeout=60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_compare_and_swap_across_processes(fresh_url: str) -> None:
    race([[_CHILD, fresh_url, "50"] for _ in range(4)])  # also racing to create and migrate
    store = open_store(fresh_url)
    assert store.get("p", "counter") == b"200"
    store.close()


_CLOCKED = """
import sys, time
from lakectl.core.kv.stores import open_store
from lakectl.core.kv.helpers import set_many

store = open_store(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
me = sys.argv[3]
for i in range(int(sys.argv[2])):
    value = f"{me}-{i}".encode()
    then = lambda value=value: [("clocks", value.decode(), str(time.time_ns()).encode())]
    set_many(store, "staging", [("shared", value), (f"own-{me}-{i % 7}", value)], then)
store.close()
"""


def test_a_clock_read_in_then_orders_the_batches_that_wrote_one_key_as_they_landed(fresh_url: str) -> None:
    """What a rebuild of the journal relies on (docs/decisions/0009-journal.md): of the batches
    of four processes that all set one key, the one whose ``then`` read the latest clock is the
    one whose value the key holds."""
    store = open_store(fresh_url)  # created and migrated before the race
    store.close()
    race([[_CLOCKED, fresh_url, "40", str(n)] for n in range(4)])
    store = open_store(fresh_url)
    try:
        clocks = {key: int(value) for key, value in store.scan("clocks")}
        assert len(clocks) == 160
        assert store.get("staging", "shared").decode() == max(clocks, key=clocks.__getitem__)
    finally:
        store.close()


# --- PostgreSQL only ---------------------------------------------------------------------


def _pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF) | st.sampled_from("\x00\x01\x02")))
def test_postgres_key_escape_round_trips_without_nul(s: str) -> None:
    escaped = pg.escape(s)
    assert "\x00" not in escaped
    assert pg.unescape(escaped) == s


@given(st.lists(st.text(alphabet="\x00\x01\x02a\U0001f600", max_size=6), min_size=2, max_size=8))
def test_postgres_key_escape_preserves_code_point_order(keys: list[str]) -> None:
    assert sorted(keys, key=pg.escape) == sorted(keys)
    assert len({pg.escape(k) for k in keys}) == len(set(keys))


def test_postgres_open_store_by_url(pg_url: str) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        s = open_store(url)
        assert isinstance(s, PostgresStore)
        s.set("p", "k", b"v")
        s.close()
        with pytest.raises(StorageError):
            s.get("p", "k")  # closed


def test_postgres_migrates_an_empty_database(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database(at_head=False)
    try:
        PostgresStore(url).close()
        assert _pg_rows(url, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
        collations = _pg_rows(
            url,
            "SELECT column_name, collation_name FROM information_schema.columns"
            " WHERE table_name = 'kv' AND data_type = 'text' ORDER BY column_name",
        )
        assert collations == [("key", "C"), ("partition", "C")]
        # The server's own default collation is not byte order: the column's is what counts.
        assert _pg_rows(url, "SELECT 'B' < 'a'") == [(False,)]
    finally:
        postgres_server.drop_database(url)


def test_postgres_open_at_head_stays_off_sqlalchemy(pg_url: str) -> None:
    code = (
        "import sys; from lakectl.core.kv.postgres import PostgresStore;"
        f"PostgresStore({pg_url!r}).close();"
        "sys.exit(any(m in sys.modules for m in ('sqlalchemy', 'alembic')))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def test_postgres_reconnects_after_the_server_drops_the_connection(pg_url: str) -> None:
    s = PostgresStore(pg_url)
    try:
        s.set("p", "k", b"v")
        _pg_rows(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'lakectl'",
        )
        with pytest.raises(StorageError) as info:
            s.get("p", "k")
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert s.get("p", "k") == b"v"  # the next call has a new connection
    finally:
        s.close()


def test_postgres_errors_are_storage_errors_without_the_password(
    postgres_server: PostgresServer,
) -> None:
    with pytest.raises(InvalidArgument) as bad:
        PostgresStore("postgresql://u:s3cret@h/x?bogus=1")
    assert "s3cret" not in str(bad.value)
    refused = f"postgresql://u:s3cret@127.0.0.1:{_closed_port()}/db?connect_timeout=2"
    with pytest.raises(StorageError) as info:
        PostgresStore(refused)
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert "s3cret" not in str(info.value) and "s3cret" not in repr(info.value.details)
    with pytest.raises(StorageError):
        PostgresStore(postgres_server.url("no_such_database"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
