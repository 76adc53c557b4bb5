"""The event stream of the core: every hooked verb announces itself before its change and after
it, and a consumer that refuses the ``before`` leaves the lake exactly as it was."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.events import Event, Fanout, Verb
from lakectl.core.lake import Lake
from lakectl.errors import PredicateFailed


class Recorder:
    def __init__(self, refuse: Verb | None = None) -> None:
        self.refuse = refuse
        self.seen: list[tuple[str, Event]] = []

    def before(self, event: Event) -> None:
        self.seen.append(("before", event))
        if event.verb is self.refuse:
            raise PredicateFailed(f"refused {event.verb.value}")

    def after(self, event: Event) -> None:
        self.seen.append(("after", event))

    def failed(self, event: Event, error: BaseException) -> None:
        self.seen.append(("failed", event))


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, "events")
    writes.upload(opened, "events", "main", "a.csv", io.BytesIO(b"1\n"))
    p.commit(opened, "events", "main", "base", committer="tester")
    yield opened
    opened.close()


def state(lake: Lake) -> list[tuple[str, str, bytes]]:
    """Every KV row of the lake: a refused verb must leave them all as they were."""
    return [
        (partition, key, value)
        for partition in lake.kv.partitions("")  # type: ignore[attr-defined]
        for key, value in lake.kv.scan(partition, "")
    ]


def test_every_hooked_verb_announces_itself_before_and_after(lake: Lake) -> None:
    recorder = Recorder()
    lake.events = recorder
    p.create_branch(lake, "events", "dev", "main")
    writes.upload(lake, "events", "dev", "b.csv", io.BytesIO(b"2\n"))
    made = p.commit(lake, "events", "dev", "add b", committer="ada", metadata={"k": "v"})
    merged = merging.merge(lake, "events", "dev", "main", committer="ada")
    p.create_tag(lake, "events", "v1", "main")
    p.delete_tag(lake, "events", "v1")
    p.delete_branch(lake, "events", "dev")
    # The journal-only verbs (the upload's write-objects) announce themselves too.
    hooked = [(when, e) for when, e in recorder.seen if e.verb.has_hooks]
    assert [e.verb for _, e in recorder.seen if not e.verb.has_hooks] == [Verb.WRITE_OBJECTS] * 2
    verbs = [(when, e.verb) for when, e in hooked]
    assert verbs == [
        (when, verb)
        for verb in (
            Verb.CREATE_BRANCH,
            Verb.COMMIT,
            Verb.MERGE,
            Verb.CREATE_TAG,
            Verb.DELETE_TAG,
            Verb.DELETE_BRANCH,
        )
        for when in ("before", "after")
    ]
    commit_before, commit_after = (e for _, e in hooked[2:4])
    assert commit_before.commit_id == "" and commit_after.commit_id == made.id
    assert (commit_after.branch, commit_after.committer, commit_after.commit_message) == (
        "dev",
        "ada",
        "add b",
    )
    assert dict(commit_after.metadata) == {"k": "v"}
    merge_after = hooked[5][1]
    assert (merge_after.source_ref, merge_after.branch, merge_after.commit_id) == (
        "dev",
        "main",
        merged.commit.id,
    )
    tag_after = hooked[7][1]
    assert (tag_after.tag, tag_after.commit_id) == ("v1", merged.commit.id)


@pytest.mark.parametrize(
    "verb",
    [Verb.COMMIT, Verb.MERGE, Verb.CREATE_BRANCH, Verb.DELETE_BRANCH, Verb.CREATE_TAG, Verb.DELETE_TAG],
)
def test_a_refused_before_changes_nothing(lake: Lake, verb: Verb) -> None:
    p.create_branch(lake, "events", "dev", "main")
    writes.upload(lake, "events", "dev", "b.csv", io.BytesIO(b"2\n"))
    p.commit(lake, "events", "dev", "add b", committer="ada")
    p.create_tag(lake, "events", "v0", "main")
    writes.upload(lake, "events", "main", "staged.csv", io.BytesIO(b"3\n"))
    if verb is Verb.MERGE:
        merging.reset(lake, "events", "main")
    before = state(lake)
    recorder, second = Recorder(refuse=verb), Recorder()
    lake.events = Fanout([recorder, second])
    attempts = {
        Verb.COMMIT: lambda: p.commit(lake, "events", "main", "m", committer="ada"),
        Verb.MERGE: lambda: merging.merge(lake, "events", "dev", "main", committer="ada"),
        Verb.CREATE_BRANCH: lambda: p.create_branch(lake, "events", "new", "main"),
        Verb.DELETE_BRANCH: lambda: p.delete_branch(lake, "events", "dev"),
        Verb.CREATE_TAG: lambda: p.create_tag(lake, "events", "v1", "main"),
        Verb.DELETE_TAG: lambda: p.delete_tag(lake, "events", "v0"),
    }
    with pytest.raises(PredicateFailed, match="refused"):
        attempts[verb]()
    assert state(lake) == before
    assert [when for when, _ in recorder.seen] == ["before"]
    assert second.seen == [], "a refusal stops the fan-out before the next sink"
