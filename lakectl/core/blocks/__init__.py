"""Keep-style block storage: locators, signatures, manifests, block adapters and object data."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable


@runtime_checkable
class BlockAdapter(Protocol):
    """Where block bytes live. Names are bare locators ``<md5>+<size>`` (no hints)."""

    def put(self, locator: str, data: bytes | memoryview) -> None:
        """Store the block atomically (readers see all of it or nothing); idempotent. When a
        complete copy is already stored, check it against ``data`` (or the locator's md5):
        touch it if intact, so that a concurrent GC spares it; rewrite it, atomically, if not
        (a put heals a rotten block, as keepstore does). Callers holding the bytes just put;
        ``touch`` is for those that hold none (copies, links). ``data`` may be a view of a
        buffer the caller reuses: keep no reference to it after returning."""
        ...

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        """Return the block's bytes (or a slice); raise ``BlockNotFound``, ``CorruptBlock``."""
        ...

    def exists(self, locator: str) -> bool:
        """True when a complete block of that locator is stored."""
        ...

    def touch(self, locator: str) -> bool:
        """Refresh the stored block's modification time; False (nothing done) when no complete
        block is stored. What stages a block again without its bytes (a copy, a link) touches
        it, so that a concurrent garbage collection never deletes it (docs/decisions/0008)."""
        ...

    def modified(self, locator: str) -> float:
        """When the block was last written or touched (epoch seconds); ``BlockNotFound``."""
        ...

    def delete(self, locator: str) -> None:
        """Remove the block; absent is not an error."""
        ...

    def list(self) -> Iterator[str]:
        """Yield the locators of every stored block, in no particular order."""
        ...

    def sync(self) -> None:
        """Make every block put so far durable (one barrier for many puts)."""
        ...


@dataclass(frozen=True, slots=True)
class Temporary:
    """A temporary file a writer left in a block store: a write in flight, or a killed writer's."""

    name: str
    """Its path under the store's root, ``<md5[:3]>/.<md5>.<random>.tmp``."""
    size: int
    modified: float
    """Epoch seconds of its last write."""
    volume: str | None = None
    """The volume holding it, in a volume set."""


@runtime_checkable
class HasTemporaries(Protocol):
    """An optional capability of block stores that write blocks through temporary files (a local
    directory, a volume set of them; not S3, whose puts are atomic): listing and removing what
    killed writers left behind. Garbage collection removes those older than its grace period."""

    def temporaries(self) -> Iterator[Temporary]:
        """Yield every temporary file, in no particular order; ``StorageError`` when the store
        cannot be listed."""
        ...

    def remove_temporary(self, temporary: Temporary) -> bool:
        """Remove one file :meth:`temporaries` yielded; False when it is gone already (its
        writer finished or another collection removed it)."""
        ...


@runtime_checkable
class HasStorageClass(Protocol):
    """An optional capability of block stores kept in an object store with storage classes (S3):
    the class a block is stored in, as lakeFS's ``underlyingProperties`` reports an object's."""

    def storage_class(self, locator: str) -> str | None:
        """The block's storage class; ``BlockNotFound`` when it is not stored."""
        ...


@runtime_checkable
class HasParts(Protocol):
    """An optional capability of block stores that read part of a block without the rest (a
    local directory, a volume set, S3's ranged GET): a packed small object is read alone and
    checked against its own md5, not by reading and hashing its whole pack
    (:func:`lakectl.core.blocks.data.get_checked`)."""

    def get_part(self, locator: str, offset: int, length: int) -> bytes:
        """``length`` bytes of the block at ``offset``, **not verified**: the caller checks them
        against an md5 it knows. Fewer bytes when the stored block is shorter;
        ``BlockNotFound`` when it is not stored."""
        ...


@runtime_checkable
class HasMaps(Protocol):
    """An optional capability of block stores whose blocks are files (a local directory): a whole
    block mapped from its file rather than copied into memory, for a reader that writes it out
    (a download: no copy out of the page cache, no fresh pages to fault in; docs/decisions/0015)."""

    def get_mapped(self, locator: str) -> mmap.mmap | None:
        """The whole block, mapped copy-on-write from its file (writable memory, so that a
        direct write can take it; nothing writes it), once its size and md5 are checked; None
        for an empty block. ``BlockNotFound``, ``CorruptBlock`` as :meth:`BlockAdapter.get`."""
        ...


_CAPABLE: dict[tuple[type, object], bool] = {}


def _capable(adapter: object, capability: Any) -> bool:
    """``isinstance(adapter, capability)`` for the optional capabilities above, by the adapter's
    class (their methods are the class's): a runtime-checkable protocol's ``isinstance`` looks
    up every method each time, ~0.2 ms, which a read of many small objects paid per object."""
    key = (type(adapter), capability)
    found = _CAPABLE.get(key)
    if found is None:
        found = _CAPABLE[key] = isinstance(adapter, capability)
    return found


def has_parts(adapter: object) -> TypeGuard[HasParts]:
    return _capable(adapter, HasParts)


def has_maps(adapter: object) -> TypeGuard[HasMaps]:
    return _capable(adapter, HasMaps)
