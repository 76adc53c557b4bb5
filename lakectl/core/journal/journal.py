"""The journal: every mutation of a lake, recorded and sealed in batches as Parquet
(docs/decisions/0009-journal.md).

A :class:`Journal` is an :class:`~lakectl.core.events.EventSink`. ``before`` stores an *intent*
under the writer's own KV partition (refusing the verb if it cannot), ``after`` overwrites it
with its *outcome*; a staged write instead stores its entry done, in the write's own
transaction. Before the verb returns, its done entry is also logged in the block store
(:class:`LogWriter`, :mod:`lakectl.core.journal.log`), so that an acknowledged change survives
the loss of the metadata database before it is sealed. :func:`seal` numbers done entries with
the lake's logical timestamps and stores them as one Parquet block per batch; :func:`entries`
reads the sealed journal back.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from lakectl.core import keys
from lakectl.core.blocks.data import block_locator
from lakectl.core.events import CARRIED, MAKING, Event, EventSink, Fanout, NoEvents, Verb
from lakectl.core.journal import log
from lakectl.core.journal.form import (
    DONE,
    PENDING,
    encode_header,
    extended_text,
    header_fields,
    json_bytes,
    json_text,
    live,
    live_from,
    open_ended,
    read_live,
)
from lakectl.core.journal.recovery import MAKES_COMMITS, decide
from lakectl.core.journal.seal import FOLLOW_INTERVAL, SEAL_BATCH, follow, last_timestamp, poll, seal, tail
from lakectl.core.journal.sealed import (
    BATCH,
    COLUMNS,
    MARK,
    READ_CHUNK,
    Entry,
    batches,
    entries,
    sealed_blocks,
)
from lakectl.core.journal.writers import writer_record
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix, set_many
from lakectl.core.kv.retry import AGAIN, SETTING, Again, retry
from lakectl.errors import (
    AlreadyExists,
    Conflict,
    DirtyBranch,
    Forbidden,
    HookFailed,
    InvalidArgument,
    KeyNotFound,
    LakectlError,
    NotFound,
    NothingToCommit,
    PredicateFailed,
    StorageError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lakectl.core.graph.staging import Carry
    from lakectl.core.lake import Lake
    from lakectl.core.model import Commit

CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("lakectl_journal_client", default="")
"""Who is mutating: the server sets the authenticated user per request; unset, the committer."""

SEAL_EVERY = 1000
"""A writer seals the journal after this many entries of its own."""
MAX_OPEN = 64
"""Open intents a thread keeps track of; older ones are left to recovery."""
SEAL_INTERVAL = 1.0
"""Seconds within which a writer seals what it finished (its keeper thread), besides on close."""
CLOSE_SEAL_WRITERS = 16
"""A closing writer seals when this many writers are registered (their entries in logs, not yet
sealed): a run of short commands seals once in so many, not once each."""
HEARTBEAT = 10.0
"""Seconds between two heartbeats of a writer in its registration record."""


def payload_of(event: Event) -> dict[str, Any]:
    """What a replay needs from an event: its non-empty fields and its payload."""
    out: dict[str, Any] = {}
    for name in ("branch", "source_ref", "commit_id", "commit_message", "committer", "tag"):
        value = getattr(event, name)
        if value:
            out[name] = value
    if event.metadata:
        out["metadata"] = dict(event.metadata)
    if event.paths:
        out["paths"] = list(event.paths)
    out.update(event.payload)
    return out


class GroupWriter:
    """Writes of many threads to one partition, made durable together (group commit): each
    caller returns once its own write is stored, and one thread writes every write queued by
    then in one transaction. Under concurrent requests, the journal takes the database's write
    lock once for many entries instead of once per entry (docs/decisions/0009)."""

    def __init__(self, kv: KVStore, partition: str) -> None:
        self.kv = kv
        self.partition = partition
        self._cond = threading.Condition()
        self._queue: list[tuple[str, bytes]] = []
        self._filling = 1
        """Number of the batch the queue fills."""
        self._stored = 0
        """Number of the last batch written (or failed)."""
        self._writing = False
        self._failed: dict[int, BaseException] = {}

    def write(self, key: str, value: bytes) -> None:
        """Store ``value`` at ``key``; raise what the store raised for the batch it was in."""
        self.write_many([(key, value)])

    def write_many(self, items: list[tuple[str, bytes]]) -> None:
        """Store ``items`` in one batch (or none of them); raise what the store raised for it."""
        if not items:
            return
        with self._cond:
            self._queue.extend(items)
            mine = self._filling
            while self._stored < mine and self._writing:
                self._cond.wait()
            if self._stored < mine:
                # No write in flight and ours not stored: this thread writes the queue.
                batch, self._queue = self._queue, []
                self._filling += 1
                self._writing = True
            else:
                batch = []
        if batch:
            failure: BaseException | None = None
            try:
                self._store(batch)
            except BaseException as e:  # every waiter learns it, and the next batch can start
                failure = e
            with self._cond:
                self._stored = mine
                self._writing = False
                if failure is not None:
                    self._failed[mine] = failure
                self._cond.notify_all()
        with self._cond:
            failed = self._failed.get(mine)
        if failed is not None:
            raise failed

    def _store(self, batch: list[tuple[str, bytes]]) -> None:
        if len(batch) == 1:
            self.kv.set(self.partition, *batch[0])
        else:
            set_many(self.kv, self.partition, batch)


class LogWriter(GroupWriter):
    """A writer's acknowledged entries made durable outside the metadata database before the
    answer (:mod:`lakectl.core.journal.log`): concurrent callers share one log record and one sync
    (group commit). In a local block directory the records are written one after the other
    into the writer's log file, made beforehand of zeros (:data:`log.FIRST_FILE_BYTES`,
    twice as many as the last file's once one fills, up to :data:`log.FILE_BYTES`) and
    opened ``O_DSYNC``: a record's write returns once it is durable, and its sync changes no
    metadata (the file's size and blocks are durable already), 0.10 ms here against 0.15 ms for
    an append and its ``fdatasync``. In other stores each record is a block. What is sealed is
    deleted (:meth:`retire`)."""

    def __init__(self, kv: KVStore, partition: str, blocks: Any, writer: str) -> None:
        super().__init__(kv, partition)
        self.blocks = blocks
        self.writer = writer
        self._folder = log.directory(blocks)
        self._file: int | None = None
        """The open log file's descriptor (its path is :attr:`_path`), None until the next write."""
        self._path = ""
        self._segment = 0
        self._offset = 0
        """Where the open log file's next record goes."""
        self._size = 0
        """The open log file's size: its records, then zeros."""
        self._next_size = log.FIRST_FILE_BYTES
        self._written: dict[str, list[str]] = {}
        """Log files (paths) or blocks (locators) of this writer not yet retired, and the keys
        of their entries."""
        self._files = threading.Lock()
        """Held by an append and by a retirement: a file is never deleted under a write."""

    def _store(self, batch: list[tuple[str, bytes]]) -> None:
        data = log.encode(self.writer, batch)
        with self._files:
            if self._folder is None:
                name = block_locator(data)
                self.blocks.put(name, data)
                self.blocks.sync()
            else:
                name = self._append(data)
            self._written.setdefault(name, []).extend(k for k, _ in batch)

    def _append(self, data: bytes) -> str:
        assert self._folder is not None
        try:
            if self._file is None or self._offset + len(data) > self._size:
                if self._file is not None:  # filled: a writer this busy gets bigger files
                    self._next_size = min(2 * self._next_size, log.FILE_BYTES)
                self._close()
                self._open(len(data))
            assert self._file is not None
            view = memoryview(data)
            while view:  # O_DSYNC: durable once written
                written = os.pwrite(self._file, view, self._offset)
                view = view[written:]
                self._offset += written
        except OSError as e:
            self._close()  # a record cut short ends that file: the next one starts afresh
            raise StorageError(f"cannot log the journal's entries in {self._folder}: {e}") from e
        return self._path

    def _open(self, least: int) -> None:
        """A new log file of zeros (``least`` bytes for a record bigger than the next file),
        durable with its name before its first record."""
        from lakectl.core.blocks.local import fsync_dir  # the log has a folder only in a local directory

        assert self._folder is not None
        if not os.path.isdir(self._folder):
            os.makedirs(self._folder, exist_ok=True)
            fsync_dir(os.path.dirname(self._folder))
        self._segment += 1
        self._path = os.path.join(self._folder, log.file_name(self.writer, self._segment))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DSYNC | os.O_CLOEXEC
        self._file = os.open(self._path, flags, 0o600)
        self._size = max(self._next_size, least)
        self._offset = 0
        zeros = memoryview(bytes(self._size))
        while zeros:
            zeros = zeros[os.pwrite(self._file, zeros, self._size - len(zeros)) :]
        fsync_dir(self._folder)

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.close(self._file)
            self._file = None

    def retire(self) -> None:
        """Delete the log files or blocks whose entries are sealed: gone from the writer's
        partition (a seal deletes an entry's live key once its batch is published)."""
        with self._files:
            if not self._written:
                return
            live = {key for key, _ in self.kv.scan(self.partition)}
            for name, written in list(self._written.items()):
                if not live.isdisjoint(written):
                    continue
                if self._folder is None:
                    self.blocks.delete(name)
                else:
                    if name == self._path:
                        self._close()  # the next record starts the next file
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name)
                del self._written[name]

    def close(self) -> None:
        with self._files:
            self._close()


LOGGED_INTENTS = frozenset({Verb.CREATE_BRANCH, Verb.CREATE_REPOSITORY})
"""Verbs whose intent is logged before their change, with what it creates: a later change may
name what they made before their outcome is logged (a write to a new branch or repository), and a
rebuild after
the database's loss must still have it. Verbs that make commits log each commit instead
(:meth:`Journal._made`)."""

Opened = tuple[tuple[str, ...], str, dict[str, Any], str, bytes]
"""An intent a thread keeps until its verb ends: the verb's identity, its key, record, payload
text and encoded header (see :func:`live`)."""


class Journal:
    """The journal's event sink for one process (one *writer*) of a lake."""

    def __init__(self, kv: KVStore, blocks: Any, writer: str | None = None, reads: bool = False) -> None:
        self.kv = kv
        self.blocks = blocks
        self.writer = writer or uuid.uuid4().hex[:16]
        self.reads = reads
        """Read auditing: the lake's ``journal.reads``, read when the lake was opened (or enabled)."""
        self.partition = keys.journal_live_partition(self.writer)
        # Guards this process's clock and sequence only, never shared metadata.
        self._lock = threading.Lock()
        self._clock = 0
        self._seq = 0
        self._registered = False
        self._open = threading.local()
        self._group = GroupWriter(kv, self.partition)
        self._log = LogWriter(kv, self.partition, blocks, self.writer)
        self._client = ""
        self._opened: set[str] = set()
        """Keys of intents whose verb has not ended, in every thread."""
        self._unsealed = 0
        """Entries this writer finished since it last sealed."""
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None
        self._kept = False
        """Whether the keeper ran a round: a writer that lives that long seals as it closes."""
        self._sealing = threading.Lock()
        """Held through a seal: a flush waits for the keeper's seal in flight to end."""

    @property
    def hears_reads(self) -> bool:
        """Whether the lake announces object reads to it (:func:`lakectl.core.events.hears_reads`)."""
        return self.reads

    def _default_client(self) -> str:
        # Embedded, one process is one user: the committer, looked up once.
        if not self._client:
            from lakectl.core.lake import default_committer

            self._client = default_committer()
        return self._client

    def _tick(self) -> tuple[int, int]:
        with self._lock:
            self._clock = max(self._clock + 1, time.time_ns() // 1000)
            self._seq += 1
            return self._clock, self._seq

    def _stack(self) -> list[Opened]:
        stack: list[Opened] | None = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        return stack

    def _withdraw(self, key: str) -> None:
        with self._lock:
            self._opened.discard(key)
        self._quietly(lambda: self.kv.delete(self.partition, key))

    def failed(self, event: Event, error: BaseException) -> None:
        """The verb raised after its intent: a refusal (the verb's own checks, a lost
        compare-and-swap) changed nothing, and its intent is withdrawn; after any other error
        the change may have landed, and the intent is decided from the lake, as recovery decides
        a dead writer's (:mod:`lakectl.core.journal.recovery`)."""
        if CARRIED in event.notes:
            # A staged write stores its entry, done, with each of its writes: whatever landed
            # has its entry, and nothing else has one. Not acknowledged: not logged.
            event.notes.pop(STORED, None)
            self._finished()
            return
        stack = self._stack()
        which = _identity(event)
        found = [i for i, opened in enumerate(stack) if opened[0] == which]
        if not found:
            return
        key, record = stack.pop(found[-1])[1:3]
        if isinstance(error, REFUSALS):
            self._withdraw(key)
        else:
            self._decide(key, record)

    def _decide(self, key: str, record: dict[str, Any]) -> None:
        from lakectl.core.lake import Lake

        with self._lock:
            self._opened.discard(key)
        outcome = None
        with contextlib.suppress(LakectlError):
            outcome = decide(Lake(kv=self.kv, blocks=self.blocks), record)
        if outcome is None:
            self._quietly(lambda: self.kv.delete(self.partition, key))
            return
        done = {**record, "state": DONE, "event_payload": outcome, "recovered": True}
        self._quietly(lambda: self._group.write(key, live(done)))
        self._finished()

    def close(self) -> None:
        """Decide the intents of verbs that raised and so never ended (a lake is closed only
        once no verb runs on it; a refused ``lakectl commit`` leaves nothing behind), seal what
        this writer finished, and unregister it once nothing of it is left.

        What this writer acknowledged is in its log already: sealing it now is not needed for a
        rebuild, and costs a short command a tenth of a second (pyarrow's Parquet writer). So a
        writer that lived less than its keeper's first round (a short command) leaves its
        entries to the next seal (any writer's keeper, ``journal tail``, ``fsck``, ``gc``, or a
        later close) unless :data:`CLOSE_SEAL_WRITERS` writers wait already, or it decided
        intents here (changes never acknowledged, so never logged). A server seals as it stops."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join()
            self._keeper = None
        with self._lock:
            opened = sorted(self._opened)
        for key in opened:
            with contextlib.suppress(LakectlError):
                self._decide(key, read_live(self.kv.get(self.partition, key)))
        if self._registered and (opened or self._kept or self._waiting() >= CLOSE_SEAL_WRITERS):
            self._quietly(self._seal)
            self._quietly(self._log.retire)
            self._quietly(self._unregister)
        elif self._registered:
            # A refused verb's intent may have been logged (a branch's creation): withdrawn, its
            # log goes too. What waits for the next seal keeps its log.
            self._quietly(self._log.retire)
            self._quietly(self._unregister)  # nothing of it left (its verbs were all refused)
            if self._registered:  # entries left for the next seal: recovery lets it go after
                self._quietly(self._closed)
        self._log.close()

    def _closed(self) -> None:
        self.kv.set(
            keys.JOURNAL,
            keys.journal_writer_key(self.writer),
            json_bytes({**writer_record(), "closed": True}),
        )

    def _waiting(self) -> int:
        """How many writers are registered: every command that changed the lake since the last
        seal is one until a seal took its entries and recovery let it go."""
        try:
            return sum(1 for _ in scan_prefix(self.kv, keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX))
        except LakectlError:
            return CLOSE_SEAL_WRITERS

    def _register(self) -> None:
        self.kv.set(keys.JOURNAL, keys.journal_writer_key(self.writer), json_bytes(writer_record()))
        self._registered = True
        self._stop.clear()
        self._keeper = threading.Thread(target=self._keep, name=f"journal-{self.writer}", daemon=True)
        self._keeper.start()

    def _unregister(self) -> None:
        if next(iter(self.kv.scan(self.partition)), None) is None:
            self.kv.delete(keys.JOURNAL, keys.journal_writer_key(self.writer))
            self._registered = False

    def _seal(self) -> None:
        with self._sealing:
            with self._lock:
                pending, self._unsealed = self._unsealed, 0
            if pending:
                try:
                    seal(self.kv, self.blocks)
                except LakectlError:
                    with self._lock:
                        self._unsealed += pending  # the next look tries again
                    raise

    def _keep(self) -> None:
        """The writer's keeper: seals what it finished within :data:`SEAL_INTERVAL` (so that a
        rebuild misses at most that much of a writer that dies with the database) and renews
        the heartbeat by which writers on other hosts tell that it lives."""
        beat = time.monotonic()
        while not self._stop.wait(SEAL_INTERVAL):
            self._kept = True
            self._quietly(self._seal)
            self._quietly(self._log.retire)  # what this seal or another sealer sealed
            if time.monotonic() - beat >= HEARTBEAT:
                beat = time.monotonic()
                self._quietly(self._beat)

    def _beat(self) -> None:
        self.kv.set(keys.JOURNAL, keys.journal_writer_key(self.writer), json_bytes(writer_record()))

    def _record(self, event: Event, state: str) -> tuple[str, dict[str, Any], str, bytes]:
        """The entry's key, its record, its payload's JSON text and its encoded header."""
        if not self._registered:
            self._register()
        clock, seq = self._tick()
        payload = payload_of(event)
        record = {
            "state": state,
            "time": clock,
            "writer": self.writer,
            "seq": seq,
            "client_id": CLIENT.get() or self._default_client(),
            "repo_id": event.repository,
            "event_type": event.verb.value,
            "event_payload": payload,
        }
        return f"{clock:016x}-{seq:012x}", record, json_text(payload), encode_header(record)

    def before(self, event: Event) -> None:
        """Store the intent; raising here refuses the verb with nothing changed. A staged write
        (:data:`~lakectl.core.events.CARRIED`) stores no intent: each of its writes stores its
        entry, done, in the write's own transaction (:meth:`_carrier`). A read (only announced
        when the lake audits reads) is stored as done at once: it changes nothing, so there is
        no outcome to wait for, and a read whose entry cannot be stored is refused."""
        if event.verb is Verb.READ_OBJECT:
            key, _, text, header = self._record(event, DONE)
            self._group.write(key, live_from(DONE, header, text))
            self._finished()
            return
        carried: list[Carry] | None = event.notes.get(CARRIED)
        if carried is not None:
            key, record, text, _ = self._record(event, DONE)
            stored: dict[str, bytes] = {}
            event.notes[STORED] = stored
            carried.append(self._carrier(key, record, text, stored))
            return
        key, record, text, header = self._record(event, PENDING)
        stack = self._stack()
        which = _identity(event)
        # A thread runs a verb to its end before the next: an open intent of the same verb on
        # the same target was refused (or is being retried), so it describes nothing.
        if any(opened[0] == which for opened in stack):
            for opened in stack:
                if opened[0] == which:
                    self._withdraw(opened[1])
            stack[:] = [s for s in stack if s[0] != which]
        del stack[:-MAX_OPEN]
        self._group.write(key, live_from(PENDING, header, text))
        if event.verb in LOGGED_INTENTS:
            # Later changes may build on it (writes to the new branch) before its outcome is
            # logged: a rebuild decides it by them (rebuild.py). Raising refuses the verb.
            self._log.write(key, live_from(PENDING, header, text))
        with self._lock:
            self._opened.add(key)
        stack.append((which, key, record, text, header))
        if event.verb in MAKES_COMMITS:
            event.notes.setdefault(MAKING, []).append(functools.partial(self._made, key, record, header))

    def _made(self, key: str, record: dict[str, Any], header: bytes, commit: Commit) -> None:
        """Log a commit its verb is about to publish, under the verb's intent (still pending):
        a later change may name it (a merge, the next commit) although its writer dies before
        logging the outcome, and a rebuild must then find its record (:mod:`.rebuild`). Raising
        here refuses the verb: no branch names the commit yet."""
        made = {**record["event_payload"], "commit_id": commit.id, "commit": commit.encode().decode()}
        self._log.write(key, live_from(PENDING, header, json_text(made)))

    def _carrier(self, key: str, record: dict[str, Any], text: str, stored: dict[str, bytes]) -> Carry:
        """A staged write's entry as each of its writes stores it, in the write's transaction once
        its rows are in: done, with the tokens written so far and the clock of each write
        (``settled``, ``settled_in``), read inside the transaction. Two writes of one path land
        in the order of those clocks (docs/decisions/0009-journal.md, "Concurrent writers"),
        and an entry is stored if and only if its write landed: nothing is ever pending. The
        last entry made is kept in ``stored``, for the log (:meth:`after`)."""
        close = open_ended(DONE, header_fields(record), text)
        settled: dict[str, int] = {}

        def carry(tokens: Sequence[str]) -> list[tuple[str, str, bytes]]:
            settled[tokens[-1]] = time.time_ns()
            added: dict[str, Any] = {"tokens": list(tokens), "settled": settled[tokens[-1]]}
            if len(settled) > 1:
                added["settled_in"] = dict(settled)
            # A write redone (a commit took its token) stores its entry again, with every token
            # so far, under a key of its own: a sealer may have sealed the first one already,
            # and the key it deleted must not be written again (the sealer's next run deletes
            # that key once more). A sealer that sees both seals the last (journal/seal.py).
            attempt = len(tokens)
            made = (key if attempt == 1 else f"{key}.{attempt}", close(added))
            stored.clear()  # a later attempt supersedes the earlier ones (journal/seal.py)
            stored[made[0]] = made[1]
            return [(self.partition, *made)]

        return carry

    def after(self, event: Event) -> None:
        """Store the outcome over the intent, and log it in the block store (a staged write's
        entry is stored already, with the write: it is logged). The change is done, so nothing
        raises here but the log: a change whose entry cannot be made durable outside the
        metadata database is not acknowledged (``StorageError``), although it landed."""
        if CARRIED in event.notes:
            stored: dict[str, bytes] = event.notes.pop(STORED, {})
            self._finished()
            self._log.write_many(list(stored.items()))
            return
        stack = self._stack()
        which = _identity(event)
        found = [i for i, opened in enumerate(stack) if opened[0] == which]
        if not found:
            return
        _, key, record, text, header = stack.pop(found[-1])
        outcome = live_from(DONE, header, extended_text(text, record["event_payload"], payload_of(event)))
        with self._lock:
            self._opened.discard(key)
        # Not stored: its intent stays pending for recovery, and the change is not acknowledged.
        self._group.write(key, outcome)
        self._finished()
        self._log.write(key, outcome)

    def _finished(self) -> None:
        """One more entry of this writer done: sealed once :data:`SEAL_EVERY` of them wait."""
        with self._lock:
            self._unsealed += 1
            due = self._unsealed >= SEAL_EVERY
        if due:
            self._quietly(self._seal)

    @staticmethod
    def _quietly(action: Any) -> None:
        # An outcome that cannot be stored leaves its intent pending, for recovery to resolve.
        with contextlib.suppress(LakectlError):
            action()


STORED = "journal.stored"
"""The note in which a staged write's journal entry, as its last write stored it, waits for
:meth:`Journal.after` to log it."""

REFUSALS = (InvalidArgument, NotFound, AlreadyExists, Conflict, Forbidden, PredicateFailed, DirtyBranch,
            NothingToCommit, HookFailed)  # fmt: skip
"""What a verb raises when it refused: nothing of its change landed."""


def _identity(event: Event) -> tuple[str, ...]:
    """What ``before`` and ``after`` of one verb share (``done`` adds only what it produced)."""
    return (event.verb.value, event.repository, event.branch, event.tag, event.source_ref)


# -- the lake's setting ---------------------------------------------------------------------


def _setting(kv: KVStore) -> tuple[dict[str, Any], bytes | None]:
    try:
        raw = kv.get(keys.LAKE, keys.JOURNAL_SETTING)
    except KeyNotFound:
        return {}, None
    return json.loads(raw), raw


def is_enabled(kv: KVStore) -> bool:
    return bool(_setting(kv)[0].get("enabled"))


def install(lake: Lake) -> None:
    """Install the journal on an opened lake when the lake has it switched on, auditing reads
    when its setting says so (``journal.reads``)."""
    setting = _setting(lake.kv)[0]
    if not setting.get("enabled"):
        return
    found = find(lake.events)
    if found is not None:
        found.reads = bool(setting.get("reads"))
        return
    journal = Journal(lake.kv, lake.blocks, reads=bool(setting.get("reads")))
    current: EventSink = lake.events
    # Last in line: the intent is written once every other consumer has let the verb go.
    lake.events = journal if isinstance(current, NoEvents) else Fanout([current, journal])


def audits_reads(sink: EventSink) -> bool:
    """Whether object reads are announced to ``sink`` (a lake's events): the journal is on and
    its ``reads`` setting too. A cached flag: no store is asked (docs/decisions/0009)."""
    found = find(sink)
    return found is not None and found.reads


def find(sink: EventSink) -> Journal | None:
    """The journal among ``sink`` (a lake's events), None when it is off."""
    if isinstance(sink, Journal):
        return sink
    if isinstance(sink, Fanout):
        return next((j for j in map(find, sink.sinks) if j is not None), None)
    return None


def release(lake: Lake) -> None:
    """What the lake's journal holds for verbs that never ended, let go as the lake closes."""
    found = find(lake.events)
    if found is not None:
        found.close()


def flush(lake: Lake) -> None:
    """Seal now what the lake's writer finished (its keeper would within a second), and delete
    its log blocks whose entries are sealed."""
    found = find(lake.events)
    if found is not None:
        found._seal()
        found._log.retire()


def enable(lake: Lake, reads: bool | None = None) -> dict[str, Any]:
    """Switch the journal on for the lake (idempotent); ``reads`` switches read auditing on or
    off (None: as it is). This process follows the setting from now on; other processes from
    their next opening of the lake. Returns ``{"enabled", "since", "reads"}``."""

    def attempt() -> dict[str, Any] | Again:
        setting, raw = _setting(lake.kv)
        on = raw is not None and bool(setting.get("enabled"))
        # Switched on again after `journal disable`: it journals from now, with a gap before.
        wanted = dict(setting) if on else {**setting, "enabled": True, "since": int(time.time())}
        if reads is not None:
            wanted["reads"] = reads
        if raw is not None and wanted == setting:
            return wanted
        try:
            lake.kv.set_if(keys.LAKE, keys.JOURNAL_SETTING, json_bytes(wanted), raw)
        except PredicateFailed:
            return AGAIN  # another process changed the setting meanwhile: apply ours over it
        return wanted

    wanted = retry(SETTING, attempt, "could not change the journal's setting: it kept changing")
    install(lake)
    return {**wanted, "reads": bool(wanted.get("reads"))}


def disable(lake: Lake) -> dict[str, Any]:
    """Switch the journal off for the lake (idempotent): this process seals what it journalled
    and stops; other processes stop at their next opening of the lake. What is sealed stays (the
    audit trail), but a rebuild can no longer give back the changes made from now on. Returns
    ``{"enabled", "since", "reads"}``."""

    def attempt() -> Again | None:
        setting, raw = _setting(lake.kv)
        if raw is not None and not setting.get("enabled"):
            return None
        wanted = {**setting, "enabled": False}
        try:
            lake.kv.set_if(keys.LAKE, keys.JOURNAL_SETTING, json_bytes(wanted), raw)
        except PredicateFailed:
            return AGAIN
        return None

    retry(SETTING, attempt, "could not change the journal's setting: it kept changing")
    found = find(lake.events)
    if found is not None:
        with contextlib.suppress(LakectlError):  # else the next seal takes them, as after a close
            flush(lake)  # what it journalled while on, sealed now rather than by another process
        found.close()
        sinks = lake.events.sinks if isinstance(lake.events, Fanout) else ()
        rest = [sink for sink in sinks if sink is not found]
        lake.events = rest[0] if len(rest) == 1 else Fanout(rest) if rest else NoEvents()
    setting = _setting(lake.kv)[0]
    return {"enabled": False, "since": int(setting.get("since", 0)), "reads": bool(setting.get("reads"))}


__all__ = [
    "BATCH",
    "CLIENT",
    "COLUMNS",
    "DONE",
    "FOLLOW_INTERVAL",
    "MARK",
    "PENDING",
    "READ_CHUNK",
    "SEAL_BATCH",
    "Entry",
    "Journal",
    "batches",
    "entries",
    "follow",
    "last_timestamp",
    "poll",
    "seal",
    "sealed_blocks",
    "tail",
]
