"""The mark of a garbage collection: which blocks stay, on real histories with dated commits."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from lakectl.core import listing, porcelain, writes
from lakectl.core import multipart as mp
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc, retention
from lakectl.errors import BlockNotFound
from tests.unit.graphkit import REPO, T0, blocks, write

DAY = retention.DAY


def test_expired_commits_release_only_their_own_blocks(lake: Lake, dated: dict[str, str]) -> None:
    v1, v2, v3 = (blocks(lake, dated[k], "a") for k in ("v1", "v2", "v3"))
    retention.set_rules(lake, REPO, retention.GCRules(7))
    marked = gc.mark(lake, REPO, now=T0)
    assert v3 <= marked.live and blocks(lake, "main", "keep") <= marked.live
    assert not (v1 | v2) & marked.live
    # The repository's initial commit is dated at its creation (now): an ancestor older in the
    # graph but newer on the clock, kept because every ancestor is looked at.
    assert (marked.retained, marked.expired) == (2, 2)
    head = porcelain.get_commit(lake, REPO, "main")
    assert head.meta_range_id in marked.live
    assert {r.id for r in lake.trees.ranges(head.meta_range_id)} <= marked.live


def test_without_rules_every_commit_stays(lake: Lake, dated: dict[str, str]) -> None:
    marked = gc.mark(lake, REPO, now=T0 + 1000 * DAY)
    assert marked.expired == 0
    for label in dated:
        assert blocks(lake, dated[label], "a") <= marked.live


def test_branch_rules_tags_staged_and_uploads_keep_blocks(lake: Lake, dated: dict[str, str]) -> None:
    retention.set_rules(
        lake,
        REPO,
        retention.GCRules.from_dict(
            {"default_retention_days": 7, "branches": [{"branch_id": "archive", "retention_days": 20}]}
        ),
    )
    porcelain.create_branch(lake, REPO, "archive", dated["v2"])  # v2 is 10 days old: within 20
    porcelain.create_tag(lake, REPO, "first", dated["v1"])
    write(lake, "main", "staged", "not committed yet")
    upload = mp.create(lake, REPO, "main", "big")
    part = mp.put_part(
        lake, REPO, upload.id, 1, b"part in flight", hashlib.md5(b"part in flight").hexdigest()
    )
    marked = gc.mark(lake, REPO, now=T0)
    assert blocks(lake, dated["v2"], "a") <= marked.live, "kept by the archive branch's 20 days"
    assert blocks(lake, dated["v1"], "a") <= marked.live, "kept by the tag"
    assert blocks(lake, "main", "staged") <= marked.live
    assert set(part.locators) <= marked.live


def test_blocks_shared_with_another_repository_stay(lake: Lake, dated: dict[str, str]) -> None:
    porcelain.create_repo(lake, "other")
    write(lake, "main", "copy-of-v1", "version 1", repo="other")  # the same block, deduplicated
    porcelain.commit(lake, "other", "main", "old but another repository's", committer="t")
    retention.set_rules(lake, REPO, retention.GCRules(7))
    marked = gc.mark(lake, REPO, now=T0)
    assert blocks(lake, dated["v1"], "a") == blocks(lake, "main", "copy-of-v1", repo="other")
    assert blocks(lake, dated["v1"], "a") <= marked.live
    assert not blocks(lake, dated["v2"], "a") & marked.live


def test_every_object_of_a_retained_commit_is_live(lake: Lake, dated: dict[str, str]) -> None:
    retention.set_rules(lake, REPO, retention.GCRules(15))
    marked = gc.mark(lake, REPO, now=T0)
    for ref in (dated["v2"], dated["v3"], "main"):
        for info in listing.list_objects(lake, REPO, ref):
            assert blocks(lake, ref, info.path) <= marked.live, (ref, info.path)


def _age_all_blocks(root: str, seconds: float) -> float:
    past = time.time() - seconds
    for directory, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (past, past))
    return past


def test_writes_and_copies_of_existing_blocks_refresh_their_age(lake: Lake) -> None:
    """What a sweep relies on (decision 0008): a block that an upload deduplicates, or that a copy
    reuses, is as fresh as a new one, so a collection running meanwhile cannot delete it."""
    root = lake.blocks.root  # type: ignore[attr-defined]
    write(lake, "main", "a", "shared bytes")
    (bare,) = blocks(lake, "main", "a")
    past = _age_all_blocks(root, 3600)
    write(lake, "main", "b", "shared bytes")  # deduplicated
    assert lake.blocks.modified(bare) > past + 60
    _age_all_blocks(root, 3600)
    entry = porcelain.stat(lake, REPO, "main", "a").entry
    assert entry is not None
    writes.touch_blocks(lake, entry)  # what every copy does before staging
    assert lake.blocks.modified(bare) > past + 60
    lake.blocks.delete(bare)
    with pytest.raises(BlockNotFound):
        writes.touch_blocks(lake, entry)
