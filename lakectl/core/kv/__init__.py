"""The KV store protocol: five methods over (partition, key) -> value, ordered by key.

Keys and partitions are ``str`` compared by code point, which is the byte order of their UTF-8
encoding; values are ``bytes``. Conveniences (prefix scans, batched writes) live in
:mod:`lakectl.core.kv.helpers` and the bounded compare-and-swap retries in
:mod:`lakectl.core.kv.retry`, never in the protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

Then = Callable[[], Sequence[tuple[str, str, bytes]]] | None
"""What a batch stores last, in its own transaction: a function called once the batch's rows are
written and before the transaction commits, returning ``(partition, key, value)`` rows. A clock it
reads then orders the batch after every transaction that wrote one of the same keys before it
(docs/decisions/0009-journal.md, "Concurrent writers"). It must not use the store: the
transaction holds the store's write lock."""


@runtime_checkable
class KVStore(Protocol):
    def get(self, partition: str, key: str) -> bytes:
        """Return the value; raise ``KeyNotFound`` when absent."""
        ...

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        """Yield ``(key, value)`` for keys >= start in key order (a consistent-enough snapshot per
        page); at most ``limit`` of them, read in pages no larger (a probe for the next key reads
        one row, not a page)."""
        ...

    def set(self, partition: str, key: str, value: bytes) -> None:
        """Store the value unconditionally."""
        ...

    def delete(self, partition: str, key: str) -> None:
        """Remove the key; deleting an absent key is not an error."""
        ...

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        """Store only if the current value equals ``expected`` (None: key must not exist), and
        then the rows ``then`` returns (:data:`Then`), in one transaction; raise
        ``PredicateFailed`` otherwise, having stored nothing."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class BatchWriter(Protocol):
    """Optional fast path a driver may offer: many writes in one transaction."""

    def set_many(self, partition: str, items: list[tuple[str, bytes]], then: Then = None) -> None:
        """Store ``items`` in ``partition``, then the rows ``then`` returns (:data:`Then`), in one
        transaction."""
        ...

    def delete_many(self, partition: str, keys: list[str]) -> None: ...

    def drop_partition(self, partition: str) -> None: ...


class PartitionLister(Protocol):
    """Optional: the partitions holding at least one key, by name prefix (garbage collection
    finds staging partitions no branch refers to any more)."""

    def partitions(self, prefix: str) -> list[str]:
        """Names starting with ``prefix`` of every non-empty partition, in order."""
        ...
