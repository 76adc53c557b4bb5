"""An object's properties beyond its bytes: rewriting its user metadata in place (lakeFS's
``objects/stat/user_metadata``), and what the underlying storage says of it (lakeFS's
``underlyingProperties``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from lakectl.core import porcelain, writes
from lakectl.core.blocks import HasStorageClass
from lakectl.core.blocks.data import parse_segment
from lakectl.core.lake import Lake
from lakectl.core.limits import check_metadata
from lakectl.core.model import Entry


def replace_user_metadata(
    lake: Lake, repo: str, branch: str, path: str, metadata: Mapping[str, str]
) -> Entry:
    """Stage the object at ``path`` on ``branch`` (staged or committed) again with ``metadata``
    as all of its user metadata; its bytes, checksum, content type and mtime stay, as lakeFS
    keeps them. ``ObjectNotFound`` when there is no such object on the branch. The read and the
    staging are not one atomic step: a write of the same path in between is overwritten, as a
    copy of the path onto itself would."""
    metadata = check_metadata(dict(metadata))
    writes.check_writable(lake, repo, branch)
    current = porcelain.stat(lake, repo, branch, path)
    assert current.entry is not None
    entry = dataclasses.replace(current.entry, metadata=metadata)
    writes.touch_blocks(lake, entry)
    writes.stage_rows(lake, repo, branch, [(current.path, entry.to_row())])
    return entry


def storage_class(lake: Lake, repo: str, ref: str, path: str) -> str | None:
    """The storage class of the object's data in the block store (its first block's), None for a
    store without classes (a local directory) and for an imported object, whose bytes live at
    its source."""
    entry = porcelain.stat(lake, repo, ref, path).entry
    assert entry is not None
    if entry.external is not None or not isinstance(lake.blocks, HasStorageClass):
        return None
    for token in entry.locators:
        bare, _, _, length = parse_segment(token)
        if length:
            return lake.blocks.storage_class(bare)
    return None  # the empty object has no block
