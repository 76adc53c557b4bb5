"""The working copy's index: each file's (size, mtime_ns, inode, checksum) as of its commit, and the scan.

``status`` must not read a file that did not change, so the index remembers, for every file of
the commit the directory is at, the stat it had when it was known to hold that commit's bytes.
A file whose size, mtime and inode are those of its entry is unchanged; only the others are
hashed. The format is packed binary (docs/decisions/0011-local-index.md: 100k entries load in
20-45 ms with their lookup table, where SQLite takes ~125 ms and JSON ~115 ms):

    b"LKIX1\\n"  count: u64
    count x (size, mtime_ns, inode): 3 x i64
    paths and checksums, UTF-8 (surrogateescape), each followed by NUL, path then checksum

The index file's own mtime, from the same file-system clock as the files', is later than every
stat it holds. An entry whose mtime is within :data:`RACY_NS` of it may have been written again
in the same clock tick after it was read (git's "racily clean" entries), so it is hashed like a
changed one.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain

__all__ = ["META_DIR", "REF_FILE", "Index", "Scan", "scan"]

REF_FILE = ".lakefs_ref.yaml"
"""lakeFS's file naming the source URI and head commit of a directory."""
META_DIR = ".lakectl"
"""Our additions, at the root of the working copy: the index, and temporary files of downloads."""
INDEX_NAME = "index"
_MAGIC = b"LKIX1\n"
_HEADER = struct.Struct("<Q")
RACY_NS = 20_000_000
"""File timestamps move in clock ticks (1-10 ms on Linux); 20 ms covers them with room."""


@dataclass(slots=True)
class Index:
    """Entries by path relative to the working copy's root."""

    paths: list[str] = field(default_factory=list)
    checksums: list[str] = field(default_factory=list)
    stats: array[int] = field(default_factory=lambda: array("q"))
    stamp_ns: int = 0
    _pos: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def pos(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = dict(zip(self.paths, range(len(self.paths)), strict=True))
        return self._pos

    def entries(self) -> Iterator[tuple[str, int, int, int, str]]:
        """``(path, size, mtime_ns, inode, checksum)`` of every entry."""
        s = self.stats
        for i, path in enumerate(self.paths):
            yield path, s[3 * i], s[3 * i + 1], s[3 * i + 2], self.checksums[i]

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
        by lakeFS's lakectl) or one this version cannot read."""
        try:
            with open(os.path.join(root, META_DIR, INDEX_NAME), "rb") as f:
                data = f.read()
                stamp_ns = os.fstat(f.fileno()).st_mtime_ns
        except FileNotFoundError:
            return None
        if not data.startswith(_MAGIC):
            return None
        (count,) = _HEADER.unpack_from(data, len(_MAGIC))
        start = len(_MAGIC) + _HEADER.size
        end = start + 24 * count
        stats = array("q")
        stats.frombytes(data[start:end])
        if count == 0:
            return Index(stamp_ns=stamp_ns)
        parts = data[end:-1].decode("utf-8", "surrogateescape").split("\0")
        return Index(parts[0::2], parts[1::2], stats, stamp_ns)

    def updated(self, updates: Mapping[str, tuple[int, int, int, str]], removed: Iterable[str]) -> Index:
        """A new index with ``updates`` (path -> size, mtime_ns, inode, checksum) set and the
        ``removed`` paths gone; in time proportional to the changes, not to the index (the
        order of entries does not matter)."""
        pos = self.pos
        paths, sums, stats = list(self.paths), list(self.checksums), array("q", self.stats)
        for path, (size, mtime, ino, checksum) in updates.items():
            i = pos.get(path)
            if i is None:
                paths.append(path)
                sums.append(checksum)
                stats.extend((size, mtime, ino))
            else:
                sums[i] = checksum
                stats[3 * i], stats[3 * i + 1], stats[3 * i + 2] = size, mtime, ino
        gone = sorted({pos[p] for p in removed if p in pos and p not in updates}, reverse=True)
        if len(gone) <= 64:
            for i in gone:  # from the end, so that the positions still to delete stay put
                del paths[i], sums[i], stats[3 * i : 3 * i + 3]
        else:
            dropped = set(gone)
            keep = [i for i in range(len(paths)) if i not in dropped]
            old = stats
            stats = array("q")
            for i in keep:
                stats.extend(old[3 * i : 3 * i + 3])
            paths, sums = [paths[i] for i in keep], [sums[i] for i in keep]
        return Index(paths, sums, stats)

    def save(self, root: str) -> None:
        """Write atomically (temporary file, rename): a crash leaves the old index or the new."""
        meta = os.path.join(root, META_DIR)
        os.makedirs(meta, exist_ok=True)
        blob = "\0".join(chain.from_iterable(zip(self.paths, self.checksums, strict=True))) + "\0"
        target = os.path.join(meta, INDEX_NAME)
        tmp = target + ".tmp"
        with open(tmp, "wb") as f:
            f.write(_MAGIC)
            f.write(_HEADER.pack(len(self.paths)))
            f.write(self.stats.tobytes())
            f.write(blob.encode("utf-8", "surrogateescape"))
        os.replace(tmp, target)
        self.stamp_ns = os.stat(target).st_mtime_ns


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


def scan(root: str, index: Index) -> Scan:
    """Compare the files under ``root`` with ``index``: one ``lstat`` a file, and a read only of
    those whose stat differs from their entry without their size telling (or racy ones)."""
    pos = index.pos
    stats = index.stats
    seen = bytearray(len(index))
    racy_from = index.stamp_ns - RACY_NS
    out = Scan()
    added, changed, found = out.added, out.changed, out.stats
    suspects: list[tuple[str, int, int, int, int]] = []
    # The walk and the comparison in one loop, names bound locally: this loop is the whole
    # cost of a status with nothing changed (one lstat a file, no read).
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as it:
            for entry in it:
                if entry.is_file(follow_symlinks=False):
                    rel = prefix + entry.name
                    st = entry.stat(follow_symlinks=False)
                    size, mtime = st.st_size, st.st_mtime_ns
                    i = pos.get(rel)
                    if i is None:
                        if prefix or rel != REF_FILE:
                            added.append(rel)
                            found[rel] = (size, mtime, st.st_ino)
                        continue
                    seen[i] = 1
                    j = 3 * i
                    if stats[j] != size:
                        changed.append(rel)
                        found[rel] = (size, mtime, st.st_ino)
                    elif stats[j + 1] != mtime or stats[j + 2] != st.st_ino or mtime >= racy_from:
                        suspects.append((rel, i, size, mtime, st.st_ino))
                elif entry.is_dir(follow_symlinks=False):
                    name = entry.name
                    if (prefix or name != META_DIR) and not os.path.lexists(entry.path + "/" + REF_FILE):
                        stack.append((entry.path, prefix + name + "/"))
                # anything else (symbolic links, sockets, devices) is not data
    if suspects:
        from lakectl.core.blocks.data import file_checksum

        for rel, i, size, mtime, ino in suspects:
            checksum = file_checksum(os.path.join(root, rel))
            out.hashed[rel] = (size, mtime, ino, checksum)
            if checksum != index.checksums[i]:
                changed.append(rel)
                found[rel] = (size, mtime, ino)
    start = seen.find(0)
    while start != -1:
        out.removed.append(index.paths[start])
        start = seen.find(0, start + 1)
    added.sort()
    changed.sort()
    return out
