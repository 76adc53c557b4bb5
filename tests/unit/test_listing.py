"""Listings with a delimiter against a model, on trees of many small ranges: directories are
stepped over by their paths alone where nothing is staged under the prefix, and through the
staged view where something is; either way the listing is the model's."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core import listing, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph import tree as tree_mod
from lakectl.core.graph.ranges import ChunkPolicy
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.model import PathType

SMALL = ChunkPolicy(min_rows=2, normal_rows=3, strict=4, loose=2, max_rows=4)
SMALL_PAGES = ChunkPolicy(min_rows=1, normal_rows=2, strict=4, loose=2, max_rows=4, hash_offset=4)
NAMES = st.sampled_from(["a", "b", "c", "d"])
PATHS = st.lists(NAMES, min_size=1, max_size=4).map("/".join)


def model(paths: set[str], prefix: str, after: str) -> list[tuple[str, PathType]]:
    out: list[tuple[str, PathType]] = []
    for path in sorted(paths):
        if not path.startswith(prefix):
            continue
        cut = path.find("/", len(prefix))
        item = (path[: cut + 1], PathType.COMMON_PREFIX) if cut >= 0 else (path, PathType.OBJECT)
        if item[0] > after and (not out or out[-1] != item):
            out.append(item)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    committed=st.sets(PATHS, min_size=1, max_size=60),
    staged=st.lists(st.tuples(PATHS, st.booleans()), max_size=6),
    prefix=st.sampled_from(["", "a/", "b/", "a/b/", "c/d/"]),
    after=st.sampled_from(["", "a/", "a/b", "b/c/", "c"]),
)
def test_listings_are_the_models(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    committed: set[str],
    staged: list[tuple[str, bool]],
    prefix: str,
    after: str,
) -> None:
    monkeypatch.setattr(tree_mod.Trees.__init__, "__defaults__", (SMALL, SMALL_PAGES))
    # A path that is a file and a directory at once ("a" and "a/b") is allowed: keys are keys.
    blocks = tmp_path / f"blocks-{len(list(tmp_path.iterdir()))}"
    lake = Lake(kv=MemoryStore(), blocks=LocalAdapter(str(blocks)))
    p.create_repo(lake, "rep")
    for path in sorted(committed):
        writes.upload(lake, "rep", "main", path, io.BytesIO(path.encode()))
    p.commit(lake, "rep", "main", "tree")
    assert len(lake.trees.ranges(p.get_commit(lake, "rep", "main").meta_range_id)) > 1 or len(committed) < 5
    view = set(committed)
    for path, keep in staged:
        if keep:
            writes.upload(lake, "rep", "main", path, io.BytesIO(b"staged"))
            view.add(path)
        elif path in view:
            writes.delete_objects(lake, "rep", "main", [path])
            view.discard(path)
    for ref, paths in (("main", view), ("main@", committed)):
        got = [(o.path, o.path_type) for o in listing.list_objects(lake, "rep", ref, prefix, "/", after)]
        assert got == model(paths, prefix, after), ref
