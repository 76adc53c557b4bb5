"""The journal under killed processes: writers, a committer, a merger and a sealer run on one
embedded lake while the test SIGKILLs them at random points and starts them again. Afterwards:
every acknowledged mutation is in the sealed journal, every sealed entry describes a mutation
that happened, and every mutation that happened is in the journal (a killed writer's open intent
is recovered: docs/decisions/0009-journal.md); logical timestamps are 1..N.

Workers acknowledge a mutation by a line in their own file, written and flushed once the verb
returned; a line cut by the kill has no newline and does not count.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import random
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakectl.core import changes, listing, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.journal import journal, rebuild
from lakectl.core.lake import Lake
from lakectl.errors import LakectlError, ObjectNotFound
from server.auth.secret import journal_seal

REPO = "killed"
SECRET = "killed-server-secret"
"""The servers' auth secret: their users' journal entries are verified with its key."""
RUN_S = 8.0
MAX_RUN_S = 60.0
ENOUGH_WRITES = 50
"""On a loaded machine, the run goes on (up to this) until every kind was acknowledged."""
SPAWN_GRACE_S = 1.5


def _ack(out: str, name: str) -> Any:
    return open(Path(out, f"ack-{name}.txt"), "a", buffering=1)


def _writer(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    ack = _ack(out, name)
    for n in range(10**9):
        path = f"{name}/{n:06d}"
        try:
            writes.upload(lake, REPO, "dev", path, f"{name} {n}".encode())
        except LakectlError:
            continue
        ack.write(f"write {path}\n")


def _written_by_writer(path: str) -> bytes:
    """What :func:`_writer` uploaded at ``path``."""
    name, n = path.split("/")
    return f"{name} {int(n)}".encode()


def _committer(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    ack = _ack(out, name)
    while True:
        try:
            made = p.commit(lake, REPO, "dev", f"by {name}")
        except LakectlError:
            time.sleep(0.01)
            continue
        ack.write(f"commit {made.id}\n")


def _merger(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    ack = _ack(out, name)
    while True:
        try:
            merged = merging.merge(lake, REPO, "dev", "main")
        except LakectlError:
            time.sleep(0.01)
            continue
        if merged.changed:
            ack.write(f"merge {merged.commit.id}\n")
        time.sleep(0.02)


def _sealer(home: str, out: str, name: str) -> None:
    lake = opening.open_lake(home)
    while True:
        with contextlib.suppress(LakectlError):
            journal.seal(lake.kv, lake.blocks)
        time.sleep(0.05)


ROLES: dict[str, Callable[[str, str, str], None]] = {
    "writer": _writer,
    "committer": _committer,
    "merger": _merger,
    "sealer": _sealer,
}


def _acked(out: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for f in sorted(out.glob("ack-*.txt")):
        lines = f.read_text().split("\n")
        for line in lines[:-1]:
            kind, _, what = line.partition(" ")
            found.append((kind, what))
    return found


def _all_kinds(out: Path) -> bool:
    return {kind for kind, _ in _acked(out)} >= {"write", "commit", "merge"}


def _writes(out: Path) -> int:
    return sum(1 for kind, _ in _acked(out) if kind == "write")


def _reachable(lake: Lake, ref: str) -> set[str]:
    return {c.id for c in changes.log(lake, REPO, ref)}


@pytest.mark.slow
def test_killed_writers_committers_mergers_and_sealers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "killer")
    home, out = str(tmp_path / "lake"), tmp_path / "acks"
    out.mkdir()
    lake = opening.open_lake(home)
    journal.enable(lake)
    p.create_repo(lake, REPO)
    p.create_branch(lake, REPO, "dev", "main")
    lake.close()

    ctx = multiprocessing.get_context("spawn")
    rng = random.Random(int(os.environ.get("LAKECTL_KILL_SEED", "12")))
    born = 0

    def start(role: str) -> Any:
        nonlocal born
        born += 1
        proc = ctx.Process(target=ROLES[role], args=(home, str(out), f"{role}{born}"), daemon=True)
        proc.start()
        return proc

    workers = {("writer", 1): start("writer"), ("writer", 2): start("writer")}
    workers |= {(role, 1): start(role) for role in ("committer", "merger", "sealer")}
    time.sleep(SPAWN_GRACE_S)
    kills = 0
    began = time.monotonic()
    try:
        # At least RUN_S, and on a loaded machine until every kind of mutation was acknowledged.
        while time.monotonic() < began + RUN_S or (
            not (_all_kinds(out) and _writes(out) > ENOUGH_WRITES) and time.monotonic() < began + MAX_RUN_S
        ):
            time.sleep(rng.uniform(0.1, 0.6))
            slot = rng.choice(sorted(workers))
            workers[slot].kill()  # SIGKILL: wherever it is, between intent, CAS and outcome
            workers[slot].join()
            kills += 1
            workers[slot] = start(slot[0])
    finally:
        for proc in workers.values():
            proc.kill()
            proc.join()

    # The database lost with the last of them: the blocks as they left them, rebuilt alone.
    lost = tmp_path / "lost"
    shutil.copytree(Path(home) / "blocks", lost / "blocks")
    lake = opening.open_lake(home)
    acked = _acked(out)
    assert kills >= 8 and _writes(out) > ENOUGH_WRITES
    check(lake, acked)
    lake.close()
    rebuild.rebuild_embedded(str(lost))
    rebuilt = opening.open_lake(str(lost))
    try:
        _check_rebuilt(rebuilt, acked, _written_by_writer)
        on_main = {c.id for c in changes.log(rebuilt, REPO, "main")}
        assert {m for kind, m in acked if kind == "merge"} <= on_main | {
            c.id for c in changes.log(rebuilt, REPO, "dev")
        }
    finally:
        rebuilt.close()


def check(lake: Lake, acked: list[tuple[str, str]]) -> None:
    """Seal what is done; every acknowledged mutation is in the journal, every entry happened."""
    while journal.seal(lake.kv, lake.blocks):
        pass
    entries = list(journal.entries(lake.kv, lake.blocks))
    assert {kind for kind, _ in acked} >= {"write", "commit", "merge"}

    # Logical timestamps: 1..N, each once, in order.
    assert [e.logical_timestamp for e in entries] == list(range(1, len(entries) + 1))

    rows = [row for e in entries if e.event_type == "write-objects" for row in e.event_payload["rows"]]
    written = {path: row for path, row in rows}
    # A write redone into the next token (a commit took the first) is journaled again with every
    # token it went to; when a sealer sealed the first attempt's entry before the redo, both stay.
    # Any other path in two entries is a write journaled twice.
    attempts: dict[str, list[list[str]]] = {}
    for e in entries:
        if e.event_type == "write-objects":
            for path, _ in e.event_payload["rows"]:
                attempts.setdefault(path, []).append(e.event_payload["tokens"])
    redone = {
        path
        for path, tokens in attempts.items()
        if len(tokens) > 1
        and all(t[: len(s)] == s and len(t) > len(s) for s, t in itertools.pairwise(tokens))
    }
    twice = {path for path, n in Counter(path for path, _ in rows).items() if n > 1} - redone
    assert not twice, [  # each write once; else which entries hold it
        (
            e.logical_timestamp,
            e.time,
            sorted(set(e.event_payload) - {"rows"}),
            [r[0] for r in e.event_payload["rows"]][:3],
        )
        for e in entries
        if e.event_type == "write-objects" and twice & {path for path, _ in e.event_payload["rows"]}
    ]
    commits = {e.event_payload["commit_id"] for e in entries if e.event_type == "commit"}
    merges = {e.event_payload["commit_id"] for e in entries if e.event_type == "merge"}
    # A merge with nothing to merge answers main's head: a merge, or the repository's first commit.
    merges_or_first = merges | {
        e.event_payload["commit_id"] for e in entries if e.event_type == "create-repository"
    }
    # No acknowledged mutation is missing.
    for kind, what in acked:
        assert what in {"write": written, "commit": commits, "merge": merges_or_first}[kind], (kind, what)

    # No entry describes a mutation that did not happen.
    on_dev, on_main = _reachable(lake, "dev"), _reachable(lake, "main")
    assert commits <= on_dev and merges <= on_main
    held = set(p.get_branch(lake, REPO, "dev").tokens)
    acked_writes = {what for kind, what in acked if kind == "write"}
    for path, row in written.items():
        assert row is not None
        try:
            assert p.stat(lake, REPO, "dev", path).entry.checksum == row[1], path  # type: ignore[union-attr]
        except ObjectNotFound:
            # Written into a token that a commit had read already, by a writer killed before it
            # wrote it again into the next token (as a living writer does): the write happened,
            # never acknowledged, and went with the token the commit dropped, as the journal says.
            assert path not in acked_writes and attempts[path][-1][-1] not in held, path

    # Nor did any change happen that the journal lacks: what a writer killed between its change
    # and its outcome did was decided from the lake (recovery, on the seals above).
    first = {e.event_payload["commit_id"] for e in entries if e.event_type == "create-repository"}
    assert {o.path for o in listing.list_objects(lake, REPO, "dev")} <= set(written)
    assert on_dev - first <= commits
    assert {c.id for c in changes.log(lake, REPO, "main") if len(c.parents) > 1} <= merges


# -- two server processes on PostgreSQL, killed and restarted under HTTP clients ---------------


def _http_worker(role: str, urls: list[str], auth: tuple[str, str], out: Path, stop: threading.Event) -> None:
    """Mutate through a random server; a 2xx answer is the acknowledgement (a dead server's
    connection error is not)."""
    rng = random.Random(role)
    with open(out / f"ack-{role}.txt", "a", buffering=1) as ack:
        for n in range(10**9):
            if stop.is_set():
                return
            base = f"{rng.choice(urls)}/repositories/{REPO}"
            try:
                if role.startswith("writer"):
                    path = f"{role}/{n:06d}"
                    r = httpx.post(
                        f"{base}/branches/dev/objects",
                        params={"path": path},
                        content=path.encode(),
                        auth=auth,
                    )
                    if r.status_code == 201:
                        ack.write(f"write {path}\n")
                elif role.startswith("committer"):
                    r = httpx.post(f"{base}/branches/dev/commits", json={"message": role}, auth=auth)
                    if r.status_code == 201:
                        ack.write(f"commit {r.json()['id']}\n")
                else:
                    r = httpx.post(f"{base}/refs/dev/merge/main", json={}, auth=auth)
                    if r.status_code == 200:
                        ack.write(f"merge {r.json()['reference']}\n")
            except httpx.TransportError:
                time.sleep(0.05)  # the server was killed: nothing acknowledged


@pytest.mark.slow
def test_two_killed_servers_on_postgres(tmp_path: Path, pg_url: str) -> None:
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.kv.postgres import PostgresStore
    from tests.integration.test_two_servers import _start, _stop, _wait_healthy

    blocks = tmp_path / "blocks"
    out = tmp_path / "acks"
    out.mkdir()
    # The lake, switched to journalling before either server opens it.
    lake = Lake(kv=PostgresStore(pg_url), blocks=LocalAdapter(str(blocks)))
    journal.enable(lake)
    p.create_repo(lake, REPO)
    p.create_branch(lake, REPO, "dev", "main")
    lake.close()
    servers = [_start(f"s{i}", tmp_path, pg_url, blocks) for i in range(2)]
    _wait_healthy(servers, tmp_path)
    creds = httpx.post(f"{servers[0][1]}/setup_lakefs", json={"username": "admin"}).json()
    auth = (creds["access_key_id"], creds["secret_access_key"])
    urls = [url for _, url in servers]

    stop = threading.Event()
    roles = ["writer1", "writer2", "committer1", "merger1"]
    threads = [threading.Thread(target=_http_worker, args=(r, urls, auth, out, stop)) for r in roles]
    for t in threads:
        t.start()
    rng = random.Random(7)
    kills = 0
    try:
        start = time.monotonic()
        while time.monotonic() < MAX_RUN_S + start and (
            time.monotonic() < start + RUN_S or kills < 4 or not _all_kinds(out) or _writes(out) <= 20
        ):
            time.sleep(rng.uniform(0.3, 1.0))
            i = rng.randrange(2)
            servers[i][0].kill()  # SIGKILL mid-request: between intent, CAS and outcome
            servers[i][0].wait()
            kills += 1
            # The same port again, so that clients find it back.
            port = urls[i].split(":")[2].split("/")[0]
            servers[i] = _restart(tmp_path, i, port)
            _wait_healthy([servers[i]], tmp_path)
    finally:
        stop.set()
        for t in threads:
            t.join()
        for proc, _ in servers:
            _stop(proc)

    acked = _acked(out)
    assert kills >= 4 and sum(1 for kind, _ in acked if kind == "write") > 20
    lake = Lake(kv=PostgresStore(pg_url), blocks=LocalAdapter(str(blocks)))
    check(lake, acked)
    assert {e.client_id for e in journal.entries(lake.kv, lake.blocks) if e.event_type == "merge"} == {
        "admin"
    }
    lake.close()


def _restart(tmp: Path, i: int, port: str) -> tuple[subprocess.Popen[bytes], str]:
    """Server ``s<i>`` again, from the configuration its first start wrote."""
    from tests.integration.test_two_servers import _lakectl

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    with open(tmp / f"s{i}.log", "ab") as log:
        proc = subprocess.Popen(
            [*_lakectl(), "server", "run", "--config", str(tmp / f"s{i}.yaml")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return proc, f"http://127.0.0.1:{port}/api/v1"


# -- a server killed with its metadata database lost: every acknowledged change rebuilt --------


def _server_conf(tmp: Path, name: str, database: str, blocks: Path) -> tuple[Path, str]:
    from tests.integration.test_two_servers import server_conf

    return server_conf(tmp, name, database, blocks, SECRET)


def _serve(tmp: Path, name: str, conf: Path) -> subprocess.Popen[bytes]:
    from tests.integration.test_two_servers import _lakectl

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    with open(tmp / f"{name}.log", "ab") as log:
        return subprocess.Popen(
            [*_lakectl(), "server", "run", "--config", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _write_until_killed(tmp: Path, proc: subprocess.Popen[bytes], url: str) -> list[tuple[str, str]]:
    """Journal on, a repository with a branch, then two uploaders and a committer against the
    server until it is SIGKILLed mid-stream; what it acknowledged (a 201), as (kind, what)."""
    from tests.integration.test_two_servers import _wait_healthy

    _wait_healthy([(proc, url)], tmp)
    creds = httpx.post(f"{url}/setup_lakefs", json={"username": "admin"}).json()
    auth = (creds["access_key_id"], creds["secret_access_key"])
    with httpx.Client(base_url=url, auth=auth, timeout=30.0) as api:
        api.post("/journal/enable").raise_for_status()
        api.post(
            "/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"}
        ).raise_for_status()
        api.post(f"/repositories/{REPO}/branches", json={"name": "dev", "source": "main"}).raise_for_status()
    acked: list[tuple[str, str]] = []
    stop = threading.Event()

    def work(role: str) -> None:
        with httpx.Client(base_url=f"{url}/repositories/{REPO}", auth=auth, timeout=30.0) as c:
            for n in itertools.count():
                if stop.is_set():
                    return
                try:
                    if role == "committer":
                        r = c.post("/branches/dev/commits", json={"message": f"c{n}"})
                        if r.status_code == 201:
                            acked.append(("commit", r.json()["id"]))
                    else:
                        path = f"{role}/{n:06d}"
                        r = c.post("/branches/dev/objects", params={"path": path}, content=path.encode())
                        if r.status_code == 201:
                            acked.append(("write", path))
                except httpx.TransportError:
                    return  # the server is gone: nothing more is acknowledged

    threads = [threading.Thread(target=work, args=(role,)) for role in ("w1", "w2", "w3", "committer")]
    for t in threads:
        t.start()
    # Kill once writes flow, and only mid-second: the last seal is well behind the last answers.
    deadline = time.monotonic() + MAX_RUN_S
    while not (sum(k == "commit" for k, _ in acked) >= 10 and sum(k == "write" for k, _ in acked) >= 100):
        assert time.monotonic() < deadline and proc.poll() is None, "the writers made no progress"
        time.sleep(0.05)
    time.sleep(0.5)
    proc.kill()  # SIGKILL: no shutdown, no last seal
    proc.wait()
    stop.set()
    for t in threads:
        t.join()
    return list(acked)


def _check_rebuilt(
    lake: Lake, acked: list[tuple[str, str]], content: Callable[[str], bytes] = str.encode
) -> None:
    """Every acknowledged upload is on dev with its bytes, every acknowledged commit in its log."""
    on_dev = {c.id for c in changes.log(lake, REPO, "dev")}
    missing_commits = [c for kind, c in acked if kind == "commit" and c not in on_dev]
    listed = {o.path for o in listing.list_objects(lake, REPO, "dev")}
    missing_writes = [w for kind, w in acked if kind == "write" and w not in listed]
    assert not missing_commits and not missing_writes, (
        f"{len(missing_commits)} of {sum(k == 'commit' for k, _ in acked)} acknowledged commits and "
        f"{len(missing_writes)} of {sum(k == 'write' for k, _ in acked)} uploads missing after the rebuild"
    )
    for kind, path in acked[:: max(1, len(acked) // 50)]:
        if kind == "write":
            assert b"".join(p.read(lake, REPO, "dev", path)) == content(path)


@pytest.mark.slow
def test_a_killed_server_loses_no_acknowledged_change_with_its_database(tmp_path: Path) -> None:
    """kill -9 of a server on SQLite under writers, lake.db lost, ``lakectl admin rebuild
    --from-journal``: every commit and upload the server acknowledged is rebuilt."""
    from tests.integration.test_two_servers import _lakectl

    home = tmp_path / "s0"
    conf, url = _server_conf(tmp_path, "s0", "{type: sqlite}", home / "blocks")
    acked = _write_until_killed(tmp_path, _serve(tmp_path, "s0", conf), url)
    for lost in ("lake.db", "lake.db-wal", "lake.db-shm"):
        with contextlib.suppress(FileNotFoundError):
            (home / lost).unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    done = subprocess.run(
        [*_lakectl(), "admin", "rebuild", "--from-journal", "--server-config", str(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lake = opening.open_lake(str(home))
    try:
        _check_rebuilt(lake, acked)
    finally:
        lake.close()


@pytest.mark.slow
def test_a_killed_server_on_postgres_loses_no_acknowledged_change(tmp_path: Path, pg_url: str) -> None:
    """The same on a server whose metadata is in PostgreSQL: the database is lost with the
    server, and the lake is rebuilt from the block directory alone."""
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.kv.sqlite import SQLiteStore

    blocks = tmp_path / "blocks"
    conf, url = _server_conf(tmp_path, "s0", f"{{type: postgres, connection_string: '{pg_url}'}}", blocks)
    acked = _write_until_killed(tmp_path, _serve(tmp_path, "s0", conf), url)
    kv = SQLiteStore(str(tmp_path / "rebuilt.db"))
    lake = Lake(kv=kv, blocks=LocalAdapter(str(blocks)))
    try:
        rebuild.rebuild(lake.blocks, kv, journal_seal(SECRET))
        _check_rebuilt(lake, acked)
    finally:
        lake.close()
