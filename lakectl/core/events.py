"""Events: what a mutating verb of the core is about to do, and what it did, for the consumers
that act on it (actions: hooks that may refuse a pre-event) and record it (the journal).

Every porcelain verb that mutates announces itself once through the lake's :class:`EventSink`:
``before(event)`` ahead of its final compare-and-swap (a sink may refuse by raising, and then
nothing has changed), ``after(event)`` once the change is done, with what it produced (a commit
id), or ``failed(event)`` when the verb raised after its ``before`` (:func:`announced`): its
change may or may not have happened. A sink never sees an ``after`` for which the change did not
happen. The default sink does
nothing, so a lake without consumers pays one call per verb.

Reads change nothing and are announced only when the lake audits them (``journal.reads``):
``before(Event(Verb.READ_OBJECT, ...))`` once per object read request, with no ``after`` (there
is no outcome); a sink that raises refuses the read.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol


class Verb(enum.Enum):
    """The mutating verbs, by lakeFS's event names where lakeFS has the event (``commit`` for
    pre-commit and post-commit); the others are journal-only."""

    COMMIT = "commit"
    MERGE = "merge"
    CREATE_BRANCH = "create-branch"
    DELETE_BRANCH = "delete-branch"
    CREATE_TAG = "create-tag"
    DELETE_TAG = "delete-tag"
    CREATE_REPOSITORY = "create-repository"
    DELETE_REPOSITORY = "delete-repository"
    WRITE_OBJECTS = "write-objects"
    DELETE_OBJECTS = "delete-objects"
    RESET = "reset"
    REVERT = "revert"
    CHERRY_PICK = "cherry-pick"
    SETTINGS = "settings"
    GARBAGE_COLLECTION = "garbage-collection"
    RESTORE_REFS = "restore-refs"
    PULL_REQUEST = "pull-request"
    """A pull request opened, changed, commented, reviewed or merged (``lakectl.core.workflow.pulls``)."""
    READ_OBJECT = "read-object"
    """Not a mutation: an audited read (``before`` only; see the module's docstring)."""
    AUTH = "auth"
    """A server's auth record (a user, a group, a policy, an access key...) stored or deleted,
    lake-wide (repository ""): journal-only (``lakectl.core.journal.records``)."""

    @property
    def has_hooks(self) -> bool:
        """lakeFS runs actions for this verb (pre-<verb> and post-<verb>)."""
        return self in HOOKED


HOOKED = frozenset(
    {
        Verb.COMMIT,
        Verb.MERGE,
        Verb.CREATE_BRANCH,
        Verb.DELETE_BRANCH,
        Verb.CREATE_TAG,
        Verb.DELETE_TAG,
    }
)


CARRIED = "carried"
"""The note of a verb whose change is one store transaction (a staged write): a list to which a
consumer's ``before`` may append a function of the staging tokens written so far that returns
``(partition, key, value)`` rows; each write of the verb stores them in its own transaction,
once its change is in (stored if and only if the change is). The journal's entry of a staged
write is so written done, with the write: one write transaction a write, not two."""

MAKING = "making"
"""The note of a verb that makes commits (commit, merge, revert, cherry-pick): a list to which a
consumer's ``before`` may append a function of a new commit, called with each commit record the
verb is about to publish, before any branch can name it (:func:`making`). The journal logs it
there: a later change may name a commit whose writer died before its outcome was logged, and a
rebuild after the loss of the metadata database must still find that commit."""


@dataclass(frozen=True, slots=True)
class Event:
    """One mutation. ``branch`` is the branch written (the destination of a merge); ``source_ref``
    the ref read from (a merge's source, a new branch's source, a tag's target); ``commit_id`` the
    commit produced (``after`` only; for a tag or a new branch, the commit it points to);
    ``payload`` what else a journal needs to replay the change (paths, locators, counts)."""

    verb: Verb
    repository: str
    branch: str = ""
    source_ref: str = ""
    commit_id: str = ""
    commit_message: str = ""
    committer: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""
    paths: Sequence[str] = ()
    payload: Mapping[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict, compare=False)
    """What a consumer carries from ``before`` to ``after`` of one verb (``done`` keeps this very
    dict): the actions' pre-event run id, so the run learns the commit it gated;
    :data:`CARRIED`; :data:`MAKING`."""

    def done(self, **changes: Any) -> Event:
        """This event as it ended: the same fields, with what the verb produced."""
        return replace(self, **changes)


class EventSink(Protocol):
    """A consumer of events. ``before`` may refuse the verb by raising a
    :class:`~lakectl.errors.LakectlError` (nothing has changed then); ``after`` must not raise:
    the change is done, whatever the consumer makes of it."""

    def before(self, event: Event) -> None: ...

    def after(self, event: Event) -> None: ...

    def failed(self, event: Event, error: BaseException) -> None:
        """The verb raised ``error`` after ``before``; its change may or may not have happened
        (a refusal such as ``AlreadyExists`` says it did not). Never raises."""
        ...


class NoEvents:
    """The sink of a lake without consumers."""

    def before(self, event: Event) -> None:
        pass

    def after(self, event: Event) -> None:
        pass

    def failed(self, event: Event, error: BaseException) -> None:
        pass


class Fanout:
    """Several sinks as one: ``before`` in order (the first refusal stops the verb), ``after`` to
    every sink."""

    def __init__(self, sinks: Sequence[EventSink]) -> None:
        self.sinks = tuple(sinks)

    def before(self, event: Event) -> None:
        for sink in self.sinks:
            sink.before(event)

    def after(self, event: Event) -> None:
        for sink in self.sinks:
            sink.after(event)

    def failed(self, event: Event, error: BaseException) -> None:
        for sink in self.sinks:
            sink.failed(event, error)


def hears_reads(sink: EventSink) -> bool:
    """Whether object reads are announced to ``sink`` (a lake's events): a consumer that audits
    them (the journal, with its ``reads`` setting on) says so by a true ``hears_reads``. A cached
    flag: no store is asked (docs/decisions/0009-journal.md)."""
    if isinstance(sink, Fanout):
        return any(hears_reads(each) for each in sink.sinks)
    return bool(getattr(sink, "hears_reads", False))


def release(sink: EventSink) -> None:
    """Let ``sink`` go as its lake closes: a sink that holds something for the lake's life (the
    journal: the intents of verbs that never ended, its writer's record) defines ``close``,
    called while the lake's store is still open."""
    if isinstance(sink, Fanout):
        for each in sink.sinks:
            release(each)
        return
    close = getattr(sink, "close", None)
    if close is not None:
        close()


def making(event: Event) -> Callable[[Any], None]:
    """What a verb that makes commits calls with each new commit before publishing it: every
    function consumers put in the event's :data:`MAKING` note (read at the call, after
    ``before``)."""

    def tell(commit: Any) -> None:
        for consumer in event.notes.get(MAKING, ()):
            consumer(commit)

    return tell


@contextmanager
def announced(sink: EventSink, event: Event) -> Iterator[None]:
    """``before`` the block that makes the change, and ``failed`` if it raises (the caller calls
    ``after`` once the block is done, with what it produced)."""
    sink.before(event)
    try:
        yield
    except BaseException as error:
        sink.failed(event, error)
        raise
