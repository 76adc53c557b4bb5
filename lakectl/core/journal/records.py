"""A server's auth records in the journal: who may use the lake (users, groups, policies, access
keys, external principals, the set-up marker, signed-out login tokens: the KV partitions under
:data:`PREFIX`, laid out by ``server.auth``) journalled as stored, so that a rebuild gives them
back (docs/decisions/0024-auth-records-in-the-journal.md).

The core does not know what they mean, and needs not: an entry
(:data:`~lakectl.core.events.Verb.AUTH`, lake-wide) is one change of one key, its partition, key
and value as stored (or its deletion), and a rebuild stores it again as it is. Secrets stay as the
server stored them, encrypted under its secret: they are never decrypted for the journal, and the
rebuilt records are read with the same secret.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from lakectl.core.events import Event, EventSink, Verb, announced
from lakectl.core.kv import KVStore, Then
from lakectl.errors import IntegrityError, KeyNotFound

PREFIX = "auth/"
"""The partitions journalled and replayed as records. A replayed entry naming any other
partition is refused: no entry may write the lake's own metadata as a record."""

Record = tuple[str, str, bytes | None]
"""A change of one key: its partition, key and value (None: deleted)."""


def payload(partition: str, key: str, value: bytes | None) -> dict[str, Any]:
    """An entry's payload for a change of one key: the value as text when it is UTF-8 (the
    server's records are JSON or plain text, so the journal reads as they are), else base64."""
    out: dict[str, Any] = {"partition": partition, "key": key}
    if value is None:
        out["value"] = None
        return out
    try:
        out["value"] = value.decode("utf-8")
    except UnicodeDecodeError:
        out["value_base64"] = base64.b64encode(value).decode("ascii")
    return out


def deleted(entry: Mapping[str, Any]) -> bool:
    """Whether an entry's payload is a deletion."""
    return entry.get("value") is None and "value_base64" not in entry


def record_of(entry: Mapping[str, Any]) -> Record:
    """The change an entry's payload describes; ``IntegrityError`` when it names a partition
    outside :data:`PREFIX` or is not a record's payload (a damaged or forged entry)."""
    partition, key = entry.get("partition"), entry.get("key")
    if not isinstance(partition, str) or not partition.startswith(PREFIX) or len(partition) == len(PREFIX):
        raise IntegrityError(
            f"a journal entry of type {Verb.AUTH.value} names the partition {partition!r}, not one of "
            f"the server's ({PREFIX}...): refused, the journal is damaged or forged"
        )
    if not isinstance(key, str) or not key:
        raise IntegrityError(f"a journal entry of type {Verb.AUTH.value} names no key in {partition!r}")
    if deleted(entry):
        return partition, key, None
    text, coded = entry.get("value"), entry.get("value_base64")
    try:
        if isinstance(text, str) and coded is None:
            return partition, key, text.encode("utf-8")
        if isinstance(coded, str) and text is None:
            return partition, key, base64.b64decode(coded, validate=True)
    except (binascii.Error, UnicodeEncodeError):
        pass
    raise IntegrityError(f"a journal entry of type {Verb.AUTH.value} has no readable value for {partition!r}")


def replay(kv: KVStore, entry: Mapping[str, Any]) -> None:
    """Store the change an entry's payload describes (``IntegrityError``, storing nothing, when
    :func:`record_of` refuses it)."""
    partition, key, value = record_of(entry)
    if value is None:
        kv.delete(partition, key)
    else:
        kv.set(partition, key, value)


def decide(kv: KVStore, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of an intent whose writer died or failed mid-way (recovery): the record as it
    is now, whether the write landed or not, so that the journal says what the store holds."""
    partition, key, _ = record_of(entry)
    try:
        now: bytes | None = kv.get(partition, key)
    except KeyNotFound:
        now = None
    return payload(partition, key, now)


class Journaled:
    """A KV store whose writes to :data:`PREFIX` partitions are announced to the lake's events
    (``events()``, read at each write: the journal is switched on and off while a server runs),
    one :data:`~lakectl.core.events.Verb.AUTH` event each, with the value as written. Reads, and
    writes to other partitions, go to the store unannounced. The rows a ``set_if``'s ``then``
    adds are stored but not announced: the server's records use none."""

    def __init__(self, kv: KVStore, events: Callable[[], EventSink]) -> None:
        self.kv = kv
        self.events = events

    def get(self, partition: str, key: str) -> bytes:
        return self.kv.get(partition, key)

    def scan(self, partition: str, start: str = "", limit: int | None = None) -> Iterator[tuple[str, bytes]]:
        return self.kv.scan(partition, start, limit)

    def set(self, partition: str, key: str, value: bytes) -> None:
        self._write(partition, key, value, lambda: self.kv.set(partition, key, value))

    def delete(self, partition: str, key: str) -> None:
        self._write(partition, key, None, lambda: self.kv.delete(partition, key))

    def set_if(
        self, partition: str, key: str, value: bytes, expected: bytes | None, then: Then = None
    ) -> None:
        self._write(partition, key, value, lambda: self.kv.set_if(partition, key, value, expected, then))

    def close(self) -> None:
        self.kv.close()

    def _write(self, partition: str, key: str, value: bytes | None, write: Callable[[], None]) -> None:
        """The write, announced as the lake's verbs are: a refused compare-and-swap
        (``PredicateFailed``) leaves no entry, and a change whose entry cannot be made durable
        raises although it landed (not acknowledged, as any verb's)."""
        if not partition.startswith(PREFIX):
            write()
            return
        sink = self.events()
        event = Event(Verb.AUTH, "", payload=payload(partition, key, value))
        with announced(sink, event):
            write()
        sink.after(event)
