"""A server's auth records in the journal (``lakectl.core.journal.records``): each change of a key
under ``auth/`` is one entry holding the value as stored; a rebuild stores them again, the last of
a key winning and a deletion deleting; an entry naming any other partition is refused; compaction
keeps what a rebuild needs; a write whose writer died is decided by the value it left
(docs/decisions/0024-auth-records-in-the-journal.md)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.events import Event, Verb
from lakectl.core.journal import compact, journal, rebuild, records
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import partitions
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.errors import IntegrityError, InvalidArgument, PredicateFailed
from tests.unit.test_journal import journalled_lake  # noqa: F401 - the fixture `lake`
from tests.unit.test_journal_recovery import DiesAfterTheChange, DiesBeforeTheChange, die

USERS, KEYS = "auth/users", "auth/credentials"
SEAL = b"the key a server derives from its secret"


def journaled(lake: Lake) -> records.Journaled:
    """The store as a server's users write it (``server.auth.store.lake_auth``)."""
    return records.Journaled(lake.kv, lambda: lake.events, SEAL)


def auth_entries(lake: Lake) -> list[dict[str, Any]]:
    """The payloads of the journal's auth entries, their signatures checked and left out."""
    found = journal.tail(lake.kv, lake.blocks, amount=1000)
    payloads = [dict(e.event_payload) for e in found if e.event_type == Verb.AUTH.value]
    assert all(p.pop("mac") == records.signature(SEAL, p) for p in payloads)
    return payloads


def stored(kv: KVStore, prefix: str = "") -> dict[str, dict[str, bytes]]:
    """Every partition under ``prefix`` with its keys and values."""
    return {part: dict(kv.scan(part)) for part in partitions(kv, prefix) or []}


@contextmanager
def rebuilt(lake: Lake, tmp_path: Path, seal: bytes | None = SEAL) -> Iterator[SQLiteStore]:
    """A new database rebuilt from the lake's blocks alone, auth entries verified with ``seal``."""
    journal.flush(lake)
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh, seal)
        yield fresh
    finally:
        fresh.close()


def plant(lake: Lake, payload: dict[str, Any]) -> None:
    """An auth entry of ``payload`` in the journal, as a forged or damaged one would hold it."""
    sink = journal.find(lake.events)
    assert sink is not None
    event = Event(Verb.AUTH, "", payload=payload)
    sink.before(event)
    sink.after(event)


def signed(payload: dict[str, Any], seal: bytes = SEAL) -> dict[str, Any]:
    return {**payload, "mac": records.signature(seal, payload)}


def test_each_change_of_a_record_is_an_entry_with_the_value_as_stored(lake: Lake) -> None:
    kv = journaled(lake)
    kv.set(USERS, "ada", b'{"id": "ada"}')
    kv.set_if(USERS, "ada", b'{"id": "ada", "epoch": "2"}', b'{"id": "ada"}')
    with pytest.raises(PredicateFailed):
        kv.set_if(USERS, "ada", b"lost", b'{"id": "ada"}')  # refused: nothing changed, no entry
    kv.set(KEYS, "AKIA1", b"\xff\x00 not text")
    kv.delete(USERS, "ada")
    kv.set("ui/links", "t", b"1")  # not a record of the server's auth: not journalled
    kv.delete("ui/links", "t")
    assert auth_entries(lake) == [
        {"partition": USERS, "key": "ada", "value": '{"id": "ada"}'},
        {"partition": USERS, "key": "ada", "value": '{"id": "ada", "epoch": "2"}'},
        {"partition": KEYS, "key": "AKIA1", "value_base64": base64.b64encode(b"\xff\x00 not text").decode()},
        {"partition": USERS, "key": "ada", "value": None},
    ]
    entries = journal.tail(lake.kv, lake.blocks, amount=1000)
    assert {(e.event_type, e.repo_id, e.client_id) for e in entries} == {("auth", "", "ada")}
    assert lake.kv.get(KEYS, "AKIA1") == b"\xff\x00 not text"


def test_nothing_is_journalled_while_the_journal_is_off(lake: Lake) -> None:
    kv = journaled(lake)
    journal.disable(lake)
    kv.set(USERS, "off", b"1")
    journal.enable(lake)  # followed at the next write: the store asks the lake's events each time
    kv.set(USERS, "on", b"2")
    assert [e["key"] for e in auth_entries(lake)] == ["on"]


def test_a_rebuild_gives_back_every_record_as_it_was_last_written(lake: Lake, tmp_path: Path) -> None:
    kv = journaled(lake)
    kv.set("auth/meta", "setup", b"ada")
    kv.set(USERS, "ada", b"v1")
    p.create_repo(lake, "between")  # the lake's own entries interleave
    kv.set_if(USERS, "ada", b"v2", b"v1")
    kv.set(USERS, "gone", b"x")
    kv.set(KEYS, "AKIA-GONE", b"secret, encrypted")
    kv.delete(USERS, "gone")
    kv.delete(KEYS, "AKIA-GONE")
    kv.set("auth/revoked", "0" * 64, b"1900000000")
    kv.set("ui/ended", "cookie", b"1")
    with rebuilt(lake, tmp_path) as fresh:
        assert stored(fresh, "auth/") == stored(lake.kv, "auth/")
        assert stored(fresh, "auth/")[USERS] == {"ada": b"v2"}
        assert KEYS not in stored(fresh, "auth/")
        assert stored(fresh, "ui/") == {}
        assert [r.name for r in Lake(kv=fresh, blocks=lake.blocks).refs.list_repos()] == ["between"]


FORGED = ["repositories", "lake", "journal", "repo/between", "auth", "auth/", "authx/users", "", None]


@pytest.mark.parametrize("partition", FORGED)
def test_an_entry_naming_a_partition_outside_auth_is_refused(
    lake: Lake, tmp_path: Path, partition: str | None
) -> None:
    p.create_repo(lake, "between")
    forged = signed({"partition": partition, "key": "evil", "value": '{"name": "evil"}'})
    plant(lake, forged)
    with pytest.raises(IntegrityError, match="refused"), rebuilt(lake, tmp_path):
        pass
    fresh = SQLiteStore(str(tmp_path / "direct.db"))
    try:
        with pytest.raises(IntegrityError):
            records.replay(fresh, forged, SEAL)
        assert stored(fresh) == {}
    finally:
        fresh.close()


@pytest.mark.parametrize(
    "bad",
    [
        {"partition": USERS, "key": "", "value": "x"},
        {"partition": USERS, "key": "k", "value": 3},
        {"partition": USERS, "key": "k", "value": "x", "value_base64": "eA=="},
        {"partition": USERS, "key": "k", "value_base64": "not base64!"},
    ],
)
def test_a_damaged_record_is_refused_and_writes_nothing(tmp_path: Path, bad: dict[str, Any]) -> None:
    fresh = SQLiteStore(str(tmp_path / "direct.db"))
    try:
        with pytest.raises(IntegrityError):
            records.replay(fresh, signed(bad), SEAL)
        assert stored(fresh) == {}
    finally:
        fresh.close()


def test_compaction_keeps_the_last_record_of_each_key_and_a_rebuild_still_gives_them_back(
    lake: Lake, tmp_path: Path
) -> None:
    kv = journaled(lake)
    kv.set(USERS, "ada", b"v1")
    kv.set_if(USERS, "ada", b"v2", b"v1")
    kv.set(USERS, "bob", b"b1")
    kv.set(KEYS, "AKIA-GONE", b"k")
    kv.delete(KEYS, "AKIA-GONE")
    kv.set("auth/revoked", "t1", b"1")
    kv.delete("auth/revoked", "t1")
    kv.set("auth/revoked", "t1", b"2")  # the same key again, after its deletion
    done = compact.compact(lake.kv, lake.blocks)
    assert done["dropped"] == 5
    assert auth_entries(lake) == [
        {"partition": USERS, "key": "ada", "value": "v2"},
        {"partition": USERS, "key": "bob", "value": "b1"},
        {"partition": "auth/revoked", "key": "t1", "value": "2"},
    ]
    with rebuilt(lake, tmp_path) as fresh:
        assert stored(fresh, "auth/") == stored(lake.kv, "auth/") != {}


def test_a_record_whose_writer_died_after_writing_it_is_journalled(lake: Lake, tmp_path: Path) -> None:
    die(lake, DiesAfterTheChange, lambda lake: journaled(lake).set(USERS, "ada", b"landed"))
    journal.seal(lake.kv, lake.blocks)  # recovery decides the dead writer's intent
    assert auth_entries(lake) == [{"partition": USERS, "key": "ada", "value": "landed"}]
    with rebuilt(lake, tmp_path) as fresh:
        assert stored(fresh, "auth/") == {USERS: {"ada": b"landed"}}


def test_a_record_whose_writer_died_before_writing_it_is_journalled_as_it_is(
    lake: Lake, tmp_path: Path
) -> None:
    kv = journaled(lake)
    kv.set(USERS, "ada", b"kept")
    die(lake, DiesBeforeTheChange, lambda lake: journaled(lake).set(USERS, "ada", b"never written"))
    journal.seal(lake.kv, lake.blocks)
    # As a setting: recorded with the value it has now, which it kept; a rebuild changes nothing.
    assert auth_entries(lake)[-1] == {"partition": USERS, "key": "ada", "value": "kept"}
    with rebuilt(lake, tmp_path) as fresh:
        assert stored(fresh, "auth/") == {USERS: {"ada": b"kept"}}


def test_the_journals_human_lines_name_the_record(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    from lakectl.cli import render

    journaled(lake).set(USERS, "ada", b'{"id": "ada"}')
    (entry,) = journal.tail(lake.kv, lake.blocks, amount=1)
    render.journal_line(entry.to_dict())
    assert capsys.readouterr().out.split()[-3:] == ["auth", "partition=auth/users", "key=ada"]


@pytest.mark.parametrize("seal", [None, b"another server's key"])
def test_a_record_not_signed_by_the_servers_secret_is_refused(
    lake: Lake, tmp_path: Path, seal: bytes | None
) -> None:
    """As a user on a store whose log records are blocks could plant one: an object whose
    bytes read as a log record naming a new admin. Unsigned, or signed under another key, it
    stops the rebuild (which ``admin rebuild`` writes aside: nothing is left)."""
    p.create_repo(lake, "between")
    planted = {"partition": USERS, "key": "mallory", "value": '{"groups": {"Admins": "builtin"}}'}
    if seal is not None:
        planted = signed(planted, seal)
    plant(lake, planted)
    with pytest.raises(IntegrityError, match="not signed by this server's secret"), rebuilt(lake, tmp_path):
        pass


def test_a_journal_with_a_servers_records_is_not_rebuilt_without_its_secret(
    lake: Lake, tmp_path: Path
) -> None:
    journaled(lake).set(USERS, "ada", b"{}")
    with pytest.raises(InvalidArgument, match="--server-config"), rebuilt(lake, tmp_path, seal=None):
        pass
