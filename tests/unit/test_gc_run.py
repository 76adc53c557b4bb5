"""A whole collection in-process: exactly the expired-only blocks go, and everything kept reads back."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from lakectl.core import lake as lake_floor
from lakectl.core import listing, merging, porcelain, writes
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc, retention
from lakectl.errors import InvalidArgument, MissingData
from tests.unit.graphkit import REPO, T0, blocks, tree_blocks, write


def age_everything(lake: Lake, seconds: float = 7 * 86_400) -> None:
    past = time.time() - seconds
    for directory, _, files in os.walk(lake.blocks.root):  # type: ignore[attr-defined]
        for name in files:
            os.utime(os.path.join(directory, name), (past, past))


def readable(lake: Lake, ref: str) -> dict[str, bytes]:
    return {
        o.path: b"".join(porcelain.read(lake, REPO, ref, o.path))
        for o in listing.list_objects(lake, REPO, ref)
    }


def test_a_collection_deletes_exactly_the_expired_blocks(lake: Lake, dated: dict[str, str]) -> None:
    """The data only expired commits name goes; their trees stay (decision 0025)."""
    expired_trees = tree_blocks(lake, dated["v1"]) | tree_blocks(lake, dated["v2"])
    gone = blocks(lake, dated["v1"], "a") | blocks(lake, dated["v2"], "a")
    write(lake, "main", "staged", "staged, not committed")
    keep = {ref: readable(lake, ref) for ref in ("main", dated["v3"])}
    retention.set_rules(lake, REPO, retention.GCRules(7))
    age_everything(lake)
    stored = set(lake.blocks.list())

    dry = gc.run(lake, REPO, dry_run=True, now=T0)
    assert set(lake.blocks.list()) == stored, "a dry run deletes nothing"
    report = gc.run(lake, REPO, now=T0)
    assert dry.to_dict() == {**report.to_dict(), "dry_run": True}
    assert stored - set(lake.blocks.list()) == gone
    assert expired_trees <= set(lake.blocks.list()), "the trees of expired commits stay"
    assert report.deleted == len(gone) and report.bytes_freed == sum(int(b.split("+")[1]) for b in gone)
    assert (report.retained_commits, report.expired_commits) == (2, 2)
    for ref, objects in keep.items():
        assert readable(lake, ref) == objects, f"{ref} must read back byte for byte"
    again = gc.run(lake, REPO, now=T0)
    assert again.deleted == 0, "a second collection finds nothing more"


def test_young_unreferenced_blocks_are_kept(lake: Lake, dated: dict[str, str]) -> None:
    retention.set_rules(lake, REPO, retention.GCRules(7))
    expired = blocks(lake, dated["v1"], "a")
    report = gc.run(lake, REPO, now=T0)  # every block was written moments ago
    assert report.deleted == 0 and report.young >= len(expired)
    assert expired <= set(lake.blocks.list())
    assert gc.run(lake, REPO, now=T0, grace_seconds=0).deleted >= len(expired)
    with pytest.raises(InvalidArgument):
        gc.run(lake, REPO, grace_seconds=-1)


def test_without_rules_only_unreferenced_blocks_go(lake: Lake, dated: dict[str, str]) -> None:
    writes.upload(lake, REPO, "main", "doomed", b"staged then reset")
    doomed = blocks(lake, "main", "doomed")
    merging.reset(lake, REPO, "main")
    age_everything(lake)
    report = gc.run(lake, REPO, now=T0)
    assert set(lake.blocks.list()).isdisjoint(doomed)
    assert report.deleted == len(doomed) and report.expired_commits == 0
    for label in dated:
        assert readable(lake, dated[label])


def test_a_commit_just_inside_its_retention_stays(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """The boundary: retention 3 days, a commit 2 days old whose file was overwritten since. It is
    within retention, so its bytes must survive a collection."""
    clock = [T0]
    monkeypatch.setattr(lake_floor, "clock", lambda: clock[0])
    write(lake, "main", "a", "overwritten later")
    old = porcelain.commit(lake, REPO, "main", "old", committer="t").id
    clock[0] += 2 * 86_400
    write(lake, "main", "a", "newer")
    porcelain.commit(lake, REPO, "main", "new", committer="t")
    retention.set_rules(lake, REPO, retention.GCRules(3))
    age_everything(lake)
    born = porcelain.get_commit(lake, REPO, old).creation_date
    gc.run(lake, REPO, now=born + 2 * 86_400 + 10)  # 2 days old: within 3
    assert readable(lake, old) == {"a": b"overwritten later"}
    gc.run(lake, REPO, now=born + 3 * 86_400)  # exactly 3 days old: still retained
    assert readable(lake, old) == {"a": b"overwritten later"}
    gc.run(lake, REPO, now=born + 3 * 86_400 + 1)  # past 3 days: collected
    with pytest.raises(MissingData):  # the commit's tree is shared, its data is gone
        readable(lake, old)


def test_stale_multipart_uploads_are_aborted_and_their_parts_collected(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakectl.core import multipart as mp

    clock = [T0]
    monkeypatch.setattr(lake_floor, "clock", lambda: clock[0])
    stale = mp.create(lake, REPO, "main", "stale.bin")
    part = mp.put_part(lake, REPO, stale.id, 1, b"abandoned part", hashlib.md5(b"abandoned part").hexdigest())
    clock[0] += 6 * 86_400
    fresh = mp.create(lake, REPO, "main", "fresh.bin")
    kept = mp.put_part(lake, REPO, fresh.id, 1, b"part in flight", hashlib.md5(b"part in flight").hexdigest())
    age_everything(lake)
    clock[0] += 2 * 86_400  # the first upload is 8 days old, the second 2
    dry = gc.run(lake, REPO, dry_run=True)
    assert dry.uploads_aborted == 1 and len(list(mp.list_uploads(lake, REPO))) == 2
    report = gc.run(lake, REPO)
    assert report.uploads_aborted == 1
    assert dry.to_dict() == {**report.to_dict(), "dry_run": True}, "a dry run reports what a run does"
    assert [u.id for u in mp.list_uploads(lake, REPO)] == [fresh.id]
    stored = set(lake.blocks.list())
    assert stored.isdisjoint(part.locators), "the aborted upload's part is collected"
    assert set(kept.locators) <= stored, "a part in flight stays"


def test_staging_a_deleted_branch_left_behind_is_dropped_and_its_blocks_collected(lake: Lake) -> None:
    from lakectl.core import keys
    from lakectl.core.kv.helpers import partitions

    porcelain.create_branch(lake, REPO, "crashed", "main")
    porcelain.create_branch(lake, REPO, "deleted", "main")
    write(lake, "crashed", "orphan.txt", "staged on a branch whose deletion crashed halfway")
    write(lake, "deleted", "gone.txt", "staged on a branch deleted cleanly")
    write(lake, "main", "kept.txt", "staged on main")
    orphan = blocks(lake, "crashed", "orphan.txt")
    orphan_token = porcelain.get_branch(lake, REPO, "crashed").staging_token
    lake.refs.delete_branch(REPO, "crashed")  # the branch record goes, its partition stays
    porcelain.delete_branch(lake, REPO, "deleted")
    age_everything(lake)
    staging = keys.staging_partition(REPO, "")  # type: ignore[arg-type]

    dry = gc.run(lake, REPO, dry_run=True)
    assert dry.staging_dropped == 1
    assert keys.staging_partition(REPO, orphan_token) in (partitions(lake.kv, staging) or [])
    report = gc.run(lake, REPO)
    assert report.staging_dropped == 1
    main = porcelain.get_branch(lake, REPO, "main")
    assert partitions(lake.kv, staging) == [keys.staging_partition(REPO, main.staging_token)]
    assert set(lake.blocks.list()).isdisjoint(orphan), "the orphan's block is collected"
    assert readable(lake, "main")["kept.txt"] == b"staged on main"
    assert gc.run(lake, REPO).staging_dropped == 0


def leave_temporary(root: str, size: int, age_seconds: float) -> str:
    """A temporary block file as a writer killed mid-put leaves it; returns its path."""
    data = os.urandom(size)
    md5 = hashlib.md5(data).hexdigest()
    os.makedirs(os.path.join(root, md5[:3]), exist_ok=True)
    path = os.path.join(root, md5[:3], f".{md5}.{os.urandom(8).hex()}.tmp")
    with open(path, "wb") as f:
        f.write(data[: size // 2])  # killed half-way
    past = time.time() - age_seconds
    os.utime(path, (past, past))
    return path


def test_old_temporary_files_are_removed_and_young_ones_kept(lake: Lake) -> None:
    write(lake, "main", "a", "a")
    porcelain.commit(lake, REPO, "main", "a", committer="t")
    root = lake.blocks.root  # type: ignore[attr-defined]
    old = leave_temporary(root, 2000, 7 * 86_400)
    young = leave_temporary(root, 4000, 60)
    stored = set(lake.blocks.list())

    dry = gc.run(lake, REPO, dry_run=True)
    assert os.path.exists(old) and os.path.exists(young), "a dry run removes nothing"
    assert (dry.temporaries_deleted, dry.temporaries_bytes_freed) == (1, 1000)
    report = gc.run(lake, REPO)
    assert dry.to_dict() == {**report.to_dict(), "dry_run": True}
    assert not os.path.exists(old), "a temporary file older than the grace period goes"
    assert os.path.exists(young), "a young one may be a put in flight: it stays"
    assert set(lake.blocks.list()) == stored, "temporary files are not blocks"
    assert report.to_dict()["temporaries_deleted"] == 1
    assert gc.run(lake, REPO, grace_seconds=0).temporaries_deleted == 1
    assert not os.path.exists(young)
