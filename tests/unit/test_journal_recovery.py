"""A writer killed between its intent and its outcome: once it is seen dead, its open intent is
decided from the lake (done, with what the verb produced, or withdrawn), so that journal and
metadata agree, and a rebuild gives back the lake (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes, keys, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.events import Event
from lakectl.core.journal import form, journal, rebuild, writers
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.upkeep import refsdump, retention
from lakectl.errors import AlreadyExists, NothingToCommit, StorageError
from tests.property.test_journal_rebuild import state

REPO = "rec"


class Killed(BaseException):
    """The writer's process ends here (a SIGKILL, as the verb sees it)."""


class DiesAfterTheChange(journal.Journal):
    def after(self, event: Event) -> None:
        raise Killed


class DiesBeforeTheChange(journal.Journal):
    def before(self, event: Event) -> None:
        super().before(event)
        raise Killed


def _dead_pid() -> int:
    code = "import os; print(os.getpid())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(opened)
    p.create_repo(opened, REPO)
    writes.upload(opened, REPO, "main", "a.csv", b"1\n")
    p.commit(opened, REPO, "main", "one")
    p.create_branch(opened, REPO, "dev", "main")
    writes.upload(opened, REPO, "dev", "b.csv", b"2\n")
    p.commit(opened, REPO, "dev", "two")
    p.create_tag(opened, REPO, "old", "main")
    yield opened
    opened.close()


def die(lake: Lake, sink: type[journal.Journal], verb: Callable[[Lake], Any]) -> None:
    """Run ``verb`` with a writer that dies at ``sink``'s point, then leave it for dead."""
    writer = die_unseen(lake, verb, sink)
    key = keys.journal_writer_key(writer.writer)
    lake.kv.set(keys.JOURNAL, key, json.dumps({**writers.writer_record(), "pid": _dead_pid()}).encode())


def die_unseen(
    lake: Lake, verb: Callable[[Lake], Any], sink: type[journal.Journal] = DiesAfterTheChange
) -> journal.Journal:
    """Run ``verb`` with a writer that dies at ``sink``'s point (by default after the change,
    before it logs the outcome), never taken for dead so far (its record names this living
    process): no seal decides its intent, as when the metadata database is lost with it."""
    writer = sink(lake.kv, lake.blocks)
    kept, lake.events = lake.events, writer
    try:
        with pytest.raises(Killed):
            verb(lake)
    finally:
        lake.events = kept
        writer._stop.set()  # its keeper dies with it, with nothing said
        if writer._keeper is not None:
            writer._keeper.join()
    return writer


RULES = retention.GCRules.from_dict(
    {"default_retention_days": 7, "branches": [{"branch_id": "dev", "retention_days": 1}]}
)
VERBS: dict[str, Callable[[Lake], Any]] = {
    "write-objects": lambda lake: writes.upload(lake, REPO, "dev", "c.csv", io.BytesIO(b"3\n")),
    "delete-objects": lambda lake: writes.delete_objects(lake, REPO, "dev", ["b.csv"]),
    "commit": lambda lake: p.commit(lake, REPO, "main", "m"),
    "merge": lambda lake: merging.merge(lake, REPO, "dev", "main"),
    "revert": lambda lake: merging.revert(lake, REPO, "dev", "dev"),
    "reset": lambda lake: merging.reset(lake, REPO, "main"),
    "create-branch": lambda lake: p.create_branch(lake, REPO, "feat", "main"),
    "delete-branch": lambda lake: p.delete_branch(lake, REPO, "dev"),
    "create-tag": lambda lake: p.create_tag(lake, REPO, "v1", "dev"),
    "delete-tag": lambda lake: p.delete_tag(lake, REPO, "old"),
    "create-repository": lambda lake: p.create_repo(lake, "other"),
    "delete-repository": lambda lake: p.delete_repo(lake, REPO),
    "settings": lambda lake: retention.set_rules(lake, REPO, RULES),
    "restore-refs": lambda lake: refsdump.restore(lake, "copy", refsdump.dump(lake, REPO)),
}
PREPARE = {"commit": "m.csv", "reset": "x.csv"}
"""Staged by a living writer first, for the verbs that need something staged."""


def prepare(lake: Lake, name: str) -> None:
    if name in PREPARE:
        writes.upload(lake, REPO, "main", PREPARE[name], b"staged\n")
    if name == "restore-refs":
        p.create_repo(lake, "copy", "main", bare=True)


def rebuilt_state(lake: Lake, tmp_path: Path) -> dict[str, Any]:
    """The lake rebuilt from its blocks and journal alone, as the property test sees a lake."""
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        return state(Lake(kv=fresh, blocks=lake.blocks))
    finally:
        fresh.close()


def sealed_types(lake: Lake) -> list[str]:
    journal.seal(lake.kv, lake.blocks)  # recovery first: the dead writer's intent is decided
    return [e.event_type for e in journal.entries(lake.kv, lake.blocks)]


@pytest.mark.parametrize("name", VERBS)
def test_a_change_made_by_a_writer_that_died_before_its_outcome_is_journalled(
    lake: Lake, tmp_path: Path, name: str
) -> None:
    prepare(lake, name)
    before = sealed_types(lake)
    die(lake, DiesAfterTheChange, VERBS[name])
    assert sealed_types(lake) == [*before, name]  # decided as done
    recovered = list(journal.entries(lake.kv, lake.blocks))[-1]
    if name in ("commit", "revert"):
        head = p.get_branch(lake, REPO, "main" if name == "commit" else "dev").commit_id
        assert recovered.event_payload["commit_id"] == head  # the very commit it made
    if name == "merge":
        assert recovered.event_payload["commit_id"] == p.get_branch(lake, REPO, "main").commit_id
    assert rebuilt_state(lake, tmp_path) == state(lake)


@pytest.mark.parametrize("name", VERBS)
def test_an_intent_whose_writer_died_before_the_change_is_withdrawn(
    lake: Lake, tmp_path: Path, name: str
) -> None:
    prepare(lake, name)
    before, expected = sealed_types(lake), state(lake)
    die(lake, DiesBeforeTheChange, VERBS[name])
    assert state(lake) == expected
    if name == "settings":
        # A setting is recorded as the value it has now, which it kept: replayed, nothing moves.
        assert sealed_types(lake) == [*before, "settings"]
        assert list(journal.entries(lake.kv, lake.blocks))[-1].event_payload["value"] is None
    else:
        assert sealed_types(lake) == before
    assert rebuilt_state(lake, tmp_path) == expected
    # Nothing of the dead writer is left: its intent withdrawn, its registration gone.
    journal.seal(lake.kv, lake.blocks)
    writers = [k for k, _ in lake.kv.scan(keys.JOURNAL) if k.startswith(keys.JOURNAL_WRITER_PREFIX)]
    assert len(writers) == 1  # the fixture's own, alive


def test_a_living_writers_open_intent_is_left_alone(lake: Lake) -> None:
    writer = DiesAfterTheChange(lake.kv, lake.blocks)
    kept, lake.events = lake.events, writer
    with pytest.raises(Killed):
        p.create_branch(lake, REPO, "slow", "main")  # its outcome not written yet: it lives on
    lake.events = kept
    journal.seal(lake.kv, lake.blocks)
    assert "create-branch" not in [e.event_type for e in journal.entries(lake.kv, lake.blocks)][-1:]
    pending = [form.read_live(v)["state"] for _, v in lake.kv.scan(writer.partition)]
    assert pending == [journal.PENDING]
    writer.close()


def _pending(lake: Lake) -> list[dict[str, Any]]:
    sink = journal.find(lake.events)
    assert sink is not None
    records = [form.read_live(v) for _, v in lake.kv.scan(sink.partition)]
    return [r for r in records if r["state"] == journal.PENDING]


def test_a_refused_verb_withdraws_its_intent_at_once(lake: Lake) -> None:
    before = sealed_types(lake)
    with pytest.raises(AlreadyExists):
        p.create_branch(lake, REPO, "dev", "main")  # refused by its compare-and-swap
    with pytest.raises(NothingToCommit):
        p.commit(lake, REPO, "dev", "nothing staged")
    assert _pending(lake) == []  # no need to wait for the lake to close
    assert sealed_types(lake) == before


def test_a_verb_that_failed_after_its_change_landed_is_journalled(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(repo: Any, tokens: Any) -> None:
        raise StorageError("the disk went away")

    before = sealed_types(lake)
    monkeypatch.setattr(lake.staging, "drop_tokens", broken)
    with pytest.raises(StorageError):
        p.delete_branch(lake, REPO, "dev")  # the branch is gone; dropping its staging failed
    monkeypatch.undo()
    assert _pending(lake) == []
    assert sealed_types(lake) == [*before, "delete-branch"]
    assert rebuilt_state(lake, tmp_path) == state(lake)


@pytest.mark.parametrize("verb", ["commit", "merge"])
def test_a_commit_whose_writer_died_unlogged_is_rebuilt_once_a_later_change_names_it(
    lake: Lake, tmp_path: Path, verb: str
) -> None:
    """A writer dies after its verb published a commit on dev and before it logged the outcome;
    a living writer's merge of dev into main, acknowledged, names that commit as a parent. The
    metadata database is lost before anyone decides the dead intent: the rebuild still has the
    commit (logged before it was published), so main's history can be walked, and its journal
    holds the commit as done."""
    if verb == "commit":
        writes.upload(lake, REPO, "dev", "c.csv", b"3\n")
    else:
        writes.upload(lake, REPO, "main", "m.csv", b"4\n")
        p.commit(lake, REPO, "main", "main moves on")
    if verb == "commit":
        writer = die_unseen(lake, lambda lake: p.commit(lake, REPO, "dev", "its writer dies"))
    else:
        writer = die_unseen(lake, lambda lake: merging.merge(lake, REPO, "main", "dev"))
    dead = p.get_branch(lake, REPO, "dev").commit_id
    merged = merging.merge(lake, REPO, "dev", "main")

    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        rebuilt = Lake(kv=fresh, blocks=lake.blocks)
        history = [c.id for c in changes.log(rebuilt, REPO, "main")]
        assert history[0] == merged.commit.id and dead in history
        made = [e for e in journal.entries(fresh, lake.blocks) if e.event_payload.get("commit_id") == dead]
        assert [e.event_type for e in made] == [verb]
        assert state(rebuilt) == state(lake)
    finally:
        fresh.close()
    writer.close()


def test_a_branch_whose_writer_died_unlogged_is_rebuilt_once_a_write_to_it_was_acknowledged(
    lake: Lake, tmp_path: Path
) -> None:
    """A writer dies after it created a branch and before it logged the outcome; a living
    writer's upload to the new branch is acknowledged (logged). The metadata database is lost
    before anyone decides the dead intent: the rebuild has the branch (its intent, logged before
    the change, names the record it made) and the upload on it."""
    writer = die_unseen(lake, lambda lake: p.create_branch(lake, REPO, "feat", "main"))
    writes.upload(lake, REPO, "feat", "new.csv", b"on the new branch\n")

    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        rebuilt = Lake(kv=fresh, blocks=lake.blocks)
        assert b"".join(p.read(rebuilt, REPO, "feat", "new.csv")) == b"on the new branch\n"
        entries = journal.entries(fresh, lake.blocks)
        made = [e.event_type for e in entries if e.event_payload.get("branch") == "feat"]
        assert made == ["write-objects", "create-branch"]  # the branch's decided entry sealed last
        assert state(rebuilt) == state(lake)
    finally:
        fresh.close()
    writer.close()


def test_a_repository_whose_writer_died_unlogged_is_rebuilt_once_a_write_to_it_was_acknowledged(
    lake: Lake, tmp_path: Path
) -> None:
    """The same for a repository: created by a writer that dies before logging the outcome, then
    written to by a living one; rebuilt with its first commit, its default branch and the upload."""
    writer = die_unseen(lake, lambda lake: p.create_repo(lake, "orphan"))
    writes.upload(lake, "orphan", "main", "first.csv", b"in the new repository\n")

    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        rebuilt = Lake(kv=fresh, blocks=lake.blocks)
        assert b"".join(p.read(rebuilt, "orphan", "main", "first.csv")) == b"in the new repository\n"
        assert [c.message for c in changes.log(rebuilt, "orphan", "main")] == ["Repository created"]
        assert state(rebuilt) == state(lake)
    finally:
        fresh.close()
    writer.close()


def test_a_repository_whose_writer_died_unlogged_is_rebuilt_once_a_commit_on_it_names_its_first(
    lake: Lake, tmp_path: Path
) -> None:
    """A living writer commits on the repository a dead writer created: the commit names the
    repository's first commit as its parent, and the creation's entry is replayed once (as the
    repository's, not also as a commit's)."""
    writer = die_unseen(lake, lambda lake: p.create_repo(lake, "orphan"))
    writes.upload(lake, "orphan", "main", "first.csv", b"in the new repository\n")
    p.commit(lake, "orphan", "main", "the first data")

    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        rebuilt = Lake(kv=fresh, blocks=lake.blocks)
        history = [c.message for c in changes.log(rebuilt, "orphan", "main")]
        assert history == ["the first data", "Repository created"]
        types = [e.event_type for e in journal.entries(fresh, lake.blocks) if e.repo_id == "orphan"]
        assert sorted(types) == ["commit", "create-repository", "write-objects"]
        assert state(rebuilt) == state(lake)
    finally:
        fresh.close()
    writer.close()
