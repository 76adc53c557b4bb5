"""Import sources: parse a source URI, list it in key order, read an external entry through its guard.

A source is a local directory (``local:///abs/dir``, ``local://rel/dir`` or a plain path) or an S3
prefix (``s3://bucket/prefix``). Listing yields ``(relative key, size, External)`` in code-point
order, which is the lake's path order. Reads never serve bytes of another version: a local file
is stat'ed before and after each chunk (size and mtime_ns), an S3 object is read with
``IfMatch=<etag>`` and its size checked; a change or a vanished source is ``SourceChanged``.

On a server, local paths are read within the lake's :class:`~lakectl.core.hostpaths.Confinement`:
a source is checked once resolved, its listing follows no symbolic link out of it, and every read
opens the file without following a link and checks where the opened file lies.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lakectl.core.hostpaths import Confinement
from lakectl.core.importing.protocol import CHUNK, Listed, Source, changed
from lakectl.core.model import Entry, External
from lakectl.errors import InvalidArgument, InvalidURI, NotFound, StorageError


@dataclass(frozen=True, slots=True)
class LocalSource:
    """A directory on this machine (the server's, when a server imports)."""

    uri: str
    root: str
    confinement: Confinement | None = None
    """A server's: ``root`` is resolved and allowed, and no symbolic link is followed out of it."""

    def list(self) -> Iterator[Listed]:
        # os.walk orders neither globally nor in code points; sorting the relative names
        # (strings only, no stat results) keeps memory at one string per file. Confined, the
        # walk is os.fwalk's, which enters a directory by its descriptor, checked to be the one
        # listed: a directory swapped for a link while it is walked is not walked.
        names: list[str] = []
        if self.confinement is None:
            walked: Iterator[tuple[str, list[str]]] = ((d, f) for d, _, f in os.walk(self.root))
        else:
            walked = ((d, f) for d, _, f, _ in os.fwalk(self.root, follow_symlinks=False))
        for dirpath, files in walked:
            rel = os.path.relpath(dirpath, self.root)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            names.extend(base + f for f in files)
        names.sort()
        resolved: dict[str, bool] = {self.root: True}  # confined: whether a directory resolves to itself
        for name in names:
            full = os.path.join(self.root, name)
            try:
                if self.confinement is None:
                    st = os.stat(full)
                else:
                    full, st = self._inside(full, resolved)
            except OSError:
                continue  # vanished while listing, or led out of the source: not imported
            if not stat_mod.S_ISREG(st.st_mode):
                continue
            yield name, st.st_size, External(full, mtime_ns=st.st_mtime_ns), int(st.st_mtime)

    def _inside(self, full: str, resolved: dict[str, bool]) -> tuple[str, os.stat_result]:
        """Confined: the resolved path of a listed file and its ``lstat``, when it is in the
        source (``OSError`` otherwise). A link is resolved: one to a file of the source is that
        file. Each directory is resolved once (``resolved``), so a file whose directory was
        swapped for a link since the walk is resolved too, and left out when it leads outside."""
        inside = self.root.rstrip(os.sep) + os.sep
        directory = os.path.dirname(full)
        if directory not in resolved:
            resolved[directory] = os.path.realpath(directory) == directory
        st = os.lstat(full)
        if stat_mod.S_ISLNK(st.st_mode) or not resolved[directory]:
            full = os.path.realpath(full)
            if not full.startswith(inside):
                raise OSError(f"{full} is outside the source")
            st = os.lstat(full)
        return full, st


def parse_source(uri: str, blocks: Any = None, confinement: Confinement | None = None) -> Source:
    """The source a URI names; ``InvalidURI`` for another scheme, ``NotFound`` for a missing
    directory, ``Forbidden`` for a local one outside ``confinement`` (a server's)."""
    if not isinstance(uri, str) or not uri or "\x00" in uri:
        raise InvalidURI(f"invalid import source {uri!r}: expected s3://bucket/prefix or a local directory")
    if uri.startswith("s3://"):
        from lakectl.core.importing import s3

        source = s3.parse(uri, blocks)
        if confinement is not None:
            confinement.check_object_store(source.bucket, source.prefix, f"import source {uri!r}")
        return source
    if "://" in uri and not uri.startswith("local://"):
        scheme = uri.split("://", 1)[0]
        raise InvalidURI(
            f"cannot import from {uri!r}: scheme {scheme!r} is not supported (s3:// or a local directory)"
        )
    path = uri[len("local://") :] if uri.startswith("local://") else uri
    if not path:
        raise InvalidURI(f"invalid import source {uri!r}: no directory")
    root = os.path.abspath(os.path.expanduser(path))
    if confinement is not None:
        root = confinement.check(root, f"import source {uri!r}", tree=True)
    if not os.path.isdir(root):
        if os.path.exists(root):
            raise InvalidURI(f"import source {uri!r} is not a directory")
        raise NotFound(f"import source {uri!r}: no such directory {root}")
    return LocalSource(uri, root, confinement)


@dataclass(frozen=True, slots=True)
class OneObject:
    """A single object (lakeFS's ``type: object``): the source entry whose relative key is empty."""

    uri: str
    inner: Source

    def list(self) -> Iterator[Listed]:
        for item in self.inner.list():
            if item[0] == "":
                yield item
                return
        raise NotFound(f"import source {self.uri!r}: no such object")


@dataclass(frozen=True, slots=True)
class LocalFile:
    uri: str
    path: str

    def list(self) -> Iterator[Listed]:
        st = os.stat(self.path)
        yield "", st.st_size, External(self.path, mtime_ns=st.st_mtime_ns), int(st.st_mtime)


def parse_object(uri: str, blocks: Any = None, confinement: Confinement | None = None) -> Source:
    """The single object a URI names (an S3 key or a local file, which must lie within
    ``confinement`` when there is one: ``Forbidden``)."""
    if isinstance(uri, str) and uri.startswith("s3://"):
        from lakectl.core.importing import s3

        source = s3.parse(uri, blocks)
        if confinement is not None:
            confinement.check_object_store(source.bucket, source.prefix, f"import source {uri!r}")
        return OneObject(uri, source)
    if (
        isinstance(uri, str)
        and uri
        and "\x00" not in uri
        and ("://" not in uri or uri.startswith("local://"))
    ):
        path = os.path.abspath(os.path.expanduser(uri.removeprefix("local://")))
        if confinement is not None:
            path = confinement.check(path, f"import source {uri!r}")
        if os.path.isfile(path):
            return LocalFile(uri, path)
        if not os.path.exists(path):
            raise NotFound(f"import source {uri!r}: no such file {path}")
    raise InvalidURI(f"invalid import object {uri!r}: expected s3://bucket/key or a local file")


def local_checksum(size: int, mtime_ns: int) -> str:
    """What a local file's entry reports as its checksum (ETag): its version, not an md5 (reading
    every file to hash it would copy the cost the import avoids)."""
    return f"{mtime_ns:x}-{size:x}"


def read_external(
    entry: Entry,
    offset: int = 0,
    length: int | None = None,
    blocks: Any = None,
    confinement: Confinement | None = None,
) -> Iterator[bytes]:
    """The bytes ``[offset, offset+length)`` of an imported entry, checked against its guard
    (an S3 source read with the client of ``blocks``, the lake's block store, when it is on S3;
    a local one, on a server, only where its ``confinement`` allows: ``Forbidden`` elsewhere)."""
    ext = entry.external
    assert ext is not None
    if offset < 0 or (length is not None and length < 0):
        raise InvalidArgument(f"bad range offset={offset} length={length}")
    end = entry.size if length is None else min(entry.size, offset + length)
    if ext.address.startswith("s3://"):
        from lakectl.core.importing import s3

        if confinement is not None:
            confinement.check_object_store(*s3.split(ext.address), ext.address)
        return s3.read(ext, entry.size, offset, end, blocks)
    return _read_local(ext, entry.size, offset, end, confinement)


def _check(ext: External, size: int, st: os.stat_result) -> None:
    if st.st_size != size or st.st_mtime_ns != ext.mtime_ns:
        raise changed(ext, f"size {st.st_size}, expected {size}; or mtime changed")


def _read_local(
    ext: External, size: int, offset: int, end: int, confinement: Confinement | None
) -> Iterator[bytes]:
    try:
        if confinement is None:
            f = open(ext.address, "rb")  # noqa: SIM115 -- closed in the generator's finally
        else:
            f = os.fdopen(confinement.open(ext.address), "rb")
    except FileNotFoundError as exc:
        raise changed(ext, "no such file") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # confined: the file was replaced by a symbolic link
            raise changed(ext, "replaced by a symbolic link") from exc
        raise StorageError(f"cannot read imported object at {ext.address}: {exc.strerror or exc}") from exc
    # Opened and checked eagerly, so a changed source fails before any header is sent.
    try:
        st = os.fstat(f.fileno())
        if not stat_mod.S_ISREG(st.st_mode):
            raise changed(ext, "no longer a regular file")
        _check(ext, size, st)
    except BaseException:
        f.close()
        raise
    return _chunks(f, ext, size, offset, end)


def _chunks(f: object, ext: External, size: int, offset: int, end: int) -> Iterator[bytes]:
    import io

    assert isinstance(f, io.BufferedReader)
    with f:
        pos = offset
        f.seek(pos)
        while pos < end:
            try:
                data = f.read(min(CHUNK, end - pos))
            except OSError as exc:
                raise StorageError(f"cannot read imported object at {ext.address}: {exc}") from exc
            # Checked after the read and before the bytes leave: a write meanwhile is caught.
            _check(ext, size, os.fstat(f.fileno()))
            if not data:
                raise changed(ext, "shorter than recorded")
            pos += len(data)
            yield data
