"""Rebuild from the journal after concurrent writers: three writers (overwriting and deleting a few
shared paths, and writing their own), a committer and a merger run as processes on one embedded
lake with the journal on; then the journal is sealed, the lake's state is taken, the metadata
database is deleted and ``lakectl admin rebuild --from-journal`` builds a new one from the blocks.
Every repository, branch head, tag, reachable commit, staged row (as stored) and byte is the
original's (docs/decisions/0009-journal.md, "Concurrent writers").

The same again through a server: five writers (mostly on two shared paths), a committer and a
merger as HTTP clients of one server process (its requests run concurrently in its thread pool),
and the rebuild of its lake; on SQLite and on PostgreSQL.

Workers stop when asked (the committer and the merger first, so that writes are left staged),
between two verbs: a verb cut in the middle is the kill test's business
(tests/integration/test_journal_kill.py), and what it leaves is not sealed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.errors import LakectlError
from server.auth.secret import journal_seal, load_secret_key
from server.config import Settings, load_settings
from tests.integration.test_two_servers import _lakectl
from tests.pg import PostgresServer
from tests.property.test_journal_rebuild import state
from tests.server.conftest import Live, serve

REPO = "racing"
RUN_S = 5.0
"""How long the workers race once all of them are running: at least."""
MAX_RUN_S = 60.0
"""On a loaded machine they race on (up to this) until each kind of work was done enough."""
WRITE_ON_S = 0.5
"""How long the writers go on once the committer and the merger stopped."""
START_S = 60.0
STOP_S = 60.0
"""Hard limits: for every worker to start, and to stop once asked."""
SHARED = [f"shared/{i}" for i in range(6)]


def _stopping(out: str, role: str = "writer") -> bool:
    return os.path.exists(os.path.join(out, f"stop-{role}"))


def _started(out: str, name: str) -> None:
    Path(out, f"started-{name}").touch()


def _count(out: str, name: str, counts: dict[str, int]) -> None:
    """``counts`` so far, replaced whole: the race reads them as it goes."""
    done = Path(out, f"counts-{name}.tmp")
    done.write_text(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    os.replace(done, Path(out, f"counts-{name}.txt"))


def _writer(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    rng = random.Random(name)
    counts = {"write": 0, "delete": 0}
    _started(out, name)
    n = 0
    while not _stopping(out):
        n += 1
        roll = rng.random()
        try:
            if roll < 0.7:  # the same few paths as the other writers: same-key races
                writes.upload(lake, REPO, "dev", rng.choice(SHARED), f"{name} {n}".encode())
                counts["write"] += 1
            elif roll < 0.85:
                counts["delete"] += len(writes.delete_existing(lake, REPO, "dev", [rng.choice(SHARED)]))
            else:
                writes.upload(lake, REPO, "dev", f"{name}/{n:06d}", f"{name} {n}".encode())
                counts["write"] += 1
        except LakectlError:
            continue
        if n % 10 == 0:
            _count(out, name, counts)
    _count(out, name, counts)
    lake.close()


def _committer(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    counts = {"commit": 0}
    _started(out, name)
    while not _stopping(out, "mover"):
        try:
            p.commit(lake, REPO, "dev", f"by {name}")
            counts["commit"] += 1
            _count(out, name, counts)
        except LakectlError:
            time.sleep(0.01)
    _count(out, name, counts)
    lake.close()


def _merger(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    counts = {"merge": 0}
    _started(out, name)
    while not _stopping(out, "mover"):
        with contextlib.suppress(LakectlError):
            counts["merge"] += merging.merge(lake, REPO, "dev", "main").changed
        _count(out, name, counts)
        time.sleep(0.02)
    _count(out, name, counts)
    lake.close()


ROLES: dict[str, Callable[[str, str, str], None]] = {
    "writer1": _writer,
    "writer2": _writer,
    "writer3": _writer,
    "committer": _committer,
    "merger": _merger,
}


def _counts(out: Path) -> dict[str, int]:
    total: dict[str, int] = {}
    for f in out.glob("counts-*.txt"):
        for item in f.read_text().split():
            kind, _, value = item.partition("=")
            total[kind] = total.get(kind, 0) + int(value)
    return total


def _enough(done: dict[str, int], writes: int) -> bool:
    return done.get("write", 0) > writes and done.get("commit", 0) > 2 and done.get("merge", 0) > 0


def _race_on(done: Callable[[], dict[str, int]], writes: int) -> None:
    """:data:`RUN_S`, and on a loaded machine on until :func:`_enough` was ``done``."""
    began = time.monotonic()
    time.sleep(RUN_S)
    while not _enough(done(), writes) and time.monotonic() < began + MAX_RUN_S:
        time.sleep(0.1)


def _race(home: str, out: Path) -> dict[str, int]:
    """Run the workers for RUN_S (at least) once all have started; stop them; what they did."""
    ctx = multiprocessing.get_context("spawn")
    procs = {
        name: ctx.Process(target=fn, args=(home, str(out), name), daemon=True) for name, fn in ROLES.items()
    }
    writers = [proc for name, proc in procs.items() if name.startswith("writer")]
    movers = [proc for proc in procs.values() if proc not in writers]
    for proc in procs.values():
        proc.start()
    try:
        deadline = time.monotonic() + START_S
        while len(list(out.glob("started-*"))) < len(procs):
            assert time.monotonic() < deadline, "the workers did not start"
            assert all(proc.is_alive() for proc in procs.values()), "a worker died"
            time.sleep(0.05)
        _race_on(lambda: _counts(out), 50)
        # The committer and the merger first, so that the writers leave something staged.
        deadline = time.monotonic() + STOP_S
        (out / "stop-mover").touch()
        for proc in movers:
            proc.join(max(0.1, deadline - time.monotonic()))
        time.sleep(WRITE_ON_S)
        (out / "stop-writer").touch()
        for proc in writers:
            proc.join(max(0.1, deadline - time.monotonic()))
        assert all(proc.exitcode == 0 for proc in procs.values()), [proc.exitcode for proc in procs.values()]
    finally:
        for proc in procs.values():
            if proc.is_alive():
                proc.kill()
                proc.join()
    return _counts(out)


@pytest.mark.slow
def test_a_lake_written_concurrently_is_rebuilt_from_its_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "racer")
    home, out = tmp_path / "lake", tmp_path / "out"
    out.mkdir()
    lake = opening.open_lake(str(home))
    journal.enable(lake)
    p.create_repo(lake, REPO)
    p.create_branch(lake, REPO, "dev", "main")
    lake.close()

    done = _race(str(home), out)
    assert _enough(done, 50), done

    lake = opening.open_lake(str(home))
    while journal.seal(lake.kv, lake.blocks):
        pass
    expected = state(lake, dangling=False)
    entries = list(journal.entries(lake.kv, lake.blocks))
    lake.close()
    assert expected[REPO]["branch dev"][2], "nothing was left staged"

    for name in ("lake.db", "lake.db-wal", "lake.db-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(home / name)
    env = {
        **os.environ,
        "LAKECTL_HOME": str(home),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_BASE_URI": "",
    }
    rebuilt = subprocess.run(
        [*_lakectl(), "admin", "rebuild", "--from-journal", "--json"],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr.decode()

    kv = SQLiteStore(str(home / "lake.db"))
    try:
        fresh = Lake(kv=kv, blocks=LocalAdapter(str(home / "blocks")))
        assert state(fresh, dangling=False) == expected
        assert list(journal.entries(fresh.kv, fresh.blocks)) == entries
    finally:
        kv.close()


# -- the same through a server: concurrent HTTP clients, one server process -------------------


def _client_worker(server: Live, role: str, stop: threading.Event, counts: dict[str, int]) -> None:
    """A writer, committer or merger through the REST API until ``stop``; a 2xx is a success."""
    rng = random.Random(role)
    base = f"/repositories/{REPO}"
    with server.client((server.key_id, server.secret)) as api:
        n = 0
        while not stop.is_set():
            n += 1
            if role.startswith("writer"):
                # Two hot paths: one process's thread pool races less than processes do.
                path = rng.choice(SHARED[:2]) if rng.random() < 0.8 else f"{role}/{n:06d}"
                if rng.random() < 0.15:
                    ok = api.delete(f"{base}/branches/dev/objects", params={"path": path}).status_code == 204
                else:
                    put = api.post(
                        f"{base}/branches/dev/objects", params={"path": path}, content=f"{role} {n}"
                    )
                    ok = put.status_code == 201
            elif role == "committer":
                ok = api.post(f"{base}/branches/dev/commits", json={"message": role}).status_code == 201
                time.sleep(0.01)
            else:
                ok = api.post(f"{base}/refs/dev/merge/main", json={}).status_code == 200
                time.sleep(0.02)
            counts[role] = counts.get(role, 0) + ok


def _kinds(counts: dict[str, int]) -> dict[str, int]:
    """The clients' counts by role, as the processes' kinds of work."""
    roles = dict(counts)
    writes = sum(v for k, v in roles.items() if k.startswith("writer"))
    return {"write": writes, "commit": roles.get("committer", 0), "merge": roles.get("merger", 0)}


def _serve_race(settings: Any) -> dict[str, int]:
    """The clients' race against a server of ``settings`` with the journal on; what they did."""
    counts: dict[str, int] = {}
    with serve(settings) as server:
        with server.client((server.key_id, server.secret)) as api:
            assert api.post("/journal/enable").status_code == 200
            assert api.post("/repositories", json={"name": REPO, "storage_namespace": "local://r"}).is_success
            assert api.post(
                f"/repositories/{REPO}/branches", json={"name": "dev", "source": "main"}
            ).is_success
        roles = ["writer1", "writer2", "writer3", "writer4", "writer5", "committer", "merger"]
        stops = {role: threading.Event() for role in roles}
        threads = [
            threading.Thread(target=_client_worker, args=(server, role, stops[role], counts))
            for role in roles
        ]
        for t in threads:
            t.start()
        _race_on(lambda: _kinds(counts), 30)
        for role in ("committer", "merger"):  # first, so that the writers leave something staged
            stops[role].set()
        time.sleep(WRITE_ON_S)
        for stop in stops.values():
            stop.set()
        for t in threads:
            t.join(STOP_S)
        assert not any(t.is_alive() for t in threads)
    # The server closed its lake as it stopped: its writer sealed what it finished.
    assert _enough(_kinds(counts), 30), counts
    return counts


def _expected(lake: Lake) -> dict[str, Any]:
    assert journal.seal(lake.kv, lake.blocks) == 0
    expected = state(lake, dangling=False)
    lake.close()
    assert expected[REPO]["branch dev"][2], "nothing was left staged"
    return expected


@pytest.mark.slow
def test_a_lake_served_to_concurrent_clients_is_rebuilt_from_its_journal(tmp_path: Path) -> None:
    settings = load_settings(None, str(tmp_path / "server"), environ={})
    _serve_race(settings)
    home = Path(settings.data_dir)
    expected = _expected(
        Lake(kv=SQLiteStore(str(home / "lake.db")), blocks=LocalAdapter(str(home / "blocks")))
    )
    for name in ("lake.db", "lake.db-wal", "lake.db-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(home / name)
    rebuild.rebuild_sqlite(str(home / "lake.db"), LocalAdapter(str(home / "blocks")), _seal(settings))
    kv = SQLiteStore(str(home / "lake.db"))
    try:
        assert state(Lake(kv=kv, blocks=LocalAdapter(str(home / "blocks"))), dangling=False) == expected
    finally:
        kv.close()


def _seal(settings: Settings) -> bytes:
    """The key the server's users' journal entries are verified with (its secret's)."""
    return journal_seal(load_secret_key(settings.secret_key, settings.data_dir))


@pytest.mark.slow
def test_a_lake_on_postgresql_served_to_concurrent_clients_is_rebuilt_from_its_journal(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    from lakectl.core.kv.postgres import PostgresStore

    url, into = postgres_server.create_database(), postgres_server.create_database()
    try:
        env = {"LAKECTL_SERVER_DATABASE_TYPE": "postgres", "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": url}
        settings = load_settings(None, str(tmp_path / "server"), environ=env)
        _serve_race(settings)
        blocks = LocalAdapter(str(Path(settings.data_dir) / "blocks"))
        expected = _expected(Lake(kv=PostgresStore(url), blocks=blocks))
        # The database is lost: the lake is rebuilt into another one from the blocks alone.
        fresh = PostgresStore(into)
        try:
            rebuild.rebuild(blocks, fresh, _seal(settings))
            assert state(Lake(kv=fresh, blocks=blocks), dangling=False) == expected
        finally:
            fresh.close()
    finally:
        postgres_server.drop_database(url)
        postgres_server.drop_database(into)
