"""Appends (issue 30): new blocks after an object's own, never a rewrite; concurrent appenders
take turns on a lease in the KV store, and an append written again after a commit's seal yields to
a newer write of its object."""

from __future__ import annotations

import hashlib
import io
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakectl.core import keys, leases, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.data import object_checksum
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv import Then
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.model import Entry, External
from lakectl.errors import Conflict, InvalidArgument, NothingToCommit
from tests.property.test_journal_rebuild import state

REPO = "app"
DEADLINE_S = 60.0
"""A bound on every loop below: a test that would spin forever fails instead."""


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, REPO)
    yield opened
    opened.close()


def body(lake: Lake, path: str, ref: str = "main") -> bytes:
    return b"".join(p.read(lake, REPO, ref, path))


def entry(lake: Lake, path: str, ref: str = "main") -> Entry:
    found = p.stat(lake, REPO, ref, path).entry
    assert found is not None
    return found


def md5(data: bytes) -> bytes:
    return hashlib.md5(data).digest()


# -- what an append makes -----------------------------------------------------------------


def test_an_append_adds_blocks_after_the_old_ones_and_keeps_type_and_metadata(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "log.txt", b"foo", "text/plain", {"k": "v"})
    before = entry(lake, "log.txt")
    info = writes.append(lake, REPO, "main", "log.txt", b"bar")
    after = entry(lake, "log.txt")
    assert info.entry == after
    assert body(lake, "log.txt") == b"foobar"
    assert after.locators[: len(before.locators)] == before.locators  # nothing rewritten
    assert after.size == 6
    assert after.checksum == object_checksum([md5(b"foo"), md5(b"bar")])  # md5 of md5s, "-2"
    assert after.checksum.endswith("-2")
    assert (after.content_type, dict(after.metadata)) == ("text/plain", {"k": "v"})


def test_an_append_to_a_missing_object_creates_it_as_an_upload_would(lake: Lake) -> None:
    writes.append(lake, REPO, "main", "new.txt", io.BytesIO(b"first"))
    writes.upload(lake, REPO, "main", "same.txt", b"first")
    made, uploaded = entry(lake, "new.txt"), entry(lake, "same.txt")
    assert body(lake, "new.txt") == b"first"
    assert made.identity() == uploaded.identity()


def test_an_empty_append_changes_nothing_and_creates_an_empty_object(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "a", b"abc")
    p.commit(lake, REPO, "main", "a")
    writes.append(lake, REPO, "main", "a", b"")
    branch = p.get_branch(lake, REPO, "main")
    assert not lake.staging.has_staged(REPO, branch)  # nothing staged at all
    writes.append(lake, REPO, "main", "empty", b"")
    assert body(lake, "empty") == b"" and entry(lake, "empty").identity() == (
        writes.upload(lake, REPO, "main", "empty2", b"").entry.identity()  # type: ignore[union-attr]
    )
    writes.append(lake, REPO, "main", "empty", b"x")
    assert body(lake, "empty") == b"x"


def test_an_append_to_an_imported_object_is_refused_before_its_source_is_read(lake: Lake) -> None:
    external = Entry(3, "etag", (), 1, external=External("s3://bucket/key", etag="etag"))
    writes.stage_rows(lake, REPO, "main", [("imported", external.to_row())])
    source = io.BytesIO(b"more")
    with pytest.raises(InvalidArgument, match="imported object"):
        writes.append(lake, REPO, "main", "imported", source)
    assert source.tell() == 0  # nothing read, nothing lost
    assert entry(lake, "imported") == external


def test_reads_by_range_cross_blocks_of_uneven_sizes(lake: Lake) -> None:
    """Appends leave short blocks in the middle of the locator list: a ranged read adds up their
    own sizes, whatever they are."""
    chunks = [b"abc", b"defgh", b"i", b"", b"jklmnop", b"qr"]
    for chunk in chunks:
        writes.append(lake, REPO, "main", "uneven", chunk)
    whole = b"".join(chunks)
    assert [int(t.rpartition("+")[2]) for t in entry(lake, "uneven").locators] == [3, 5, 1, 7, 2]
    for offset in range(len(whole) + 1):
        for length in range(len(whole) + 2 - offset):
            got = b"".join(p.read(lake, REPO, "main", "uneven", offset, length))
            assert got == whole[offset : offset + length], (offset, length)


def test_an_object_of_several_full_blocks_gets_one_more(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the last block's fill, an append adds blocks and rewrites none: a full last block
    and a short one are the same case."""
    monkeypatch.setattr("lakectl.core.blocks.data.BLOCK_SIZE", 4)
    monkeypatch.setattr("lakectl.core.writes.write_bytes", _small_blocks(writes.write_bytes))
    writes.upload(lake, REPO, "main", "o", b"12345678")  # two full blocks
    writes.append(lake, REPO, "main", "o", b"9ab")
    writes.append(lake, REPO, "main", "o", b"cdefg")
    assert body(lake, "o") == b"123456789abcdefg"
    assert [int(t.rpartition("+")[2]) for t in entry(lake, "o").locators] == [4, 4, 3, 4, 1]


def _small_blocks(write: Callable[..., object]) -> Callable[..., object]:
    def small(adapter: object, data: bytes, block_size: int = 0, md5: str | None = None) -> object:
        return write(adapter, data, 4)

    return small


# -- the lease --------------------------------------------------------------------------------


def test_a_lease_is_taken_waited_for_given_up_on_and_taken_over_once_expired() -> None:
    kv = MemoryStore()
    held = leases.take(kv, keys.LEASES, "k", "the test")
    with pytest.raises(Conflict, match="the test: another writer held it"):
        leases.take(kv, keys.LEASES, "k", "the test", wait=0.02)
    leases.release(kv, held)
    again = leases.take(kv, keys.LEASES, "k", "the test", wait=0.02)  # released: free at once
    dead = leases.take(kv, keys.LEASES, "other", "x", ttl=0.0)  # its holder died at once
    successor = leases.take(kv, keys.LEASES, "other", "x", wait=1.0)
    leases.release(kv, dead)  # no longer its own: left alone
    assert kv.get(keys.LEASES, "other") == successor.value
    leases.release(kv, successor)
    leases.release(kv, again)
    assert list(kv.scan(keys.LEASES)) == []


def test_an_append_waits_for_the_lease_and_leaves_none_behind(lake: Lake) -> None:
    lease = leases.take(lake.kv, keys.LEASES, keys.append_lease_key(REPO, "main", "x"), "holder")
    done = threading.Event()

    def append() -> None:
        writes.append(lake, REPO, "main", "x", b"after the holder")
        done.set()

    worker = threading.Thread(target=append)
    worker.start()
    assert not done.wait(0.2)  # the holder still holds it
    leases.release(lake.kv, lease)
    worker.join(DEADLINE_S)
    assert done.is_set() and body(lake, "x") == b"after the holder"
    assert list(lake.kv.scan(keys.LEASES)) == []


# -- concurrency --------------------------------------------------------------------------------

CHUNK = re.compile(rb"<(\d+):(\d+):(x*)>")


def chunk(writer: int, n: int) -> bytes:
    """A chunk no other is a part of, of a length that varies (uneven blocks)."""
    return b"<%d:%d:%s>" % (writer, n, b"x" * ((writer * 7 + n * 13) % 50))


def check_chunks(data: bytes, expected: Counter[bytes]) -> list[bytes]:
    """The chunks of ``data`` in order, each exactly one of ``expected`` (nothing lost, nothing
    twice, none cut or interleaved with another); returns them."""
    found = [m.group(0) for m in CHUNK.finditer(data)]
    assert b"".join(found) == data, "bytes outside any whole chunk: an append was cut"
    assert Counter(found) == expected
    return found


def test_concurrent_appenders_each_land_whole_once(lake: Lake) -> None:
    writers, each = 4, 25
    errors: list[BaseException] = []

    def appender(w: int) -> None:
        try:
            for n in range(each):
                writes.append(lake, REPO, "main", "shared.log", chunk(w, n))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    assert not errors and not any(t.is_alive() for t in threads)
    found = check_chunks(
        body(lake, "shared.log"), Counter(chunk(w, n) for w in range(writers) for n in range(each))
    )
    for w in range(writers):  # one appender's chunks keep its order
        mine = [c for c in found if c.startswith(b"<%d:" % w)]
        assert mine == [chunk(w, n) for n in range(each)]


def test_appends_racing_commits_lose_nothing_and_every_commit_extends_the_last(lake: Lake) -> None:
    appends, stop, commits = 60, threading.Event(), []
    errors: list[BaseException] = []

    def committer() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                commits.append(p.commit(lake, REPO, "main", f"c{len(commits)}").id)
            except NothingToCommit:
                time.sleep(0.001)
            except BaseException as exc:  # reported by the test below
                errors.append(exc)
                return

    thread = threading.Thread(target=committer)
    thread.start()
    try:
        for n in range(appends):
            writes.append(lake, REPO, "main", "stream", chunk(0, n))
    finally:
        stop.set()
        thread.join(DEADLINE_S)
    assert not errors
    assert commits, "the committer made no commit: the race was not run"
    whole = body(lake, "stream")
    assert check_chunks(whole, Counter(chunk(0, n) for n in range(appends))) == [
        chunk(0, n) for n in range(appends)
    ]
    for cid in commits:  # what each commit holds is a beginning of what the next holds
        assert whole.startswith(body(lake, "stream", cid))


class BeforeTheWrite:
    """The store's ``set_if``, running ``meanwhile`` just before the first staged write of
    ``path`` lands (an append's compare-and-swap, after its read of the object)."""

    def __init__(self, lake: Lake, path: str, meanwhile: Callable[[], object]) -> None:
        self.path, self.meanwhile = path, meanwhile
        self.original = lake.kv.set_if
        self.fired = False

    def __call__(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        if not self.fired and partition.startswith("staging/") and key == self.path:
            self.fired = True
            self.meanwhile()
        self.original(partition, key, value, expected, then)


def commit_before_the_write(lake: Lake, path: str, meanwhile: Callable[[], object]) -> BeforeTheWrite:
    """A commit that seals and commits the branch's token just before the append's write lands
    in it (the commit misses it, and the token is dropped), then ``meanwhile`` writing into the
    new token: the race an append's write again into the new token is for."""

    def commit_then() -> None:
        writes.upload(lake, REPO, "main", "other", b"for the commit to commit")
        p.commit(lake, REPO, "main", "sealed the token the append is about to write")
        meanwhile()

    return BeforeTheWrite(lake, path, commit_then)


def test_an_append_written_again_after_a_seal_yields_to_a_newer_upload(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes.upload(lake, REPO, "main", "obj", b"base")
    p.commit(lake, REPO, "main", "base")
    newer = lambda: writes.upload(lake, REPO, "main", "obj", b"uploaded after the seal")  # noqa: E731
    race = commit_before_the_write(lake, "obj", newer)
    monkeypatch.setattr(lake.kv, "set_if", race)
    writes.append(lake, REPO, "main", "obj", b"+appended")
    assert race.fired
    assert body(lake, "obj") == b"uploaded after the seal"  # the upload came last: it stays
    assert body(lake, "obj", "main~1") == b"base"  # the commit missed the append


def test_an_append_written_again_after_a_seal_lands_in_the_new_token(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes.upload(lake, REPO, "main", "obj", b"base")
    p.commit(lake, REPO, "main", "base")
    race = commit_before_the_write(lake, "obj", lambda: None)
    monkeypatch.setattr(lake.kv, "set_if", race)
    writes.append(lake, REPO, "main", "obj", b"+appended")
    assert race.fired
    branch = p.get_branch(lake, REPO, "main")
    assert lake.staging.get_staged(REPO, branch, "obj") is not None  # written again, staged
    assert body(lake, "obj", "main~1") == b"base"  # the commit missed the append...
    assert body(lake, "obj") == b"base+appended"  # ...which is not lost


def test_an_upload_between_an_appends_read_and_its_write_is_appended_to_not_lost(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes.upload(lake, REPO, "main", "obj", b"base")
    p.commit(lake, REPO, "main", "base")
    between = lambda: writes.upload(lake, REPO, "main", "obj", b"uploaded meanwhile")  # noqa: E731
    race = BeforeTheWrite(lake, "obj", between)
    monkeypatch.setattr(lake.kv, "set_if", race)
    writes.append(lake, REPO, "main", "obj", b"+appended")
    assert race.fired
    assert body(lake, "obj") == b"uploaded meanwhile+appended"  # read again, appended to the upload


# -- the journal --------------------------------------------------------------------------------


def test_a_rebuild_from_the_journal_keeps_the_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    lake = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(lake)
    p.create_repo(lake, REPO)
    writes.upload(lake, REPO, "main", "log", b"foo")
    p.commit(lake, REPO, "main", "foo")
    writes.append(lake, REPO, "main", "log", b"bar")
    writes.append(lake, REPO, "main", "log", b"buzz")
    p.commit(lake, REPO, "main", "bar buzz")
    writes.append(lake, REPO, "main", "log", b"!")  # staged only
    writes.append(lake, REPO, "main", "new", b"made by an append")
    expected = state(lake)
    assert body(lake, "log") == b"foobarbuzz!"
    lake.close()
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        blocks = opening.open_lake(str(tmp_path / "lake")).blocks
        rebuild.rebuild(blocks, fresh)
        assert state(Lake(kv=fresh, blocks=blocks)) == expected
    finally:
        fresh.close()
