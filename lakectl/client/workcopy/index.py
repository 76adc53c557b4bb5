"""The working copy's index: each file's (size, mtime_ns, inode, checksum) as of its commit, and the scan.

``status`` must not read a file that did not change, so the index remembers, for every file of
the commit the directory is at, the stat it had when it was known to hold that commit's bytes.
A file whose size, mtime and inode are those of its entry is unchanged; only the others are
hashed. The format is packed binary (docs/decisions/0011-local-index.md: 100k entries load in
20-45 ms with their lookup table, where SQLite takes ~125 ms and JSON ~115 ms):

    b"LKIX3\\n"  count: u64
    watch_size: u64, then the monitor's token and the pending paths, each followed by NUL
    count x (size, mtime_ns, inode): 3 x i64
    paths_size: u64, then the paths, UTF-8 (surrogateescape), each followed by NUL
    the checksums, each followed by NUL

Entries are sorted by path: a path is found by bisection, and the entries below a directory
are one slice, so that a scan of a few paths (the monitor's) and an update cost what they
touch, not what the index holds. The checksums are decoded only when asked for (a status with
nothing changed never does): half the strings of a load. Indexes of the earlier formats
(``LKIX1``: paths and checksums interleaved; ``LKIX2``: no watch section; both with new paths
appended at the end) are read (and sorted) too, and written again in this one.

The watch section serves the monitor (:mod:`lakectl.client.workcopy.monitor`): ``token`` is the
daemon's count of changes when the scan that this index follows began, ``pending`` the paths
that scan found differing from their entries (a status records no change in the index). A scan
with the monitor stats the paths changed since the token, and the pending ones.

The index file's own mtime, from the same file-system clock as the files', is later than every
stat it holds. An entry whose mtime is within :data:`RACY_NS` of it may have been written again
in the same clock tick after it was read (git's "racily clean" entries), so it is hashed like a
changed one.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import pickle
import signal
import stat
import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["META_DIR", "REF_FILE", "Index", "Scan", "scan", "scan_paths"]

REF_FILE = ".lakefs_ref.yaml"
"""lakeFS's file naming the source URI and head commit of a directory."""
META_DIR = ".lakectl"
"""Our additions, at the root of the working copy: the index, and temporary files of downloads."""
INDEX_NAME = "index"
_MAGIC = b"LKIX3\n"
_MAGIC_V2 = b"LKIX2\n"
_MAGIC_V1 = b"LKIX1\n"
_HEADER = struct.Struct("<Q")
RACY_NS = 20_000_000
"""File timestamps move in clock ticks (1-10 ms on Linux); 20 ms covers them with room."""


class Index:
    """Entries by path relative to the working copy's root."""

    __slots__ = ("_checksums", "_pos", "_sums_blob", "paths", "pending", "stamp_ns", "stats", "token")

    def __init__(
        self,
        paths: list[str] | None = None,
        checksums: list[str] | None = None,
        stats: array[int] | None = None,
        stamp_ns: int = 0,
        *,
        sums_blob: bytes = b"",
        token: str = "",
        pending: list[str] | None = None,
    ) -> None:
        self.paths = [] if paths is None else paths
        self.token = token
        self.pending = [] if pending is None else pending
        self.stats = array("q") if stats is None else stats
        self.stamp_ns = stamp_ns
        self._pos: dict[str, int] | None = None
        # Either the decoded list, or the NUL-terminated checksums as loaded (decoded once).
        self._checksums = checksums if checksums is not None or sums_blob else []
        self._sums_blob = sums_blob

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def checksums(self) -> list[str]:
        if self._checksums is None:
            self._checksums = self._sums_blob[:-1].decode("utf-8", "surrogateescape").split("\0")
            self._sums_blob = b""
        return self._checksums

    @property
    def pos(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = dict(zip(self.paths, range(len(self.paths)), strict=True))
        return self._pos

    def entries(self) -> Iterator[tuple[str, int, int, int, str]]:
        """``(path, size, mtime_ns, inode, checksum)`` of every entry."""
        s, checksums = self.stats, self.checksums
        for i, path in enumerate(self.paths):
            yield path, s[3 * i], s[3 * i + 1], s[3 * i + 2], checksums[i]

    @staticmethod
    def build(entries: Iterable[tuple[str, int, int, int, str]]) -> Index:
        out = Index()
        for path, size, mtime_ns, inode, checksum in sorted(entries):
            out.paths.append(path)
            out.checksums.append(checksum)
            out.stats.extend((size, mtime_ns, inode))
        return out

    @staticmethod
    def load(root: str) -> Index | None:
        """The index of the working copy at ``root``; None when it has none (a directory linked
        by lakeFS's lakectl), one this version cannot read, or a damaged one (the caller then
        builds it again from the lake)."""
        try:
            with open(os.path.join(root, META_DIR, INDEX_NAME), "rb") as f:
                data = f.read()
                stamp_ns = os.fstat(f.fileno()).st_mtime_ns
        except FileNotFoundError:
            return None
        magic = data[: len(_MAGIC)]
        if magic not in (_MAGIC, _MAGIC_V2, _MAGIC_V1) or len(data) < len(_MAGIC) + _HEADER.size:
            return None
        (count,) = _HEADER.unpack_from(data, len(_MAGIC))
        start = len(_MAGIC) + _HEADER.size
        token, pending = "", []
        if magic == _MAGIC:
            if len(data) < start + _HEADER.size:
                return None
            (size,) = _HEADER.unpack_from(data, start)
            watch = data[start + _HEADER.size : start + _HEADER.size + size]
            if len(watch) != size or watch[-1:] != b"\0":
                return None
            token, *pending = watch[:-1].decode("utf-8", "surrogateescape").split("\0")
            start += _HEADER.size + size
        end = start + 24 * count
        if len(data) < end + (_HEADER.size if magic != _MAGIC_V1 else 0):
            return None
        stats = array("q")
        stats.frombytes(data[start:end])
        if magic == _MAGIC_V1:
            parts = data[end:-1].decode("utf-8", "surrogateescape").split("\0") if count else []
            if len(parts) != 2 * count:
                return None
            return _sorted(Index(parts[0::2], parts[1::2], stats, stamp_ns))
        (size,) = _HEADER.unpack_from(data, end)
        start = end + _HEADER.size
        paths_blob, sums_blob = data[start : start + size], data[start + size :]
        if paths_blob.count(0) != count or sums_blob.count(0) != count or sums_blob[-1:] not in (b"\0", b""):
            return None
        if count == 0:
            return Index(stamp_ns=stamp_ns, token=token, pending=pending)
        paths = paths_blob[:-1].decode("utf-8", "surrogateescape").split("\0")
        index = Index(paths, None, stats, stamp_ns, sums_blob=sums_blob, token=token, pending=pending)
        return index if magic == _MAGIC else _sorted(index)

    def find(self, path: str) -> int | None:
        """The position of ``path``'s entry (paths are kept sorted), or None."""
        if self._pos is not None:
            return self._pos.get(path)
        paths = self.paths
        i = bisect.bisect_left(paths, path)
        return i if i < len(paths) and paths[i] == path else None

    def under(self, prefix: str) -> range:
        """The positions of the entries below the directory ``prefix`` (ending with ``/``):
        every path from ``prefix`` up to, not including, the prefix with its ``/`` made ``0``,
        the next character."""
        paths = self.paths
        return range(bisect.bisect_left(paths, prefix), bisect.bisect_left(paths, prefix[:-1] + "0"))

    def updated(self, updates: Mapping[str, tuple[int, int, int, str]], removed: Iterable[str]) -> Index:
        """A new index with ``updates`` (path -> size, mtime_ns, inode, checksum) set and the
        ``removed`` paths gone, still sorted by path; a few list and array slices copied whole
        (memory copies) around each inserted or dropped entry, no Python step per entry. The
        token stays; the paths set or removed are no longer pending."""
        removed = set(removed)
        paths, stats = self.paths, self.stats
        sums, new_stats = list(self.checksums), array("q", stats)
        inserts = []
        for path, (size, mtime, ino, checksum) in updates.items():
            i = self.find(path)
            if i is None:
                inserts.append((path, size, mtime, ino, checksum))
            else:
                sums[i] = checksum
                new_stats[3 * i], new_stats[3 * i + 1], new_stats[3 * i + 2] = size, mtime, ino
        events: list[tuple[int, int, str, tuple[str, int, int, int, str] | None]] = [
            (bisect.bisect_left(paths, e[0]), 0, e[0], e) for e in inserts
        ]
        for path in removed:
            if path not in updates and (i := self.find(path)) is not None:
                events.append((i, 1, path, None))  # after an insert at the same position
        pending = [p for p in self.pending if p not in updates and p not in removed]
        if not events:
            return Index(list(paths), sums, new_stats, token=self.token, pending=pending)
        events.sort()
        out_paths: list[str] = []
        out_sums: list[str] = []
        out_stats = array("q")
        cursor = 0
        for at, _, _, entry in events:
            out_paths += paths[cursor:at]
            out_sums += sums[cursor:at]
            out_stats += new_stats[3 * cursor : 3 * at]
            if entry is None:  # the entry at ``at`` goes
                cursor = at + 1
            else:
                cursor = at
                out_paths.append(entry[0])
                out_sums.append(entry[4])
                out_stats.extend(entry[1:4])
        out_paths += paths[cursor:]
        out_sums += sums[cursor:]
        out_stats += new_stats[3 * cursor :]
        return Index(out_paths, out_sums, out_stats, token=self.token, pending=pending)

    def save(self, root: str) -> None:
        """Write atomically (temporary file, rename): a crash leaves the old index or the new."""
        meta = os.path.join(root, META_DIR)
        os.makedirs(meta, exist_ok=True)
        paths = _joined(self.paths)
        sums = self._sums_blob or _joined(self.checksums)
        watch = _joined([self.token, *self.pending])
        target = os.path.join(meta, INDEX_NAME)
        tmp = target + ".tmp"
        with open(tmp, "wb") as f:
            f.write(_MAGIC)
            f.write(_HEADER.pack(len(self.paths)))
            f.write(_HEADER.pack(len(watch)))
            f.write(watch)
            f.write(self.stats.tobytes())
            f.write(_HEADER.pack(len(paths)))
            f.write(paths)
            f.write(sums)
        os.replace(tmp, target)
        self.stamp_ns = os.stat(target).st_mtime_ns


def _sorted(index: Index) -> Index:
    """``index`` with its entries sorted by path, as this format keeps them (the earlier ones
    appended new paths at the end)."""
    paths = index.paths
    if all(paths[i] < paths[i + 1] for i in range(len(paths) - 1)):
        return index
    out = Index.build(index.entries())
    out.stamp_ns = index.stamp_ns
    return out


def _joined(texts: list[str]) -> bytes:
    """``texts`` each followed by NUL, encoded (one join: a generator of concatenations takes
    six times as long at 100k)."""
    return ("\0".join(texts) + "\0").encode("utf-8", "surrogateescape") if texts else b""


@dataclass(slots=True)
class Scan:
    """What the directory holds against its index: paths added, changed and removed, and the
    stat and checksum of every file hashed on the way (to refresh the index with)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    hashed: dict[str, tuple[int, int, int, str]] = field(default_factory=dict)
    """path -> (size, mtime_ns, inode, checksum) of each file read, changed or not."""
    stats: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """path -> (size, mtime_ns, inode) of each added or changed file (as found)."""

    @property
    def clean(self) -> bool:
        return not (self.added or self.changed or self.removed)

    def local_paths(self) -> set[str]:
        return {*self.added, *self.changed, *self.removed}


WORKERS = 2
"""Processes a scan of a big tree walks it in: this one and a forked one (a stat a file is most
of a status's time, and Python's per-file work would keep one core busy for 0.3 s at 100k)."""
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
FORK_FROM = 20_000
"""Index entries from which a scan forks: below, the fork costs more than it saves."""


def scan(root: str, index: Index) -> Scan:
    """Compare the files under ``root`` with ``index``: one ``lstat`` a file, and a read only of
    those whose stat differs from their entry without their size telling (or racy ones). A big
    tree's directories are walked by :data:`WORKERS` processes, a share each."""
    walk = _Walk(index)
    units = [(root, "")]
    for _ in range(3):  # the top directories, a level deeper while they are too few to share
        if len(units) >= 2 * WORKERS:
            break
        shallow, units = units, []
        walk.walk(shallow, into=units)
    if len(units) > 1 and len(index) >= FORK_FROM and hasattr(os, "fork"):
        theirs = units[1::2]
        child = _fork(index, theirs)
        try:
            walk.walk(units[0::2])
        except BaseException:
            if child is not None:
                _abandon(child)  # nobody will read its answer: it must not wait for ever
            raise
        found = _collect(child) if child is not None else None
        if found is None:
            walk.walk(theirs)  # the fork failed or died: this process walks its share
        else:
            walk.merge(found)
    else:
        walk.walk(units)
    return walk.finish(root, index)


def scan_paths(root: str, index: Index, files: Iterable[str], dirs: Iterable[str]) -> Scan:
    """The scan of :func:`scan` restricted to what may have changed: the ``files`` (relative
    paths), the ``dirs`` (relative, ending with ``/``: walked whole) and the index's pending
    paths. The answer is the full scan's when every change since the index's token is among
    them (the monitor's promise)."""
    walk_dirs = set(dirs)
    check = set(index.pending)
    for f in files:
        head, _, name = f.rpartition("/")
        if name == REF_FILE and head:  # a nested working copy appeared or went: walk its directory
            walk_dirs.add(head + "/")
        else:
            check.add(f)
    tops = [d for d in sorted(walk_dirs) if d]
    if len(tops) < len(walk_dirs):
        return scan(root, index)
    kept: list[str] = []
    for d in tops:  # sorted: a directory comes before those below it
        if not (kept and d.startswith(kept[-1])):
            kept.append(d)
    eligible = _Eligible(root)
    units = [(os.path.join(root, d[:-1]), d) for d in kept if eligible(d)]
    under = tuple(kept)
    # Entries are sorted by path: those below a directory are one slice of the index, found
    # by bisection. Nothing here costs a step per entry of the index.
    lookup: dict[str, int] = {}
    candidates: list[int] = []
    for d in kept:
        span = index.under(d)
        candidates += span
        lookup.update(zip(index.paths[span.start : span.stop], span, strict=True))
    walk = _Walk(index, lookup)
    for rel in sorted(check):
        if under and rel.startswith(under):
            continue
        i = index.find(rel)
        if i is not None:
            candidates.append(i)
        head, _, _ = rel.rpartition("/")
        if rel == REF_FILE or not eligible(head + "/" if head else ""):
            continue
        try:
            st = os.lstat(os.path.join(root, rel))
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISREG(st.st_mode):
            walk.compare(rel, st, i)
    walk.walk(units)
    return walk.finish(root, index, candidates)


class _Eligible:
    """Whether the files of a directory (relative, ``""`` or ending with ``/``) belong to the
    working copy as its walk finds them: a real directory all the way down, not the meta
    directory, not in a nested working copy."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.known: dict[str, bool] = {"": True}

    def __call__(self, rel: str) -> bool:
        known = self.known.get(rel)
        if known is not None:
            return known
        parent, _, name = rel[:-1].rpartition("/")
        ok = (bool(parent) or name != META_DIR) and self(parent + "/" if parent else "")
        if ok:
            path = os.path.join(self.root, rel[:-1])
            try:
                ok = stat.S_ISDIR(os.lstat(path).st_mode) and not os.path.lexists(path + "/" + REF_FILE)
            except OSError:
                ok = False
        self.known[rel] = ok
        return ok


@dataclass(slots=True)
class _Found:
    """What a walk found, as a forked walker sends it back."""

    added: list[tuple[str, int, int, int]] = field(default_factory=list)
    changed: list[tuple[str, int, int, int]] = field(default_factory=list)
    suspects: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    seen: bytearray = field(default_factory=bytearray)


class _Walk:
    """The walk and the comparison, one loop with names bound locally: this loop is the whole
    cost of a status with nothing changed (one lstat a file, no read)."""

    def __init__(self, index: Index, pos: dict[str, int] | None = None) -> None:
        self.pos = index.pos if pos is None else pos
        self.stats = index.stats
        self.racy_from = index.stamp_ns - RACY_NS
        self.found = _Found(seen=bytearray(len(index)))

    def walk(self, units: list[tuple[str, str]], into: list[tuple[str, str]] | None = None) -> None:
        """Walk the directories ``units`` (``(path, prefix)``) and below; with ``into``, only the
        files of ``units`` themselves, their subdirectories appended to ``into``."""
        pos, stats, racy_from = self.pos, self.stats, self.racy_from
        added, changed, suspects, seen = (
            self.found.added,
            self.found.changed,
            self.found.suspects,
            self.found.seen,
        )
        stack = list(units)
        deeper = stack if into is None else into
        while stack:
            directory, prefix = stack.pop()
            # Listed through a descriptor, each entry's stat is an fstatat of its bare name:
            # the kernel does not resolve the whole path again for every file (a quarter of
            # the system time of a walk 6 directories deep).
            fd = os.open(directory, _DIRECTORY)
            try:
                with os.scandir(fd) as it:
                    for entry in it:
                        if entry.is_file(follow_symlinks=False):
                            rel = prefix + entry.name
                            st = entry.stat(follow_symlinks=False)
                            size, mtime = st.st_size, st.st_mtime_ns
                            i = pos.get(rel)
                            if i is None:
                                if prefix or rel != REF_FILE:
                                    added.append((rel, size, mtime, st.st_ino))
                                continue
                            seen[i] = 1
                            j = 3 * i
                            if stats[j] != size:
                                changed.append((rel, size, mtime, st.st_ino))
                            elif stats[j + 1] != mtime or stats[j + 2] != st.st_ino or mtime >= racy_from:
                                suspects.append((rel, i, size, mtime, st.st_ino))
                        elif entry.is_dir(follow_symlinks=False):
                            name = entry.name
                            path = directory + "/" + name
                            if (prefix or name != META_DIR) and not os.path.lexists(path + "/" + REF_FILE):
                                deeper.append((path, prefix + name + "/"))
                        # anything else (symbolic links, sockets, devices) is not data
            finally:
                os.close(fd)

    def compare(self, rel: str, st: os.stat_result, i: int | None) -> None:
        """The walk's comparison, for one file found otherwise (the monitor's paths)."""
        found, size, mtime = self.found, st.st_size, st.st_mtime_ns
        if i is None:
            found.added.append((rel, size, mtime, st.st_ino))
            return
        found.seen[i] = 1
        j = 3 * i
        if self.stats[j] != size:
            found.changed.append((rel, size, mtime, st.st_ino))
        elif self.stats[j + 1] != mtime or self.stats[j + 2] != st.st_ino or mtime >= self.racy_from:
            found.suspects.append((rel, i, size, mtime, st.st_ino))

    def merge(self, other: _Found) -> None:
        mine = self.found
        mine.added += other.added
        mine.changed += other.changed
        mine.suspects += other.suspects
        n = len(mine.seen)
        both = int.from_bytes(mine.seen, "little") | int.from_bytes(other.seen, "little")
        mine.seen = bytearray(both.to_bytes(n, "little"))

    def finish(self, root: str, index: Index, candidates: list[int] | None = None) -> Scan:
        """The scan: suspects read and compared, entries not seen removed (of ``candidates``
        only, when given: the entries a partial scan looked for), lists sorted."""
        found, out = self.found, Scan()
        for rel, size, mtime, ino in found.added:
            out.added.append(rel)
            out.stats[rel] = (size, mtime, ino)
        for rel, size, mtime, ino in found.changed:
            out.changed.append(rel)
            out.stats[rel] = (size, mtime, ino)
        if found.suspects:
            from lakectl.core.blocks.data import file_checksum

            for rel, i, size, mtime, ino in found.suspects:
                checksum = file_checksum(os.path.join(root, rel))
                out.hashed[rel] = (size, mtime, ino, checksum)
                if checksum != index.checksums[i]:
                    out.changed.append(rel)
                    out.stats[rel] = (size, mtime, ino)
        seen = found.seen
        if candidates is not None:
            out.removed.extend(sorted({index.paths[i] for i in candidates if not seen[i]}))
        else:
            start = seen.find(0)
            while start != -1:
                out.removed.append(index.paths[start])
                start = seen.find(0, start + 1)
        out.added.sort()
        out.changed.sort()
        return out


def _fork(index: Index, units: list[tuple[str, str]]) -> tuple[int, int] | None:
    """A forked process walking ``units`` against ``index`` (its pid and the pipe it answers
    on); None when no process can be forked."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: walk, answer, and exit without running anything of the parent's
        try:
            os.close(r)
            try:
                walk = _Walk(index)
                walk.walk(units)
                answer: tuple[Any, ...] = ("found", walk.found)
            except OSError as exc:
                answer = ("oserror", exc.errno, exc.strerror, exc.filename)
            data = memoryview(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _abandon(child: tuple[int, int]) -> None:
    pid, r = child
    os.close(r)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _collect(child: tuple[int, int]) -> _Found | None:
    """What the forked walker found; its error raised here; None when it died answering nothing."""
    pid, r = child
    chunks = []
    try:
        while chunk := os.read(r, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    try:
        answer = pickle.loads(b"".join(chunks))
    except (pickle.UnpicklingError, EOFError, ValueError):
        return None
    if answer[0] == "oserror":
        raise OSError(answer[1], answer[2], answer[3])
    found: _Found = answer[1]
    return found
