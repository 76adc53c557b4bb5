"""Pull requests: a proposal to merge one branch into another, with its discussion, reviews and
checks, and the one merge that honours them.

A pull request is a KV record in its repository's partition (:mod:`lakectl.core.keys`), numbered
in order of creation (``1``, ``2``, ...; lakeFS's ids are text, and these are too). Its comments
and reviews are records of their own beside it, so commenting never races a status change. A
review is a reviewer's latest verdict, with the source branch's head at that moment: a later
commit on the source makes it *stale*, and only fresh approvals by others than the author count.

The checks shown are the actions runs of the source branch's head commit
(:mod:`lakectl.core.workflow.actionruns`): a failed one holds the merge back, but the source's author
chose them, so they never satisfy a rule. A branch protection rule (:mod:`lakectl.core.protection`)
sets what a merge needs: ``required_approvals`` and ``required_checks``, the checks being the
destination's own pre-merge actions, committed at its head (the merge runs them, from there,
whatever the source did to ``_lakefs_actions/``); :func:`gate` says what is missing, and
:func:`merge_pull` refuses (``PreconditionFailed``, with the reasons) until nothing is.

Every change announces one ``Verb.PULL_REQUEST`` event whose payload lists the records written
(``writes: [[key, record or null], ...]``), so the journal replays pull requests as it replays
refs.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

from lakectl.core import keys, protection
from lakectl.core.events import Event, Verb, announced
from lakectl.core.graph.refs import check_branch_name
from lakectl.core.kv.helpers import update_with_retries
from lakectl.core.kv.retry import AGAIN, SETTING, Again, retry
from lakectl.core.limits import check_name, check_text
from lakectl.core.model import RepositoryId
from lakectl.core.workflow import actionruns
from lakectl.errors import (
    AlreadyExists,
    Forbidden,
    InvalidArgument,
    KeyNotFound,
    NotFound,
    PreconditionFailed,
    PredicateFailed,
)

if TYPE_CHECKING:
    from lakectl.core.lake import Lake

MAX_TITLE_BYTES = 1024
MAX_TEXT_BYTES = 64 * 1024
MAX_AMOUNT = 1000
DEFAULT_AMOUNT = 100


class PullStatus(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


class StatusFilter(enum.Enum):
    """What a listing shows: lakeFS's ``open``, ``closed`` (closed or merged) and ``all``, and
    ``merged`` alone."""

    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"
    ALL = "all"

    def admits(self, status: PullStatus) -> bool:
        if self is StatusFilter.ALL:
            return True
        if self is StatusFilter.CLOSED:
            return status is not PullStatus.OPEN
        return bool(status.value == self.value)


class Verdict(enum.Enum):
    APPROVED = "approved"
    CHANGES_REQUESTED = "changes_requested"


def rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(value: Any) -> int:
    """Epoch seconds from a record's date: an int, or lakeFS's RFC 3339 text."""
    if isinstance(value, int):
        return value
    return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())


@dataclass(frozen=True, slots=True)
class PullRequest:
    """One pull request; :meth:`to_dict` is lakeFS's ``PullRequest`` shape."""

    id: str
    status: PullStatus
    title: str
    description: str
    author: str
    source_branch: str
    destination_branch: str
    creation_date: int
    closed_date: int | None = None
    merged_commit_id: str = ""

    @property
    def number(self) -> int:
        return int(self.id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status.value,
            "title": self.title,
            "description": self.description,
            "author": self.author,
            "source_branch": self.source_branch,
            "destination_branch": self.destination_branch,
            "creation_date": rfc3339(self.creation_date),
        }
        if self.merged_commit_id:
            out["merged_commit_id"] = self.merged_commit_id
        if self.closed_date is not None:
            out["closed_date"] = rfc3339(self.closed_date)
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> PullRequest:
        closed = d.get("closed_date")
        return PullRequest(
            str(d["id"]),
            PullStatus(d["status"]),
            str(d["title"]),
            str(d.get("description") or ""),
            str(d["author"]),
            str(d["source_branch"]),
            str(d["destination_branch"]),
            _seconds(d["creation_date"]),
            _seconds(closed) if closed is not None else None,
            str(d.get("merged_commit_id") or ""),
        )


@dataclass(frozen=True, slots=True)
class Comment:
    id: str
    author: str
    body: str
    creation_date: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "author": self.author,
            "body": self.body,
            "creation_date": rfc3339(self.creation_date),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Comment:
        return Comment(str(d["id"]), str(d["author"]), str(d["body"]), _seconds(d["creation_date"]))


@dataclass(frozen=True, slots=True)
class Review:
    """A reviewer's latest verdict, and the source head it was given on."""

    reviewer: str
    verdict: Verdict
    commit_id: str
    creation_date: int
    stale: bool = False
    """The source branch has moved since (set when read, never stored)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "reviewer": self.reviewer,
            "verdict": self.verdict.value,
            "commit_id": self.commit_id,
            "creation_date": rfc3339(self.creation_date),
            "stale": self.stale,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Review:
        return Review(
            str(d["reviewer"]),
            Verdict(d["verdict"]),
            str(d["commit_id"]),
            _seconds(d["creation_date"]),
            bool(d.get("stale", False)),
        )


@dataclass(frozen=True, slots=True)
class Check:
    """One actions run of the source head, as a check: its action run id, event and status."""

    run_id: str
    event_type: str
    status: str

    @property
    def passed(self) -> bool:
        return self.status == actionruns.COMPLETED

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "event_type": self.event_type, "status": self.status}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Check:
        return Check(str(d["run_id"]), str(d["event_type"]), str(d["status"]))


@dataclass(frozen=True, slots=True)
class Gate:
    """What a merge of the pull request needs now, and what it has."""

    source_commit_id: str
    required_approvals: int
    approvals: tuple[str, ...]
    """Reviewers whose approval counts: fresh, not the author's."""
    required_checks: bool
    checks: tuple[Check, ...]
    reasons: tuple[str, ...]
    """Why a merge is refused now; empty when it may go ahead."""
    destination_checks: tuple[str, ...] = ()
    """The destination's pre-merge actions (committed at its head) a merge into a protected
    branch runs, and that must pass: the checks a rule's ``required_checks`` asks for."""
    destination_commit_id: str = ""
    """The destination's head the gate read: :func:`merge_pull` merges onto that head only."""

    @property
    def mergeable(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_commit_id": self.source_commit_id,
            "required_approvals": self.required_approvals,
            "approvals": list(self.approvals),
            "required_checks": self.required_checks,
            "checks": [c.to_dict() for c in self.checks],
            "destination_checks": list(self.destination_checks),
            "destination_commit_id": self.destination_commit_id,
            "mergeable": self.mergeable,
            "reasons": list(self.reasons),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Gate:
        return Gate(
            str(d["source_commit_id"]),
            int(d["required_approvals"]),
            tuple(str(a) for a in d["approvals"]),
            bool(d["required_checks"]),
            tuple(Check.from_dict(c) for c in d["checks"]),
            tuple(str(r) for r in d["reasons"]),
            tuple(str(c) for c in d.get("destination_checks", ())),
            str(d.get("destination_commit_id") or ""),
        )


# -- records in the KV store ------------------------------------------------------------------


def _partition(lake: Lake, repo: str) -> tuple[RepositoryId, str]:
    from lakectl.core.porcelain import get_repo

    rid = get_repo(lake, repo).name  # RepositoryNotFound
    return rid, keys.repo_partition(rid)


def parse_id(text: str) -> int:
    """A pull request number from its id (``"12"``; lakeFS's path parameter)."""
    if (
        not isinstance(text, str)
        or not text.isascii()
        or not text.isdigit()
        or len(text) > 10
        or int(text) < 1
    ):
        raise InvalidArgument(f"invalid pull request id {text!r}: a positive whole number")
    return int(text)


def _encode(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def _load(lake: Lake, part: str, number: int, repo: str) -> tuple[PullRequest, bytes]:
    try:
        raw = lake.kv.get(part, keys.pull_key(number))
    except KeyNotFound:
        raise NotFound(f"no pull request {number} in repository {repo!r}", pull_request=str(number)) from None
    return PullRequest.from_dict(json.loads(raw)), raw


def _announce(
    lake: Lake, rid: RepositoryId, action: str, pull: str, writes: Sequence[tuple[str, Any]]
) -> Event:
    return Event(
        Verb.PULL_REQUEST,
        rid,
        payload={"action": action, "pull_request": pull, "writes": [[k, v] for k, v in writes]},
    )


def _next_number(lake: Lake, part: str, key: str) -> int:
    def bump(old: bytes | None) -> bytes:
        return str(int(old or b"0") + 1).encode()

    return int(update_with_retries(lake.kv, part, key, bump))


def _check_title(title: str) -> str:
    title = check_name(
        title.strip() if isinstance(title, str) else title, "pull request title", MAX_TITLE_BYTES
    )
    if not title:
        raise InvalidArgument("a pull request needs a title")
    return title


def _check_body(text: str, what: str) -> str:
    return check_text(text, what, MAX_TEXT_BYTES)


# -- the verbs -------------------------------------------------------------------------------


def create_pull(
    lake: Lake, repo: str, title: str, source: str, destination: str, description: str = "", author: str = ""
) -> PullRequest:
    """Open a pull request from ``source`` into ``destination`` (both existing branches, not the
    same one, with no other open pull request between them: ``AlreadyExists``)."""
    from lakectl.core.lake import default_committer, now

    rid, part = _partition(lake, repo)
    title, description = _check_title(title), _check_body(description, "pull request description")
    src, dst = check_branch_name(source), check_branch_name(destination)
    if src == dst:
        raise InvalidArgument(f"a pull request merges one branch into another, not {src!r} into itself")
    for branch in (src, dst):
        lake.refs.get_branch(rid, branch)  # BranchNotFound
    author = check_name(author or default_committer(), "author")
    # Refused before a number is taken (a refused request changes nothing); _claim decides races.
    _refuse_if_open(lake, part, repo, keys.pull_open_key(src, dst), "")
    event = _announce(lake, rid, "create", "", [])
    with announced(lake.events, event):
        number = _next_number(lake, part, keys.PULL_SEQUENCE)
        pull = PullRequest(str(number), PullStatus.OPEN, title, description, author, src, dst, now())
        record = pull.to_dict()
        key = keys.pull_key(number)
        lake.kv.set_if(part, key, _encode(record), None)
        try:
            claimed = _claim(lake, part, repo, pull)
        except BaseException:
            lake.kv.delete(part, key)  # another one is open between the branches: this one never was
            raise
    writes = [(keys.PULL_SEQUENCE, str(number)), (key, record), claimed]
    lake.events.after(event.done(payload={**event.payload, "pull_request": pull.id, "writes": writes}))
    return pull


def _claim(lake: Lake, part: str, repo: str, pull: PullRequest) -> tuple[str, str]:
    """Mark ``pull`` (already stored as open) as the open pull request between its branches;
    ``AlreadyExists`` while another one is. A mark naming a pull request that is no longer open,
    or was never stored, is stale and taken over. Returns the write, for the journal.

    The record is open before it is marked, and undone by the caller when the mark is refused:
    of two racing openers, the second to mark finds the first open and gives way."""
    key = keys.pull_open_key(pull.source_branch, pull.destination_branch)

    def attempt() -> tuple[str, str] | Again:
        held = _refuse_if_open(lake, part, repo, key, pull.id)
        try:
            lake.kv.set_if(part, key, pull.id.encode(), held)
            return key, pull.id
        except PredicateFailed:
            return AGAIN

    return retry(SETTING, attempt, f"could not mark pull request {pull.id} open: too many concurrent changes")


def _refuse_if_open(lake: Lake, part: str, repo: str, key: str, mine: str) -> bytes | None:
    """The open mark ``key`` as stored (None: none); ``AlreadyExists`` when it names an open
    pull request other than ``mine``."""
    try:
        held = lake.kv.get(part, key)
    except KeyNotFound:
        return None
    if held.decode() != mine:
        try:
            other: PullRequest | None = _load(lake, part, int(held), repo)[0]
        except NotFound:
            other = None
        if other is not None and other.status is PullStatus.OPEN:
            raise AlreadyExists(
                f"pull request {other.id} from {other.source_branch!r} into "
                f"{other.destination_branch!r} is already open",
                pull_request=other.id,
            )
    return held


def _scan(lake: Lake, part: str, after: int = 0) -> Iterator[PullRequest]:
    start = keys.pull_key(after + 1) if after else keys.PULL_PREFIX
    for key, raw in lake.kv.scan(part, start):
        if not key.startswith(keys.PULL_PREFIX):
            return
        yield PullRequest.from_dict(json.loads(raw))


def get_pull(lake: Lake, repo: str, pull_id: str) -> PullRequest:
    _, part = _partition(lake, repo)
    return _load(lake, part, parse_id(pull_id), repo)[0]


def iter_pulls(
    lake: Lake, repo: str, status: StatusFilter = StatusFilter.ALL, prefix: str = "", after: str = ""
) -> Iterator[PullRequest]:
    """The pull requests in number order after the id ``after``, whose id starts with
    ``prefix`` and whose status ``status`` admits."""
    _, part = _partition(lake, repo)
    start = parse_id(after) if after else 0
    for pull in _scan(lake, part, start):
        if pull.id.startswith(prefix) and status.admits(pull.status):
            yield pull


def list_pulls(
    lake: Lake,
    repo: str,
    status: StatusFilter = StatusFilter.ALL,
    prefix: str = "",
    after: str = "",
    amount: int | None = None,
) -> tuple[list[PullRequest], bool]:
    """One page of :func:`iter_pulls`, and whether more follow."""
    limit = DEFAULT_AMOUNT if amount is None or amount <= 0 else min(amount, MAX_AMOUNT)
    taken = list(islice(iter_pulls(lake, repo, status, prefix, after), limit + 1))
    return taken[:limit], len(taken) > limit


def update_pull(
    lake: Lake,
    repo: str,
    pull_id: str,
    title: str | None = None,
    description: str | None = None,
    status: PullStatus | None = None,
) -> PullRequest:
    """Change the title, the description, or close or reopen (``status`` open/closed); a merged
    pull request keeps its status (``PreconditionFailed``), and one is reopened only while no
    other is open between the same branches (``AlreadyExists``)."""
    from lakectl.core.lake import now

    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    new_title = _check_title(title) if title is not None else None
    new_text = _check_body(description, "pull request description") if description is not None else None
    if status is PullStatus.MERGED:
        raise InvalidArgument("a pull request is merged by merging it, not by setting its status")
    reopened = False

    def change(old: bytes | None) -> bytes:
        nonlocal reopened
        if old is None:
            raise NotFound(f"no pull request {number} in repository {repo!r}", pull_request=str(number))
        pull = PullRequest.from_dict(json.loads(old))
        reopened = status is PullStatus.OPEN and pull.status is PullStatus.CLOSED
        if status is not None and status is not pull.status:
            if pull.status is PullStatus.MERGED:
                raise PreconditionFailed(
                    f"pull request {pull.id} is merged: it can no longer be closed or reopened"
                )
            if status is PullStatus.OPEN:
                for branch in (pull.source_branch, pull.destination_branch):
                    lake.refs.get_branch(rid, check_branch_name(branch))  # a deleted branch cannot merge
            closed = now() if status is PullStatus.CLOSED else None
            pull = replace(pull, status=status, closed_date=closed)
        pull = replace(
            pull,
            title=new_title if new_title is not None else pull.title,
            description=new_text if new_text is not None else pull.description,
        )
        return _encode(pull.to_dict())

    key = keys.pull_key(number)
    event = _announce(lake, rid, "update", str(number), [])
    with announced(lake.events, event):
        raw = update_with_retries(lake.kv, part, key, change)
        record = json.loads(raw)
        writes: list[tuple[str, Any]] = [(key, record)]
        if reopened:
            try:
                writes.append(_claim(lake, part, repo, PullRequest.from_dict(record)))
            except BaseException:
                closed = replace(PullRequest.from_dict(record), status=PullStatus.CLOSED, closed_date=now())
                lake.kv.set_if(part, key, _encode(closed.to_dict()), raw)  # undone: still closed
                raise
    lake.events.after(event.done(payload={**event.payload, "writes": writes}))
    return PullRequest.from_dict(record)


def add_comment(lake: Lake, repo: str, pull_id: str, body: str, author: str = "") -> Comment:
    """Comment on a pull request (open or not: a merged one can still be discussed)."""
    from lakectl.core.lake import default_committer, now

    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    body = _check_body(body, "comment")
    if not body.strip():
        raise InvalidArgument("a comment needs some text")
    _load(lake, part, number, repo)
    author = check_name(author or default_committer(), "author")
    event = _announce(lake, rid, "comment", str(number), [])
    with announced(lake.events, event):
        seq = _next_number(lake, part, keys.pull_comment_sequence_key(number))
        comment = Comment(str(seq), author, body, now())
        key = keys.pull_comment_prefix(number) + f"{seq:010d}"
        lake.kv.set_if(part, key, _encode(comment.to_dict()), None)
    writes = [(keys.pull_comment_sequence_key(number), str(seq)), (key, comment.to_dict())]
    lake.events.after(event.done(payload={**event.payload, "writes": writes}))
    return comment


def list_comments(lake: Lake, repo: str, pull_id: str) -> list[Comment]:
    _, part = _partition(lake, repo)
    number = parse_id(pull_id)
    _load(lake, part, number, repo)
    prefix = keys.pull_comment_prefix(number)
    out = []
    for key, raw in lake.kv.scan(part, prefix):
        if not key.startswith(prefix):
            break
        out.append(Comment.from_dict(json.loads(raw)))
    return out


def _source_head(lake: Lake, rid: RepositoryId, pull: PullRequest) -> str:
    try:
        return str(lake.refs.get_branch(rid, check_branch_name(pull.source_branch)).commit_id)
    except NotFound:
        return ""  # the source branch was deleted: no review can be fresh


def review(lake: Lake, repo: str, pull_id: str, reviewer: str, verdict: Verdict, body: str = "") -> Review:
    """Record ``reviewer``'s verdict on the source's current head (replacing an earlier one);
    a comment with ``body`` goes with it. The author cannot approve its own pull request
    (``Forbidden``), and only an open one is reviewed (``PreconditionFailed``)."""
    from lakectl.core.lake import now

    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    reviewer = check_name(reviewer, "reviewer")
    pull = _load(lake, part, number, repo)[0]
    if pull.status is not PullStatus.OPEN:
        raise PreconditionFailed(
            f"pull request {pull.id} is {pull.status.value}: only open ones are reviewed"
        )
    if verdict is Verdict.APPROVED and reviewer == pull.author:
        raise Forbidden(f"{reviewer!r} opened pull request {pull.id} and cannot approve it")
    if body:
        add_comment(lake, repo, pull_id, body, reviewer)
    head = _source_head(lake, rid, pull)
    record = Review(reviewer, verdict, head, now())
    key = keys.pull_review_prefix(number) + reviewer
    event = _announce(lake, rid, "review", pull.id, [])
    with announced(lake.events, event):
        update_with_retries(lake.kv, part, key, lambda old: _encode(record.to_dict()))
    lake.events.after(event.done(payload={**event.payload, "writes": [(key, record.to_dict())]}))
    return record


def withdraw_review(lake: Lake, repo: str, pull_id: str, reviewer: str) -> None:
    """Remove ``reviewer``'s verdict (``NotFound`` when it gave none)."""
    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    _load(lake, part, number, repo)
    key = keys.pull_review_prefix(number) + check_name(reviewer, "reviewer")
    try:
        lake.kv.get(part, key)
    except KeyNotFound:
        raise NotFound(f"{reviewer!r} has not reviewed pull request {number}") from None
    event = _announce(lake, rid, "withdraw-review", str(number), [])
    with announced(lake.events, event):
        lake.kv.delete(part, key)
    lake.events.after(event.done(payload={**event.payload, "writes": [(key, None)]}))


def list_reviews(lake: Lake, repo: str, pull_id: str) -> list[Review]:
    """The reviewers' latest verdicts, each marked stale when the source has moved since."""
    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    pull = _load(lake, part, number, repo)[0]
    return _reviews(lake, rid, part, pull)


def _reviews(
    lake: Lake, rid: RepositoryId, part: str, pull: PullRequest, head: str | None = None
) -> list[Review]:
    """The reviews, marked stale against the source's ``head`` (read when not given; none for
    a pull request no longer open)."""
    if pull.status is not PullStatus.OPEN:
        head = ""
    elif head is None:
        head = _source_head(lake, rid, pull)
    prefix = keys.pull_review_prefix(pull.number)
    out = []
    for key, raw in lake.kv.scan(part, prefix):
        if not key.startswith(prefix):
            break
        r = Review.from_dict(json.loads(raw))
        out.append(replace(r, stale=bool(head) and r.commit_id != head))
    return out


def checks(lake: Lake, repo: str, commit_id: str) -> list[Check]:
    """The actions runs of ``commit_id``, oldest first: the checks of a pull request whose
    source head it is."""
    if not commit_id:
        return []
    runs = actionruns.list_runs(lake, repo, commit=commit_id, amount=MAX_AMOUNT)
    return [Check(r.run_id, r.event_type, r.status) for r in reversed(runs)]


def gate(lake: Lake, repo: str, pull_id: str) -> Gate:
    """What merging the pull request needs now (the destination's protection rule), and what
    it has: fresh approvals by others than the author, and the checks of the source head."""
    rid, part = _partition(lake, repo)
    pull = _load(lake, part, parse_id(pull_id), repo)[0]
    return _gate(lake, rid, part, pull)


def _gate(lake: Lake, rid: RepositoryId, part: str, pull: PullRequest) -> Gate:
    head = _source_head(lake, rid, pull)
    rule = protection.rule_for(lake.kv, rid, pull.destination_branch)
    required = rule.required_approvals if rule is not None else 0
    need_checks = rule.required_checks if rule is not None else False
    fresh = [r for r in _reviews(lake, rid, part, pull, head) if not r.stale]
    approvals = tuple(
        r.reviewer for r in fresh if r.verdict is Verdict.APPROVED and r.reviewer != pull.author
    )
    changes_requested = [r.reviewer for r in fresh if r.verdict is Verdict.CHANGES_REQUESTED]
    found = tuple(checks(lake, rid, head))
    dest_head = _head(lake, rid, pull.destination_branch)
    judges, invalid = _destination_checks(lake, rid, pull.destination_branch, dest_head) if rule else ((), ())
    reasons: list[str] = []
    if pull.status is not PullStatus.OPEN:
        reasons.append(f"the pull request is {pull.status.value}")
    if not head:
        reasons.append(f"the source branch {pull.source_branch!r} no longer exists")
    if len(approvals) < required:
        reasons.append(f"{len(approvals)} of {required} required approval(s) on the source's current head")
    if changes_requested:
        reasons.append("changes requested by " + ", ".join(sorted(changes_requested)))
    failed = [c.run_id for c in found if not c.passed]
    if failed:
        reasons.append("failed check(s): " + ", ".join(failed))
    if invalid:
        reasons.append("invalid action file(s) at the destination's head: " + ", ".join(invalid))
    elif need_checks and not judges:
        reasons.append(
            f"checks are required, and the destination {pull.destination_branch!r} has no pre-merge "
            "action committed at its head to run"
        )
    return Gate(head, required, approvals, need_checks, found, tuple(reasons), judges, dest_head)


def _head(lake: Lake, rid: RepositoryId, branch: str) -> str:
    try:
        return str(lake.refs.get_branch(rid, check_branch_name(branch)).commit_id)
    except NotFound:
        return ""


def _destination_checks(
    lake: Lake, rid: RepositoryId, branch: str, head: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of the pre-merge actions committed at ``head``, ``branch``'s (what a merge into
    it runs when a rule protects it), and the paths of the action files there that do not parse."""
    from lakectl.core.workflow import actions

    if not head:
        return (), ()
    loaded = actions.load(lake, rid, head)
    chosen = actions.matching(loaded.actions, "pre-merge", branch)
    return tuple(a.name for a in chosen), tuple(path for path, _ in loaded.errors)


def merge_pull(
    lake: Lake,
    repo: str,
    pull_id: str,
    merger: str = "",
    strategies: Sequence[str] = (),
    message: str | None = None,
) -> PullRequest:
    """Merge the pull request's source into its destination when :func:`gate` finds nothing
    missing (``PreconditionFailed`` listing what is), then mark it merged with the commit."""
    from lakectl.core import merging
    from lakectl.core.lake import now

    rid, part = _partition(lake, repo)
    number = parse_id(pull_id)
    pull = _load(lake, part, number, repo)[0]
    found = _gate(lake, rid, part, pull)
    if not found.mergeable:
        raise PreconditionFailed(
            f"pull request {pull.id} cannot be merged: " + "; ".join(found.reasons),
            reasons=list(found.reasons),
        )
    # The gate judged this head; a merge of whatever the branch holds later would skip it.
    result = merging.merge(
        lake,
        repo,
        found.source_commit_id,
        pull.destination_branch,
        strategies,
        message or f"Merge pull request #{pull.id} from {pull.source_branch}: {pull.title}",
        committer=merger or None,
        metadata={"pull_request": pull.id, "source_branch": pull.source_branch},
        through_pull=True,
        onto=found.destination_commit_id,
    )

    def change(old: bytes | None) -> bytes:
        if old is None:
            raise NotFound(f"no pull request {number} in repository {repo!r}")
        current = PullRequest.from_dict(json.loads(old))
        if current.status is not PullStatus.OPEN:
            raise PreconditionFailed(f"pull request {pull.id} was {current.status.value} meanwhile")
        return _encode(
            replace(
                current,
                status=PullStatus.MERGED,
                merged_commit_id=result.commit.id,
                closed_date=now(),
            ).to_dict()
        )

    key = keys.pull_key(number)
    event = _announce(lake, rid, "merge", pull.id, [])
    with announced(lake.events, event):
        raw = update_with_retries(lake.kv, part, key, change)
    record = json.loads(raw)
    lake.events.after(event.done(payload={**event.payload, "writes": [(key, record)]}))
    return PullRequest.from_dict(record)


def replay(lake: Lake, rid: RepositoryId, payload: Mapping[str, Any]) -> None:
    """Apply a journaled ``Verb.PULL_REQUEST`` event's writes (the journal's rebuild)."""
    part = keys.repo_partition(rid)
    for key, value in payload.get("writes", ()):
        if value is None:
            with suppress(KeyNotFound):
                lake.kv.delete(part, key)
        else:
            lake.kv.set(part, key, value.encode() if isinstance(value, str) else _encode(value))
