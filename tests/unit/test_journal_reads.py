"""Read auditing in the core (``journal.reads``): a read is one done entry with no intent; it costs
no store access while reads are not audited; the setting outlives the process; concurrent reads
are all recorded; compaction keeps reads; a rebuild skips them and gives the same lake
(docs/decisions/0009-journal.md)."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import keys, opening, writes
from lakectl.core import porcelain as p
from lakectl.core import reads as reads_module
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import compact, form, journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.errors import ObjectNotFound, StorageError
from tests.property.test_journal_rebuild import state


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, "rds")
    writes.upload(opened, "rds", "main", "a.csv", io.BytesIO(b"0123456789"))
    p.commit(opened, "rds", "main", "one")
    yield opened
    opened.close()


def reads(lake: Lake, repo: str = "") -> list[journal.Entry]:
    found = journal.tail(lake.kv, lake.blocks, amount=10_000, repo=repo)
    return [e for e in found if e.event_type == "read-object"]


def test_a_read_is_one_done_entry_with_its_range(lake: Lake) -> None:
    assert journal.enable(lake, reads=True)["reads"] is True
    head = p.get_branch(lake, "rds", "main").commit_id
    assert b"".join(p.read(lake, "rds", "main", "a.csv", 2, 3)) == b"234"
    assert b"".join(p.read(lake, "rds", head, "a.csv", 8)) == b"89"
    with pytest.raises(ObjectNotFound):
        p.read(lake, "rds", "main", "nope")
    # Nothing pending: a read has no intent waiting for an outcome.
    live = lake.kv.partitions("journal/live/")  # type: ignore[attr-defined]
    states = [form.read_live(raw)["state"] for part in live for _, raw in lake.kv.scan(part)]
    assert journal.PENDING not in states
    first, second = reads(lake)
    assert (first.client_id, first.repo_id) == ("ada", "rds")
    assert first.event_payload == {
        "ref": "main",
        "path": "a.csv",
        "branch": "main",
        "commit_id": head,
        "staged": False,
        "checksum": p.stat(lake, "rds", "main", "a.csv").entry.checksum,  # type: ignore[union-attr]
        "range": "bytes=2-4",
    }
    assert (second.event_payload["ref"], second.event_payload["range"]) == (head, "bytes=8-9")
    assert reads_module.span(10, 0, None) == reads_module.span(10, 0, 99) == ""
    assert reads_module.span(10, 12, None) == "bytes=12-"
    assert "branch" not in second.event_payload and "staged" not in second.event_payload


class Counting:
    """A KV store that counts the calls made to it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def counted(*args: Any, **kw: Any) -> Any:
            self.calls += 1
            return method(*args, **kw)

        return counted


def _kv_calls_of_a_read(lake: Lake) -> int:
    counting = Counting(lake.kv)
    seen = Lake(kv=counting, blocks=lake.blocks, events=lake.events)  # type: ignore[arg-type]
    b"".join(p.read(seen, "rds", "main", "a.csv"))
    return counting.calls


def test_reads_not_audited_cost_no_store_access(lake: Lake) -> None:
    plain = _kv_calls_of_a_read(lake)  # no journal
    journal.enable(lake)
    assert _kv_calls_of_a_read(lake) == plain, "journal on, reads off: not one store access more"
    journal.enable(lake, reads=True)
    assert _kv_calls_of_a_read(lake) > plain


def test_the_setting_is_the_lakes_and_outlives_the_process(lake: Lake, tmp_path: Path) -> None:
    journal.enable(lake, reads=True)
    other = opening.open_lake(str(tmp_path / "lake"))
    assert journal.audits_reads(other.events)
    journal.enable(lake, reads=False)  # this process stops at once; another on its next opening
    assert not journal.audits_reads(lake.events) and journal.audits_reads(other.events)
    other.close()
    again = opening.open_lake(str(tmp_path / "lake"))
    assert not journal.audits_reads(again.events)
    assert journal.enable(again) == {**journal.enable(again), "reads": False}
    again.close()


def test_concurrent_reads_are_each_recorded(lake: Lake) -> None:
    journal.enable(lake, reads=True)
    threads, each = 8, 25

    def reader() -> None:
        for _ in range(each):
            b"".join(p.read(lake, "rds", "main", "a.csv"))

    running = [threading.Thread(target=reader) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    found = reads(lake)
    assert len(found) == threads * each
    stamps = [e.logical_timestamp for e in found]
    assert stamps == sorted(set(stamps))


def test_a_read_whose_entry_cannot_be_stored_is_refused(lake: Lake) -> None:
    journal.enable(lake, reads=True)
    sink = journal.find(lake.events)
    assert sink is not None

    def broken(items: list[tuple[str, bytes]]) -> None:
        raise StorageError("disk full")

    sink._group.write_many = broken  # type: ignore[method-assign]
    with pytest.raises(StorageError):
        p.read(lake, "rds", "main", "a.csv")


def test_compaction_keeps_reads_even_of_a_deleted_repository(lake: Lake) -> None:
    journal.enable(lake, reads=True)
    p.create_repo(lake, "gone")
    writes.upload(lake, "gone", "main", "x", b"x")
    b"".join(p.read(lake, "gone", "main", "x"))
    p.delete_repo(lake, "gone")
    before = reads(lake, "gone")
    done = compact.compact(lake.kv, lake.blocks)
    assert done["dropped"] >= 3
    assert reads(lake, "gone") == before and len(before) == 1
    types = [e.event_type for e in journal.tail(lake.kv, lake.blocks, amount=100, repo="gone")]
    assert types == ["read-object"]


def test_a_rebuild_with_reads_audited_gives_the_same_lake(lake: Lake, tmp_path: Path) -> None:
    # The history starts before the journal: rebuild from a journal that holds it all.
    home = str(tmp_path / "j")
    journalled = opening.open_lake(home)
    journal.enable(journalled, reads=True)
    p.create_repo(journalled, "rbx")
    writes.upload(journalled, "rbx", "main", "a", b"a")
    b"".join(p.read(journalled, "rbx", "main", "a"))
    p.commit(journalled, "rbx", "main", "one")
    p.create_branch(journalled, "rbx", "dev", "main")
    b"".join(p.read(journalled, "rbx", "dev", "a", 0, 1))
    writes.upload(journalled, "rbx", "dev", "b", b"b")
    b"".join(p.read(journalled, "rbx", "dev", "b"))
    p.create_tag(journalled, "rbx", "v1", "main")
    b"".join(p.read(journalled, "rbx", "v1", "a"))
    expected = state(journalled)
    sealed = journal.tail(journalled.kv, journalled.blocks, amount=1000)
    assert [e.event_type for e in sealed].count("read-object") >= 4
    journalled.close()
    os.remove(os.path.join(home, "lake.db"))
    blocks = LocalAdapter(os.path.join(home, "blocks"))
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    done = rebuild.rebuild(blocks, fresh)
    assert done.entries == len(sealed)
    assert state(Lake(kv=fresh, blocks=blocks)) == expected
    assert fresh.get(keys.LAKE, keys.JOURNAL_SETTING)
    fresh.close()
