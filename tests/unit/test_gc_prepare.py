"""lakeFS's GC preparation, tree files by id and commit records written as given, on the core:
the commits CSV follows the collector's rules, the uncommitted file names staged blocks, the
prepared blocks are garbage after the grace period, and a commit record is checked before it is
written."""

from __future__ import annotations

import csv
import hashlib
import io
import os

import pyarrow.parquet as pq
import pytest

from lakectl.core import keys, porcelain, treefiles
from lakectl.core.graph.refs import commit_id_of
from lakectl.core.lake import Lake
from lakectl.core.model import BLOCK_ADDRESS_SCHEME, Commit
from lakectl.core.upkeep import gc, gcprepare, refsdump, retention
from lakectl.errors import Conflict, InvalidArgument, NotFound
from tests.unit.graphkit import REPO, T0, commit, write


def commits_csv(lake: Lake, run: gcprepare.PreparedCommits) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(lake.blocks.get(run.commits).decode())))


def test_the_commits_csv_lists_every_commit_with_the_rules_expiry(lake: Lake, dated: dict[str, str]) -> None:
    everything = {c.id: c for c in retention.list_commits(lake, porcelain.get_repo(lake, REPO).name)}
    rows = commits_csv(lake, gcprepare.prepare_commits(lake, REPO))
    assert {r["commit_id"] for r in rows} == set(everything)
    assert {r["expired"] for r in rows} == {"false"}  # no rules: nothing expires
    retention.set_rules(lake, REPO, retention.GCRules(7))
    run = gcprepare.prepare_commits(lake, REPO)
    rows = commits_csv(lake, run)
    assert list(rows[0]) == list(gcprepare.COMMITS_HEADER)
    assert [r["commit_id"] for r in rows] == sorted(everything)
    assert {r["commit_id"] for r in rows if r["expired"] == "true"} == {dated["v1"], dated["v2"]}
    assert all(r["metarange_id"] == everything[r["commit_id"]].meta_range_id for r in rows)  # type: ignore[index]
    assert gcprepare.prepare_commits(lake, REPO).run_id != run.run_id
    with pytest.raises(NotFound):
        gcprepare.prepare_commits(lake, "no-such-repo")


def test_uncommitted_addresses_are_the_staged_blocks(lake: Lake) -> None:
    assert gcprepare.prepare_uncommitted(lake, REPO).addresses is None  # nothing staged: no file
    commit(lake, "main", "committed", done="committed data")
    write(lake, "main", "staged", "staged, not committed")
    staged = porcelain.stat(lake, REPO, "main", "staged").entry
    committed = porcelain.stat(lake, REPO, "main", "done").entry
    assert staged is not None and committed is not None
    run = gcprepare.prepare_uncommitted(lake, REPO)
    assert run.addresses is not None and run.count == 1
    table = pq.read_table(io.BytesIO(lake.blocks.get(run.addresses)))
    assert table.schema.names == ["physical_address", "creation_date"]
    addresses = table.column("physical_address").to_pylist()
    assert addresses == [staged.physical_address]
    assert committed.physical_address not in addresses
    assert addresses[0].startswith(BLOCK_ADDRESS_SCHEME)


def test_prepared_blocks_are_garbage_once_their_grace_period_is_over(lake: Lake) -> None:
    write(lake, "main", "staged", "staged, not committed")
    made = {
        gcprepare.prepare_commits(lake, REPO).commits,
        gcprepare.prepare_uncommitted(lake, REPO).addresses,
    }
    kept = gc.run(lake, REPO)  # within the grace period: young, kept
    assert kept.deleted == 0 and all(lake.blocks.exists(b) for b in made if b)
    assert not made & gc.mark(lake, REPO).live
    gc.run(lake, REPO, grace_seconds=0)
    assert not any(lake.blocks.exists(b) for b in made if b)
    assert porcelain.stat(lake, REPO, "main", "staged").entry is not None  # its block is live


def test_a_task_keeps_its_outcome(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    task = gcprepare.submit(lake, REPO)
    assert task.completed and task.result is not None and task.error is None
    assert gcprepare.status(lake, REPO, task.task_id) == task
    for unknown in ("0" * 32, "x", task.task_id.upper()):
        with pytest.raises(NotFound):
            gcprepare.status(lake, REPO, unknown)
    porcelain.create_repo(lake, "other")
    with pytest.raises(NotFound):
        gcprepare.status(lake, "other", task.task_id)

    def refuse(*_: object, **__: object) -> gcprepare.PreparedCommits:
        raise InvalidArgument("no way")

    monkeypatch.setattr(gcprepare, "prepare_commits", refuse)
    failed = gcprepare.status(lake, REPO, gcprepare.submit(lake, REPO).task_id)
    assert failed.completed and failed.result is None
    assert failed.error == {"code": "invalid_argument", "message": "no way"}


def test_tree_files_are_found_only_in_their_repositorys_trees(lake: Lake) -> None:
    head = commit(lake, "main", "data", a="1", b__c="2")
    mid = head.meta_range_id
    kind = treefiles.TreeFile
    assert treefiles.locate(lake, REPO, kind.META_RANGE, mid) == mid
    assert treefiles.read(lake, REPO, kind.META_RANGE, mid) == lake.blocks.get(mid)
    pages = lake.ranges.pages(mid)
    ranges = lake.trees.ranges(mid)
    for info in [*pages, *ranges]:
        assert treefiles.read(lake, REPO, kind.RANGE, info.id) == lake.blocks.get(info.id)
    with pytest.raises(NotFound):
        treefiles.locate(lake, REPO, kind.META_RANGE, ranges[0].id)  # a range is no metarange
    with pytest.raises(NotFound):
        treefiles.locate(lake, REPO, kind.RANGE, mid)  # nor a metarange a range
    porcelain.create_repo(lake, "other")
    for k, oid in ((kind.META_RANGE, mid), (kind.RANGE, ranges[0].id)):
        with pytest.raises(NotFound):
            treefiles.locate(lake, "other", k, oid)  # stored in the lake, not a tree of "other"
    data = os.urandom(32)
    stray = f"{hashlib.md5(data).hexdigest()}+32"
    for oid in (stray, "not-a-locator", ""):
        with pytest.raises(NotFound):
            treefiles.locate(lake, REPO, kind.RANGE, oid)
    with pytest.raises(InvalidArgument):
        kind.parse("sstable")


def _record(parent: Commit, **changes: object) -> dict[str, object]:
    record: dict[str, object] = {
        "parents": [parent.id],
        "committer": "restorer",
        "message": "restored",
        "creation_date": T0 - 86_400,
        "meta_range_id": parent.meta_range_id,
        "metadata": {"k": "v"},
        "generation": parent.generation + 1,
        **changes,
    }
    record["id"] = commit_id_of(
        tuple(record["parents"]),  # type: ignore[arg-type]
        record["meta_range_id"],  # type: ignore[arg-type]
        str(record["message"]),
        str(record["committer"]),
        record["metadata"],  # type: ignore[arg-type]
        record["creation_date"],  # type: ignore[arg-type]
    )
    return record


def test_a_commit_record_is_written_as_given_once_checked(lake: Lake) -> None:
    head = commit(lake, "main", "data", a="1")
    rid = porcelain.get_repo(lake, REPO).name
    record = _record(head)
    made = refsdump.create_commit_record(lake, REPO, record)
    assert lake.refs.get_commit(rid, made.id).to_dict() == record
    assert refsdump.create_commit_record(lake, REPO, record) == made  # the same again: a no-op
    assert porcelain.get_commit(lake, REPO, "main").id == head.id  # no branch moved
    child = refsdump.create_commit_record(lake, REPO, _record(made))
    assert child.generation == made.generation + 1
    refused = [
        {**record, "id": "f" * 64},  # not the record's hash
        _record(head, parents=["e" * 64]),  # no such parent
        _record(head, meta_range_id=f"{'d' * 32}+10"),  # no such tree
        _record(head, meta_range_id="nonsense"),
        _record(head, generation=7),
        {**record, "message": 3},
    ]
    for bad in refused:
        with pytest.raises(InvalidArgument):
            refsdump.create_commit_record(lake, REPO, bad)
    other = _record(head, message="other")
    lake.kv.set(keys.repo_partition(rid), keys.commit_key(other["id"]), b"{}")  # type: ignore[arg-type]
    with pytest.raises(Conflict):
        refsdump.create_commit_record(lake, REPO, other)
