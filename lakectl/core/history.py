"""Where ``log`` starts and ends in the walk, as lakeFS's log API defines them: the page after a
commit, up to a commit, since a date-time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from lakectl.core.model import Commit
from lakectl.errors import InvalidArgument


def parse_since(text: str) -> float | None:
    """An RFC 3339 date-time (``2024-05-01T12:00:00Z``, ``...+02:00``) as a POSIX time; ``""``:
    None. Without an offset it is UTC, and a date alone its midnight (UTC), as lakeFS's API reads
    a ``date``: so a naive ``datetime`` sent by an SDK means the same on every server."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(
            f"invalid date-time {text[:64]!r}: expected RFC 3339, such as 2024-05-01T12:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def stop_at(commits: Iterable[Commit], last: str) -> Iterator[Commit]:
    """The commits up to and including the one whose id is ``last``."""
    for c in commits:
        yield c
        if c.id == last:
            return


def after(commits: Iterable[Commit], offset: str) -> Iterator[Commit]:
    """The commits that follow the one whose id is ``offset`` (the ``next_offset`` of the page
    before); none when it is not among them, as a page past the end is empty."""
    it = iter(commits)
    for c in it:
        if c.id == offset:
            break
    return it
