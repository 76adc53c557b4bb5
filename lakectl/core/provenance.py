"""Where data came from, and what was made from it: the inputs commits record
(:mod:`lakectl.core.graph.inputs`), followed across repositories.

:func:`upstream` answers "what was ``path`` at ``ref`` made from": the commit that last wrote
the path (the newest commit reachable from the ref that changed it, merges aside: a merge brings
a write, the commit it brings made it), the code that ran, and the same for each input, to a
depth. :func:`downstream` answers "what was made from this commit". Both follow only what the
caller may read (``readable``, a server's per-repository permission): an input in a repository
the caller may not read shows what the readable commit's own metadata says of it (repository,
commit id, path) and nothing of that repository itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakectl.core import changes
from lakectl.core.graph.inputs import Input, code_of, inputs_of, made_from
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, RepositoryId
from lakectl.core.porcelain import get_repo, lookup, resolve
from lakectl.core.uri import check_path
from lakectl.errors import InvalidArgument, NotFound

Readable = Callable[[str], bool]
MAX_DEPTH = 50


def everything(repo: str) -> bool:
    """The embedded lake's answer: its user reads every repository."""
    return True


@dataclass
class Source:
    """``path`` at ``ref`` of ``repository``: the commit that last wrote it (None: none did, or
    the repository is not ``readable``), the code it records, and its inputs as sources."""

    repository: str
    ref: str
    path: str
    readable: bool = True
    commit: Commit | None = None
    code: dict[str, Any] | None = None
    inputs: list[Source] = field(default_factory=list)
    more: bool = False
    """Inputs left out: the depth was reached, or the source was met already on the way."""

    def to_dict(self) -> dict[str, Any]:
        c = self.commit
        return {
            "repository": self.repository,
            "ref": self.ref,
            "path": self.path,
            "readable": self.readable,
            "commit": None if c is None else _commit_dict(c),
            "code": self.code,
            "inputs": [i.to_dict() for i in self.inputs],
            "more": self.more,
        }


def _commit_dict(c: Commit) -> dict[str, Any]:
    return {"id": c.id, "message": c.message, "committer": c.committer, "creation_date": c.creation_date}


def upstream(
    lake: Lake, repo: str, ref: str, path: str, depth: int = 5, readable: Readable = everything
) -> Source:
    """What ``path`` at ``ref`` was made from, ``depth`` levels of inputs deep."""
    if not 0 <= depth <= MAX_DEPTH:
        raise InvalidArgument(f"depth must be between 0 and {MAX_DEPTH}, got {depth}")
    path = check_path(path, allow_empty=True)
    rid = get_repo(lake, repo).name
    return _source(lake, rid, ref, path, depth, readable, set())


def _source(
    lake: Lake, repo: RepositoryId, ref: str, path: str, depth: int, readable: Readable, seen: set[Input]
) -> Source:
    if not readable(repo):
        return Source(repo, ref, path, readable=False)
    writer = last_writer(lake, repo, ref, path)
    source = Source(repo, ref, path, commit=writer, code=None if writer is None else code_of(writer))
    found = [] if writer is None else inputs_of(writer)
    if depth == 0:
        source.more = bool(found)
        return source
    for i in found:
        if i in seen:
            source.more = True
            continue
        source.inputs.append(_input_source(lake, i, depth - 1, readable, seen | {i}))
    return source


def _input_source(lake: Lake, i: Input, depth: int, readable: Readable, seen: set[Input]) -> Source:
    try:
        return _source(lake, i.repository, i.commit, i.path, depth, readable, seen)
    except NotFound:  # recorded, but gone: the repository deleted, the commit collected
        return Source(i.repository, i.commit, i.path, readable=readable(i.repository))


def last_writer(lake: Lake, repo: str, ref: str, path: str) -> Commit | None:
    """The newest commit reachable from ``ref`` that changed ``path``, merges aside."""
    objects, prefixes = _log_filter(lake, repo, ref, path)
    return next(changes.log(lake, repo, ref, 1, no_merges=True, objects=objects, prefixes=prefixes), None)


def _log_filter(lake: Lake, repo: str, ref: str, path: str) -> tuple[list[str], list[str]]:
    """``path`` as the log filters by it: the object of that name at ``ref``, else everything
    under it as a directory (``""``: anything)."""
    if path and not path.endswith("/") and lookup(lake, repo, ref, path) is not None:
        return [path], []
    return [], [path.rstrip("/") + "/" if path else ""]


def downstream(
    lake: Lake, repo: str, ref: str, path: str = "", readable: Readable = everything
) -> list[Source]:
    """The commits made from ``ref``'s commit of ``repo`` (its data under ``path``, if given), in
    the repositories the caller may read, oldest first."""
    path = check_path(path, allow_empty=True)
    rid = get_repo(lake, repo).name
    commit = resolve(lake, repo, ref).commit
    made: list[Source] = []
    for out_repo, out_id in made_from(lake.kv, rid, commit.id):
        if not readable(out_repo):
            continue
        try:
            out = lake.refs.get_commit(out_repo, out_id)
        except NotFound:  # the repository deleted since
            continue
        paths = [i.path for i in inputs_of(out) if (i.repository, i.commit) == (rid, commit.id)]
        if not path or any(_overlap(path, p) for p in paths):
            made.append(Source(out_repo, out.id, ",".join(paths), commit=out, code=code_of(out)))
    return sorted(made, key=lambda s: (s.commit.creation_date if s.commit else 0, s.repository, s.ref))


def _overlap(a: str, b: str) -> bool:
    """Whether one path is the other or under it (``""`` is everything)."""
    return a.startswith(b) or b.startswith(a)
