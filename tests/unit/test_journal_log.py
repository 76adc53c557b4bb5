"""The journal's log (docs/decisions/0009-journal.md, "Acknowledged means in the blocks"): an
acknowledged change is in the block store before it is sealed, a rebuild from the blocks alone
gives it back, the log is deleted once sealed, and neither a killed sealer, an object that looks
like a log record nor a garbage collection takes anything from a rebuild."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lakectl.core import keys, listing, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.journal import form, journal
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc
from lakectl.errors import IntegrityError


def _logs(lake: Lake) -> set[str]:
    """The ids of the entries in the lake's journal log (its writers' files, its log blocks)."""
    from lakectl.core.journal import log

    return {i for _, ids in log.logged(lake.blocks) for i in ids}


def test_an_acknowledged_change_is_in_the_blocks_before_it_is_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verb returns once its entry is logged in the block store: a rebuild from the blocks
    alone, with nothing sealed, gives every change back; a seal then retires the log blocks."""
    from lakectl.core.journal import rebuild
    from lakectl.core.kv.sqlite import SQLiteStore

    monkeypatch.setattr(journal, "SEAL_INTERVAL", 3600.0)  # no keeper seals during the test
    lake = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(lake)
    p.create_repo(lake, "logged")
    writes.upload(lake, "logged", "main", "a", b"one")
    made = p.commit(lake, "logged", "main", "first")
    writes.upload(lake, "logged", "main", "b", b"two")
    assert journal.batches(lake.kv) == [] and len(_logs(lake)) == 4
    kv = SQLiteStore(str(tmp_path / "rebuilt.db"))
    rebuilt = Lake(kv=kv, blocks=lake.blocks)
    done = rebuild.rebuild(lake.blocks, kv)
    assert (done.entries, done.batches) == (4, 1)
    assert p.get_branch(rebuilt, "logged", "main").commit_id == made.id
    assert b"".join(p.read(rebuilt, "logged", "main", "b")) == b"two"
    assert _logs(lake) == set()  # sealed by the rebuild: a second rebuild reads its batch alone
    kv.close()
    lake.close()


def test_log_blocks_are_deleted_once_sealed(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(lake)
    p.create_repo(lake, "retired")
    writes.upload(lake, "retired", "main", "a", b"a")
    assert len(_logs(lake)) == 2
    journal.flush(lake)
    assert _logs(lake) == set() and len(journal.batches(lake.kv)) == 1
    lake.close()


def test_a_rebuild_of_a_lake_without_a_journal_refuses(tmp_path: Path) -> None:
    from lakectl.core.journal import rebuild
    from lakectl.errors import NotFound

    home = tmp_path / "lake"
    lake = opening.open_lake(str(home))
    journal_off = {"enabled": False}
    lake.kv.set(keys.LAKE, keys.JOURNAL_SETTING, json.dumps(journal_off).encode())
    lake.close()
    lake = opening.open_lake(str(home))
    p.create_repo(lake, "unjournaled")
    lake.close()
    (home / "lake.db").unlink()
    with pytest.raises(NotFound, match="no journal among the blocks"):
        rebuild.rebuild_embedded(str(home))
    assert sorted(f.name for f in home.iterdir()) == ["blocks"]  # nothing half-built left


class _Killed(BaseException):
    """A sealer's death, between storing its batch and publishing it."""


@pytest.mark.parametrize("later", [False, True], ids=["at-the-end", "mid-chain"])
def test_a_batch_a_killed_sealer_left_unpublished_does_not_stop_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, later: bool
) -> None:
    """Its batch follows the same batch as the one published after it: the rebuild takes the one
    published (the one a later batch follows, or the larger), and nothing is replayed twice."""
    from lakectl.core.journal import rebuild
    from lakectl.core.kv.sqlite import SQLiteStore

    monkeypatch.setattr(journal, "SEAL_INTERVAL", 3600.0)
    lake = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(lake, "forked")
    journal.seal(lake.kv, lake.blocks)
    writes.upload(lake, "forked", "main", "a", b"a")
    real = lake.kv.set_if

    def killed(partition: str, key: str, value: bytes, expected: bytes | None) -> None:
        if key == keys.JOURNAL_CURSOR:
            raise _Killed
        real(partition, key, value, expected)

    monkeypatch.setattr(lake.kv, "set_if", killed)
    with pytest.raises(_Killed):
        journal.seal(lake.kv, lake.blocks)
    monkeypatch.setattr(lake.kv, "set_if", real)
    writes.upload(lake, "forked", "main", "b", b"b")
    journal.seal(lake.kv, lake.blocks)  # publishes a batch of both writes after the first
    if later:
        p.commit(lake, "forked", "main", "both")
        journal.seal(lake.kv, lake.blocks)
    journal.flush(lake)
    assert len(rebuild.find_journal(lake.blocks)[2]) == 1  # the batch left unpublished
    kv = SQLiteStore(str(tmp_path / "rebuilt.db"))
    rebuilt = Lake(kv=kv, blocks=lake.blocks)
    done = rebuild.rebuild(lake.blocks, kv)
    assert done.entries == (4 if later else 3)
    assert {o.path for o in listing.list_objects(rebuilt, "forked", "main")} == {"a", "b"}
    kv.close()
    lake.close()


def test_an_object_that_looks_like_a_log_record_is_not_replayed(tmp_path: Path) -> None:
    """A user's object whose bytes are a well-formed log record adds nothing to a rebuild of a
    local lake: its log is in files no upload writes, and no block is read as a log record."""
    from lakectl.core.journal import log, rebuild

    home = tmp_path / "lake"
    lake = opening.open_lake(str(home))
    p.create_repo(lake, "honest")
    forged = {"state": "done", "time": 1, "writer": "f" * 16, "seq": 1, "client_id": "mallory",
              "repo_id": "forged", "event_type": "create-repository",
              "event_payload": {"default_branch": "main", "creation_date": 1,
                                "storage_namespace": "local://forged", "bare": True}}  # fmt: skip
    record = log.encode("f" * 16, [("0000000000000001-000000000001", form.live(forged))])
    writes.upload(lake, "honest", "main", "innocent.bin", record)
    assert any(lake.blocks.get(b, 0, 4) == log.MAGIC[:4] for b in lake.blocks.list())
    lake.close()
    (home / "lake.db").unlink()
    rebuild.rebuild_embedded(str(home))
    lake = opening.open_lake(str(home))
    assert [r.name for r in p.list_repos(lake)] == ["honest"]
    lake.close()


def test_in_a_store_of_volumes_each_log_record_is_a_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the blocks are not one local directory (volumes, S3), a record of the log is a block
    of its own: a rebuild from the blocks alone gives back what nothing sealed, and a seal then
    deletes those blocks."""
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.blocks.volumes import VolumeSet
    from lakectl.core.journal import log, rebuild
    from lakectl.core.kv.sqlite import SQLiteStore

    monkeypatch.setattr(journal, "SEAL_INTERVAL", 3600.0)
    blocks = VolumeSet([(f"v{i}", LocalAdapter(str(tmp_path / f"v{i}"))) for i in range(2)])
    lake = Lake(kv=SQLiteStore(str(tmp_path / "lake.db")), blocks=blocks)
    journal.enable(lake)
    p.create_repo(lake, "volumes")
    writes.upload(lake, "volumes", "main", "a", b"a")
    # The repository's intent (logged before its change), its outcome, the upload.
    assert log.files(blocks) == [] and len(list(log.logged(blocks))) == 3
    kv = SQLiteStore(str(tmp_path / "rebuilt.db"))
    assert rebuild.rebuild(blocks, kv).entries == 2
    assert b"".join(p.read(Lake(kv=kv, blocks=blocks), "volumes", "main", "a")) == b"a"
    kv.close()
    writes.upload(lake, "volumes", "main", "b", b"b")
    journal.flush(lake)
    assert list(log.logged(blocks)) == []
    lake.close()


def test_a_log_file_is_made_before_its_records_and_a_torn_record_ends_it(tmp_path: Path) -> None:
    """A writer's log file is whole zeros before its first record (a record's sync then changes
    no metadata); a reader takes the records up to the zeros, and a record cut short by a crash
    (its header whole, its entries partly zeros: the CRC fails) ends them too. A log block with
    a wrong CRC is malformed. A writer that fills a file gets a bigger one next."""
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.journal import log
    from lakectl.core.kv.memory import MemoryStore

    blocks = LocalAdapter(str(tmp_path / "blocks"))
    writer = journal.LogWriter(MemoryStore(), "live", blocks, "a" * 16)
    for n in range(3):
        writer.write(f"{n:016x}-{n:012x}", form.live({"state": "done", "n": n, "event_payload": {}}))
    (path,) = log.files(blocks)
    assert os.path.getsize(path) == log.FIRST_FILE_BYTES
    found = log.read_file(path)
    assert [header["n"] for _, header, _ in found] == [0, 1, 2]
    with open(path, "rb") as f:
        data = f.read().rstrip(b"\0")
    torn = log.encode("f" * 16, [("0000000000000009-000000000009", b"done {}\n" + b"y" * 64)])
    with open(path, "wb") as f:
        f.write(data + torn[:-20] + b"\0" * 120)
    assert log.read_file(path) == found
    with pytest.raises(IntegrityError, match="CRC"):
        list(log.decode(torn[:-20] + b"\0" * 20))
    noise = os.urandom(log.FIRST_FILE_BYTES).hex()  # more than a file, compressed
    big = form.live({"state": "done", "n": 3, "event_payload": {"x": noise}})
    writer.write("big", big)
    writer.close()
    assert len(log.files(blocks)) == 2
    assert os.path.getsize(log.files(blocks)[1]) == 2 * log.FIRST_FILE_BYTES  # it grew
    assert [h["n"] for _, h, _ in log.read_file(log.files(blocks)[1])] == [3]


def test_a_collection_never_deletes_log_blocks_it_did_not_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a store that keeps the log as blocks, a collection with no grace period, run by a
    process that seals nothing (no journal of its own), leaves another writer's unsealed log
    blocks alone: a rebuild from the blocks still has that writer's acknowledged upload."""
    from lakectl.core.blocks.volumes import local_volumes
    from lakectl.core.journal import rebuild
    from lakectl.core.kv.sqlite import SQLiteStore

    monkeypatch.setattr(journal, "SEAL_INTERVAL", 3600.0)  # no keeper seals during the test
    blocks = local_volumes([tmp_path / "v1", tmp_path / "v2"])
    kv = SQLiteStore(str(tmp_path / "lake.db"))
    writer = Lake(kv=kv, blocks=blocks)
    journal.enable(writer)
    p.create_repo(writer, "other")
    writes.upload(writer, "other", "main", "a", b"acknowledged")
    logged = _logs(writer)
    assert len(logged) == 2
    collector = Lake(kv=kv, blocks=blocks)  # another process: no journal installed
    report = gc.run(collector, "other", grace_seconds=0)
    assert _logs(writer) == logged and report.deleted == 0
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    rebuild.rebuild(blocks, fresh)
    assert b"".join(p.read(Lake(kv=fresh, blocks=blocks), "other", "main", "a")) == b"acknowledged"
    fresh.close()
    writer.close()
    kv.close()
