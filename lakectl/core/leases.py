"""Leases in the KV store: one holder at a time for a short piece of work, across processes.

A lease is a key whose value names its holder and when it expires. It is taken with ``set_if``
against absence, or against the very value of a lease past its expiry (its holder died); its
holder deletes it once done. Nothing is held in a process: two servers sharing one KV store take
turns on it as two threads do. A lease guards work of milliseconds (an append's read of its
object and its staged write); its time to live is thousands of times that, so only a holder that
died, or stalled for longer than the time to live, is ever taken over. Nothing fences such a
stalled holder off: its work must be short.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from lakectl.core.kv import KVStore
from lakectl.errors import Conflict, KeyNotFound, PredicateFailed

TTL: Final = 30.0
"""Seconds a lease lasts: past them, another taker may take it over."""
WAIT: Final = 30.0
"""Seconds a taker waits for a held lease before giving up (``Conflict``)."""
FIRST_PAUSE: Final = 0.001
MAX_PAUSE: Final = 0.05
"""A waiting taker looks again after a pause that doubles from the first to the last, jittered."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease this process holds: where it is, and the value it stored (its holder is unique)."""

    partition: str
    key: str
    value: bytes
    expires: float
    ttl: float


def _value(ttl: float) -> tuple[bytes, float]:
    expires = time.time() + ttl
    return json.dumps({"holder": uuid.uuid4().hex, "expires": expires}).encode(), expires


def _expiry(raw: bytes) -> float:
    """When a stored lease expires; a value that is no lease counts as expired."""
    try:
        return float(json.loads(raw)["expires"])
    except (ValueError, KeyError, TypeError):
        return 0.0


def _stored(kv: KVStore, partition: str, key: str) -> bytes | None:
    try:
        return kv.get(partition, key)
    except KeyNotFound:
        return None


def take(kv: KVStore, partition: str, key: str, what: str, ttl: float = TTL, wait: float = WAIT) -> Lease:
    """Take the lease at ``(partition, key)``: at once when nobody holds it or its holder's time
    ran out, else after waiting for it, at most ``wait`` seconds (then ``Conflict``, naming
    ``what`` the lease is for)."""
    deadline = time.monotonic() + wait
    pause = FIRST_PAUSE
    while True:
        current = _stored(kv, partition, key)
        if current is None or _expiry(current) <= time.time():
            value, expires = _value(ttl)
            try:
                kv.set_if(partition, key, value, current)
                return Lease(partition, key, value, expires, ttl)
            except PredicateFailed:
                pass  # another taker won it: wait for it as for any holder
        if time.monotonic() >= deadline:
            raise Conflict(f"{what}: another writer held it for over {wait:g} s; try again")
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, MAX_PAUSE)


def release(kv: KVStore, lease: Lease) -> None:
    """Delete the lease if it is still this holder's and far from expiring. One past half its
    time is left to expire instead: between the look and the delete, its expiry could pass and
    another taker could take it, whose lease the delete would then remove."""
    if _stored(kv, lease.partition, lease.key) != lease.value:
        return
    if lease.expires - time.time() > lease.ttl / 2:
        kv.delete(lease.partition, lease.key)


@contextmanager
def held(
    kv: KVStore, partition: str, key: str, what: str, ttl: float = TTL, wait: float = WAIT
) -> Iterator[Lease]:
    """The lease, held for the body of the ``with`` (:func:`take`, then :func:`release`)."""
    lease = take(kv, partition, key, what, ttl, wait)
    try:
        yield lease
    finally:
        release(kv, lease)
