"""Object reads as the journal audits them: what one read request found, and its announcement to
the lake's events when the lake audits reads (``journal.reads``, docs/decisions/0009-journal.md).

Every surface that serves an object's bytes (``fs cat``/``fs download`` embedded, the REST read
and its signed-locator form, the S3 gateway's GET, presigned URLs) reads through
:func:`lakectl.core.porcelain.read_opened`, which calls :func:`announce` once per request: never
per block or chunk. A reader that seeks (a Parquet preview) opens the object as a file with
:func:`lakectl.core.objectfile.open_read`, which announces it once likewise. With reads not
audited, an announcement is one look at a cached flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakectl.core.events import Event, Verb, hears_reads
from lakectl.core.model import Branch, Entry, RepositoryId

if TYPE_CHECKING:
    from lakectl.core.lake import Lake


@dataclass(frozen=True, slots=True)
class ObjectRead:
    """One object as a read found it: the ref as asked, what it resolved to, and the entry."""

    repo: RepositoryId
    ref: str
    path: str
    entry: Entry
    commit_id: str
    """The commit the ref resolved to; for a branch, its head (the read also saw its staging)."""
    branch: str = ""
    """The branch, when the ref is one."""
    staged: bool | None = None
    """Whether the bytes are the branch's uncommitted ones; None: looked up when announced."""
    presigned: bool = False
    """Read through a presigned URL (its client is the user who signed it)."""
    seen: Branch | None = field(default=None, compare=False, repr=False)
    """The branch record the read saw, to look ``staged`` up in."""


def audited(lake: Lake) -> bool:
    return hears_reads(lake.events)


def span(size: int, offset: int, length: int | None) -> str:
    """The part of an object a read asked for, as an HTTP range (``bytes=a-b``, inclusive); empty
    for the whole object."""
    end = size if length is None else min(size, offset + length)
    if offset == 0 and end >= size:
        return ""
    return f"bytes={offset}-{end - 1}" if end > offset else f"bytes={offset}-"  # past the end: nothing


def staged(lake: Lake, found: ObjectRead) -> bool:
    """Whether a read at a branch found uncommitted bytes (False for any other ref)."""
    if found.staged is not None:
        return found.staged
    if found.seen is None:
        return False
    return lake.staging.get_staged(found.repo, found.seen, found.path) is not None


def announce(lake: Lake, found: ObjectRead, offset: int = 0, length: int | None = None) -> None:
    """Announce one read of ``found`` (``[offset, offset + length)``) when the lake audits reads;
    a sink that cannot record it refuses the read by raising."""
    if not audited(lake):
        return
    payload: dict[str, object] = {"ref": found.ref, "path": found.path, "checksum": found.entry.checksum}
    if found.branch:
        # Only under audit: one staging look tells uncommitted bytes from the head's.
        payload["staged"] = staged(lake, found)
    rng = span(found.entry.size, offset, length)
    if rng:
        payload["range"] = rng
    if found.presigned:
        payload["presigned"] = True
    lake.events.before(
        Event(Verb.READ_OBJECT, found.repo, branch=found.branch, commit_id=found.commit_id, payload=payload)
    )
