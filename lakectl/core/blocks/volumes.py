"""Blocks spread over several volumes by Keep's rendezvous hashing, with replicas and read fallback.

Placement (as Keep clients order keep services): for each volume, weigh
``md5(<locator md5 hex> + <volume id>)``; the *probe order* of a block is the volumes sorted by
weight, highest first. A put writes the first ``replicas`` volumes of that order that accept
it; a get tries the whole order until one copy reads back intact. Adding or removing a volume
changes the order only where that volume ranks, so about 1/n of the blocks move.

What the set does when some volumes fail (docs/decisions/0005-block-placement.md):

- ``put`` skips a volume that raises ``StorageError`` and takes the next in the probe order;
  it raises ``StorageError`` unless ``replicas`` copies were stored (copies already written
  stay: they are content-addressed and harmless, and a later put completes the set). Each
  volume's put checks a copy it already holds and rewrites it if rotten, so a put of the same
  bytes heals every replica it lands on; copies further down the probe order (left by a
  volume since added) are neither checked nor needed: a get falls back past a bad one.
- ``get`` falls back on ``BlockNotFound``, ``StorageError`` and ``CorruptBlock``. With no good
  copy it raises ``StorageError`` if any volume failed (a retry may succeed), else
  ``CorruptBlock`` if any copy was damaged, else ``BlockNotFound``.
- ``exists`` is True when any volume holds a complete copy. A failing volume counts as not
  holding it (a false "no" only costs a put, which then lands on working volumes); only when
  every volume fails does it raise ``StorageError``.
- ``delete``, ``list`` and ``sync`` try every volume concerned and then raise ``StorageError``
  if one failed: a copy left behind, a partial listing or an unsynced write must not pass
  silently.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence

from lakectl.core.blocks import BlockAdapter, HasParts, HasTemporaries, Temporary
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.blocks.locator import parse_locator
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    LakectlError,
    StorageError,
)

__all__ = ["VolumeSet", "local_volumes"]


def _split(locator: str) -> tuple[str, int]:
    """The md5 and size of a bare locator ``<md5>+<size>``; anything else is InvalidLocator."""
    parsed = parse_locator(locator)
    if parsed.hints or parsed.size is None:
        raise InvalidLocator(f"not a bare block locator: {locator!r}", locator=repr(locator))
    return parsed.md5, parsed.size


class VolumeSet:
    """A ``BlockAdapter`` over named volumes (any adapters), placing blocks by rendezvous hashing.

    Volume ids must be unique and stable: they decide placement, so renaming a volume moves
    (for new puts) the blocks it ranks first for; existing copies are still found, because a
    get walks the whole probe order.
    """

    def __init__(self, volumes: Sequence[tuple[str, BlockAdapter]], replicas: int = 1) -> None:
        pairs = list(volumes)
        if not pairs:
            raise InvalidArgument("a volume set needs at least one volume")
        seen: set[str] = set()
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidArgument(f"a volume is an (id, adapter) pair, got {pair!r}")
            volume_id, adapter = pair
            if not isinstance(volume_id, str) or not volume_id:
                raise InvalidArgument(f"volume id must be a non-empty string, got {volume_id!r}")
            if volume_id in seen:
                raise InvalidArgument(f"duplicate volume id {volume_id!r}", volume=volume_id)
            if not isinstance(adapter, BlockAdapter):
                raise InvalidArgument(f"volume {volume_id!r} is not a block adapter: {adapter!r}")
            seen.add(volume_id)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= len(pairs):
            raise InvalidArgument(f"replicas must be between 1 and {len(pairs)}, got {replicas!r}")
        self._volumes: dict[str, BlockAdapter] = dict(pairs)
        self._salts = [(volume_id, volume_id.encode()) for volume_id in self._volumes]
        self.replicas = replicas
        # Volumes written since the last sync(): only they need a barrier, so a volume that is
        # down (and was skipped by every put) does not fail every commit.
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VolumeSet({list(self._volumes.items())!r}, replicas={self.replicas})"

    @property
    def volume_ids(self) -> list[str]:
        """The volume ids, in the order they were given."""
        return list(self._volumes)

    def volume(self, volume_id: str) -> BlockAdapter:
        """The adapter of one volume (for tools that inspect or repair a single volume)."""
        try:
            return self._volumes[volume_id]
        except KeyError:
            raise InvalidArgument(f"no volume {volume_id!r}", volume=volume_id) from None

    def probe_order(self, locator: str) -> list[str]:
        """Volume ids by descending ``md5(<locator md5 hex> + <volume id>)``: where the block goes."""
        md5, _ = _split(locator)
        return self._order(md5)

    def _order(self, md5: str) -> list[str]:
        prefix = md5.encode()
        weighted = [(hashlib.md5(prefix + salt).digest(), vid) for vid, salt in self._salts]
        weighted.sort(reverse=True)
        return [vid for _, vid in weighted]

    def put(self, locator: str, data: bytes | memoryview) -> None:
        """Store ``replicas`` copies on the first volumes of the probe order that accept them,
        each checked by its volume (touched if intact, rewritten if rotten)."""
        md5, size = _split(locator)
        if len(data) != size:
            raise InvalidLocator(f"locator {locator} names {size} bytes, got {len(data)}", locator=locator)
        stored = 0
        failures: dict[str, StorageError] = {}
        for volume_id in self._order(md5):
            try:
                self._volumes[volume_id].put(locator, data)
            except StorageError as exc:
                failures[volume_id] = exc
                continue
            with self._dirty_lock:
                self._dirty.add(volume_id)
            stored += 1
            if stored == self.replicas:
                return
        message = f"block {locator}: stored {stored} of {self.replicas} copies"
        raise _storage_error(message, failures, locator=locator) from _first(failures)

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        """The first intact copy in probe order; each volume verifies the whole block's md5."""
        md5, _ = _split(locator)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidArgument(f"bad range offset={offset} length={length}", locator=locator)
        failures: dict[str, LakectlError] = {}
        for volume_id in self._order(md5):
            try:
                return self._volumes[volume_id].get(locator, offset, length)
            except (BlockNotFound, StorageError, CorruptBlock) as exc:
                failures[volume_id] = exc
        for kind in (StorageError, CorruptBlock):
            causes = {vid: exc for vid, exc in failures.items() if isinstance(exc, kind)}
            if causes:
                message = f"no intact copy of block {locator} ({_reasons(failures)})"
                raise kind(message, locator=locator) from _first(causes)
        raise BlockNotFound(f"no block {locator}", locator=locator) from _first(failures)

    def get_part(self, locator: str, offset: int, length: int) -> bytes:
        """The part from the first volume in probe order that holds the block, unverified
        (:class:`~lakectl.core.blocks.HasParts`; a caller whose check fails reads the block
        with :meth:`get`, which finds an intact copy)."""
        md5, _ = _split(locator)
        failures: dict[str, LakectlError] = {}
        for volume_id in self._order(md5):
            volume = self._volumes[volume_id]
            if not isinstance(volume, HasParts):
                return self.get(locator, offset, length)
            try:
                return volume.get_part(locator, offset, length)
            except (BlockNotFound, StorageError) as exc:
                failures[volume_id] = exc
        causes = {vid: exc for vid, exc in failures.items() if isinstance(exc, StorageError)}
        if causes:
            raise StorageError(
                f"no volume could read block {locator} ({_reasons(failures)})", locator=locator
            )
        raise BlockNotFound(f"no block {locator}", locator=locator) from _first(failures)

    def exists(self, locator: str) -> bool:
        """True when any volume holds a complete copy; raise ``StorageError`` only if all fail."""
        md5, _ = _split(locator)
        failures: dict[str, StorageError] = {}
        for volume_id in self._order(md5):
            try:
                if self._volumes[volume_id].exists(locator):
                    return True
            except StorageError as exc:
                failures[volume_id] = exc
        if len(failures) == len(self._volumes):
            message = f"cannot tell whether block {locator} exists"
            raise _storage_error(message, failures, locator=locator) from _first(failures)
        return False

    def touch(self, locator: str) -> bool:
        """Touch every copy; True when any volume holds one. ``StorageError`` only if all fail."""
        md5, _ = _split(locator)
        touched = False
        failures: dict[str, StorageError] = {}
        for volume_id in self._order(md5):
            try:
                touched = self._volumes[volume_id].touch(locator) or touched
            except StorageError as exc:
                failures[volume_id] = exc
        if not touched and len(failures) == len(self._volumes):
            message = f"cannot touch block {locator}"
            raise _storage_error(message, failures, locator=locator) from _first(failures)
        return touched

    def modified(self, locator: str) -> float:
        """The newest modification time among the copies."""
        md5, _ = _split(locator)
        times: list[float] = []
        for volume_id in self._order(md5):
            try:
                times.append(self._volumes[volume_id].modified(locator))
            except (BlockNotFound, StorageError):
                continue
        if not times:
            raise BlockNotFound(f"no block {locator} on any volume", locator=locator)
        return max(times)

    def delete(self, locator: str) -> None:
        """Remove every copy; raise ``StorageError`` (after trying all) if one may remain."""
        md5, _ = _split(locator)
        failures: dict[str, StorageError] = {}
        for volume_id in self._order(md5):
            try:
                self._volumes[volume_id].delete(locator)
            except StorageError as exc:
                failures[volume_id] = exc
        if failures:
            message = f"cannot delete every copy of block {locator}"
            raise _storage_error(message, failures, locator=locator) from _first(failures)

    def list(self) -> Iterator[str]:
        """Every block held by any volume, once; ``StorageError`` if a volume cannot be listed."""
        seen: set[str] = set()
        for volume_id, adapter in self._volumes.items():
            try:
                for locator in adapter.list():
                    if locator not in seen:
                        seen.add(locator)
                        yield locator
            except StorageError as exc:
                raise StorageError(f"cannot list volume {volume_id!r}: {exc}", volume=volume_id) from exc

    def sync(self) -> None:
        """Make every copy put so far durable: one barrier per volume written since the last sync."""
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        failures: dict[str, StorageError] = {}
        for volume_id in self._volumes:  # configured order: deterministic, and each volume once
            if volume_id not in dirty:
                continue
            try:
                self._volumes[volume_id].sync()
            except StorageError as exc:
                failures[volume_id] = exc
        if failures:
            with self._dirty_lock:  # still not durable: the next sync must try them again
                self._dirty.update(failures)
            raise _storage_error("cannot sync every volume", failures) from _first(failures)

    def temporaries(self) -> Iterator[Temporary]:
        """The temporary files of every volume that has them, each naming its volume."""
        for volume_id, adapter in self._volumes.items():
            if not isinstance(adapter, HasTemporaries):
                continue
            try:
                for temporary in adapter.temporaries():
                    yield dataclasses.replace(temporary, volume=volume_id)
            except StorageError as exc:
                raise StorageError(f"cannot list volume {volume_id!r}: {exc}", volume=volume_id) from exc

    def remove_temporary(self, temporary: Temporary) -> bool:
        """Remove a temporary file :meth:`temporaries` yielded, on its volume."""
        adapter = self.volume(temporary.volume or "")
        if not isinstance(adapter, HasTemporaries):
            raise InvalidArgument(f"volume {temporary.volume!r} keeps no temporary files")
        return adapter.remove_temporary(dataclasses.replace(temporary, volume=None))


def local_volumes(
    paths: Sequence[str | os.PathLike[str]], replicas: int = 1, *, fsync_each: bool = False
) -> VolumeSet:
    """A volume set of local directories; each volume's id is its absolute, normalised path.

    The id being the path, moving a directory changes where new blocks go (old ones are still
    read); build a ``VolumeSet`` with explicit ids where directories move.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise InvalidArgument("local_volumes takes a list of directories, not one path")
    pairs: list[tuple[str, BlockAdapter]] = []
    for path in paths:
        root = os.path.abspath(os.fspath(path))
        pairs.append((root, LocalAdapter(root, fsync_each=fsync_each)))
    return VolumeSet(pairs, replicas)


def _reasons(failures: Mapping[str, LakectlError]) -> str:
    return "; ".join(f"{vid}: {type(exc).__name__}" for vid, exc in failures.items())


def _first(failures: Mapping[str, LakectlError]) -> LakectlError | None:
    return next(iter(failures.values()), None)


def _storage_error(message: str, failures: Mapping[str, StorageError], **details: object) -> StorageError:
    """One ``StorageError`` for failures on several volumes, naming each volume's reason."""
    return StorageError(
        f"{message} ({_reasons(failures)})",
        volumes={vid: exc.message for vid, exc in failures.items()},
        **details,
    )
