"""The lake's identity record: a metadata database belongs to the blocks it was made with.

A lake is two stores, metadata (KV) and blocks, and only the metadata says which blocks are in
use. Opened over a missing or emptied database, the blocks would look unreferenced and the next
garbage collection would delete them all. So every lake's KV store carries an identity record
(``lake``/``identity``, written once, by compare-and-swap), and :func:`open_metadata`, which both
the embedded lake and the server open their metadata with, applies one rule to a store without
one:

- it holds lake records (repositories, the signing secret, anything): a lake made before the
  record existed, adopted silently (the record is written);
- it is empty and so is the block store: a new lake (first use), the record is written, and
  the lake's journal switched on (a lake made before keeps its setting);
- it is empty but the block store holds blocks: ``StorageError`` naming the database, and
  nothing is created, unless the caller asked to create the lake (``lakectl init``, ``lakectl
  server setup``). Then the record counts the blocks that were there
  (``created_over_blocks``), and garbage collection refuses to run until told
  (:func:`clear_preexisting`) that whatever was worth keeping has been imported again.

A database in a file (SQLite) is checked before the driver creates it: a missing or zero-byte
file over a block store that holds blocks is refused without writing anything.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import time
import uuid
from dataclasses import dataclass, replace
from urllib.parse import urlsplit, urlunsplit

from lakectl.core import keys
from lakectl.core.blocks import BlockAdapter
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import partitions
from lakectl.core.kv.retry import AGAIN, LAKE_IDENTITY, Again, retry
from lakectl.core.kv.stores import open_store
from lakectl.errors import KeyNotFound, PredicateFailed, StorageError

__all__ = ["Identity", "Origin", "claim", "clear_preexisting", "get", "open_metadata"]


class Origin(enum.Enum):
    """How this process came by the lake's identity record."""

    FOUND = "found"
    """It was there."""
    ADOPTED = "adopted"
    """Written now for a lake made before the record existed."""
    CREATED = "created"
    """Written now for a new lake."""


@dataclass(frozen=True, slots=True)
class Identity:
    lake_id: str
    creation_date: int
    created_over_blocks: int = 0
    """Blocks the block store already held when this database was created on request; while
    non-zero, garbage collection refuses to run (it would delete them)."""
    origin: Origin = Origin.FOUND
    """Not stored: how this process found the record."""

    @property
    def just_created_over(self) -> int:
        """How many stored blocks this process just created the lake over (0: none, or not now)."""
        return self.created_over_blocks if self.origin is Origin.CREATED else 0

    def encode(self) -> bytes:
        record: dict[str, object] = {"lake_id": self.lake_id, "creation_date": self.creation_date}
        if self.created_over_blocks:
            record["created_over_blocks"] = self.created_over_blocks
        return json.dumps(record, sort_keys=True).encode()

    @staticmethod
    def decode(raw: bytes) -> Identity:
        try:
            d = json.loads(raw)
            return Identity(str(d["lake_id"]), int(d["creation_date"]), int(d.get("created_over_blocks", 0)))
        except (ValueError, TypeError, KeyError) as e:
            raise StorageError(f"the lake's identity record is damaged: {raw[:100]!r}") from e


def get(kv: KVStore) -> Identity | None:
    """The lake's identity record, None when it has none (a lake opened without
    :func:`open_metadata`, such as a test's in-memory one)."""
    try:
        return Identity.decode(kv.get(keys.LAKE, keys.IDENTITY))
    except KeyNotFound:
        return None


def open_metadata(url: str, blocks: BlockAdapter, create: bool = False) -> tuple[KVStore, Identity]:
    """Open the KV store at ``url`` as the metadata of the lake whose blocks are in ``blocks``,
    by the rule of this module; ``create``: the caller asked for a new lake (over whatever blocks
    are there). ``StorageError`` when the database is missing or empty but blocks are stored."""
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else None
    if path is not None and not create and _missing_or_empty(path) and _holds_blocks(blocks):
        state = "missing" if not os.path.exists(path) else "empty"
        raise _refusal(f"{path} is {state}", path, blocks)
    kv = open_store(url)
    try:
        return kv, claim(kv, blocks, path or _without_password(url), create)
    except BaseException:
        kv.close()
        raise


def claim(kv: KVStore, blocks: BlockAdapter, database: str, create: bool = False) -> Identity:
    """The identity record of the lake in ``kv`` (metadata) and ``blocks``, written when missing
    by the rule of this module; ``database`` names the store in errors."""
    found = get(kv)
    if found is not None:
        return found
    if _holds_lake_records(kv):
        return _write(kv, Identity(uuid.uuid4().hex, int(time.time()), 0, Origin.ADOPTED))
    over = 0
    if _holds_blocks(blocks):
        if not create:
            raise _refusal(f"{database} holds no lake", database, blocks)
        over = sum(1 for _ in blocks.list())
    _journal_on(kv)
    return _write(kv, Identity(uuid.uuid4().hex, int(time.time()), over, Origin.CREATED))


def _journal_on(kv: KVStore) -> None:
    """A new lake journals from its first change (docs/journal.md): its setting is written
    before its identity, so that every process that opens it finds the journal on. A lake that
    exists keeps its setting; ``lakectl journal disable`` switches it off."""
    setting = json.dumps({"enabled": True, "since": int(time.time())}, sort_keys=True).encode()
    with contextlib.suppress(PredicateFailed):  # another process creating the lake wrote it first
        kv.set_if(keys.LAKE, keys.JOURNAL_SETTING, setting, None)


def clear_preexisting(kv: KVStore) -> None:
    """Forget that the lake was created over existing blocks (garbage collection may run)."""

    def attempt() -> Again | None:
        try:
            raw = kv.get(keys.LAKE, keys.IDENTITY)
        except KeyNotFound:
            return None
        current = Identity.decode(raw)
        if not current.created_over_blocks:
            return None
        try:
            kv.set_if(keys.LAKE, keys.IDENTITY, replace(current, created_over_blocks=0).encode(), raw)
        except PredicateFailed:
            return AGAIN
        return None

    retry(LAKE_IDENTITY, attempt, "the lake's identity record kept changing", error=StorageError)


def _write(kv: KVStore, identity: Identity) -> Identity:
    try:
        kv.set_if(keys.LAKE, keys.IDENTITY, identity.encode(), None)
    except PredicateFailed:  # another process opened the same new lake first: theirs it is
        written = get(kv)
        assert written is not None
        return written
    return identity


def _holds_lake_records(kv: KVStore) -> bool:
    if next(iter(kv.scan(keys.REPOSITORIES)), None) is not None:
        return True
    try:
        kv.get(keys.LAKE, keys.SIGNING_SECRET)
        return True
    except KeyNotFound:
        pass
    return bool(partitions(kv, ""))  # users of a server, staging left by deleted repositories...


def _holds_blocks(blocks: BlockAdapter) -> bool:
    return next(iter(blocks.list()), None) is not None


def _missing_or_empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except FileNotFoundError:
        return True
    except OSError as e:
        raise StorageError(f"cannot read the metadata database {path}: {e.strerror or e}", path=path) from e


def _refusal(what: str, database: str, blocks: BlockAdapter) -> StorageError:
    store = getattr(blocks, "root", None) or repr(blocks)
    return StorageError(
        f"the metadata database {what}, but the block store {store} holds blocks: it is no new lake, "
        "and a new database would take them for garbage. Restore the database (or point the lake "
        "at its own); to start a new lake over these blocks on purpose, create it explicitly "
        "(`lakectl init`; for a server, `lakectl server setup`)",
        database=database,
    )


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
