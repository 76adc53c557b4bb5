"""Objects: :class:`StoredObject` (at any reference: read it) and :class:`WriteableObject` (on a
branch: write it too), as lakeFS's wrapper names them."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Literal, cast

from lakectl.api.models import ObjectInfo
from lakectl.exceptions import (
    ObjectExistsException,
    ObjectNotFoundException,
    UnsupportedOperationException,
    api_errors,
)

if TYPE_CHECKING:
    from lakectl.api.client import Client

ReadModes = Literal["r", "rb"]
WriteModes = Literal["x", "xb", "w", "wb"]
SPOOL_BYTES = 8 << 20
"""What a writer keeps in memory before it spools to a temporary file."""


class StoredObject:
    """The object at ``path`` of ``reference`` (a branch, tag, commit id or expression) of
    ``repository``."""

    def __init__(self, repository: str, reference: str, path: str, client: Client) -> None:
        self._repo, self._ref, self._path, self._client = repository, reference, path, client

    @property
    def repo(self) -> str:
        return self._repo

    @property
    def ref(self) -> str:
        return self._ref

    @property
    def path(self) -> str:
        return self._path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lakefs://{self._repo}/{self._ref}/{self._path})"

    def stat(self) -> ObjectInfo:
        """The object's metadata; ``ObjectNotFoundException`` if there is none."""
        with api_errors():
            return ObjectInfo.of(self._client.backend.stat(self._repo, self._ref, self._path))

    def exists(self) -> bool:
        try:
            self.stat()
        except ObjectNotFoundException:
            return False
        return True

    def reader(self, mode: ReadModes = "rb", pre_sign: bool | None = None) -> IO[Any]:
        """A file object of the object's bytes (``rb``) or UTF-8 text (``r``): read, seek and
        tell; only the blocks that hold what is read are fetched. ``pre_sign`` is accepted and
        ignored."""
        if mode not in ("r", "rb"):
            raise UnsupportedOperationException(None, f"unsupported reader mode {mode!r}")
        size = self.stat().size_bytes
        raw = _ObjectStream(self, size)
        buffered = io.BufferedReader(raw, buffer_size=1 << 20)
        return buffered if mode == "rb" else io.TextIOWrapper(buffered, encoding="utf-8")

    def copy(self, destination_branch_id: str, destination_path: str) -> WriteableObject:
        """Stage a copy of this object at ``destination_path`` on the branch
        ``destination_branch_id`` of the same repository: it shares this object's blocks, no
        byte is written."""
        with api_errors():
            self._client.backend.copy_object(
                self._repo, destination_branch_id, destination_path, self._ref, self._path
            )
        return WriteableObject(self._repo, destination_branch_id, destination_path, self._client)

    def _chunks(self, offset: int) -> Iterator[bytes]:
        with api_errors():
            yield from self._client.backend.read(self._repo, self._ref, self._path, offset=offset)


class WriteableObject(StoredObject):
    """An object on a branch: written (``upload``, ``writer``) and deleted too."""

    def upload(
        self,
        data: str | bytes,
        mode: WriteModes = "w",
        pre_sign: bool | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> WriteableObject:
        """Stage ``data`` (text is stored as UTF-8) at the path; with mode ``x``/``xb`` only where
        no object is (``ObjectExistsException``)."""
        self._check_mode(mode)
        body = data.encode() if isinstance(data, str) else bytes(data)
        with api_errors():
            self._client.backend.upload(self._repo, self._ref, self._path, body, content_type, metadata)
        return self

    def writer(
        self,
        mode: WriteModes = "wb",
        pre_sign: bool | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> IO[Any]:
        """A file object whose bytes (``wb``/``xb``) or text (``w``/``x``) are staged as the
        object when it is closed; any size: past 8 MiB it spools to a temporary file. An
        exception inside its ``with`` block discards it."""
        self._check_mode(mode)
        raw = _ObjectWriter(self, content_type, metadata)
        return cast(IO[Any], raw if "b" in mode else _TextWriter(raw))

    def append(self, data: str | bytes) -> WriteableObject:
        """lakectl's: add ``data`` (text as UTF-8) to the end of the object, as new blocks
        (created if missing; its content type and metadata stay). Concurrent appends all land,
        each whole (docs/concepts.md). Not in lakeFS's wrapper."""
        body = data.encode() if isinstance(data, str) else bytes(data)
        with api_errors():
            self._client.backend.append(self._repo, self._ref, self._path, body)
        return self

    def delete(self) -> None:
        with api_errors():
            self._client.backend.delete_objects(self._repo, self._ref, [self._path])

    def _check_mode(self, mode: str) -> None:
        if mode not in ("x", "xb", "w", "wb"):
            raise UnsupportedOperationException(None, f"unsupported write mode {mode!r}")
        if mode.startswith("x") and self.exists():
            raise ObjectExistsException(412, f"object {self._path!r} exists on {self._ref!r}")

    def _store(self, source: BinaryIO, content_type: str | None, metadata: Mapping[str, str] | None) -> None:
        with api_errors():
            self._client.backend.upload(self._repo, self._ref, self._path, source, content_type, metadata)


class _ObjectStream(io.RawIOBase):
    """An object's bytes as a raw stream, read in order from the lake; a seek elsewhere reads
    on from there, and only the blocks that hold what is read are fetched."""

    def __init__(self, obj: StoredObject, size: int) -> None:
        super().__init__()
        self._obj, self._size = obj, size
        self._chunks: Iterator[bytes] | None = None
        self._held = memoryview(b"")
        self._at = 0  # position of the next byte the stream gives

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        target = base + offset
        if target < 0:
            raise ValueError(f"negative seek position {target}")
        if target != self._at:
            self._chunks, self._held, self._at = None, memoryview(b""), target
        return self._at

    def readinto(self, buffer: Any) -> int:
        with memoryview(buffer) as view:
            data = self._take(len(view))
            view[: len(data)] = data
            return len(data)

    def _take(self, n: int) -> memoryview:
        """Up to ``n`` of the next bytes (empty at the end); the position moves past them."""
        if not self._held:
            if self._at >= self._size:
                return memoryview(b"")
            if self._chunks is None:
                self._chunks = self._obj._chunks(self._at)
            self._held = memoryview(next(self._chunks, b""))
        taken, self._held = self._held[:n], self._held[n:]
        self._at += len(taken)
        return taken


class _ObjectWriter(io.RawIOBase):
    """Bytes spooled (memory, then a temporary file) and staged as the object on close."""

    def __init__(
        self, obj: WriteableObject, content_type: str | None, metadata: Mapping[str, str] | None
    ) -> None:
        super().__init__()
        self._obj, self._type, self._meta = obj, content_type, metadata
        import tempfile

        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed by close()
        self._discarded = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._spool.write(data)

    def discard(self) -> None:
        """Close without staging anything."""
        self._discarded = True
        self.close()

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None:
            self._discarded = True
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._discarded:
                self._spool.seek(0)
                self._obj._store(cast(BinaryIO, self._spool), self._type, self._meta)
        finally:
            self._spool.close()
            super().close()


class _TextWriter(io.TextIOWrapper):
    """A writer's text, UTF-8: an exception inside its ``with`` block discards the object too."""

    def __init__(self, raw: _ObjectWriter) -> None:
        super().__init__(raw, encoding="utf-8", write_through=True)  # type: ignore[arg-type]
        self._raw = raw

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None:
            self.flush()
            self._raw.discard()
        self.close()
