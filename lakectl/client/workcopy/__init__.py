"""``lakectl local``: a directory linked to a path of a ref, synced through the Backend alone.

The verbs of lakeFS's ``lakectl local`` (init, clone, list, status, commit, pull, checkout),
with its ``.lakefs_ref.yaml`` (``src``, ``at_head``) and an index of our own under ``.lakectl/``
(:mod:`lakectl.client.workcopy.index`) so that an unchanged file is never read again. Every
remote step is a :class:`~lakectl.client.Backend` verb, so the embedded lake and a server behave
alike. docs/local.md is the user's guide.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakectl.client.workcopy import monitor
from lakectl.client.workcopy.index import META_DIR, REF_FILE, Index, Scan, scan, scan_paths
from lakectl.client.workcopy.reffile import Ref, find_root, read_ref, write_ref
from lakectl.errors import (
    AlreadyExists,
    BranchNotFound,
    Conflict,
    DirtyBranch,
    InvalidArgument,
    InvalidURI,
    LakectlError,
    ObjectNotFound,
    PreconditionFailed,
)

if TYPE_CHECKING:
    from lakectl.client import Backend
    from lakectl.core.model import Commit

__all__ = [
    "Outcome",
    "Status",
    "checkout",
    "clone",
    "commit",
    "find_root",
    "init",
    "list_linked",
    "pull",
    "status",
]

DEFAULT_PARALLELISM = 25
"""Files transferred at once (lakeFS's default for ``lakectl local``)."""
Advance = Callable[[int], None]


@dataclass(slots=True)
class Source:
    """A parsed ``src``: repository, ref and prefix (empty, or ending with ``/``)."""

    repo: str
    ref: str
    prefix: str

    @staticmethod
    def parse(text: str) -> Source:
        from lakectl.core.uri import parse_uri

        uri = parse_uri(text)
        if uri.ref is None:
            raise InvalidURI(f"invalid URI {text!r}: expected lakefs://<repository>/<ref>/[<path>]")
        return Source(uri.repo, uri.ref, uri.path)

    def __str__(self) -> str:
        return f"lakefs://{self.repo}/{self.ref}/{self.prefix}"


@dataclass(slots=True)
class Outcome:
    """What a verb did to the directory (lakeFS's summary: downloaded, uploaded, removed)."""

    operation: str
    directory: str
    src: str
    at_head: str
    downloaded: int = 0
    uploaded: int = 0
    removed: int = 0
    commit: Commit | None = None
    gitignore: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "directory": self.directory,
            "src": self.src,
            "at_head": self.at_head,
            "downloaded": self.downloaded,
            "uploaded": self.uploaded,
            "removed": self.removed,
            "commit": self.commit.to_dict() if self.commit is not None else None,
            "gitignore": self.gitignore,
        }


@dataclass(slots=True)
class Status:
    """Local changes against ``at_head``, and with ``remote`` what the branch gained since."""

    directory: str
    src: str
    at_head: str
    local: Scan
    remote: list[tuple[str, str]] | None = None
    """(type, path) of each change from ``at_head`` to the ref's head; None: not asked."""
    head: str = ""

    def changes(self) -> list[dict[str, Any]]:
        """The one JSON shape of a change (``lakectl diff``'s, with its ``source``)."""
        out = [_change("local", "added", p) for p in self.local.added]
        out += [_change("local", "changed", p) for p in self.local.changed]
        out += [_change("local", "removed", p) for p in self.local.removed]
        out.sort(key=lambda c: c["path"])
        for kind, path in self.remote or ():
            out.append(_change("remote", kind, path))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "src": self.src,
            "at_head": self.at_head,
            "head": self.head or None,
            "changes": self.changes(),
        }


def _change(source: str, kind: str, path: str) -> dict[str, Any]:
    return {"source": source, "type": kind, "path": path, "path_type": "object"}


# -- linking --------------------------------------------------------------------------------


def _resolve_source(b: Backend, text: str) -> tuple[Source, str]:
    """The source with its prefix made a directory, and the commit its ref is at. A path that
    is an object is refused: a directory mirrors a prefix."""
    src = Source.parse(text)
    head = b.get_commit(src.repo, src.ref).id
    if src.prefix and not src.prefix.endswith("/"):
        try:
            b.stat(src.repo, head, src.prefix)
        except ObjectNotFound:
            src.prefix += "/"
        else:
            raise InvalidArgument(
                f"lakeFS path {text} is an existing object and cannot be used as a reference source"
            )
    return src, head


def _link(directory: str, src: Source, head: str, force: bool, ignore: bool, operation: str) -> Ref:
    from lakectl.client.workcopy import gitignore

    if ignore:
        gitignore.check_not_git_root(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot create directory {directory!r}: {exc.strerror}") from exc
    if os.path.exists(os.path.join(directory, REF_FILE)) and not force:
        raise AlreadyExists(
            f"directory {directory!r} already linked to a lakeFS path, run command with --force to overwrite",
            path=directory,
        )
    ref = Ref(str(src), head, operation)
    write_ref(directory, ref)
    return ref


def init(b: Backend, uri: str, directory: str, force: bool = False, ignore: bool = True) -> Outcome:
    """Link ``directory`` (created if missing) to ``uri`` at its head commit, downloading
    nothing: the files already there count as local changes against that commit."""
    directory = os.path.abspath(directory)
    src, head = _resolve_source(b, uri)
    _link(directory, src, head, force, ignore, "")
    _listed_index(b, src, head, directory)
    out = Outcome("init", directory, str(src), head)
    out.gitignore = _ignore(directory) if ignore else None
    return out


def clone(
    b: Backend,
    uri: str,
    directory: str,
    ignore: bool = True,
    parallelism: int = DEFAULT_PARALLELISM,
    progress: Callable[[int], Advance] | None = None,
) -> Outcome:
    """Download the objects under ``uri`` at its head commit into ``directory``, which must be
    missing or empty, and link it."""
    directory = os.path.abspath(directory)
    try:
        if os.listdir(directory):
            raise AlreadyExists(f"directory {directory!r} exists and is not empty", path=directory)
    except FileNotFoundError:
        pass
    except NotADirectoryError as exc:
        raise AlreadyExists(f"{directory!r} exists and is not a directory", path=directory) from exc
    except OSError as exc:
        raise InvalidArgument(f"cannot use directory {directory!r}: {exc.strerror or exc}") from exc
    src, head = _resolve_source(b, uri)
    ref = _link(directory, src, head, False, ignore, "clone")
    wanted = [rel for rel, _, _ in _listing(b, src, head)]
    advance = progress(len(wanted)) if progress is not None else None
    fetched = _download(b, src, head, directory, wanted, parallelism, advance, fresh=True)
    Index.build((p, *v) for p, v in fetched.items()).save(directory)
    write_ref(directory, Ref(ref.src, head))
    out = Outcome("clone", directory, ref.src, head, downloaded=len(fetched))
    out.gitignore = _ignore(directory) if ignore else None
    return out


def _ignore(directory: str) -> str | None:
    from lakectl.client.workcopy import gitignore

    return gitignore.ignore(directory)


def _listing(b: Backend, src: Source, commit: str) -> Iterable[tuple[str, int, str]]:
    """``(path relative to the prefix, size, checksum)`` of the objects under the prefix."""
    cut = len(src.prefix)
    for info in b.list_objects(src.repo, commit, src.prefix):
        rel = info.path[cut:]
        if info.entry is not None and _is_file_name(rel):
            yield rel, info.entry.size, info.entry.checksum


def _is_file_name(rel: str) -> bool:
    """Whether an object's path below the prefix can be a file of the directory: not a directory
    marker (``a/``), and no empty, ``.`` or ``..`` segment (``a//b``, or ``/x`` after the
    prefix ``data/`` of ``data//x``), which would name another file or one outside the
    directory. Objects that cannot be files are left out of the working copy."""
    return bool(rel) and all(part not in ("", ".", "..") for part in rel.split("/"))


def list_linked(directory: str) -> list[dict[str, str]]:
    """Every working copy under ``directory``, nested ones included (hidden directories are not
    searched): its directory, source and head commit."""
    out: list[dict[str, str]] = []
    top = os.path.abspath(directory)
    for here, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if REF_FILE in names:
            ref = read_ref(here)
            out.append({"directory": os.path.relpath(here, top), "src": ref.src, "at_head": ref.at_head})
    return sorted(out, key=lambda r: r["directory"])


# -- status ---------------------------------------------------------------------------------


def _open(directory: str, b: Backend | Callable[[], Backend]) -> tuple[str, Ref, Source, Index]:
    """The working copy holding ``directory``: its root, ref file, source and index. A missing
    index (a directory linked by lakeFS's lakectl) is made from the listing of the commit it is
    at, with no stats: every file is read once, by the first status."""
    root = find_root(directory)
    ref = read_ref(root)
    src = Source.parse(ref.src)
    index = Index.load(root)
    if index is None:
        index = _listed_index(b if not callable(b) else b(), src, ref.at_head, root)
    return root, ref, src, index


def _listed_index(b: Backend, src: Source, commit_id: str, root: str) -> Index:
    """An index of the commit's objects with no stats (-1): each file present is read once and
    compared with its object's checksum; a file missing is removed, one not listed is added."""
    index = Index.build((rel, size, -1, -1, checksum) for rel, size, checksum in _listing(b, src, commit_id))
    index.save(root)
    return index


def _scan(root: str, index: Index) -> tuple[Scan, Index]:
    """Scan (only the paths the monitor saw change, when one runs), and refresh the index's
    stats of files read and found unchanged, so that the next scan does not read them again
    (git's index refresh). The index then carries the monitor's token and the paths found
    changed; it is written when it learned enough to save the next scan work."""
    changes = monitor.query(root, index.token)
    if changes is None and monitor.wanted(root):
        with contextlib.suppress(OSError):
            monitor.spawn(root)  # gone since (a reboot, a crash): back for the next command
    try:
        if changes is None or changes.full:
            found = scan(root, index)
        else:
            found = scan_paths(root, index, changes.files, changes.dirs)
    except OSError as exc:  # an unreadable directory or file: one error line, not a traceback
        raise InvalidArgument(f"cannot read {exc.filename!r}: {exc.strerror or exc}") from exc
    index.token = "" if changes is None else changes.token
    index.pending = sorted(found.local_paths()) if changes is not None else []
    stale = {p: v for p, v in found.hashed.items() if p not in found.stats}
    if stale:
        index = _rewrite(root, index, stale, ())
    elif changes is not None and (changes.full or len(changes.files) + len(changes.dirs) > SAVE_AFTER):
        index.save(root)
    return found, index


SAVE_AFTER = 1000
"""Paths the monitor reported from which a status writes the index (and its new token): below,
writing 100k entries costs more than the next scan saves."""


def _rewrite(
    root: str,
    index: Index,
    updates: dict[str, tuple[int, int, int, str]],
    removed: Iterable[str],
) -> Index:
    fresh = index.updated(updates, removed)
    fresh.save(root)
    return fresh


def status(b: Callable[[], Backend], directory: str, remote: bool = False) -> Status:
    """Local changes against the commit the directory is at; with ``remote`` also the changes
    committed on its ref since. ``b`` gives the backend, called only with ``remote`` (or for a
    working copy without an index): a status asks the lake nothing."""
    root, ref, src, index = _open(directory, b)
    out = Status(root, ref.src, ref.at_head, _scan(root, index)[0])
    if remote:
        out.head = b().get_commit(src.repo, src.ref).id
        out.remote = _remote_changes(b(), src, ref.at_head, out.head)
    return out


def _remote_changes(b: Backend, src: Source, base: str, head: str) -> list[tuple[str, str]]:
    if not base or base == head:
        return []
    cut = len(src.prefix)
    return [
        (c.type.value, c.path[cut:])
        for c in b.diff_refs(src.repo, base, head, two_way=True, prefix=src.prefix)
        if _is_file_name(c.path[cut:])
    ]


# -- commit ---------------------------------------------------------------------------------


def commit(
    b: Backend,
    directory: str,
    message: str,
    metadata: dict[str, str] | None = None,
    allow_empty_message: bool = False,
    force: bool = False,
    parallelism: int = DEFAULT_PARALLELISM,
) -> Outcome:
    """Upload the files added and changed, delete the objects of files removed, and commit the
    branch; then bring what others committed meanwhile into the directory. Refused when a file
    changed here was changed on the branch too (``Conflict``), and when the branch holds
    uncommitted changes outside the directory's prefix (``DirtyBranch``, unless ``force``)."""
    root, ref, src, index = _open(directory, b)
    _check_interrupted(ref, force)
    found, index = _scan(root, index)
    out = Outcome("commit", root, ref.src, ref.at_head)
    if found.clean:
        return out
    if not message and not allow_empty_message:
        raise InvalidArgument("a commit message is required (-m), or pass --allow-empty-message")
    try:
        head = b.get_branch(src.repo, src.ref).commit_id
    except BranchNotFound as exc:
        raise BranchNotFound(
            f"{ref.src} is not on a branch: commit needs one (lakectl local checkout to move)",
            branch=src.ref,
        ) from exc
    mine = found.local_paths()
    conflicts = sorted(mine & {p for _, p in _remote_changes(b, src, ref.at_head, head)})
    if conflicts:
        raise Conflict(
            f"conflicts between local directory and remote {ref.src} (pull first, or undo the local "
            "change) in the following files",
            conflicts=conflicts,
        )
    if not force:
        outside = [c.path for c in b.diff_uncommitted(src.repo, src.ref) if not c.path.startswith(src.prefix)]
        if outside:
            raise DirtyBranch(
                f"branch {src.ref} contains uncommitted changes outside of local path {src.prefix or '/'!r}"
                f" (e.g. {outside[0]}); to commit them with yours, use --force",
                paths=outside[:100],
            )
    write_ref(root, Ref(ref.src, ref.at_head, "commit"))
    upload = sorted(found.added + found.changed)
    try:
        infos = b.upload_files(src.repo, src.ref, [(src.prefix + p, os.path.join(root, p)) for p in upload])
        if found.removed:
            b.delete_objects(src.repo, src.ref, [src.prefix + p for p in found.removed])
        done = b.commit(src.repo, src.ref, message, metadata, allow_empty_message=allow_empty_message)
    except OSError as exc:  # a file vanished or became unreadable since the scan
        write_ref(root, ref)
        raise InvalidArgument(f"cannot read {exc.filename!r}: {exc.strerror or exc}") from exc
    except LakectlError:
        # Refused (a hook, a protected branch...): the directory is as it was, so no interrupted
        # operation is recorded; what was uploaded stays staged on the branch, as in lakeFS.
        write_ref(root, ref)
        raise
    updates = {}
    cut = len(src.prefix)
    for info in infos:
        rel = info.path[cut:]
        assert info.entry is not None
        updates[rel] = (*found.stats[rel], info.entry.checksum)
    index = _rewrite(root, index, updates, found.removed)
    # Others' commits (and staged changes under the prefix) went into this commit too: the
    # directory takes them, so that it holds the commit it says it is at.
    theirs = [(k, p) for k, p in _remote_changes(b, src, ref.at_head, done.id) if p not in mine]
    pulled = _apply(b, src, done.id, root, index, theirs, parallelism)
    write_ref(root, Ref(ref.src, done.id))
    out.at_head, out.commit = done.id, done
    out.uploaded, out.removed = len(upload), len(found.removed) + pulled.removed
    out.downloaded = pulled.downloaded
    return out


# -- pull and checkout ----------------------------------------------------------------------


def pull(b: Backend, directory: str, force: bool = False, parallelism: int = DEFAULT_PARALLELISM) -> Outcome:
    """Bring the directory to its ref's head: download what changed, delete what was removed.
    Refused when files changed here (``PreconditionFailed``) unless ``force``, which discards
    those changes."""
    root, ref, src, index = _open(directory, b)
    _check_interrupted(ref, force)
    found, index = _scan(root, index)
    if not found.clean and not force:
        n = len(found.local_paths())
        raise PreconditionFailed(
            f"there are {n} uncommitted changes. Either commit them first or use --force to revert "
            "local changes",
            paths=sorted(found.local_paths())[:100],
        )
    head = b.get_commit(src.repo, src.ref).id
    return _sync(b, "pull", root, ref, src, index, found, head, parallelism)


def checkout(b: Backend, directory: str, to: str = "", parallelism: int = DEFAULT_PARALLELISM) -> Outcome:
    """Make the directory hold the commit ``to`` resolves to (a branch, tag, commit id or
    expression of the same repository; empty: the commit it is at), discarding local changes
    and touching only the files that differ. ``src`` stays as it is, as in lakeFS."""
    root, ref, src, index = _open(directory, b)
    found, index = _scan(root, index)
    target = b.get_commit(src.repo, to).id if to else ref.at_head
    return _sync(b, "checkout", root, ref, src, index, found, target, parallelism)


def local_changes(b: Backend, directory: str) -> int:
    """How many files differ from the commit the directory is at (for a confirmation)."""
    root, _, _, index = _open(directory, b)
    return len(_scan(root, index)[0].local_paths())


def _sync(
    b: Backend,
    operation: str,
    root: str,
    ref: Ref,
    src: Source,
    index: Index,
    found: Scan,
    target: str,
    parallelism: int,
) -> Outcome:
    """Move the directory from ``at_head`` to ``target``, local changes discarded."""
    changes = dict((p, k) for k, p in _remote_changes(b, src, ref.at_head, target))
    # A file changed here is put back as ``target`` has it: fetched, or removed when it has none.
    for path in found.local_paths():
        if path not in changes:
            changes[path] = "added" if path in index.pos else "removed"
    write_ref(root, Ref(ref.src, ref.at_head, operation))
    done = _apply(b, src, target, root, index, sorted((k, p) for p, k in changes.items()), parallelism)
    write_ref(root, Ref(ref.src, target))
    return Outcome(operation, root, ref.src, target, downloaded=done.downloaded, removed=done.removed)


@dataclass(slots=True)
class _Applied:
    downloaded: int = 0
    removed: int = 0
    index: Index = field(default_factory=Index)


def _apply(
    b: Backend,
    src: Source,
    commit_id: str,
    root: str,
    index: Index,
    changes: list[tuple[str, str]],
    parallelism: int,
) -> _Applied:
    """Make each path of ``changes`` as the commit has it (``removed``: no file), and the index
    say so."""
    fetch = [p for k, p in changes if k != "removed"]
    drop = [p for k, p in changes if k == "removed"]
    removed = sum(_remove(root, p) for p in drop)
    fetched = _download(b, src, commit_id, root, fetch, parallelism, None)
    if not changes:
        return _Applied(index=index)
    fresh = _rewrite(root, index, fetched, drop)
    return _Applied(len(fetched), removed, fresh)


def _check_interrupted(ref: Ref, force: bool) -> None:
    if ref.active_operation and not force:
        raise PreconditionFailed(
            f"latest 'local {ref.active_operation}' operation was interrupted, local data may be "
            "incomplete: use 'lakectl local checkout' to sync with the remote, or --force"
        )


# -- files ----------------------------------------------------------------------------------


def _download(
    b: Backend,
    src: Source,
    commit_id: str,
    root: str,
    paths: list[str],
    parallelism: int,
    advance: Advance | None,
    fresh: bool = False,
) -> dict[str, tuple[int, int, int, str]]:
    """Download the objects at ``prefix + path`` of the commit to ``root/path``, each through a
    temporary file renamed into place, as ``fs download -r`` does; return each file's (size,
    mtime_ns, inode, checksum), the checksum computed from the bytes as they came. ``fresh``:
    the directory holds nothing yet (a clone), so nothing in the way needs clearing."""
    if not paths:
        return {}
    from lakectl.core.blocks.data import Checksummer

    tmpdir = os.path.join(root, META_DIR, "tmp")
    os.makedirs(tmpdir, exist_ok=True)
    tag = uuid.uuid4().hex[:12]
    for parent in sorted({os.path.dirname(p) for p in paths}):
        if parent:
            _make_dir(root, parent, fresh)

    def fetch(item: tuple[int, str]) -> tuple[str, tuple[int, int, int, str]]:
        n, rel = item
        target = os.path.join(root, rel)
        tmp = os.path.join(tmpdir, f"{tag}-{n}")
        summer = Checksummer()
        try:
            with open(tmp, "wb") as f:
                for chunk in b.read(src.repo, commit_id, src.prefix + rel):
                    summer.update(chunk)
                    f.write(chunk)
            if not fresh and os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)  # a directory where the commit has a file
            os.replace(tmp, target)
            st = os.stat(target)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise InvalidArgument(f"cannot write {target!r}: {exc.strerror or exc}", path=target) from exc
            raise
        if advance is not None:
            advance(1)
        return rel, (st.st_size, st.st_mtime_ns, st.st_ino, summer.hexdigest())

    workers = max(1, min(parallelism, len(paths)))
    if workers == 1:
        return dict(map(fetch, enumerate(paths)))
    from concurrent.futures import ThreadPoolExecutor

    # Backends are shared between threads (as fs download -r does); map stops at the first error.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(fetch, enumerate(paths)))


def _make_dir(root: str, rel: str, fresh: bool) -> None:
    """Create ``root/rel``; a file in the way (the commit has a directory there) is removed."""
    if not fresh:
        probe = root
        for part in rel.split("/"):
            probe = os.path.join(probe, part)
            if os.path.islink(probe) or (os.path.lexists(probe) and not os.path.isdir(probe)):
                os.unlink(probe)  # a file, or a link that would lead the write elsewhere
                break
    try:
        os.makedirs(os.path.join(root, rel), exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"cannot create directory {rel!r}: {exc.strerror or exc}", path=rel) from exc


def _remove(root: str, rel: str) -> int:
    """Delete the file (1 if there was one), and the directories it leaves empty."""
    target = os.path.join(root, *rel.split("/"))
    parent = os.path.dirname(target)
    if os.path.realpath(parent) != os.path.join(os.path.realpath(root), *rel.split("/")[:-1]):
        return 0  # a link on the way leads out of the directory: nothing of ours to delete there
    try:
        os.unlink(target)
    except FileNotFoundError:
        return 0
    except IsADirectoryError:
        return 0
    except OSError as exc:
        raise InvalidArgument(f"cannot delete {target!r}: {exc.strerror or exc}", path=target) from exc
    while parent != root and len(parent) > len(root):
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = os.path.dirname(parent)
    return 1
