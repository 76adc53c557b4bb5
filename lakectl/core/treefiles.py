"""The files of a repository's trees by id, for lakeFS's metadata API: metaranges and ranges.

lakeFS stores a commit's tree as a metarange naming ranges (SSTables) in the repository's
storage namespace. Here a tree is a root (the metarange, the commit's ``meta_range_id``) naming
pages, each naming ranges, every one a content-addressed block of the lake (our own file format:
:mod:`lakectl.core.graph.ranges`). A *range* in lakeFS's terms is either a page or a range here,
so that a client walking a tree from its metarange can fetch every file it names.

Blocks are shared by the whole lake, so an id is served only when it is a file of one of the
repository's own trees (the tree of one of its commits): knowing another repository's ids reads
nothing. Finding a metarange reads the repository's commit records; finding a range reads, in
addition, the roots and pages of its trees until one names it (both cached by the range store).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

from lakectl.core import keys
from lakectl.core.blocks.locator import parse_locator
from lakectl.core.graph.ranges import ROOT_LEVEL, RangeStore
from lakectl.core.kv.helpers import scan_prefix
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, RepositoryId
from lakectl.core.porcelain import get_repo
from lakectl.errors import BlockNotFound, CorruptBlock, InvalidArgument, InvalidLocator, NotFound


class TreeFile(enum.Enum):
    """lakeFS's metadata object types."""

    META_RANGE = "meta_range"
    RANGE = "range"

    @staticmethod
    def parse(text: str) -> TreeFile:
        """The type named ``text``; ``InvalidArgument`` for any other."""
        try:
            return TreeFile(text)
        except ValueError:
            raise InvalidArgument(
                f"unknown metadata object type {text[:80]!r}: expected range or meta_range"
            ) from None


def locate(lake: Lake, repo: str, kind: TreeFile, object_id: str) -> str:
    """The bare locator of ``object_id`` when it is a file of that kind of one of the repository's
    trees; ``NotFound`` otherwise (an id that is not a locator included)."""
    rid = get_repo(lake, repo).name
    missing = NotFound(f"no {kind.value} {object_id[:100]!r} in repository {rid!r}")
    try:
        bare = parse_locator(object_id).bare
    except InvalidLocator:
        raise missing from None
    metaranges = dict.fromkeys(_metaranges(lake, rid))  # distinct, in commit id order
    if kind is TreeFile.META_RANGE:
        if bare in metaranges:
            return bare
        raise missing
    seen: set[str] = set()
    for metarange in metaranges:
        if _names(lake.ranges, metarange, bare, seen):
            return bare
    raise missing


def read(lake: Lake, repo: str, kind: TreeFile, object_id: str) -> bytes:
    """The bytes of a file :func:`locate` finds (``BlockNotFound`` if its block is gone)."""
    return lake.blocks.get(locate(lake, repo, kind, object_id))


def _metaranges(lake: Lake, rid: RepositoryId) -> Iterator[str]:
    for _, raw in scan_prefix(lake.kv, keys.repo_partition(rid), keys.COMMIT_PREFIX):
        yield Commit.decode(raw).meta_range_id


def _names(store: RangeStore, metarange: str, wanted: str, seen: set[str]) -> bool:
    """Whether the tree of ``metarange`` has a page or range ``wanted``; pages in ``seen`` (walked
    for an earlier tree) are skipped, and added as they are read. An unreadable tree (its blocks
    collected) names nothing."""
    try:
        root = store.read_index(metarange)
        if root.level != ROOT_LEVEL:  # a flat metarange names its ranges
            return wanted in root.ids
        for page in root.ids:
            if page == wanted:
                return True
            if page in seen:
                continue
            seen.add(page)
            if wanted in store.read_index(page).ids:
                return True
    except (BlockNotFound, CorruptBlock):
        return False
    return False
