"""A server's auth records in the journal: who may use the lake (users, groups, policies, access
keys, external principals, the set-up marker, signed-out login tokens: the KV partitions under
:data:`PREFIX`, laid out by ``server.auth``) journalled as stored, so that a rebuild gives them
back (docs/decisions/0024-auth-records-in-the-journal.md).

The core does not know what they mean, and needs not: an entry
(:data:`~lakectl.core.events.Verb.AUTH`, lake-wide) is one change of one key, its partition, key
and value as stored (or its deletion), and a rebuild stores it again as it is. Secrets stay as the
server stored them, encrypted under its secret: they are never decrypted for the journal, and the
rebuilt records are read with the same secret.

Each entry is signed (HMAC-SHA256) under a key the server derives from that secret, and a
rebuild replays only entries it verifies: in a store where log records are blocks (S3, volume
sets), an object uploaded with the bytes of a log record could otherwise add a user or a key to
the rebuilt lake. The rebuild of a server's lake is therefore given its configuration
(``lakectl admin rebuild --from-journal --server-config``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
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


def payload(partition: str, key: str, value: bytes | None, seal: bytes) -> dict[str, Any]:
    """An entry's payload for a change of one key: the value as text when it is UTF-8 (the
    server's records are JSON or plain text, so the journal reads as they are), else base64;
    signed with ``seal`` (:func:`signature`)."""
    out: dict[str, Any] = {"partition": partition, "key": key}
    if value is None:
        out["value"] = None
    else:
        try:
            out["value"] = value.decode("utf-8")
        except UnicodeDecodeError:
            out["value_base64"] = base64.b64encode(value).decode("ascii")
    out["mac"] = signature(seal, out)
    return out


def signature(seal: bytes, entry: Mapping[str, Any]) -> str:
    """HMAC-SHA256 under ``seal`` (a key the server derives from its secret, which no user can
    read and which outlives the database) of an entry's payload but its ``mac``: a record
    stored as a block by anyone else (an object whose bytes read as a log record) is refused
    by a rebuild, never replayed as a user or a key."""
    signed = json.dumps({k: v for k, v in entry.items() if k != "mac"}, sort_keys=True, separators=(",", ":"))
    return hmac.new(seal, signed.encode(), hashlib.sha256).hexdigest()


def deleted(entry: Mapping[str, Any]) -> bool:
    """Whether an entry's payload is a deletion."""
    return entry.get("value") is None and "value_base64" not in entry


def record_of(entry: Mapping[str, Any], seal: bytes) -> Record:
    """The change an entry's payload describes; ``IntegrityError`` when it names a partition
    outside :data:`PREFIX`, is not a record's payload, or is not signed under ``seal`` (a
    damaged or forged entry)."""
    mac = entry.get("mac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, signature(seal, entry)):
        raise IntegrityError(
            f"a journal entry of type {Verb.AUTH.value} is not signed by this server's secret: "
            "refused, the journal is forged or the secret is another server's"
        )
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
    value = _value(entry)
    if value is not None:
        return partition, key, value
    raise IntegrityError(f"a journal entry of type {Verb.AUTH.value} has no readable value for {partition!r}")


def replay(kv: KVStore, entry: Mapping[str, Any], seal: bytes) -> None:
    """Store the change an entry's payload describes (``IntegrityError``, storing nothing, when
    :func:`record_of` refuses it)."""
    partition, key, value = record_of(entry, seal)
    if value is None:
        kv.delete(partition, key)
    else:
        kv.set(partition, key, value)


def decide(kv: KVStore, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The payload of an intent whose writer died or failed mid-way (recovery), None for none:
    the change as asked (still signed: recovery runs in any process, which has no server secret
    to sign anything else) when the store holds what it wrote; else none, since it never landed
    or a later change superseded it, which its own entry records."""
    partition, key = entry.get("partition"), entry.get("key")
    if not isinstance(partition, str) or not isinstance(key, str):
        return None
    try:
        now: bytes | None = kv.get(partition, key)
    except KeyNotFound:
        now = None
    asked = None if deleted(entry) else _value(entry)
    return dict(entry) if now == asked else None


def _value(entry: Mapping[str, Any]) -> bytes | None:
    text, coded = entry.get("value"), entry.get("value_base64")
    try:
        if isinstance(text, str) and coded is None:
            return text.encode("utf-8")
        if isinstance(coded, str) and text is None:
            return base64.b64decode(coded, validate=True)
    except (binascii.Error, UnicodeEncodeError):
        pass
    return None


class Journaled:
    """A KV store whose writes to :data:`PREFIX` partitions are announced to the lake's events
    (``events()``, read at each write: the journal is switched on and off while a server runs),
    one :data:`~lakectl.core.events.Verb.AUTH` event each, with the value as written. Reads, and
    writes to other partitions, go to the store unannounced. The rows a ``set_if``'s ``then``
    adds are stored but not announced: the server's records use none."""

    def __init__(self, kv: KVStore, events: Callable[[], EventSink], seal: bytes) -> None:
        self.kv = kv
        self.events = events
        self.seal = seal
        """Signs each entry (:func:`signature`)."""

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
        event = Event(Verb.AUTH, "", payload=payload(partition, key, value, self.seal))
        with announced(sink, event):
            write()
        sink.after(event)
