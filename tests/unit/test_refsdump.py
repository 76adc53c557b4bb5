"""Refs dump and restore in the core: documents split over blocks, records checked against their
content before anything is written, and dumps kept by garbage collection."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakectl.core import changes, listing, porcelain
from lakectl.core.lake import Lake
from lakectl.core.model import Commit
from lakectl.core.upkeep import gc, refsdump
from lakectl.errors import Conflict, InvalidArgument
from tests.unit.graphkit import REPO, view


def _state(lake: Lake, repo: str) -> tuple[Any, ...]:
    branches = sorted((b.name, b.commit_id) for b in porcelain.list_branches(lake, repo))
    tags = sorted((t.name, t.commit_id) for t in porcelain.list_tags(lake, repo))
    logs = {name: [c.to_dict() for c in changes.log(lake, repo, name)] for name, _ in branches}
    return branches, tags, logs


def _bare(lake: Lake, name: str = "copy") -> str:
    porcelain.create_repo(lake, name, "main", bare=True)
    return name


def _manifest_with(
    lake: Lake, kind: str, records: list[Any], base: refsdump.RefsManifest
) -> refsdump.RefsManifest:
    """``base`` with the ``kind`` document replaced by one of ``records``."""
    doc_id, _ = refsdump._store(lake, kind, records, 1 << 20)
    fields = base.to_dict()
    fields[f"{kind}_meta_range_id"] = doc_id
    return refsdump.RefsManifest.from_dict(fields)


def _commit_records(lake: Lake) -> list[dict[str, Any]]:
    return [c.to_dict() for c in changes.log(lake, REPO, "main")]


def test_documents_larger_than_a_block_are_split_and_restored(lake: Lake, history: dict[str, Commit]) -> None:
    manifest = refsdump.dump(lake, REPO, block_size=256)
    index = json.loads(lake.blocks.get(manifest.commits_meta_range_id))
    assert len(index["parts"]) > 1  # the commits document spans several blocks
    counts = refsdump.restore(lake, _bare(lake), manifest)
    assert counts == {"commits": len(history), "tags": 1, "branches": 2}
    assert _state(lake, "copy") == _state(lake, REPO)
    assert view(lake, "main") == {
        o.path: b"".join(porcelain.read(lake, "copy", "main", o.path))
        for o in listing.list_objects(lake, "copy", "main")
    }


def test_the_same_refs_dump_to_the_same_manifest(lake: Lake, history: dict[str, Commit]) -> None:
    assert refsdump.dump(lake, REPO) == refsdump.dump(lake, REPO)


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda rs: [{**rs[0], "message": "rewritten"}, *rs[1:]], id="content-not-matching-id"),
        pytest.param(lambda rs: [{**rs[0], "generation": 99}, *rs[1:]], id="wrong-generation"),
        pytest.param(lambda rs: rs[:-1], id="parent-missing"),
        pytest.param(lambda rs: [{**rs[0], "parents": "x"}, *rs[1:]], id="malformed-parents"),
        pytest.param(lambda rs: [{**rs[0], "metadata": {"k": 1}}, *rs[1:]], id="malformed-metadata"),
        pytest.param(lambda rs: [*rs, 7], id="not-a-record"),
    ],
)
def test_tampered_commits_are_refused_and_nothing_is_written(
    lake: Lake, history: dict[str, Commit], tamper: Any
) -> None:
    good = refsdump.dump(lake, REPO)
    bad = _manifest_with(lake, "commits", tamper(_commit_records(lake)), good)
    target = _bare(lake)
    with pytest.raises(InvalidArgument):
        refsdump.restore(lake, target, bad)
    assert _state(lake, target) == ([], [], {})
    assert not any(True for _ in lake.kv.scan(f"repo/{target}", "commit/"))
    refsdump.restore(lake, target, good)  # still bare: the good dump goes in
    assert _state(lake, target) == _state(lake, REPO)


def test_refs_naming_commits_outside_the_dump_are_refused(lake: Lake, history: dict[str, Commit]) -> None:
    good = refsdump.dump(lake, REPO)
    stray = _manifest_with(lake, "tags", [{"id": "v9", "commit_id": "f" * 64}], good)
    with pytest.raises(InvalidArgument, match="not in it"):
        refsdump.restore(lake, _bare(lake), stray)
    bad_name = _manifest_with(lake, "branches", [{"id": "no spaces", "commit_id": history["C1"].id}], good)
    with pytest.raises(InvalidArgument):
        refsdump.restore(lake, "copy", bad_name)
    assert _state(lake, "copy") == ([], [], {})


def test_restore_only_into_a_bare_repository(lake: Lake, history: dict[str, Commit]) -> None:
    manifest = refsdump.dump(lake, REPO)
    with pytest.raises(Conflict, match="not bare"):
        refsdump.restore(lake, REPO, manifest)
    porcelain.create_repo(lake, "other")
    before = _state(lake, "other")
    with pytest.raises(Conflict):
        refsdump.restore(lake, "other", manifest)
    assert _state(lake, "other") == before


def test_garbage_collection_keeps_the_blocks_of_dumps(lake: Lake, history: dict[str, Commit]) -> None:
    manifest = refsdump.dump(lake, REPO, block_size=256)
    pinned = set(refsdump.dump_blocks(lake, REPO))
    assert manifest.commits_meta_range_id in pinned and len(pinned) > 3
    gc.run(lake, REPO, grace_seconds=0)
    assert all(lake.blocks.exists(b) for b in pinned)
    refsdump.restore(lake, _bare(lake), manifest)
    assert _state(lake, "copy") == _state(lake, REPO)


def test_fsck_verifies_the_blocks_of_dumps(lake: Lake, history: dict[str, Commit]) -> None:
    from lakectl.core.upkeep import fsck

    manifest = refsdump.dump(lake, REPO)
    report = fsck.check(lake)
    assert report.ok and report.orphaned_count == 0  # a dump's blocks are referenced, not orphans
    lake.blocks.delete(manifest.tags_meta_range_id)
    damaged = fsck.check(lake).damaged
    assert [(d.locator, d.problem.value, d.origin.repository) for d in damaged] == [
        (manifest.tags_meta_range_id, "missing", REPO)
    ]
