"""Conveniences built on the KV protocol: prefix scans, batches, partition drops, retried updates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import cast

from lakectl.core.kv import BatchWriter, KVStore, Then
from lakectl.core.kv.retry import AGAIN, RECORD, Again, RetryPolicy, retry
from lakectl.errors import KeyNotFound, PredicateFailed

DROP_CHUNK = 10_000
"""Keys deleted per batch by :func:`drop_partition`: bounded memory, few transactions."""


def scan_prefix(store: KVStore, partition: str, prefix: str) -> Iterator[tuple[str, bytes]]:
    """Yield ``(key, value)`` for the keys starting with ``prefix``, in key order."""
    # Keys with a common prefix are contiguous in code-point order and start at the prefix.
    for key, value in store.scan(partition, prefix):
        if not key.startswith(prefix):
            return
        yield key, value


def _batch_writer(store: KVStore) -> BatchWriter | None:
    # BatchWriter is optional and not runtime-checkable: look for its methods by name.
    if all(callable(getattr(store, m, None)) for m in ("set_many", "delete_many", "drop_partition")):
        return cast(BatchWriter, store)
    return None


def set_many(
    store: KVStore,
    partition: str,
    items: Iterable[tuple[str, bytes]],
    then: Then = None,
) -> None:
    """Store every ``(key, value)``, then the rows ``then`` returns (:data:`~lakectl.core.kv.Then`):
    one transaction when the driver offers it, else one by one."""
    writer = _batch_writer(store)
    if writer is not None:
        writer.set_many(partition, list(items), then)
        return
    for key, value in items:
        store.set(partition, key, value)
    for part, key, value in then() if then is not None else ():
        store.set(part, key, value)


def delete_many(store: KVStore, partition: str, keys: Iterable[str]) -> None:
    """Remove every key (absent keys are fine): one transaction when the driver offers it."""
    writer = _batch_writer(store)
    if writer is not None:
        writer.delete_many(partition, list(keys))
        return
    for key in keys:
        store.delete(partition, key)


def partitions(store: KVStore, prefix: str) -> list[str] | None:
    """The non-empty partitions whose names start with ``prefix``; None when the driver cannot
    list partitions (the optional :class:`~lakectl.core.kv.PartitionLister`)."""
    lister = getattr(store, "partitions", None)
    if not callable(lister):
        return None
    return cast(list[str], lister(prefix))


def drop_partition(store: KVStore, partition: str) -> None:
    """Remove every key of the partition, in batches of :data:`DROP_CHUNK`."""
    writer = _batch_writer(store)
    if writer is not None:
        writer.drop_partition(partition)
        return
    batch: list[str] = []
    # Deleting behind a scan is safe: scans resume after the last key they yielded.
    for key, _ in store.scan(partition):
        batch.append(key)
        if len(batch) >= DROP_CHUNK:
            delete_many(store, partition, batch)
            batch = []
    if batch:
        delete_many(store, partition, batch)


def update_with_retries(
    store: KVStore,
    partition: str,
    key: str,
    fn: Callable[[bytes | None], bytes],
    policy: RetryPolicy = RECORD,
) -> bytes:
    """Read the value (None when absent), store ``fn(old)`` with ``set_if``, and return it.

    When another writer wins the compare-and-swap, start again from the read, as ``policy``
    says; ``fn`` may therefore run several times and must not have side effects. Raises
    ``TooManyRetries`` after ``policy.attempts`` lost races.
    """

    def attempt() -> bytes | Again:
        try:
            old: bytes | None = store.get(partition, key)
        except KeyNotFound:
            old = None
        new = fn(old)
        try:
            store.set_if(partition, key, new, old)
        except PredicateFailed:
            return AGAIN
        return new

    return retry(
        policy,
        attempt,
        f"gave up updating {key!r} in partition {partition!r} after {policy.attempts} attempts",
        partition=partition,
        key=key,
        attempts=policy.attempts,
    )
