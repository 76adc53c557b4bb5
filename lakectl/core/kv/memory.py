"""In-process KV store: one dict plus a lazily maintained sorted key list per partition."""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Iterator

from lakectl.core.kv import Then
from lakectl.errors import KeyNotFound, PredicateFailed

_PAGE = 1_000


class _Partition:
    """Values by key, and the keys in order.

    Writes only touch the dict and two small sets, so loading a million keys stays O(n); the
    sorted list is brought up to date when a scan needs it (``sort`` merges the appended run in
    linear time). Deleted keys stay in the list until they are a large share of it.
    """

    __slots__ = ("added", "keys", "stale", "values")

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.keys: list[str] = []
        self.added: set[str] = set()  # in values, not yet in keys
        self.stale: set[str] = set()  # in keys, no longer in values

    def put(self, key: str, value: bytes) -> None:
        if key not in self.values:
            if key in self.stale:
                self.stale.discard(key)
            else:
                self.added.add(key)
        self.values[key] = value

    def remove(self, key: str) -> None:
        if self.values.pop(key, None) is None:
            return
        if key in self.added:
            self.added.discard(key)
        else:
            self.stale.add(key)

    def sorted_keys(self) -> list[str]:
        if self.added:
            self.keys.extend(self.added)
            self.keys.sort()
            self.added.clear()
        # Compact only when stale keys dominate, so a scan after each delete stays cheap.
        if len(self.stale) > 1_024 and len(self.stale) * 2 > len(self.keys):
            self.keys = [k for k in self.keys if k not in self.stale]
            self.stale.clear()
        return self.keys


class MemoryStore:
    """A :class:`~lakectl.core.kv.KVStore` (and ``BatchWriter``) held in this process's memory.

    One lock makes each call atomic between threads; it is not shared metadata across
    processes, so the no-in-process-locks rule does not apply here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}

    def _partition(self, partition: str) -> _Partition:
        part = self._partitions.get(partition)
        if part is None:
            part = self._partitions[partition] = _Partition()
        return part

    def get(self, partition: str, key: str) -> bytes:
        with self._lock:
            part = self._partitions.get(partition)
            value = None if part is None else part.values.get(key)
        if value is None:
            raise KeyNotFound(f"no key {key!r} in partition {partition!r}", partition=partition, key=key)
        return value

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        # Copy a page at a time under the lock and resume after the last key yielded, so
        # writes between pages (deletes included) never break or block a long scan.
        if limit is not None:
            yield from itertools.islice(self.scan(partition, start), limit)
            return
        after: str | None = None
        while True:
            with self._lock:
                part = self._partitions.get(partition)
                if part is None:
                    return
                keys = part.sorted_keys()
                if after is None:
                    i = bisect.bisect_left(keys, start)
                else:
                    i = bisect.bisect_right(keys, after)
                chunk = keys[i : i + _PAGE]
                values = part.values
                page = [(k, values[k]) for k in chunk if k in values]
            yield from page
            if len(chunk) < _PAGE:
                return
            after = chunk[-1]

    def set(self, partition: str, key: str, value: bytes) -> None:
        with self._lock:
            self._partition(partition).put(key, bytes(value))

    def delete(self, partition: str, key: str) -> None:
        with self._lock:
            part = self._partitions.get(partition)
            if part is not None:
                part.remove(key)

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        with self._lock:
            part = self._partition(partition)
            current = part.values.get(key)
            if current != expected:
                raise PredicateFailed(
                    f"value of {key!r} in partition {partition!r} changed",
                    partition=partition,
                    key=key,
                )
            part.put(key, bytes(value))
            for name, k, v in then() if then is not None else ():
                self._partition(name).put(k, bytes(v))

    def set_many(self, partition: str, items: list[tuple[str, bytes]], then: Then = None) -> None:
        with self._lock:
            part = self._partition(partition)
            for key, value in items:
                part.put(key, bytes(value))
            for name, key, value in then() if then is not None else ():
                self._partition(name).put(key, bytes(value))

    def delete_many(self, partition: str, keys: list[str]) -> None:
        with self._lock:
            part = self._partitions.get(partition)
            if part is not None:
                for key in keys:
                    part.remove(key)

    def drop_partition(self, partition: str) -> None:
        with self._lock:
            self._partitions.pop(partition, None)

    def partitions(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(n for n, p in self._partitions.items() if n.startswith(prefix) and p.values)

    def close(self) -> None:
        """Nothing to release; the data lives as long as the object."""
