"""A repository's metadata: lakeFS's key-value pairs of a repository, journaled as a setting."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import keys, opening, repometadata
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.limits import MAX_METADATA_ENTRIES
from lakectl.errors import InvalidArgument, NotFound


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(opened)
    p.create_repo(opened, "meta")
    yield opened
    opened.close()


def test_keys_are_set_merged_and_deleted(lake: Lake) -> None:
    assert repometadata.get(lake, "meta") == {}
    assert repometadata.update(lake, "meta", {"team": "data", "tier": "gold"}) == {
        "team": "data",
        "tier": "gold",
    }
    repometadata.update(lake, "meta", {"tier": "silver", "owner": "ada"})
    assert repometadata.get(lake, "meta") == {"team": "data", "tier": "silver", "owner": "ada"}
    repometadata.delete(lake, "meta", ["team", "never-set"])
    assert repometadata.get(lake, "meta") == {"tier": "silver", "owner": "ada"}
    p.create_repo(lake, "other")
    assert repometadata.get(lake, "other") == {}  # each repository its own


def test_bad_metadata_is_refused_and_changes_nothing(lake: Lake) -> None:
    repometadata.update(lake, "meta", {"kept": "yes"})
    too_many = {f"k{i}": "v" for i in range(MAX_METADATA_ENTRIES)}
    for bad in ({"": "empty key"}, {"k\x1b": "escape"}, {"k": "\udcff"}, too_many):
        with pytest.raises(InvalidArgument):
            repometadata.update(lake, "meta", bad)
    assert repometadata.get(lake, "meta") == {"kept": "yes"}
    with pytest.raises(NotFound):
        repometadata.get(lake, "no-such-repo")
    with pytest.raises(NotFound):
        repometadata.update(lake, "no-such-repo", {"a": "b"})


def test_concurrent_writers_lose_no_key(lake: Lake) -> None:
    """Each writer sets its own key at the same time: compare-and-swap keeps them all."""
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            repometadata.update(lake, "meta", {f"writer{i}": str(i)})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert repometadata.get(lake, "meta") == {f"writer{i}": str(i) for i in range(8)}


def test_each_change_is_a_journal_entry_and_a_rebuild_gives_the_metadata_back(
    lake: Lake, tmp_path: Path
) -> None:
    repometadata.update(lake, "meta", {"team": "data", "tier": "gold"})
    repometadata.update(lake, "meta", {"tier": "gold"})  # no change: no entry
    repometadata.delete(lake, "meta", ["team"])
    journal.flush(lake)
    found = [e for e in journal.tail(lake.kv, lake.blocks, repo="meta") if e.event_type == "settings"]
    assert [e.event_payload for e in found] == [
        {"key": keys.REPOSITORY_METADATA, "value": {"team": "data", "tier": "gold"}},
        {"key": keys.REPOSITORY_METADATA, "value": {"tier": "gold"}},
    ]
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
        assert repometadata.get(Lake(kv=fresh, blocks=lake.blocks), "meta") == {"tier": "gold"}
    finally:
        fresh.close()
