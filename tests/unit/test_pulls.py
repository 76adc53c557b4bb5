"""Pull requests in the core: open, list, comment, review, close and reopen, and a merge that
honours the destination's protection rule (approvals on the source's current head, checks)."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import keys, listing, merging, opening, protection, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.workflow import pulls
from lakectl.core.workflow.pulls import PullStatus, StatusFilter, Verdict
from lakectl.errors import (
    AlreadyExists,
    BranchNotFound,
    Forbidden,
    HookFailed,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    PredicateFailed,
    ProtectedBranch,
)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(opened)
    p.create_repo(opened, "rep")
    p.create_branch(opened, "rep", "feature", "main")
    yield opened
    opened.close()


def work(lake: Lake, branch: str, path: str, data: bytes) -> str:
    writes.upload(lake, "rep", branch, path, io.BytesIO(data))
    return p.commit(lake, "rep", branch, f"write {path}").id


def test_a_pull_request_is_opened_listed_and_merged(lake: Lake) -> None:
    work(lake, "feature", "a.csv", b"1,2\n")
    pr = pulls.create_pull(lake, "rep", "Add a", "feature", "main", "adds *a*")
    assert (pr.id, pr.status, pr.author) == ("1", PullStatus.OPEN, "ada")
    shape = pr.to_dict()
    assert set(shape) == {
        "id",
        "status",
        "title",
        "description",
        "author",
        "source_branch",
        "destination_branch",
        "creation_date",
    }
    assert shape["creation_date"].endswith("Z")
    assert pulls.get_pull(lake, "rep", "1") == pr
    assert pulls.list_pulls(lake, "rep") == ([pr], False)

    merged = pulls.merge_pull(lake, "rep", "1", merger="bob")
    assert merged.status is PullStatus.MERGED and merged.closed_date is not None
    head = p.get_commit(lake, "rep", "main")
    assert merged.merged_commit_id == head.id
    assert head.metadata["pull_request"] == "1" and head.committer == "bob"
    assert "Merge pull request #1 from feature" in head.message
    assert [o.path for o in listing.list_objects(lake, "rep", "main")] == ["a.csv"]
    with pytest.raises(PreconditionFailed, match="merged"):
        pulls.merge_pull(lake, "rep", "1")
    with pytest.raises(PreconditionFailed):
        pulls.update_pull(lake, "rep", "1", status=PullStatus.CLOSED)


def test_bad_input_is_refused_and_changes_nothing(lake: Lake) -> None:
    for title, src, dst, error in [
        ("", "feature", "main", InvalidArgument),
        ("x\ny", "feature", "main", InvalidArgument),
        ("t", "main", "main", InvalidArgument),
        ("t", "nope", "main", BranchNotFound),
        ("t", "feature", "bad name", InvalidArgument),
    ]:
        with pytest.raises(error):
            pulls.create_pull(lake, "rep", title, src, dst)
    assert pulls.list_pulls(lake, "rep") == ([], False)
    for bad in ("0", "-1", "x", "1" * 11, ""):
        with pytest.raises(InvalidArgument):
            pulls.get_pull(lake, "rep", bad)
    with pytest.raises(NotFound):
        pulls.get_pull(lake, "rep", "7")
    pulls.create_pull(lake, "rep", "t", "feature", "main")
    with pytest.raises(AlreadyExists):  # one open pull request between two branches
        pulls.create_pull(lake, "rep", "again", "feature", "main")
    # the refusal took no number: the next pull request is the second
    p.create_branch(lake, "rep", "other", "main")
    assert pulls.create_pull(lake, "rep", "t", "other", "main").id == "2"
    with pytest.raises(InvalidArgument):
        pulls.add_comment(lake, "rep", "1", "   ")
    with pytest.raises(InvalidArgument):
        pulls.update_pull(lake, "rep", "1", status=PullStatus.MERGED)


def test_listing_pages_and_filters_by_status(lake: Lake) -> None:
    for i in range(5):
        p.create_branch(lake, "rep", f"b{i}", "main")
        pulls.create_pull(lake, "rep", f"pr {i}", f"b{i}", "main")
    pulls.update_pull(lake, "rep", "2", status=PullStatus.CLOSED)
    page, more = pulls.list_pulls(lake, "rep", amount=2)
    assert [x.id for x in page] == ["1", "2"] and more
    page, more = pulls.list_pulls(lake, "rep", after="2", amount=2)
    assert [x.id for x in page] == ["3", "4"] and more
    page, more = pulls.list_pulls(lake, "rep", after="4", amount=2)
    assert [x.id for x in page] == ["5"] and not more
    assert [x.id for x in pulls.list_pulls(lake, "rep", StatusFilter.OPEN)[0]] == ["1", "3", "4", "5"]
    assert [x.id for x in pulls.list_pulls(lake, "rep", StatusFilter.CLOSED)[0]] == ["2"]
    assert [x.id for x in pulls.list_pulls(lake, "rep", prefix="5")[0]] == ["5"]


def test_close_and_reopen(lake: Lake) -> None:
    pulls.create_pull(lake, "rep", "t", "feature", "main")
    closed = pulls.update_pull(lake, "rep", "1", status=PullStatus.CLOSED, title="renamed")
    assert closed.status is PullStatus.CLOSED and closed.closed_date is not None and closed.title == "renamed"
    with pytest.raises(PreconditionFailed, match="closed"):
        pulls.merge_pull(lake, "rep", "1")
    again = pulls.create_pull(lake, "rep", "second", "feature", "main")  # the first is closed
    with pytest.raises(AlreadyExists):  # reopening would make two open between the same branches
        pulls.update_pull(lake, "rep", "1", status=PullStatus.OPEN)
    pulls.update_pull(lake, "rep", again.id, status=PullStatus.CLOSED)
    reopened = pulls.update_pull(lake, "rep", "1", status=PullStatus.OPEN)
    assert reopened.status is PullStatus.OPEN and reopened.closed_date is None


def test_comments_keep_their_order_and_authors(lake: Lake) -> None:
    pulls.create_pull(lake, "rep", "t", "feature", "main")
    pulls.add_comment(lake, "rep", "1", "first", "bob")
    pulls.add_comment(lake, "rep", "1", "<b>second</b>\nline two", "cy")
    got = pulls.list_comments(lake, "rep", "1")
    assert [(c.id, c.author, c.body) for c in got] == [
        ("1", "bob", "first"),
        ("2", "cy", "<b>second</b>\nline two"),
    ]


def test_required_approvals_count_fresh_approvals_by_others(lake: Lake) -> None:
    protection.add_rule(lake, "rep", protection.Rule("main", required_approvals=2))
    work(lake, "feature", "a.csv", b"1\n")
    pulls.create_pull(lake, "rep", "t", "feature", "main", author="ada")
    with pytest.raises(ProtectedBranch, match="pull request"):  # no walking around the gate
        merging.merge(lake, "rep", "feature", "main")
    with pytest.raises(Forbidden):
        pulls.review(lake, "rep", "1", "ada", Verdict.APPROVED)
    pulls.review(lake, "rep", "1", "bob", Verdict.APPROVED)
    gate = pulls.gate(lake, "rep", "1")
    assert gate.approvals == ("bob",) and not gate.mergeable
    with pytest.raises(PreconditionFailed, match="1 of 2 required approval"):
        pulls.merge_pull(lake, "rep", "1")
    pulls.review(lake, "rep", "1", "cy", Verdict.CHANGES_REQUESTED, "please fix the header")
    assert pulls.list_comments(lake, "rep", "1")[-1].body == "please fix the header"
    pulls.review(lake, "rep", "1", "cy", Verdict.APPROVED)  # a later verdict replaces the earlier
    assert pulls.gate(lake, "rep", "1").mergeable

    # A new commit on the source makes both approvals stale.
    work(lake, "feature", "b.csv", b"2\n")
    reviews = pulls.list_reviews(lake, "rep", "1")
    assert [r.stale for r in reviews] == [True, True]
    with pytest.raises(PreconditionFailed, match="0 of 2"):
        pulls.merge_pull(lake, "rep", "1")
    pulls.review(lake, "rep", "1", "bob", Verdict.APPROVED)
    pulls.review(lake, "rep", "1", "cy", Verdict.APPROVED)
    merged = pulls.merge_pull(lake, "rep", "1")
    assert {o.path for o in listing.list_objects(lake, "rep", "main")} == {"a.csv", "b.csv"}
    assert merged.merged_commit_id == p.get_commit(lake, "rep", "main").id


def test_withdrawn_review(lake: Lake) -> None:
    pulls.create_pull(lake, "rep", "t", "feature", "main", author="ada")
    pulls.review(lake, "rep", "1", "bob", Verdict.APPROVED)
    pulls.withdraw_review(lake, "rep", "1", "bob")
    assert pulls.list_reviews(lake, "rep", "1") == []
    with pytest.raises(NotFound):
        pulls.withdraw_review(lake, "rep", "1", "bob")


ACTION = """
name: {name}
on:
  pre-commit:
    branches: ["feature"]
hooks:
  - id: check
    type: command
    properties:
      command: ["{python}", "-c", "import sys; sys.exit({code})"]
"""


MAIN_GATE = """
name: main-gate
on:
  pre-merge:
    branches: ["main"]
hooks:
  - id: gate
    type: command
    properties:
      command: ["{python}", "-c", "import sys; sys.exit({code})"]
"""


def test_required_checks_are_the_destinations_own_pre_merge_actions(lake: Lake) -> None:
    def gate_on_main(code: int) -> None:
        """main's gate, committed while main is not protected (a protected main takes no commit)."""
        protection.delete_rule(lake, "rep", "main")
        text = MAIN_GATE.format(python=sys.executable, code=code)
        writes.upload(lake, "rep", "main", "_lakefs_actions/gate.yaml", io.BytesIO(text.encode()))
        p.commit(lake, "rep", "main", "main's gate")
        protection.add_rule(lake, "rep", protection.Rule("main", required_checks=True))

    protection.add_rule(lake, "rep", protection.Rule("main", required_checks=True))
    pulls.create_pull(lake, "rep", "t", "feature", "main")
    gate = pulls.gate(lake, "rep", "1")
    assert gate.checks == () and gate.destination_checks == ()
    assert "no pre-merge action" in " ".join(gate.reasons)

    # The source's own checks pass, and count for nothing: the author chose them.
    action = ACTION.format(name="quality", python=sys.executable, code=0)
    writes.upload(lake, "rep", "feature", "_lakefs_actions/quality.yaml", io.BytesIO(action.encode()))
    work(lake, "feature", "a.csv", b"1\n")
    gate = pulls.gate(lake, "rep", "1")
    assert [c.passed for c in gate.checks] == [True] and not gate.mergeable

    # main's own pre-merge action is the check: it runs on the merge, from main's head.
    gate_on_main(code=1)
    gate = pulls.gate(lake, "rep", "1")
    assert gate.destination_checks == ("main-gate",) and gate.mergeable
    head = p.get_branch(lake, "rep", "main").commit_id
    assert gate.destination_commit_id == head
    with pytest.raises(HookFailed, match="pre-merge hook aborted"):
        pulls.merge_pull(lake, "rep", "1")
    assert p.get_branch(lake, "rep", "main").commit_id == head
    assert pulls.get_pull(lake, "rep", "1").status is PullStatus.OPEN

    # A post-commit hook that fails leaves its commit, and a failed check on it: that holds
    # the merge back even when main's gate would pass it.
    gate_on_main(code=0)
    post = f"""
name: audit
on:
  post-commit:
    branches: ["feature"]
hooks:
  - id: audit
    type: command
    properties:
      command: ["{sys.executable}", "-c", "import sys; sys.exit(3)"]
"""
    writes.upload(lake, "rep", "feature", "_lakefs_actions/audit.yaml", io.BytesIO(post.encode()))
    head = work(lake, "feature", "b.csv", b"2\n")
    gate = pulls.gate(lake, "rep", "1")
    assert gate.source_commit_id == head
    assert sorted(c.passed for c in gate.checks) == [False, True]
    with pytest.raises(PreconditionFailed, match="failed check"):
        pulls.merge_pull(lake, "rep", "1")
    writes.delete_objects(lake, "rep", "feature", ["_lakefs_actions/audit.yaml"])
    work(lake, "feature", "c.csv", b"3\n")
    assert pulls.merge_pull(lake, "rep", "1").status is PullStatus.MERGED


def test_the_journal_rebuilds_pull_requests(lake: Lake, tmp_path: Path) -> None:
    pulls.create_pull(lake, "rep", "t", "feature", "main", "d")
    pulls.add_comment(lake, "rep", "1", "hello", "bob")
    pulls.review(lake, "rep", "1", "bob", Verdict.APPROVED)
    pulls.update_pull(lake, "rep", "1", status=PullStatus.CLOSED)
    p.create_branch(lake, "rep", "other", "main")
    pulls.create_pull(lake, "rep", "t2", "other", "main")
    pulls.withdraw_review(lake, "rep", "1", "bob")
    journal.seal(lake.kv, lake.blocks)

    def records(kv: object) -> dict[str, object]:
        part = keys.repo_partition("rep")
        return {k: json.loads(v) for k, v in kv.scan(part, "pulls/") if k.startswith("pulls/")}  # type: ignore[attr-defined]

    fresh = MemoryStore()
    rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh)
    assert records(fresh) == records(lake.kv)
    assert (
        len(records(fresh)) == 7
    )  # two pull requests, their marks, the sequence, a comment and its sequence


def test_racing_openers_leave_one_open_pull_request(lake: Lake) -> None:
    """Eight threads open a pull request between the same branches, and eight reopen closed ones:
    each time exactly one wins; the others get AlreadyExists and leave nothing open."""
    from concurrent.futures import ThreadPoolExecutor

    def attempt(call: object) -> str:
        try:
            return str(call())  # type: ignore[operator]
        except AlreadyExists:
            return "refused"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(
            pool.map(attempt, [lambda: pulls.create_pull(lake, "rep", "t", "feature", "main")] * 8)
        )
    assert sum(o != "refused" for o in outcomes) == 1
    open_now = pulls.list_pulls(lake, "rep", StatusFilter.OPEN)[0]
    assert len(open_now) == 1 and pulls.list_pulls(lake, "rep")[0] == open_now  # the losers left no record

    pulls.update_pull(lake, "rep", open_now[0].id, status=PullStatus.CLOSED)
    closed = [open_now[0].id]
    for _ in range(7):
        made = pulls.create_pull(lake, "rep", "t", "feature", "main")
        pulls.update_pull(lake, "rep", made.id, status=PullStatus.CLOSED)
        closed.append(made.id)
    reopen = [lambda i=i: pulls.update_pull(lake, "rep", i, status=PullStatus.OPEN) for i in closed]
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(attempt, reopen))
    assert sum(o != "refused" for o in outcomes) == 1
    assert len(pulls.list_pulls(lake, "rep", StatusFilter.OPEN)[0]) == 1


def test_a_pull_request_merges_only_onto_the_head_its_gate_read(lake: Lake) -> None:
    """The gate found the destination's checks at one head; a merge onto another head (one that
    may no longer hold them) is refused, and the destination keeps what it had."""
    work(lake, "feature", "a.csv", b"1\n")
    read = p.get_branch(lake, "rep", "main").commit_id
    moved = work(lake, "main", "m.csv", b"m\n")
    with pytest.raises(PredicateFailed, match="moved since the merge was checked"):
        merging.merge(lake, "rep", "feature", "main", onto=read, through_pull=True)
    assert p.get_branch(lake, "rep", "main").commit_id == moved
    assert merging.merge(lake, "rep", "feature", "main", onto=moved, through_pull=True).changed
