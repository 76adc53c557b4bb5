"""The journal's core: one entry per mutation with its client, repository, type and payload;
sealed with strictly increasing logical timestamps into Parquet blocks; nothing for a refused
verb; off until the lake switches it on (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core import keys, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.events import Event, Fanout, Verb
from lakectl.core.journal import compact, form, journal, seal, writers
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc, retention
from lakectl.errors import MergeConflict, PredicateFailed


@pytest.fixture(name="lake")
def journalled_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    """An embedded lake with its journal on."""
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(opened)
    yield opened
    opened.close()


def types(lake: Lake, repo: str = "") -> list[str]:
    return [e.event_type for e in journal.tail(lake.kv, lake.blocks, amount=1000, repo=repo)]


def test_on_for_a_new_lake_and_off_once_disabled(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    assert journal.is_enabled(lake.kv)
    p.create_repo(lake, "plain")
    assert [e.event_type for e in journal.tail(lake.kv, lake.blocks)] == ["create-repository"]
    assert journal.disable(lake)["enabled"] is False
    p.create_branch(lake, "plain", "dev", "main")
    lake.close()
    lake = opening.open_lake(str(tmp_path / "lake"))  # reopened: still off, nothing journalled
    p.create_tag(lake, "plain", "v1", "main")
    assert not journal.is_enabled(lake.kv) and journal.find(lake.events) is None
    assert [e.event_type for e in journal.tail(lake.kv, lake.blocks)] == ["create-repository"]
    lake.close()


def test_every_verb_is_one_entry_in_order(lake: Lake) -> None:
    p.create_repo(lake, "jrnl")
    writes.upload(lake, "jrnl", "main", "a.csv", io.BytesIO(b"1\n"))
    p.commit(lake, "jrnl", "main", "one")
    p.create_branch(lake, "jrnl", "dev", "main")
    writes.upload(lake, "jrnl", "dev", "b.csv", b"2\n")
    writes.delete_objects(lake, "jrnl", "dev", ["a.csv"])
    p.commit(lake, "jrnl", "dev", "two")
    merging.merge(lake, "jrnl", "dev", "main")
    p.create_tag(lake, "jrnl", "v1", "main")
    writes.upload(lake, "jrnl", "main", "c.csv", b"3\n")
    merging.reset(lake, "jrnl", "main")
    merging.revert(lake, "jrnl", "main", "main", parent_number=1)
    p.delete_tag(lake, "jrnl", "v1")
    p.delete_branch(lake, "jrnl", "dev")
    p.delete_repo(lake, "jrnl")
    entries = journal.tail(lake.kv, lake.blocks, amount=100)
    assert [e.event_type for e in entries] == [
        "create-repository",
        "write-objects",
        "commit",
        "create-branch",
        "write-objects",
        "delete-objects",
        "commit",
        "merge",
        "create-tag",
        "write-objects",
        "reset",
        "revert",
        "delete-tag",
        "delete-branch",
        "delete-repository",
    ]
    stamps = [e.logical_timestamp for e in entries]
    assert stamps == list(range(stamps[0], stamps[0] + len(stamps)))
    assert {e.client_id for e in entries} == {"ada"}
    assert {e.repo_id for e in entries} == {"jrnl"}
    write = entries[1].event_payload
    assert write["branch"] == "main" and write["rows"][0][0] == "a.csv"
    commit = entries[2].event_payload
    head = json.loads(commit["commit"])
    assert commit["commit_id"] and head["message"] == "one"
    assert entries[6].event_payload["branch"] == "dev"
    assert entries[7].event_payload["source_ref"] == "dev"


def test_one_entry_for_a_batch_upload(lake: Lake, tmp_path: Path) -> None:
    p.create_repo(lake, "batch")
    files = []
    for i in range(50):
        local = tmp_path / f"f{i}"
        local.write_bytes(str(i).encode())
        files.append((f"d/{i}", str(local)))
    writes.upload_files(lake, "batch", "main", files)
    (entry,) = journal.tail(lake.kv, lake.blocks, repo="batch")[1:]
    assert entry.event_type == "write-objects"
    assert [row[0] for row in entry.event_payload["rows"]] == sorted(f for f, _ in files)
    assert entry.event_payload["tokens"] == [p.get_branch(lake, "batch", "main").staging_token]
    assert entry.event_payload["settled"] > 0


def test_a_big_write_is_stored_compressed_and_read_back_whole(lake: Lake) -> None:
    p.create_repo(lake, "big")
    journal.seal(lake.kv, lake.blocks)
    row = lambda i: (4096, f"{i:032x}", f"{i:032x}+4096", 1_700_000_000, "application/octet-stream", "{}")  # noqa: E731
    updates = [(f"tables/part-{i:05d}/file\n{i}.bin", row(i)) for i in range(3000)]
    writes.stage_rows(lake, "big", "main", updates)
    writer = journal.find(lake.events)
    assert writer is not None
    ((_, raw),) = list(lake.kv.scan(writer.partition))
    text = json.dumps(form.read_live(raw)["event_payload"])
    assert len(text) > form.COMPRESS_FROM and len(raw) < len(text) / 3  # stored compressed
    assert form.read_live(raw)["state"] == journal.DONE
    journal.seal(lake.kv, lake.blocks)
    (entry,) = journal.tail(lake.kv, lake.blocks, repo="big")[1:]
    assert entry.event_payload["rows"] == [[path, list(r)] for path, r in updates]
    assert entry.event_payload["tokens"] == [p.get_branch(lake, "big", "main").staging_token]


@pytest.mark.parametrize("size", [0, 10, form.COMPRESS_FROM, 5 * form.COMPRESS_FROM])
def test_a_live_entry_reads_back_as_written_whatever_its_size(size: int) -> None:
    payload = {"rows": [["p\n" * (i % 3), "x" * (i % 50)] for i in range(size // 40)]}
    record = {"state": "pending", "time": 7, "writer": "w", "seq": 1, "event_payload": payload}
    assert form.read_live(form.live(record)) == record
    close = form.open_ended("done", form.header_fields(record), form.json_text(payload))
    finished = form.read_live(close({"tokens": ["t"], "settled": 9}))
    ended = {**payload, "tokens": ["t"], "settled": 9}
    assert finished == {**record, "state": "done", "event_payload": ended}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
NAMES = st.sampled_from(["rows", "tokens", "paths", "settled", "lost", ""])
PAYLOADS = st.dictionaries(NAMES, JSON, max_size=4)


@settings(max_examples=300, deadline=None)
@given(PAYLOADS, PAYLOADS)
def test_an_outcomes_payload_text_reuses_the_intents_and_says_the_outcome(
    announced: dict[str, object], ended: dict[str, object]
) -> None:
    text = form.extended_text(form.json_text(announced), announced, ended)
    assert json.loads(text) == ended
    kept = {**announced, **{k: v for k, v in ended.items() if k not in announced}}
    assert json.loads(form.extended_text(form.json_text(announced), announced, kept)) == kept


def test_a_live_record_of_the_single_json_form_is_read_and_sealed(lake: Lake) -> None:
    p.create_repo(lake, "older")
    journal.seal(lake.kv, lake.blocks)
    writer = journal.Journal(lake.kv, lake.blocks, writer="0lderwriter00000")
    writer._register()
    record = {
        "state": journal.DONE,
        "time": time.time_ns() // 1000,
        "writer": writer.writer,
        "seq": 1,
        "client_id": "ada",
        "repo_id": "older",
        "event_type": "create-tag",
        "event_payload": {"tag": "v0", "commit_id": "abc"},
    }
    lake.kv.set(writer.partition, "0-1", form.json_bytes(record))
    assert form.read_live(lake.kv.get(writer.partition, "0-1")) == record
    (entry,) = journal.tail(lake.kv, lake.blocks, repo="older")[1:]
    assert (entry.event_type, dict(entry.event_payload)) == ("create-tag", {"tag": "v0", "commit_id": "abc"})
    writer.close()


def test_refused_verb_leaves_no_entry(lake: Lake) -> None:
    p.create_repo(lake, "refuse")
    p.create_branch(lake, "refuse", "dev", "main")
    writes.upload(lake, "refuse", "main", "x", b"main\n")
    p.commit(lake, "refuse", "main", "m")
    writes.upload(lake, "refuse", "dev", "x", b"dev\n")
    p.commit(lake, "refuse", "dev", "d")
    before = types(lake, "refuse")
    with pytest.raises(MergeConflict):
        merging.merge(lake, "refuse", "dev", "main")

    class Refuser:
        def before(self, event: Event) -> None:
            raise PredicateFailed("no")

        def after(self, event: Event) -> None:
            pass

        def failed(self, event: Event, error: BaseException) -> None:
            pass

    journal_sink = lake.events
    lake.events = Fanout([Refuser(), journal_sink])
    with pytest.raises(PredicateFailed):
        p.create_tag(lake, "refuse", "v1", "main")
    lake.events = journal_sink
    assert types(lake, "refuse") == before
    # A commit that loses after its intent was written (nothing staged: refused) leaves none
    # behind once the thread's next verb of the same kind runs.
    with pytest.raises(Exception):  # noqa: B017 (any refusal will do)
        p.commit(lake, "refuse", "main", "empty")
    writes.upload(lake, "refuse", "main", "y", b"y")
    p.commit(lake, "refuse", "main", "y")
    assert types(lake, "refuse") == [*before, "write-objects", "commit"]
    assert seal.done_entries(lake.kv) == []
    assert [k for k, _ in lake.kv.scan(keys.journal_live_partition(_writer(lake)))] == []


def _writer(lake: Lake) -> str:
    sink = journal.find(lake.events)  # the journal, alone or after the actions
    assert sink is not None
    return sink.writer


def test_sealed_batches_are_parquet_blocks_kept_by_gc(lake: Lake) -> None:
    p.create_repo(lake, "sealed")
    journal.seal(lake.kv, lake.blocks)
    writes.upload(lake, "sealed", "main", "a", b"a")
    journal.seal(lake.kv, lake.blocks)
    found = journal.batches(lake.kv)
    assert [(b["first"], b["last"]) for b in found] == [(1, 1), (2, 2)]
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(lake.blocks.get(found[1]["locator"])))
    assert table.column_names == [
        "logical_timestamp",
        "time",
        "client_id",
        "repo_id",
        "event_type",
        "event_payload",
        "entry",
    ]
    # Each entry names the live entry it was (its writer and key), so that a rebuild tells the
    # logged entries a batch holds from those it does not.
    writer = table.column("entry")[0].as_py().split("/")[0]
    assert writer and writer == journal.find(lake.events).writer  # type: ignore[union-attr]
    roots = gc.roots(lake, "sealed")
    assert {b["locator"] for b in found} <= roots.locators


def test_two_writers_never_share_a_timestamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    first = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(first)
    second = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(first, "one-r")
    p.create_repo(second, "two-r")
    for i in range(5):
        writes.upload(first, "one-r", "main", f"f{i}", b"1")
        writes.upload(second, "two-r", "main", f"f{i}", b"2")
    # Each writer seals the others' entries too; timestamps stay dense and unique.
    journal.seal(second.kv, second.blocks)
    entries = journal.tail(first.kv, first.blocks, amount=100)
    assert [e.logical_timestamp for e in entries] == list(range(1, 13))
    assert [e.repo_id for e in entries].count("two-r") == 6
    first.close()
    second.close()


def test_client_is_the_context_user(lake: Lake) -> None:
    token = journal.CLIENT.set("grace")
    try:
        p.create_repo(lake, "who")
    finally:
        journal.CLIENT.reset(token)
    assert [e.client_id for e in journal.tail(lake.kv, lake.blocks)] == ["grace"]


def test_followers_read_everything_after(lake: Lake) -> None:
    p.create_repo(lake, "follow")
    (first,) = journal.tail(lake.kv, lake.blocks)
    for i in range(3):
        writes.upload(lake, "follow", "main", f"f{i}", b"x")
    newer = journal.tail(lake.kv, lake.blocks, amount=1, after=first.logical_timestamp)
    assert [e.logical_timestamp for e in newer] == [2, 3, 4]
    assert [e.event_type for e in journal.tail(lake.kv, lake.blocks, amount=2)] == ["write-objects"] * 2


def test_verbs_are_untouched_by_events(lake: Lake) -> None:
    assert Verb.WRITE_OBJECTS.value == "write-objects"


def test_settings_and_collections_are_entries_with_their_values(lake: Lake) -> None:
    from lakectl.core import protection

    p.create_repo(lake, "setts")
    retention.set_rules(lake, "setts", retention.GCRules.from_dict({"default_retention_days": 7}))
    protection.add_rule(lake, "setts", "stable_*")
    retention.delete_rules(lake, "setts")
    gc.run(lake, "setts", dry_run=True)
    gc.run(lake, "setts")
    found = journal.tail(lake.kv, lake.blocks, repo="setts")[1:]
    assert [e.event_type for e in found] == ["settings"] * 3 + ["garbage-collection"]
    assert found[0].event_payload["value"]["default_retention_days"] == 7
    assert found[1].event_payload == {"key": keys.BRANCH_PROTECTION, "value": [{"pattern": "stable_*"}]}
    assert found[2].event_payload == {"key": keys.GC_RULES, "value": None}
    assert found[3].event_payload["aborted_uploads"] == []


def test_protection_settings_of_either_journal_form_replay(lake: Lake) -> None:
    """Older journals list bare patterns; newer ones the rule objects, with pull-request fields."""
    from lakectl.core import protection
    from lakectl.core.journal import rebuild

    p.create_repo(lake, "forms")
    rebuild.replay_setting(lake, "forms", {"key": keys.BRANCH_PROTECTION, "value": ["stable_*"]})
    assert protection.get_rules(lake, "forms").to_list() == [{"pattern": "stable_*"}]
    rule = {"pattern": "main", "required_approvals": 2, "required_checks": True}
    rebuild.replay_setting(lake, "forms", {"key": keys.BRANCH_PROTECTION, "value": [rule]})
    assert protection.get_rules(lake, "forms").to_list() == [rule]


def test_group_writer_stores_every_write_of_many_threads_in_fewer_transactions(tmp_path: Path) -> None:
    import threading
    import time

    from lakectl.core.kv.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path / "g.db"))
    transactions = []

    class Counting:
        """The real store, counting its write transactions, each holding the write lock a while
        (as a loaded database does)."""

        def set(self, partition: str, key: str, value: bytes) -> None:
            transactions.append(1)
            time.sleep(0.001)
            store.set(partition, key, value)

        def set_many(
            self,
            partition: str,
            items: list[tuple[str, bytes]],
            also: tuple[tuple[str, str, bytes], ...] = (),
        ) -> None:
            transactions.append(len(items))
            time.sleep(0.001)
            store.set_many(partition, items, also)

        def delete_many(self, partition: str, keys: list[str]) -> None:
            store.delete_many(partition, keys)

        def drop_partition(self, partition: str) -> None:
            store.drop_partition(partition)

    group = journal.GroupWriter(Counting(), "journal/live/g")  # type: ignore[arg-type]

    def write(t: int) -> None:
        for i in range(100):
            group.write(f"{t}-{i:03d}", f"{t} {i}".encode())
            assert store.get("journal/live/g", f"{t}-{i:03d}") == f"{t} {i}".encode()  # durable on return

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(transactions) == 800
    assert len(dict(store.scan("journal/live/g"))) == 800
    assert len(transactions) < 400  # most transactions carried several entries
    store.close()


def test_a_group_write_that_fails_in_any_way_fails_its_callers_and_not_the_next_batch(tmp_path: Path) -> None:
    import threading

    from lakectl.core.kv.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path / "g.db"))
    broken = threading.Event()
    broken.set()

    class Flaky:
        def set(self, partition: str, key: str, value: bytes) -> None:
            if broken.is_set():
                raise RuntimeError("the driver broke")
            store.set(partition, key, value)

    group = journal.GroupWriter(Flaky(), "journal/live/g")  # type: ignore[arg-type]
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            group.write(f"{t}", b"x")
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a failed batch left its writers waiting"
    assert len(errors) + len(dict(store.scan("journal/live/g"))) == 4
    assert errors
    broken.clear()
    group.write("after", b"y")  # the writer goes on
    assert store.get("journal/live/g", "after") == b"y"
    store.close()


def test_fsck_counts_sealed_batches_as_referenced_and_reports_a_lost_one(lake: Lake) -> None:
    from lakectl.core.upkeep import fsck

    p.create_repo(lake, "checked")
    journal.flush(lake)  # sealed, and its log block, held until then, deleted
    (batch,) = journal.batches(lake.kv)
    report = fsck.check(lake).to_dict()
    assert report["ok"] and report["orphaned"]["count"] == 0
    lake.blocks.delete(batch["locator"])
    (missing,) = fsck.check(lake).to_dict()["missing"]
    assert (missing["locator"], missing["path"]) == (batch["locator"], "(journal batch 1..1)")


def test_compaction_drops_superseded_entries_and_a_rebuild_still_gives_the_lake(lake: Lake) -> None:
    from lakectl.core.journal import rebuild
    from lakectl.core.kv.memory import MemoryStore

    p.create_repo(lake, "gone-r")
    writes.upload(lake, "gone-r", "main", "a", b"a")
    p.delete_repo(lake, "gone-r")
    p.create_repo(lake, "kept-r")
    p.create_branch(lake, "kept-r", "tmp", "main")
    writes.upload(lake, "kept-r", "tmp", "t", b"t")
    p.delete_branch(lake, "kept-r", "tmp")
    writes.upload(lake, "kept-r", "main", "m", b"m")
    p.commit(lake, "kept-r", "main", "m")
    retention.set_rules(lake, "kept-r", retention.GCRules.from_dict({"default_retention_days": 1}))
    retention.set_rules(lake, "kept-r", retention.GCRules.from_dict({"default_retention_days": 2}))
    writes.upload(lake, "kept-r", "main", "staged", b"s")
    journal.seal(lake.kv, lake.blocks)
    old = journal.batches(lake.kv)
    before = [e.event_type for e in journal.entries(lake.kv, lake.blocks)]
    done = compact.compact(lake.kv, lake.blocks)
    after = list(journal.entries(lake.kv, lake.blocks))
    assert done == {"entries": len(after), "dropped": len(before) - len(after), "batches": 1}
    assert [e.event_type for e in after] == [
        "create-repository",
        "create-branch",
        "delete-branch",
        "write-objects",
        "commit",
        "settings",
        "write-objects",
    ]
    assert {e.repo_id for e in after} == {"kept-r"}
    assert after[-1].logical_timestamp == len(before)  # timestamps kept
    assert not any(lake.blocks.exists(b["locator"]) for b in old)  # the old generation is gone
    # The journal goes on after the compacted part; a rebuild gives the lake back.
    p.create_tag(lake, "kept-r", "v1", "main")
    assert journal.tail(lake.kv, lake.blocks, amount=1)[0].logical_timestamp == len(before) + 1
    fresh = MemoryStore()
    rebuild.rebuild(lake.blocks, fresh)
    rebuilt = Lake(kv=fresh, blocks=lake.blocks)
    assert [r.name for r in rebuilt.refs.list_repos()] == ["kept-r"]
    assert b"".join(p.read(rebuilt, "kept-r", "main", "staged")) == b"s"
    assert rebuilt.refs.get_tag("kept-r", "v1").commit_id == lake.refs.get_tag("kept-r", "v1").commit_id
    assert retention.get_rules(rebuilt, "kept-r").to_dict() == retention.get_rules(lake, "kept-r").to_dict()


def test_a_sealer_that_lost_to_the_same_batch_keeps_it_when_the_cursor_moved_on(lake: Lake) -> None:
    """Two sealers seal the same entries at the same timestamp (the same bytes, one block); the
    winner's batch is then superseded as the cursor's by a third seal. The loser must not delete
    the block: it is the published batch."""
    p.create_repo(lake, "raced")
    kv = lake.kv
    interfered = []

    class Racing:
        """The lake's store; the loser's cursor swap first lets two other seals run."""

        def __getattr__(self, name: str) -> object:
            return getattr(kv, name)

        def set_if(self, partition: str, key: str, value: bytes, expected: bytes | None) -> None:
            if key == keys.JOURNAL_CURSOR and not interfered:
                interfered.append(1)
                journal.seal(kv, lake.blocks)  # the same entries, the same bytes: it wins
                p.create_tag(lake, "raced", "v1", "main")
                journal.seal(kv, lake.blocks)  # and the cursor moves on
            kv.set_if(partition, key, value, expected)

    journal.seal(Racing(), lake.blocks)  # type: ignore[arg-type]
    assert interfered
    assert [e.event_type for e in journal.entries(kv, lake.blocks)] == ["create-repository", "create-tag"]
    assert all(lake.blocks.exists(b["locator"]) for b in journal.batches(kv))


def test_a_writer_seals_what_it_finished_within_the_interval(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal, "SEAL_INTERVAL", 0.05)
    p.create_repo(lake, "kept")
    writes.upload(lake, "kept", "main", "a.csv", b"1\n")
    deadline = time.monotonic() + 30
    while journal.last_timestamp(lake.kv) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)  # nobody reads the feed: the writer's keeper seals by itself
    sealed = journal.entries(lake.kv, lake.blocks)
    assert [e.event_type for e in sealed] == ["create-repository", "write-objects"]


def test_a_flush_returns_only_once_a_seal_in_flight_has_ended(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush while the keeper seals must not return before the keeper's seal lands: callers
    (a server's tests, a rebuild) read the lake right after and must see it sealed."""
    p.create_repo(lake, "raced")
    sink = journal.find(lake.events)
    assert sink is not None
    started = threading.Event()
    real = journal.seal

    def slow_seal(kv: object, blocks: object) -> None:
        started.set()
        time.sleep(0.3)
        real(kv, blocks)

    monkeypatch.setattr(journal, "seal", slow_seal)
    keeper = threading.Thread(target=sink._seal)
    keeper.start()
    assert started.wait(10)
    journal.flush(lake)  # finds nothing pending: the keeper took it
    assert not list(lake.kv.scan(keys.journal_live_partition(sink.writer)))
    assert journal.last_timestamp(lake.kv) == 1
    keeper.join()


def _writers(lake: Lake) -> list[str]:
    return [k for k, _ in lake.kv.scan(keys.JOURNAL) if k.startswith(keys.JOURNAL_WRITER_PREFIX)]


def test_closing_a_lake_leaves_its_logged_entries_to_the_next_seal(tmp_path: Path) -> None:
    """A closing writer's entries are in its log already: the next seal takes them, and the seal
    after it lets the closed writer go with its log; once enough closed writers wait, a closing
    writer seals them all."""
    from lakectl.core.journal import log

    lake = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(lake, "closed")
    writer = _writer(lake)
    lake.close()
    again = opening.open_lake(str(tmp_path / "lake"))
    assert journal.last_timestamp(again.kv) == 0 and log.files(again.blocks, writer)
    assert _writers(again) == [keys.journal_writer_key(writer)]
    assert journal.seal(again.kv, again.blocks) == 1 and journal.last_timestamp(again.kv) == 1
    journal.seal(again.kv, again.blocks)  # recovery finds the closed writer with nothing left
    assert _writers(again) == [] and log.files(again.blocks) == []
    assert not list(again.kv.scan(keys.journal_live_partition(writer)))
    again.close()
    for n in range(journal.CLOSE_SEAL_WRITERS):
        lake = opening.open_lake(str(tmp_path / "lake"))
        p.create_branch(lake, "closed", f"b{n}", "main")
        lake.close()
    again = opening.open_lake(str(tmp_path / "lake"))
    assert journal.last_timestamp(again.kv) == journal.CLOSE_SEAL_WRITERS + 1  # the last one sealed
    again.close()


def test_a_writer_is_dead_when_its_process_is_gone_or_its_heartbeat_old() -> None:
    me = writers.writer_record()
    assert writers.is_alive(me)
    code = "import os; print(os.getpid())"
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert not writers.is_alive({**me, "pid": int(gone.stdout)})  # exited
    assert not writers.is_alive({**me, "start": (me["start"] or 0) + 1})  # the pid, reused
    elsewhere = {**me, "host": me["host"] + "-elsewhere"}
    assert writers.is_alive(elsewhere)
    assert not writers.is_alive({**elsewhere, "heartbeat": time.time() - writers.LEASE - 1})
    assert writers.is_alive({})  # a record that cannot say is never recovered from under a writer


def test_a_refs_restore_is_one_entry_and_a_rebuild_puts_it_back(lake: Lake, tmp_path: Path) -> None:
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.journal import rebuild
    from lakectl.core.kv.sqlite import SQLiteStore
    from lakectl.core.upkeep import refsdump
    from tests.property.test_journal_rebuild import state

    p.create_repo(lake, "src")
    writes.upload(lake, "src", "main", "a.csv", b"1\n")
    p.commit(lake, "src", "main", "one")
    p.create_branch(lake, "src", "dev", "main")
    p.create_tag(lake, "src", "v1", "main")
    p.create_repo(lake, "copy", "main", bare=True)
    refsdump.restore(lake, "copy", refsdump.dump(lake, "src"))
    (entry,) = journal.tail(lake.kv, lake.blocks, amount=1)
    assert (entry.event_type, entry.repo_id) == ("restore-refs", "copy")
    assert sorted(entry.event_payload["branches"]) == ["dev", "main"]
    assert entry.event_payload["tags"] == [["v1", p.get_branch(lake, "src", "main").commit_id]]
    expected = state(lake)
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(str(tmp_path / "lake" / "blocks")), fresh)
        assert state(Lake(kv=fresh, blocks=lake.blocks)) == expected
    finally:
        fresh.close()
