"""Reset, protected branches, immutable tags, nothing to commit: the refusals of the graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakectl.core import changes, merging, porcelain, writes
from lakectl.core.lake import Lake
from lakectl.core.model import Branch, BranchId, Commit, RepositoryId, ResetKind
from lakectl.errors import (
    AlreadyExists,
    BranchNotFound,
    InvalidArgument,
    NothingToCommit,
    ProtectedBranch,
)
from tests.unit.graphkit import (
    REPO,
    cid,
    commit,
    log_messages,
    make_lake,
    noop_reset_object,
    noop_upload_delete,
    put,
    view,
)

# -- reset ------------------------------------------------------------------------------------


@pytest.fixture
def staged(lake: Lake) -> Lake:
    commit(lake, "main", "base", keep="0", dir__a="0", dir__b="0", other="0")
    put(lake, "main", new="1", dir__a="1", dir__c="1", other="1")
    writes.delete_objects(lake, REPO, "main", ["dir/b"])
    return lake


@pytest.mark.parametrize(
    ("kind", "path", "count", "left"),
    [
        (ResetKind.ALL, "", 5, []),
        (ResetKind.OBJECT, "new", 1, ["dir/a", "dir/b", "dir/c", "other"]),
        (ResetKind.OBJECT, "dir/b", 1, ["dir/a", "dir/c", "new", "other"]),
        (ResetKind.OBJECT, "keep", 0, ["dir/a", "dir/b", "dir/c", "new", "other"]),
        (ResetKind.OBJECT, "dir", 0, ["dir/a", "dir/b", "dir/c", "new", "other"]),
        (ResetKind.PREFIX, "dir/", 3, ["new", "other"]),
        (ResetKind.PREFIX, "o", 1, ["dir/a", "dir/b", "dir/c", "new"]),
        (ResetKind.PREFIX, "", 5, []),
        (ResetKind.PREFIX, "zz", 0, ["dir/a", "dir/b", "dir/c", "new", "other"]),
    ],
)
def test_reset(staged: Lake, kind: ResetKind, path: str, count: int, left: list[str]) -> None:
    lake = staged
    assert merging.reset(lake, REPO, "main", kind, path) == count
    assert [c.path for c in changes.diff_uncommitted(lake, REPO, "main")] == left
    expected = {"keep": b"0", "dir/a": b"1", "dir/c": b"1", "other": b"1", "new": b"1"}
    committed = {"keep": b"0", "dir/a": b"0", "dir/b": b"0", "other": b"0"}
    for p in {"dir/a", "dir/b", "dir/c", "other", "new"} - set(left):
        if p in committed:
            expected[p] = committed[p]
        else:
            expected.pop(p, None)
    assert view(lake, "main") == expected


def test_reset_everything_then_nothing_to_commit(staged: Lake) -> None:
    merging.reset(staged, REPO, "main")
    with pytest.raises(NothingToCommit):
        porcelain.commit(staged, REPO, "main", "nothing")


# -- protected branches, immutable tags, nothing to commit ----------------------------------


def test_default_branch_cannot_be_deleted(lake: Lake) -> None:
    porcelain.create_branch(lake, REPO, "dev", "main")
    with pytest.raises(ProtectedBranch):
        porcelain.delete_branch(lake, REPO, "main")
    porcelain.delete_branch(lake, REPO, "dev")
    with pytest.raises(BranchNotFound):
        porcelain.get_branch(lake, REPO, "dev")
    assert [b.name for b in porcelain.list_branches(lake, REPO)] == ["main"]


def test_default_branch_other_than_main_is_protected(tmp_path: Path, clock: Iterator[int]) -> None:
    lk = make_lake(tmp_path)
    porcelain.create_repo(lk, "other", default_branch="trunk")
    porcelain.create_branch(lk, "other", "main", "trunk")
    with pytest.raises(ProtectedBranch):
        porcelain.delete_branch(lk, "other", "trunk")
    porcelain.delete_branch(lk, "other", "main")


def test_tags_are_immutable(lake: Lake, history: dict[str, Commit]) -> None:
    with pytest.raises(AlreadyExists):
        porcelain.create_tag(lake, REPO, "v1", "main")
    assert cid(lake, "v1") == history["C2"].id
    porcelain.delete_tag(lake, REPO, "v1")
    porcelain.create_tag(lake, REPO, "v1", "main")
    assert cid(lake, "v1") == history["C3"].id


def test_existing_branch_cannot_be_created_again(lake: Lake) -> None:
    porcelain.create_branch(lake, REPO, "dev", "main")
    with pytest.raises(AlreadyExists):
        porcelain.create_branch(lake, REPO, "dev", "main")


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(lambda lk: None, id="fresh branch"),
        pytest.param(noop_upload_delete, id="upload then delete of a new path"),
        pytest.param(noop_reset_object, id="upload then reset"),
        pytest.param(lambda lk: merging.reset(lk, REPO, "main"), id="after reset all"),
    ],
)
def test_nothing_to_commit(lake: Lake, prepare: Callable[[Lake], None]) -> None:
    commit(lake, "main", "base", same="0")
    head = cid(lake, "main")
    prepare(lake)
    with pytest.raises(NothingToCommit):
        porcelain.commit(lake, REPO, "main", "nothing")
    assert cid(lake, "main") == head
    empty = porcelain.commit(lake, REPO, "main", "empty on purpose", allow_empty=True)
    assert empty.parents == (head,)
    assert empty.meta_range_id == porcelain.get_commit(lake, REPO, head).meta_range_id


def test_reupload_of_identical_bytes_is_nothing_to_commit(lake: Lake) -> None:
    commit(lake, "main", "base", same="0")
    put(lake, "main", same="0")  # a later clock tick: same bytes, new mtime
    assert changes.diff_uncommitted(lake, REPO, "main") == []
    with pytest.raises(NothingToCommit):
        porcelain.commit(lake, REPO, "main", "nothing")


def test_log_object_and_prefix_filters_agree(lake: Lake) -> None:
    commit(lake, "main", "base", same="0")
    put(lake, "main", same="0", other="1")
    porcelain.commit(lake, REPO, "main", "touch")
    assert log_messages(lake, objects=["same"]) == log_messages(lake, prefixes=["same"]) == ["base"]


def test_commit_message_is_required(lake: Lake) -> None:
    put(lake, "main", a="1")
    with pytest.raises(InvalidArgument):
        porcelain.commit(lake, REPO, "main", "")


def test_a_write_racing_a_branch_delete_and_recreate_is_branch_not_found(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch is deleted as the upload looks it up and created again before the upload asks
    whether the name is some other ref: the branch was not there, which is BranchNotFound (not
    InvalidRef, "not a branch"), and nothing is staged on the new branch."""
    porcelain.create_branch(lake, REPO, "dev", "main")
    original = lake.refs.get_branch
    raced: list[str] = []

    def get_branch(repo: RepositoryId, name: BranchId) -> Branch:
        if name != "dev" or raced:
            return original(repo, name)
        raced.append(name)
        porcelain.delete_branch(lake, REPO, "dev")
        try:
            return original(repo, name)
        finally:
            porcelain.create_branch(lake, REPO, "dev", "main")

    monkeypatch.setattr(lake.refs, "get_branch", get_branch)
    with pytest.raises(BranchNotFound, match="dev"):
        writes.upload(lake, REPO, "dev", "x.txt", b"data")
    assert raced and changes.diff_uncommitted(lake, REPO, "dev") == []
