"""The change feed's listing (issue 31, without Spark): each object a range of commits changed
under a prefix, insert or delete, with the commit that changed it, the entry to read and where
its new bytes begin; merges inside the range count along the end's first parents."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakectl.core import merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.feed import change_feed, commit_feed
from lakectl.core.lake import Lake
from lakectl.core.model import FeedKind
from lakectl.errors import InvalidArgument

REPO = "feed"

Change = tuple[str, FeedKind, str, bytes, int]


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, REPO)
    yield opened
    opened.close()


def commit(lake: Lake, message: str, branch: str = "main") -> str:
    return p.commit(lake, REPO, branch, message).id


def feed(lake: Lake, since: str, ref: str, prefix: str = "t/") -> list[Change]:
    """(path, kind, commit id, the bytes the feed reads, offset) of each change."""
    out = []
    for c in change_feed(lake, REPO, since, ref, prefix):
        data = b"".join(p.read_entry(lake, c.entry, c.offset))
        out.append((c.path, c.kind, c.commit_id, data, c.offset))
    return out


def test_inserts_deletes_and_appends_with_the_newest_commit_that_changed_each(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "t/a", b"a0")
    writes.upload(lake, REPO, "main", "t/b", b"b0")
    writes.upload(lake, REPO, "main", "t/log", b"one\n")
    writes.upload(lake, REPO, "main", "t/same", b"untouched")
    start = commit(lake, "start")
    writes.upload(lake, REPO, "main", "t/a", b"a1")
    writes.upload(lake, REPO, "main", "t/d", b"d1")
    writes.append(lake, REPO, "main", "t/log", b"two\n")
    second = commit(lake, "second")
    writes.upload(lake, REPO, "main", "t/a", b"a2")
    writes.delete_objects(lake, REPO, "main", ["t/b"])
    third = commit(lake, "third")
    writes.upload(lake, REPO, "main", "elsewhere", b"not under t/")
    writes.append(lake, REPO, "main", "t/log", b"three\n")
    fourth = commit(lake, "fourth")
    assert feed(lake, start, "main") == [
        ("t/a", FeedKind.INSERT, third, b"a2", 0),
        ("t/b", FeedKind.DELETE, third, b"b0", 0),  # read as it was at FROM
        ("t/d", FeedKind.INSERT, second, b"d1", 0),
        ("t/log", FeedKind.INSERT, fourth, b"two\nthree\n", 4),  # only what was appended
    ]
    assert feed(lake, second, third) == [
        ("t/a", FeedKind.INSERT, third, b"a2", 0),
        ("t/b", FeedKind.DELETE, third, b"b0", 0),
    ]
    assert feed(lake, fourth, fourth) == []


def test_a_merge_inside_the_range_is_the_commit_of_what_it_brought(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "t/f", b"foo\n")
    base = commit(lake, "base")
    p.create_branch(lake, REPO, "dev", "main")
    writes.upload(lake, REPO, "dev", "t/x", b"from dev")
    writes.append(lake, REPO, "dev", "t/f", b"bar\n")
    on_dev = commit(lake, "dev's", "dev")
    writes.upload(lake, REPO, "main", "t/y", b"on main")
    moved = commit(lake, "main's")
    merge = merging.merge(lake, REPO, "dev", "main").commit
    assert len(merge.parents) == 2
    assert feed(lake, base, merge.id) == [
        ("t/f", FeedKind.INSERT, merge.id, b"bar\n", 4),
        ("t/x", FeedKind.INSERT, merge.id, b"from dev", 0),  # not dev's commit: the merge's
        ("t/y", FeedKind.INSERT, moved, b"on main", 0),
    ]
    # FROM on the merged branch: what dev already had is no change.
    assert feed(lake, on_dev, merge.id) == [("t/y", FeedKind.INSERT, moved, b"on main", 0)]


def test_a_change_no_commit_of_the_line_made_is_the_merge_that_brought_from_in(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "t/z", b"v1")
    commit(lake, "base")
    p.create_branch(lake, REPO, "dev", "main")
    writes.upload(lake, REPO, "dev", "t/z", b"v2")
    since = commit(lake, "dev changes z", "dev")
    writes.upload(lake, REPO, "dev", "t/z", b"v1")
    commit(lake, "dev changes it back", "dev")
    writes.upload(lake, REPO, "main", "t/other", b"o")
    commit(lake, "main moves on")
    merge = merging.merge(lake, REPO, "dev", "main").commit
    writes.upload(lake, REPO, "main", "t/later", b"l")
    later = commit(lake, "later")
    rows = {path: (kind, cid, data) for path, kind, cid, data, _ in feed(lake, since, later)}
    assert rows["t/z"] == (FeedKind.INSERT, merge.id, b"v1")
    assert rows["t/later"] == (FeedKind.INSERT, later, b"l")


def test_from_not_an_ancestor_is_refused_as_diff_since_refuses_it(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "t/a", b"a")
    first = commit(lake, "first")
    writes.upload(lake, REPO, "main", "t/a", b"b")
    second = commit(lake, "second")
    with pytest.raises(InvalidArgument, match=r"is not an ancestor of .*: a change feed reads a range"):
        change_feed(lake, REPO, second, first)


def test_the_listing_costs_the_changes_not_the_objects(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = writes.upload(lake, REPO, "main", "seed", b"x").entry
    assert seed is not None  # 20,000 objects of the same bytes: staged at once
    writes.stage_rows(lake, REPO, "main", [(f"t/{i:05d}", seed.to_row()) for i in range(20_000)])
    start = commit(lake, "many")
    writes.upload(lake, REPO, "main", "t/10500", b"changed")
    end = commit(lake, "one changed")
    ranges = [r for c in (start, end) for r in lake.trees.ranges(p.get_commit(lake, REPO, c).meta_range_id)]
    covering = {r.id for r in ranges if r.min_key <= "t/10500" <= r.max_key}
    assert len({r.id for r in ranges}) > 4 * len(covering)  # a lake of many ranges
    opened: set[str] = set()
    for name in ("read_range", "read_columns", "read_paths"):
        monkeypatch.setattr(lake.trees.store, name, _counted(getattr(lake.trees.store, name), opened))
    assert [c.path for c in change_feed(lake, REPO, start, end, "t/")] == ["t/10500"]
    assert opened and opened <= covering  # only the ranges of the change, in both diffs


def _counted(read: Callable[[str], object], opened: set[str]) -> Callable[[str], object]:
    def counted(range_id: str) -> object:
        opened.add(range_id)
        return read(range_id)

    return counted


def test_by_commit_each_commit_against_its_first_parent_oldest_first(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "t/a", b"a0")
    writes.upload(lake, REPO, "main", "t/b", b"b0")
    start = commit(lake, "start")
    writes.upload(lake, REPO, "main", "t/a", b"a1")
    first = commit(lake, "a changed")
    p.create_branch(lake, REPO, "dev", "main")
    writes.upload(lake, REPO, "dev", "t/c", b"c1")
    writes.upload(lake, REPO, "dev", "t/a", b"a2")
    commit(lake, "on dev", "dev")
    writes.delete_objects(lake, REPO, "main", ["t/b"])
    second = commit(lake, "b gone")
    merge = merging.merge(lake, REPO, "dev", "main").commit
    got = [
        (c.path, c.kind, c.commit_id, b"".join(p.read_entry(lake, c.entry, c.offset)))
        for c in commit_feed(lake, REPO, start, merge.id, "t/")
    ]
    assert got == [
        ("t/a", FeedKind.DELETE, first, b"a0"),  # a change: the version before, then after
        ("t/a", FeedKind.INSERT, first, b"a1"),
        ("t/b", FeedKind.DELETE, second, b"b0"),
        ("t/a", FeedKind.DELETE, merge.id, b"a1"),  # the merge: what it brought, as one commit
        ("t/a", FeedKind.INSERT, merge.id, b"a2"),
        ("t/c", FeedKind.INSERT, merge.id, b"c1"),
    ]
    assert commit_feed(lake, REPO, merge.id, merge.id) == []
    with pytest.raises(InvalidArgument, match="is not an ancestor"):
        commit_feed(lake, REPO, merge.id, start)
