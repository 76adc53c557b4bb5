"""Rebuild from the journal under concurrent writers: each race is staged deterministically (two
lakes open on one SQLite file, each with its own journal writer; one verb held at its ``before``
or ``after`` by a gate in the event sinks while the other lake acts), and the rebuilt lake is the
original: every head, staged row (as stored) and byte (docs/decisions/0009-journal.md,
"Concurrent writers"). Each of these failed when entries were replayed in their clock order."""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes, keys, listing, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.events import Event, EventSink, Fanout, Verb
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.model import Branch, BranchId, RepositoryId, StagingToken
from lakectl.errors import NothingToCommit, PredicateFailed
from tests.property.test_journal_rebuild import state

REPO = "races"


class Gate:
    """Holds the first ``verb`` that reaches ``at`` (``before``: its intent is stored, its
    mutation not begun; ``after``: its mutation landed, the journal's outcome not yet written)."""

    def __init__(self, verb: Verb, at: str) -> None:
        self.verb, self.at = verb, at
        self.reached, self.go = threading.Event(), threading.Event()
        self.armed = True

    def _hold(self, event: Event, at: str) -> None:
        if self.armed and event.verb is self.verb and at == self.at:
            self.armed = False
            self.reached.set()
            assert self.go.wait(30), "the gate was never opened"

    def before(self, event: Event) -> None:
        self._hold(event, "before")

    def after(self, event: Event) -> None:
        self._hold(event, "after")

    def failed(self, event: Event, error: BaseException) -> None:
        pass


def gated(lake: Lake, verb: Verb, at: str) -> Gate:
    gate = Gate(verb, at)
    sink: EventSink = lake.events
    # Before: behind the journal, so the intent is stored first; after: ahead of it.
    lake.events = Fanout([sink, gate] if at == "before" else [gate, sink])
    return gate


class Held:
    """``action`` run in a thread until ``gate`` holds it; :meth:`release` lets it finish."""

    def __init__(self, gate: Gate, action: Callable[[], Any]) -> None:
        self.gate = gate
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(action,))
        self.thread.start()
        assert gate.reached.wait(30), "the held verb never reached its gate"

    def _run(self, action: Callable[[], Any]) -> None:
        try:
            action()
        except BaseException as e:  # re-raised in the test's thread
            self.failure = e

    def release(self) -> None:
        self.gate.go.set()
        self.thread.join(30)
        if self.failure is not None:
            raise self.failure


@pytest.fixture
def lakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Lake, Lake]]:
    """Two lakes on one home: two processes' worth of journal writers."""
    monkeypatch.setenv("LAKECTL_COMMITTER", "racer")
    home = str(tmp_path / "lake")
    first = opening.open_lake(home)
    journal.enable(first)
    p.create_repo(first, REPO)
    second = opening.open_lake(home)
    yield first, second
    first.close()
    second.close()


def assert_rebuilt_is_original(a: Lake, b: Lake, tmp_path: Path) -> dict[str, Any]:
    journal.seal(a.kv, a.blocks)
    expected = state(a, dangling=False)
    a.close()
    b.close()
    os.remove(tmp_path / "lake" / "lake.db")
    blocks = LocalAdapter(str(tmp_path / "lake" / "blocks"))
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(blocks, fresh)
        assert state(Lake(kv=fresh, blocks=blocks), dangling=False) == expected
    finally:
        fresh.close()
    return expected


def read(lake: Lake, path: str, ref: str = "main") -> bytes:
    return b"".join(p.read(lake, REPO, ref, path))


def test_two_writes_of_one_path_replay_in_the_order_they_landed(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    # a's intent is older, but its write lands after b's: a's value is the one staged.
    held = Held(gated(a, Verb.WRITE_OBJECTS, "before"), lambda: writes.upload(a, REPO, "main", "x", b"a"))
    writes.upload(b, REPO, "main", "x", b"b")
    held.release()
    assert read(b, "x") == b"a"
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_write_overwritten_before_its_verb_ends_replays_before_the_write_that_overwrote_it(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    # a's write lands first, b's after it, and a's verb ends last of all: the clocks the two
    # writes read in their own transactions say so, whatever came after.
    held = Held(gated(a, Verb.WRITE_OBJECTS, "after"), lambda: writes.upload(a, REPO, "main", "x", b"a"))
    writes.upload(b, REPO, "main", "x", b"b")
    held.release()
    assert read(b, "x") == b"b"
    journal.seal(b.kv, b.blocks)
    entries = [e for e in journal.tail(b.kv, b.blocks, amount=10) if e.event_type == "write-objects"]
    winner = p.stat(b, REPO, "main", "x").entry
    assert winner is not None
    by_winning = {e.event_payload["rows"][0][1][1] == winner.checksum: e.event_payload for e in entries}
    assert by_winning[False]["settled"] < by_winning[True]["settled"]
    assert "lost" not in by_winning[False] and "lost" not in by_winning[True]
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_write_that_landed_after_a_commit_sealed_stays_staged(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    writes.upload(b, REPO, "main", "base", b"0")
    # a's intent comes before the commit, its write after the commit sealed the staging.
    held = Held(gated(a, Verb.WRITE_OBJECTS, "before"), lambda: writes.upload(a, REPO, "main", "late", b"1"))
    made = p.commit(b, REPO, "main", "base")
    held.release()
    assert [c.path for c in changes.diff_uncommitted(b, REPO, "main")] == ["late"]
    assert p.get_commit(b, REPO, "main").id == made.id
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_write_that_landed_after_a_reset_stays_staged(lakes: tuple[Lake, Lake], tmp_path: Path) -> None:
    a, b = lakes
    writes.upload(b, REPO, "main", "dropped", b"0")
    # a's intent comes before the reset, its write after the reset dropped the staging.
    held = Held(gated(a, Verb.WRITE_OBJECTS, "before"), lambda: writes.upload(a, REPO, "main", "late", b"1"))
    merging.reset(b, REPO, "main")
    held.release()
    assert read(b, "late") == b"1"
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_write_the_commit_took_is_not_staged_again(lakes: tuple[Lake, Lake], tmp_path: Path) -> None:
    a, b = lakes
    writes.upload(a, REPO, "main", "base", b"0")
    # The commit's intent comes before the write, but it seals the staging after the write landed.
    held = Held(gated(b, Verb.COMMIT, "before"), lambda: p.commit(b, REPO, "main", "both"))
    writes.upload(a, REPO, "main", "early", b"1")
    held.release()
    assert {o.path for o in listing.list_objects(a, REPO, "main@")} == {"base", "early"}
    branch = p.get_branch(a, REPO, "main")
    assert list(a.staging.iter_staged(RepositoryId(REPO), branch.tokens)) == []
    assert_rebuilt_is_original(a, b, tmp_path)


def test_the_head_is_the_last_commit_to_land_not_the_last_entry(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    writes.upload(a, REPO, "main", "one", b"1")
    # a's commit intent is older than b's whole commit; a commits on top of b's.
    held = Held(gated(a, Verb.COMMIT, "before"), lambda: p.commit(a, REPO, "main", "a's"))
    first = p.commit(b, REPO, "main", "b's")
    writes.upload(b, REPO, "main", "two", b"2")
    held.release()
    head = p.get_commit(b, REPO, "main")
    assert head.message == "a's" and head.parents == (first.id,)
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_merge_racing_commits_on_its_source_keeps_both_heads(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    p.create_branch(a, REPO, "dev", "main")
    writes.upload(a, REPO, "dev", "one", b"1")
    p.commit(a, REPO, "dev", "one")
    # The merge's intent comes first; a commit on main lands before the merge's CAS... which
    # then loses and is refused, leaving nothing; a second merge lands on top.
    held = Held(gated(a, Verb.MERGE, "before"), lambda: merging.merge(a, REPO, "dev", "main"))
    writes.upload(b, REPO, "main", "m", b"m")
    p.commit(b, REPO, "main", "on main")
    with pytest.raises(PredicateFailed):  # the branch moved under the merge
        held.release()
    merging.merge(b, REPO, "dev", "main")
    writes.upload(a, REPO, "dev", "two", b"2")
    assert_rebuilt_is_original(a, b, tmp_path)


def test_writes_after_a_commit_died_between_its_seal_and_its_commit_stay_staged(
    lakes: tuple[Lake, Lake], tmp_path: Path
) -> None:
    a, b = lakes
    writes.upload(a, REPO, "main", "sealed", b"1")
    # A commit process killed after it sealed the staging: the token moved, no entry says so.
    a.committer._seal(RepositoryId(REPO), BranchId("main"), False)
    writes.upload(b, REPO, "main", "after", b"2")
    assert {c.path for c in changes.diff_uncommitted(b, REPO, "main")} == {"sealed", "after"}
    assert_rebuilt_is_original(a, b, tmp_path)


def test_a_commit_with_only_rows_that_change_nothing_leaves_the_branch_alone(
    lakes: tuple[Lake, Lake],
) -> None:
    a, _ = lakes
    writes.upload(a, REPO, "main", "x", b"1")
    p.commit(a, REPO, "main", "x")
    writes.upload(a, REPO, "main", "x", b"1")  # the same bytes: staged, changes nothing
    before = p.get_branch(a, REPO, "main")
    with pytest.raises(NothingToCommit):
        p.commit(a, REPO, "main", "nothing")
    # Refused before sealing: the staging token did not move under no journal entry.
    assert p.get_branch(a, REPO, "main") == before


@pytest.mark.parametrize("then_commit", [False, True], ids=["staged", "then committed"])
def test_a_journal_begun_by_an_older_version_rebuilds_with_this_ones_entries(
    lakes: tuple[Lake, Lake], then_commit: bool
) -> None:
    a, _ = lakes
    # A branch made before staging tokens said when they were made, by entries that named no
    # tokens and no branch records; this version's writes then name that random token.
    rid, main = RepositoryId(REPO), BranchId("main")
    branch = p.get_branch(a, REPO, "main")
    a.kv.set(
        keys.repo_partition(rid),
        keys.branch_key(main),
        Branch(main, branch.commit_id, StagingToken(uuid.uuid4().hex)).encode(),
    )
    writes.upload(a, REPO, "main", "old", b"0")
    writes.upload(a, REPO, "main", "new", b"1")
    if then_commit:
        p.commit(a, REPO, "main", "both")
        writes.upload(a, REPO, "main", "after", b"2")
    journal.seal(a.kv, a.blocks)
    expected = state(a)
    entries = list(journal.entries(a.kv, a.blocks))
    older = {"branch_record", "dropped"}
    entries[0] = dataclasses.replace(
        entries[0], event_payload={k: v for k, v in entries[0].event_payload.items() if k not in older}
    )
    entries[1] = dataclasses.replace(
        entries[1],
        event_payload={k: v for k, v in entries[1].event_payload.items() if k not in {"tokens", "settled"}},
    )
    fresh = Lake(kv=MemoryStore(), blocks=a.blocks)
    replaying = rebuild.Replay(fresh)
    for entry in entries:
        replaying.apply(entry)
    replaying.finish()
    assert state(fresh) == expected


@pytest.mark.parametrize("path", ["other/late", "tables/late"])
def test_a_write_a_partial_commit_took_stays_staged_or_committed_as_it_landed(
    lakes: tuple[Lake, Lake], tmp_path: Path, path: str
) -> None:
    a, b = lakes
    writes.upload(a, REPO, "main", "tables/t", b"0")
    writes.upload(a, REPO, "main", "other/early", b"1")
    # The partial commit's intent comes first; the write lands in the token before it is sealed,
    # so the commit takes it: committed under its prefix, kept staged elsewhere.
    commit = lambda: p.commit(b, REPO, "main", "tables", prefixes=["tables/"])  # noqa: E731
    held = Held(gated(b, Verb.COMMIT, "before"), commit)
    writes.upload(a, REPO, "main", path, b"2")
    held.release()
    committed = {o.path for o in listing.list_objects(a, REPO, "main@")}
    staged = {c.path for c in changes.diff_uncommitted(a, REPO, "main")}
    assert committed == {"tables/t"} | ({path} if path.startswith("tables/") else set())
    assert staged == {"other/early"} | (set() if path.startswith("tables/") else {path})
    assert_rebuilt_is_original(a, b, tmp_path)


@pytest.mark.parametrize("path", ["other/late", "tables/late", "logs/late"])
def test_a_write_two_partial_commits_took_before_its_entry_stays_where_it_landed(
    lakes: tuple[Lake, Lake], tmp_path: Path, path: str
) -> None:
    """The write lands, then two partial commits each take the branch's staging (the first keeps
    the write's token's rest in a new token, the second takes that one in turn); only then is the
    write's entry done, so a rebuild meets it after both commits and must follow both."""
    a, b = lakes
    writes.upload(a, REPO, "main", "tables/t", b"0")
    held = Held(gated(a, Verb.WRITE_OBJECTS, "after"), lambda: writes.upload(a, REPO, "main", path, b"2"))
    p.commit(b, REPO, "main", "tables", prefixes=["tables/"])
    writes.upload(b, REPO, "main", "logs/x", b"3")
    p.commit(b, REPO, "main", "logs", prefixes=["logs/"])
    held.release()
    committed = {o.path for o in listing.list_objects(a, REPO, "main")} - {
        c.path for c in changes.diff_uncommitted(a, REPO, "main")
    }
    staged = {c.path for c in changes.diff_uncommitted(a, REPO, "main")}
    assert staged == ({path} if path == "other/late" else set())
    assert path in committed or path in staged
    assert_rebuilt_is_original(a, b, tmp_path)


def _commit_before_the_writer_checks_its_token(a: Lake, b: Lake, seal: bool) -> None:
    """Make ``a``'s next staged write race a commit on ``b``: its rows and entry land in the
    branch's token, then (``seal``: and a sealer seals the entry) the commit takes that token,
    before ``a`` looks whether its token is still the branch's, so that it writes again."""
    refs = a.staging.refs
    looks = iter(range(1_000))

    class Racing:
        def __getattr__(self, name: str) -> Any:
            return getattr(refs, name)

        def get_branch(self, repo: RepositoryId, branch: BranchId) -> Branch:
            if next(looks) == 1:  # the write's second look: its first attempt has landed
                p.commit(b, REPO, "main", "takes the token")
                if seal:
                    journal.seal(b.kv, b.blocks)
            return refs.get_branch(repo, branch)

    a.staging.refs = Racing()  # type: ignore[assignment]


def _entries_of(lake: Lake, path: str) -> list[list[str]]:
    journal.seal(lake.kv, lake.blocks)
    return [
        e.event_payload["tokens"]
        for e in journal.entries(lake.kv, lake.blocks)
        if e.event_type == "write-objects" and path in {row[0] for row in e.event_payload["rows"]}
    ]


@pytest.mark.parametrize("sealed_between", [False, True])
def test_a_write_redone_into_the_next_token_is_journaled_with_every_token(
    lakes: tuple[Lake, Lake], tmp_path: Path, sealed_between: bool
) -> None:
    """The redo stores its entry under a key of its own. Before, it stored the first attempt's key
    again: after a seal in between, the sealer's next run deleted it as already sealed, and the
    rebuilt lake lost the write's second token."""
    a, b = lakes
    writes.upload(b, REPO, "main", "base", b"0")
    _commit_before_the_writer_checks_its_token(a, b, sealed_between)
    writes.upload(a, REPO, "main", "late", b"1")
    tokens = _entries_of(a, "late")
    if sealed_between:  # the first attempt's entry was sealed before the redo: both stay
        assert len(tokens) == 2 and tokens[1][:1] == tokens[0] and len(tokens[1]) == 2
    else:  # one entry: the last attempt's, with both tokens
        assert len(tokens) == 1 and len(tokens[0]) == 2
    assert read(b, "late") == b"1"
    assert_rebuilt_is_original(a, b, tmp_path)
