"""Zero-copy import as a task: list the sources, commit their objects as external entries on
``_<branch>_imported`` (optionally merged into the branch), with a status in the KV store.

lakeFS's semantics (docs/decisions/0010-import.md): the import branch is created from the branch
when missing; each destination prefix there is replaced by the source's objects (what was under it
and is not in the source is deleted); one commit with the given message and metadata; then,
with ``merge``, a merge of the import branch into the branch. The task's record (ingested count,
completed, error, commit) lives under ``import/<id>`` in the repository's partition and is
refreshed by a heartbeat every second, so a task whose process died is reported as stopped
instead of running forever; a cancel is a second key the heartbeat looks at.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakectl.core import keys
from lakectl.core.graph.tree import Update
from lakectl.core.hostpaths import Confinement
from lakectl.core.importing.protocol import Listed, Source
from lakectl.core.importing.sources import local_checksum, parse_object, parse_source
from lakectl.core.limits import check_metadata, check_name
from lakectl.core.model import PathType, Row
from lakectl.core.uri import check_new_path, check_path
from lakectl.errors import (
    Conflict,
    DirtyBranch,
    InvalidArgument,
    KeyNotFound,
    LakectlError,
    NotFound,
    StorageError,
)

if TYPE_CHECKING:
    from lakectl.core.lake import Lake

HEARTBEAT = 1.0
"""Seconds between two refreshes of a running task's record."""
STALE = 15.0
"""A running task whose record is older than this has lost its process."""
CANCELED = "import canceled"


class Canceled(LakectlError):
    """Internal: the worker saw the cancel key (never leaves this module)."""


@dataclass(frozen=True, slots=True)
class Location:
    """One of lakeFS's ``ImportLocation``: a source (prefix or object) and where it goes."""

    path: str
    destination: str
    type: PathType = PathType.COMMON_PREFIX

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Location:
        """lakeFS's ``ImportLocation`` JSON; a bad ``type`` is ``InvalidArgument``."""
        kind = d.get("type", PathType.COMMON_PREFIX.value)
        try:
            path_type = PathType(kind)
        except ValueError:
            raise InvalidArgument(f"import path type {kind!r}: expected common_prefix or object") from None
        path, dest = d.get("path"), d.get("destination", "")
        if not isinstance(path, str) or not isinstance(dest, str):
            raise InvalidArgument("an import path needs a source `path` and a `destination` (strings)")
        return Location(path, dest, path_type)

    def source(self, blocks: Any = None, confinement: Confinement | None = None) -> Source:
        """What ``path`` names; a local path outside ``confinement`` (a server's) is ``Forbidden``."""
        if self.type is PathType.OBJECT:
            return parse_object(self.path, blocks, confinement)
        return parse_source(self.path, blocks, confinement)

    def dest_prefix(self, source: Source) -> str:
        """The destination of the source's relative keys. A directory (or an S3 prefix ending
        in ``/``) imported to ``dest`` lands under ``dest/``, as lakectl users write it."""
        d = self.destination
        if self.type is PathType.OBJECT or not d or d.endswith("/"):
            return d
        if not self.path.startswith("s3://") or self.path.endswith("/"):
            return d + "/"
        return d


@dataclass
class Status:
    """An import task's record: lakeFS's ``ImportStatus`` and what finds its branches."""

    id: str
    repo: str
    branch: str
    import_branch: str
    merge: bool
    ingested: int = 0
    completed: bool = False
    error: str = ""
    error_code: str = ""
    update_time: float = field(default_factory=time.time)
    commit: dict[str, Any] | None = None
    metarange_id: str = ""
    import_commit_id: str = ""

    def encode(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    @staticmethod
    def decode(raw: bytes) -> Status:
        return Status(**json.loads(raw))

    @property
    def running(self) -> bool:
        return not self.completed and not self.error

    def to_dict(self) -> dict[str, Any]:
        """lakeFS's ``ImportStatus`` fields, and ours after them."""
        return {
            "id": self.id,
            "completed": self.completed,
            "update_time": datetime.fromtimestamp(self.update_time, UTC).isoformat().replace("+00:00", "Z"),
            "ingested_objects": self.ingested,
            "metarange_id": self.metarange_id,
            "commit": self.commit,
            "error": {"message": self.error, "code": self.error_code or "internal"} if self.error else None,
            "branch": self.branch,
            "import_branch": self.import_branch,
            "import_commit_id": self.import_commit_id,
            "merged": self.merge,
        }


_running: list[tuple[Lake, Status, threading.Thread]] = []
"""Imports running in threads of this process, with the lake they write."""


def stop_all(lake: Lake) -> None:
    """Cancel this process's running imports into ``lake`` and wait for them: before the lake
    closes under them (an embedded CLI interrupted, a server shutting down)."""
    for _, st, thread in [r for r in _running if r[0] is lake]:
        if thread.is_alive():
            with contextlib.suppress(LakectlError):
                cancel(lake, st.repo, st.id)
    wait_all(lake)


def wait_all(lake: Lake) -> None:
    """Wait until this process's imports into ``lake`` have ended."""
    for _, _, thread in [r for r in _running if r[0] is lake]:
        thread.join()


def import_branch_name(branch: str) -> str:
    return f"_{branch}_imported"


def _save(lake: Lake, st: Status) -> None:
    from lakectl.core import porcelain

    rid = porcelain.get_repo(lake, st.repo).name
    lake.kv.set(keys.repo_partition(rid), keys.import_key(st.id), st.encode())


def _load(lake: Lake, repo: str, import_id: str) -> Status:
    from lakectl.core import porcelain

    rid = porcelain.get_repo(lake, repo).name
    if not import_id or len(import_id) > 64 or not import_id.replace("-", "").isalnum():
        raise NotFound(f"no import {import_id!r} in {repo!r}")
    try:
        return Status.decode(lake.kv.get(keys.repo_partition(rid), keys.import_key(import_id)))
    except KeyNotFound:
        raise NotFound(f"no import {import_id!r} in {repo!r}") from None


def start(
    lake: Lake,
    repo: str,
    branch: str,
    locations: Sequence[Location],
    message: str = "",
    metadata: Mapping[str, str] | None = None,
    committer: str | None = None,
    merge: bool = True,
    background: bool = True,
) -> Status:
    """Check the request (repository, branch, sources, destinations), record the task and run it:
    in a thread of this process when ``background`` (the server's 202), else before returning."""
    from lakectl.core import porcelain, writes
    from lakectl.core.lake import default_committer

    if not locations:
        raise InvalidArgument("an import needs at least one source path")
    if branch.startswith("_") and branch.endswith("_imported"):
        raise InvalidArgument(f"{branch!r} is an import branch: import into the branch it belongs to")
    writes.check_writable(lake, repo, branch)
    if merge:
        rid = porcelain.get_repo(lake, repo).name
        if lake.staging.is_dirty(rid, porcelain.get_branch(lake, repo, branch)):
            raise DirtyBranch(
                f"branch {branch!r} has uncommitted changes; commit or reset them before an import"
            )
    sources = []
    for loc in locations:
        check_path(loc.destination, allow_empty=True)
        # Bad URIs, missing directories and paths the server may not read fail here, before a task.
        source = loc.source(lake.blocks, lake.confinement)
        dest = loc.dest_prefix(source)
        if dest and not dest.endswith("/"):
            check_new_path(dest)  # an object's path (or a prefix a key continues)
        elif dest:
            check_new_path(dest + "x")  # a name under the prefix must be one a user could write
        sources.append(source)
    # Everything the commit will check is checked now: a refused import leaves no trace.
    message = porcelain.check_message(message or "Import objects")
    metadata = check_metadata(dict(metadata or {}), "commit metadata")
    committer = check_name(committer or default_committer(), "committer")
    st = Status(uuid.uuid4().hex, repo, branch, import_branch_name(branch), merge)
    _save(lake, st)

    def work() -> None:
        try:
            _run(lake, st, list(zip(locations, sources, strict=True)), message, metadata, committer)
        finally:
            _running[:] = [r for r in _running if r[1] is not st]

    if background:
        thread = threading.Thread(target=work, name=f"import-{st.id[:8]}", daemon=True)
        _running.append((lake, st, thread))
        thread.start()
    else:
        work()
    return status(lake, repo, st.id)


def status(lake: Lake, repo: str, import_id: str, branch: str | None = None) -> Status:
    """The task's record (of an import into ``branch``, when given); a running task whose
    heartbeat stopped is reported as failed."""
    st = _load(lake, repo, import_id)
    if branch is not None and st.branch != branch:
        raise NotFound(f"no import {import_id!r} into {repo}/{branch}")
    if st.running and time.time() - st.update_time > STALE:
        st.error_code = StorageError.code
        st.error = (
            "the import stopped: the process running it ended before it completed; nothing was "
            "committed, run the import again"
        )
    return st


def cancel(lake: Lake, repo: str, import_id: str, branch: str | None = None) -> None:
    """Ask a running task to stop; ``Conflict`` when it already ended."""
    from lakectl.core import porcelain

    st = status(lake, repo, import_id, branch)
    if not st.running:
        state = "completed" if st.completed else st.error
        raise Conflict(f"import {import_id} is no longer running ({state})")
    rid = porcelain.get_repo(lake, repo).name
    lake.kv.set(keys.repo_partition(rid), keys.import_cancel_key(import_id), b"1")


class _Heartbeat:
    """Refreshes the task's record every :data:`HEARTBEAT` and notices a cancel."""

    def __init__(self, lake: Lake, st: Status) -> None:
        self.lake, self.st = lake, st
        self.canceled = False
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._beat, name=f"import-beat-{st.id[:8]}", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        from lakectl.core import porcelain

        rid = porcelain.get_repo(self.lake, self.st.repo).name
        while not self.done.wait(HEARTBEAT):
            try:
                self.lake.kv.get(keys.repo_partition(rid), keys.import_cancel_key(self.st.id))
                self.canceled = True
            except KeyNotFound:
                pass
            except LakectlError:
                continue
            self.save()

    def save(self) -> None:
        with self.lock:
            self.st.update_time = time.time()
            with contextlib.suppress(LakectlError):  # the next beat tries again
                _save(self.lake, self.st)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def _run(
    lake: Lake,
    st: Status,
    located: list[tuple[Location, Source]],
    message: str,
    metadata: Mapping[str, str],
    committer: str,
) -> None:
    from lakectl.core import merging, porcelain

    beat = _Heartbeat(lake, st)
    try:
        rid = porcelain.get_repo(lake, st.repo).name
        try:
            porcelain.get_branch(lake, st.repo, st.import_branch)
        except NotFound:
            porcelain.create_branch(lake, st.repo, st.import_branch, st.branch)
        base = lake.refs.get_commit(rid, porcelain.get_branch(lake, st.repo, st.import_branch).commit_id)

        def tick(n: int) -> None:
            st.ingested += n
            if beat.canceled:
                raise Canceled(CANCELED)

        updates = build_updates(lake, base.meta_range_id, located, tick)
        if beat.canceled:
            raise Canceled(CANCELED)
        done = porcelain.commit_rows(lake, st.repo, st.import_branch, updates, message, metadata, committer)
        del updates
        st.import_commit_id = done.id
        st.metarange_id = done.meta_range_id
        final = done
        if st.merge:
            merged = merging.merge(
                lake,
                st.repo,
                st.import_branch,
                st.branch,
                message=message,
                metadata=metadata,
                committer=committer,
            )
            final = merged.commit
        st.commit = final.to_dict()
        st.completed = True
    except Canceled:
        st.error, st.error_code = CANCELED, Conflict.code
    except LakectlError as exc:
        st.error, st.error_code = exc.message, exc.code
    except Exception as exc:  # a worker thread must leave a status, whatever happened
        st.error = f"import failed: {exc!r}"
    finally:
        beat.stop()
        beat.save()


def _rows(located: list[tuple[Location, Source]], tick: Callable[[int], None]) -> Iterator[tuple[str, Row]]:
    """Every imported object as ``(path, row)`` in path order (a path two sources give: the last)."""
    streams = []
    for order, (loc, source) in enumerate(located):
        streams.append(_located_rows(order, loc.dest_prefix(source), source.list()))
    last: tuple[str, Row] | None = None
    for path, _, row in heapq.merge(*streams, key=lambda t: (t[0], t[1])):
        if last is not None and last[0] != path:
            yield last
        last = (path, row)
        tick(1)
    if last is not None:
        yield last


def _located_rows(order: int, dest: str, listed: Iterator[Listed]) -> Iterator[tuple[str, int, Row]]:
    for key, size, ext, mtime in listed:
        path = dest + key
        check_new_path(path)
        checksum = ext.etag or local_checksum(size, ext.mtime_ns)
        yield path, order, (size, checksum, ext.encode(), mtime, "application/octet-stream", "")


def build_updates(
    lake: Lake,
    base: Any,
    located: list[tuple[Location, Source]],
    tick: Callable[[int], None],
) -> list[Update]:
    """The sorted updates that turn the import branch's tree into one whose destination
    prefixes hold exactly the sources' objects."""
    prefixes = sorted({loc.dest_prefix(src) for loc, src in located})
    # A prefix inside another is walked with it.
    roots = [p for i, p in enumerate(prefixes) if not any(p.startswith(q) for q in prefixes[:i])]
    existing = heapq.merge(*(((p for p, _ in lake.trees.iter(base, prefix=r))) for r in roots))
    updates: list[Update] = []
    old = next(existing, None)
    for path, row in _rows(located, tick):
        while old is not None and old < path:
            updates.append((old, None))
            old = next(existing, None)
        if old == path:
            old = next(existing, None)
        updates.append((path, row))
    while old is not None:
        updates.append((old, None))
        old = next(existing, None)
    return updates
