"""Reads over a commit range (issue 30, PFS v2's ``GetFile(from, to)``): what the commits after
FROM up to REF appended to an object, everything since a delete or overwrite among them, across
merges; only the blocks of the bytes returned are read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import appended, merging, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument, ObjectNotFound

REPO = "ranges"


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    p.create_repo(opened, REPO)
    yield opened
    opened.close()


def since(lake: Lake, frm: str, ref: str, path: str = "f") -> bytes:
    return b"".join(appended.read_since(lake, REPO, frm, ref, path))


def commit(lake: Lake, message: str, branch: str = "main") -> str:
    return p.commit(lake, REPO, branch, message).id


def test_the_pfs_example_foo_bar_buzz(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "f", b"foo")
    first = commit(lake, "foo")
    writes.append(lake, REPO, "main", "f", b"bar")
    second = commit(lake, "bar")
    writes.append(lake, REPO, "main", "f", b"buzz")
    third = commit(lake, "buzz")
    assert since(lake, first, third) == b"barbuzz"
    assert since(lake, second, third) == b"buzz"
    assert since(lake, third, third) == b""
    assert since(lake, first, second) == b"bar"
    assert since(lake, first, "main") == b"barbuzz"  # a branch: its head commit


def test_a_delete_inside_the_range_restarts_the_object(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "f", b"foo")
    first = commit(lake, "foo")
    writes.append(lake, REPO, "main", "f", b"bar")
    commit(lake, "bar")
    writes.delete_objects(lake, REPO, "main", ["f"])
    writes.upload(lake, REPO, "main", "g", b"something else")
    commit(lake, "deleted")
    writes.append(lake, REPO, "main", "f", b"new")  # created where absent
    recreated = commit(lake, "re-created")
    writes.append(lake, REPO, "main", "f", b"er")
    last = commit(lake, "er")
    assert since(lake, first, last) == b"newer"  # only what came after the delete
    assert since(lake, recreated, last) == b"er"


def test_an_overwrite_inside_the_range_restarts_and_a_later_append_adds(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "f", b"foo")
    first = commit(lake, "foo")
    writes.upload(lake, REPO, "main", "f", b"xyz")
    commit(lake, "overwritten")
    writes.append(lake, REPO, "main", "f", b"!")
    last = commit(lake, "!")
    assert since(lake, first, last) == b"xyz!"
    assert since(lake, f"{last}~1", last) == b"!"


def test_an_object_created_inside_the_range_is_read_whole(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "other", b"x")
    first = commit(lake, "no f yet")
    writes.append(lake, REPO, "main", "f", b"a")
    commit(lake, "a")
    writes.append(lake, REPO, "main", "f", b"b")
    assert since(lake, first, commit(lake, "b")) == b"ab"


def test_a_merge_inside_the_range_brings_the_other_branchs_appends(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "f", b"foo")
    base = commit(lake, "foo")
    p.create_branch(lake, REPO, "dev", "main")
    writes.append(lake, REPO, "dev", "f", b"bar")
    on_dev = commit(lake, "bar", "dev")
    writes.append(lake, REPO, "dev", "f", b"buzz")
    commit(lake, "buzz", "dev")
    writes.upload(lake, REPO, "main", "other", b"main moved on")
    moved = commit(lake, "other")
    merge = merging.merge(lake, REPO, "dev", "main").commit
    assert len(merge.parents) == 2
    assert since(lake, base, merge.id) == b"barbuzz"
    assert since(lake, moved, merge.id) == b"barbuzz"  # the merge appended them onto main's line
    assert since(lake, on_dev, merge.id) == b"buzz"  # FROM on the merged branch: it had bar
    writes.append(lake, REPO, "main", "f", b"!")
    after = commit(lake, "!")
    assert since(lake, on_dev, after) == b"buzz!"


def test_what_is_no_range_or_no_object_is_refused(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "f", b"foo")
    first = commit(lake, "foo")
    writes.append(lake, REPO, "main", "f", b"bar")
    second = commit(lake, "bar")
    with pytest.raises(InvalidArgument, match="is not an ancestor"):
        since(lake, second, first)
    with pytest.raises(ObjectNotFound):
        since(lake, first, second, "missing")
    writes.delete_objects(lake, REPO, "main", ["f"])
    gone = commit(lake, "deleted")
    with pytest.raises(ObjectNotFound):
        since(lake, first, gone)


def test_only_the_blocks_of_the_appended_bytes_are_read(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    writes.upload(lake, REPO, "main", "f", b"a" * 100_000)
    for n in range(20):
        writes.append(lake, REPO, "main", "f", bytes([n]) * 5_000)
    first = commit(lake, "big")
    writes.append(lake, REPO, "main", "f", b"the tail")
    last = commit(lake, "tail")
    read: list[str] = []
    get = lake.blocks.get

    def counted(locator: str, offset: int = 0, length: int | None = None) -> bytes:
        read.append(locator)
        return get(locator, offset, length)

    monkeypatch.setattr(lake.blocks, "get", counted)
    assert since(lake, first, last) == b"the tail"
    assert len(read) == 1 and read[0].endswith("+8")
