"""The verbs on repositories, branches, tags, object reads and commits.

One function per verb, turning user input (names, refs, paths) into plumbing. The other verbs are
in modules of their own (:mod:`~lakectl.core.writes`, :mod:`~lakectl.core.listing`,
:mod:`~lakectl.core.changes`, :mod:`~lakectl.core.merging`...): import each from its module. The
opened lake is :mod:`lakectl.core.lake`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TypeVar

# protection, refdiff and graph.merge are imported by the verbs that write, diff or merge:
# a read (`fs stat`, `show commit`, `branch list`) is done before they would have loaded.
from lakectl.core import keys, reads
from lakectl.core.blocks.data import (
    parse_segment,
    read_object,
)
from lakectl.core.events import CARRIED, Event, Verb, announced, making
from lakectl.core.graph.commits import (
    CommitRequest,
    Moved,
    make_commit,
)
from lakectl.core.graph.refs import (
    Resolved,
    check_branch_name,
    check_repo_name,
    check_tag_name,
    new_staging_token,
)
from lakectl.core.graph.staging import Carry, Expect, staged_values
from lakectl.core.graph.tree import Update
from lakectl.core.journal import replayorder
from lakectl.core.kv.helpers import drop_partition
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.lake import READ_AHEAD, Lake, default_committer, now, write_target
from lakectl.core.limits import (
    MAX_MESSAGE_BYTES,
    address_problem,
    check_metadata,
    check_name,
    check_storage_namespace,
    check_text,
    show,
)
from lakectl.core.model import (
    DEFAULT_BRANCH,
    INITIAL_COMMIT_MESSAGE,
    Branch,
    BranchId,
    Commit,
    CommitId,
    Entry,
    ObjectInfo,
    PathType,
    Repository,
    RepositoryId,
    Row,
    StagingToken,
    Tag,
)
from lakectl.core.uri import check_path
from lakectl.errors import (
    AlreadyExists,
    BlockNotFound,
    BranchNotFound,
    DirtyBranch,
    Gone,
    InvalidArgument,
    InvalidName,
    LakectlError,
    MissingData,
    ObjectNotFound,
    ProtectedBranch,
    RepositoryNotFound,
    TagNotFound,
)

_T = TypeVar("_T")

# -- repositories ---------------------------------------------------------------------------


def create_repo(
    lake: Lake,
    name: str,
    default_branch: str = DEFAULT_BRANCH,
    storage_namespace: str = "",
    bare: bool = False,
) -> Repository:
    """A repository whose default branch holds an empty initial commit; ``bare``: with no commit
    and no branch at all, the default branch's name only recorded (for ``refs-restore``)."""
    repo_id = check_repo_name(name)
    branch_id = check_branch_name(default_branch)
    namespace = check_storage_namespace(storage_namespace) if storage_namespace else f"local://{name}"
    try:
        lake.refs.get_repo(repo_id)
    except RepositoryNotFound:
        pass
    else:
        raise AlreadyExists(f"repository {name!r} already exists")
    repo = Repository(repo_id, branch_id, now(), namespace)
    payload = {"default_branch": branch_id, "storage_namespace": namespace, "bare": bare}
    event = Event(Verb.CREATE_REPOSITORY, repo_id, payload={**payload, "creation_date": repo.creation_date})
    if bare:
        with announced(lake.events, event):
            lake.refs.create_repo(repo)
        lake.events.after(event)
        return repo
    first = first_commit(lake, repo)
    lake.blocks.sync()
    lake.refs.put_commit(repo_id, first)
    default = Branch(branch_id, first.id, new_staging_token())
    # The intent names what it is about to create, as a branch's does (create_branch).
    made = {**event.payload, "commit": commit_record(first), **replayorder.moved(default)}
    event = Event(Verb.CREATE_REPOSITORY, repo_id, payload=made)
    with announced(lake.events, event):
        try:
            lake.refs.create_branch(repo_id, default)
        except AlreadyExists:
            # Another process is creating the same repository right now.
            raise AlreadyExists(f"repository {name!r} already exists") from None
        # The repository record goes last: a repository is visible only once it is whole.
        lake.refs.create_repo(repo)
    lake.events.after(event.done(commit_id=first.id, payload=made))
    return repo


def first_commit(lake: Lake, repo: Repository) -> Commit:
    """The commit a repository is created with (its id follows from the repository's record)."""
    req = CommitRequest(INITIAL_COMMIT_MESSAGE, "", {}, repo.creation_date, allow_empty=True)
    return make_commit((), [], lake.trees.empty(), req)


def commit_record(commit: Commit) -> str:
    """A commit as the KV stores it: what a replay of the journal puts back."""
    return commit.encode().decode()


def stage_updates(
    lake: Lake,
    rid: RepositoryId,
    bid: BranchId,
    updates: Sequence[Update],
    verb: Verb = Verb.WRITE_OBJECTS,
    *,
    expect: Expect | None = None,
) -> None:
    """Stage rows on the branch as one announced change (one journal entry for a whole batch);
    ``expect``: what the writer read of the one row's path, which the write must still find
    (:meth:`~lakectl.core.graph.staging.Staging.write_values`; an append's)."""
    rows = [[path, row] for path, row in updates]  # a row's tuple is a JSON array, as a list is
    carried: list[Carry] = []
    event = Event(verb, rid, bid, payload={"rows": rows}, notes={CARRIED: carried})

    def carry(tokens: Sequence[StagingToken]) -> list[tuple[str, str, bytes]]:
        return [row for consumer in carried for row in consumer(tokens)]

    with announced(lake.events, event):
        values = staged_values(updates)
        tokens = lake.staging.write_values(rid, bid, values, carry if carried else None, expect)
    lake.events.after(event.done(payload={**event.payload, "tokens": tokens}))


def get_repo(lake: Lake, name: str) -> Repository:
    return lake.refs.get_repo(check_repo_name(name))


def check_after(after: str) -> str:
    """A pagination offset (``--after``, the API's ``after``): any text a name or path could be,
    so never one holding a NUL or bytes that are not UTF-8."""
    problem = address_problem(after)
    if problem is not None:
        raise InvalidArgument(f"invalid offset {show(after)} to list after: {problem}")
    return after


def list_repos(lake: Lake, after: str = "", amount: int | None = None) -> list[Repository]:
    """Repositories by name after ``after``; at most ``amount`` (None: all)."""
    return list(islice(lake.refs.list_repos(check_after(after)), amount))


def delete_repo(lake: Lake, name: str) -> None:
    repo = get_repo(lake, name)
    event = Event(Verb.DELETE_REPOSITORY, repo.name)
    with announced(lake.events, event):
        lake.refs.delete_repo_record(repo.name)
        for branch in lake.refs.list_branches(repo.name):
            lake.staging.drop_tokens(repo.name, branch.tokens)
        drop_partition(lake.kv, keys.repo_partition(repo.name))
    lake.events.after(event)


# -- branches and tags ----------------------------------------------------------------------


def create_branch(lake: Lake, repo: str, name: str, source: str, hidden: bool = False) -> Branch:
    """A new branch at the commit ``source`` resolves to; ``hidden``: kept out of branch lists
    that do not ask for hidden ones."""
    r = get_repo(lake, repo)
    bid = check_branch_name(name)
    commit = lake.refs.resolve(r.name, source).commit
    if _tag_exists(lake, r.name, bid):
        raise AlreadyExists(
            f"a tag named {name!r} exists in {r.name!r}: a branch of the same name would change "
            "what that ref means"
        )
    if _branch_exists(lake, r.name, bid):
        # Refused before its intent is logged (the compare-and-swap below still decides a race).
        raise AlreadyExists(f"branch {bid!r} already exists")
    branch = Branch(bid, commit.id, new_staging_token(), hidden=hidden)
    # The intent names the record it is about to create: a rebuild that finds the intent logged
    # but no outcome (its writer died) and later changes on the branch creates it from there.
    made = replayorder.moved(branch)
    event = Event(Verb.CREATE_BRANCH, r.name, bid, source_ref=source, commit_id=commit.id, payload=made)
    with announced(lake.events, event):
        lake.refs.create_branch(r.name, branch)
    lake.events.after(event.done(payload=made))
    return branch


def _tag_exists(lake: Lake, rid: RepositoryId, name: str) -> bool:
    try:
        lake.refs.get_tag(rid, check_tag_name(name))
    except (TagNotFound, InvalidName):
        return False
    return True


def _branch_exists(lake: Lake, rid: RepositoryId, name: str) -> bool:
    try:
        lake.refs.get_branch(rid, check_branch_name(name))
    except (BranchNotFound, InvalidName):
        return False
    return True


def get_branch(lake: Lake, repo: str, name: str) -> Branch:
    r = get_repo(lake, repo)
    return lake.refs.get_branch(r.name, check_branch_name(name))


def list_branches(
    lake: Lake, repo: str, after: str = "", amount: int | None = None, show_hidden: bool = False
) -> list[Branch]:
    """Branches by name after ``after``; at most ``amount`` (None: all); hidden ones only with
    ``show_hidden``."""
    check_after(after)
    found = lake.refs.list_branches(get_repo(lake, repo).name)
    return list(islice((b for b in found if b.name > after and (show_hidden or not b.hidden)), amount))


def delete_branch(lake: Lake, repo: str, name: str) -> None:
    r = get_repo(lake, repo)
    from lakectl.core import protection

    branch = lake.refs.get_branch(r.name, check_branch_name(name))
    if branch.name == r.default_branch:
        raise ProtectedBranch(f"cannot delete the default branch {branch.name!r} of {r.name!r}")
    protection.guard(lake.kv, r.name, branch.name, protection.Move.DELETE)
    event = Event(Verb.DELETE_BRANCH, r.name, branch.name, commit_id=branch.commit_id)
    with announced(lake.events, event):
        lake.refs.delete_branch(r.name, branch.name)
        lake.staging.drop_tokens(r.name, branch.tokens)
    lake.events.after(event.done(payload=replayorder.moved(None, branch.tokens)))


def create_tag(lake: Lake, repo: str, name: str, ref: str, force: bool = False) -> Tag:
    """Tag the commit ``ref`` resolves to; ``force`` replaces a tag of that name."""
    r = get_repo(lake, repo)
    tid = check_tag_name(name)
    if _branch_exists(lake, r.name, tid):
        raise AlreadyExists(f"a branch named {name!r} exists in {r.name!r}: a tag may not shadow it")
    tag = Tag(tid, lake.refs.resolve(r.name, ref).commit.id)
    event = Event(Verb.CREATE_TAG, r.name, source_ref=ref, commit_id=tag.commit_id, tag=tid)
    with announced(lake.events, event):
        if force:
            lake.refs.replace_tag(r.name, tag)
        else:
            lake.refs.create_tag(r.name, tag)
    lake.events.after(event)
    return tag


def get_tag(lake: Lake, repo: str, name: str) -> Tag:
    return lake.refs.get_tag(get_repo(lake, repo).name, check_tag_name(name))


def list_tags(lake: Lake, repo: str, after: str = "", amount: int | None = None) -> list[Tag]:
    """Tags by name after ``after``; at most ``amount`` (None: all)."""
    check_after(after)
    found = lake.refs.list_tags(get_repo(lake, repo).name)
    return list(islice((t for t in found if t.name > after), amount))


def delete_tag(lake: Lake, repo: str, name: str) -> None:
    rid, tid = get_repo(lake, repo).name, check_tag_name(name)
    event = Event(Verb.DELETE_TAG, rid, commit_id=lake.refs.get_tag(rid, tid).commit_id, tag=tid)
    with announced(lake.events, event):
        lake.refs.delete_tag(rid, tid)
    lake.events.after(event)


# -- reading objects ------------------------------------------------------------------------


def resolve(lake: Lake, repo: str, ref: str) -> Resolved:
    return lake.refs.resolve(get_repo(lake, repo).name, ref)


def lookup(lake: Lake, repo: str, ref: str, path: str) -> Row | None:
    """The row of ``path`` at a ref. On a branch, retry until the branch record did not change
    under the read (a commit may move staged rows into the tree between the two looks)."""
    return _lookup_at(lake, repo, ref, path)[0]


def _lookup_at(lake: Lake, repo: str, ref: str, path: str) -> tuple[Row | None, Resolved]:
    rid = get_repo(lake, repo).name

    def attempt() -> tuple[Row | None, Resolved] | Again:
        res = lake.refs.resolve(rid, ref)
        try:
            if res.branch is None:
                return lake.trees.lookup(res.commit.meta_range_id, path), res
            row = lake.staging.lookup(rid, res.branch, path)
        except (BlockNotFound, MissingData) as exc:  # a range file of the tree is gone
            raise explain_missing(lake, rid, res, exc) from exc
        return (row, res) if lake.refs.get_branch(rid, res.branch.name) == res.branch else AGAIN

    return retry(STAGING_TOKEN, attempt, f"could not read {ref!r}: the branch kept changing")


def explain_missing(lake: Lake, rid: RepositoryId, res: Resolved, exc: LakectlError) -> LakectlError:
    """What a block missing under a read at ``res`` means: data a garbage collection removed on
    purpose, because the commit is past its repository's retention (``Gone``); else lost data
    (``MissingData``, a storage failure)."""
    from lakectl.core.upkeep import retention  # loaded only to explain a failed read

    if res.branch is None and not retention.is_retained(lake, rid, res.commit.id):
        return Gone(
            f"commit {res.commit.id[:12]} is past the retention of {rid!r}: garbage collection "
            "removed its data",
            commit=res.commit.id,
        )
    if isinstance(exc, MissingData):
        return exc
    return MissingData(f"data of {rid!r} at commit {res.commit.id[:12]} is missing: {exc.message}")


def stat(lake: Lake, repo: str, ref: str, path: str) -> ObjectInfo:
    return _stat_at(lake, repo, ref, path)[0]


def _stat_at(lake: Lake, repo: str, ref: str, path: str) -> tuple[ObjectInfo, Resolved]:
    path = check_path(path)
    row, res = _lookup_at(lake, repo, ref, path)
    if row is None:
        raise ObjectNotFound(f"object {path!r} not found in {repo}/{ref}")
    return ObjectInfo(path, PathType.OBJECT, Entry.from_row(row)), res


def read(
    lake: Lake,
    repo: str,
    ref: str,
    path: str,
    offset: int = 0,
    length: int | None = None,
    mapped: bool = False,
) -> Iterator[bytes]:
    """The object's bytes (or a range of them), block by block, md5-verified. A block gone
    from under a commit past its retention is ``Gone``, from anywhere else ``MissingData``.
    For a reader of whole files (a download): the next blocks are read and verified on two
    threads while the caller writes one (:func:`read_object`'s ``ahead``); with ``mapped``,
    whole blocks come as checked mappings of their files (:func:`read_object`'s)."""
    found = _open_at(lake, repo, ref, path)[0]
    return read_opened(lake, found, offset, length, ahead=READ_AHEAD, mapped=mapped)


def open_object(lake: Lake, repo: str, ref: str, path: str) -> reads.ObjectRead:
    """The object at a ref, resolved, for a reader that answers its stat (headers, a range's
    validity) before its bytes (:func:`read_opened`)."""
    return _open_at(lake, repo, ref, path)[0]


def _open_at(lake: Lake, repo: str, ref: str, path: str) -> tuple[reads.ObjectRead, Resolved]:
    info, res = _stat_at(lake, repo, ref, path)
    assert info.entry is not None
    branch = res.branch.name if res.branch is not None else ""
    rid = RepositoryId(repo)
    return reads.ObjectRead(rid, ref, info.path, info.entry, res.commit.id, branch, seen=res.branch), res


def read_opened(
    lake: Lake,
    found: reads.ObjectRead,
    offset: int = 0,
    length: int | None = None,
    ahead: int = 0,
    mapped: bool = False,
) -> Iterator[bytes]:
    """The bytes of an object :func:`open_object` found: every read of an object's bytes comes
    here, once per request, and is announced to the journal when the lake audits reads. A
    block gone from under a commit past its retention is ``Gone`` (:func:`explain_missing`)."""
    reads.announce(lake, found, offset, length)
    chunks = read_entry(lake, found.entry, offset, length, ahead, mapped)
    return explained(lake, found.repo, chunks, lambda: [_read_at(lake, found)])


def _read_at(lake: Lake, found: reads.ObjectRead) -> Resolved:
    return Resolved(lake.refs.get_commit(found.repo, CommitId(found.commit_id)), found.seen)


def check_blocks(lake: Lake, repo: str, ref: str, info: ObjectInfo) -> None:
    """Raise what a read of ``info`` (from :func:`stat` at ``ref``) would when one of its
    blocks is not stored, without reading any: for callers that hand the blocks out instead
    (signed locators), so that a client is told ``Gone`` or ``MissingData`` up front."""
    assert info.entry is not None
    for token in info.entry.locators:
        bare, _, _, length = parse_segment(token)
        if length and not lake.blocks.exists(bare):
            rid = get_repo(lake, repo).name
            lost = MissingData(f"block {bare} of {info.path!r} is missing from storage", locator=bare)
            raise explain_missing(lake, rid, lake.refs.resolve(rid, ref), lost)


def explained(
    lake: Lake, rid: RepositoryId, items: Iterator[_T], at: Callable[[], Sequence[Resolved]]
) -> Iterator[_T]:
    """``items`` (an object's bytes, a diff's changes) read at the refs ``at`` gives (asked only
    when a read fails), a block or tree file gone from under them explained
    (:func:`explain_missing`): ``Gone`` if one of them is a commit past its retention."""
    try:
        yield from items
    except (BlockNotFound, MissingData) as exc:
        told = [explain_missing(lake, rid, res, exc) for res in at()]
        raise next((e for e in told if isinstance(e, Gone)), told[0]) from exc


def read_entry(
    lake: Lake, entry: Entry, offset: int = 0, length: int | None = None, ahead: int = 0, mapped: bool = False
) -> Iterator[bytes]:
    """The bytes of an entry :func:`stat` returned: a reader that sends the stat (size, ETag)
    before the bytes gets the same version of an object that is being overwritten meanwhile.
    An imported entry is read from its source, through its guard (``SourceChanged``)."""
    if entry.external is not None:
        from lakectl.core.importing.sources import read_external

        return read_external(entry, offset, length, lake.blocks, lake.confinement)
    return read_object(lake.blocks, entry.locators, offset, length, ahead, entry.checksum, mapped)


# -- commits ----------------------------------------------------------------------------------


def commit(
    lake: Lake,
    repo: str,
    branch: str,
    message: str,
    metadata: Mapping[str, str] | None = None,
    committer: str | None = None,
    allow_empty: bool = False,
    allow_empty_message: bool = False,
    prefixes: Sequence[str] = (),
) -> Commit:
    """Commit the branch's staged changes; an empty message only with ``allow_empty_message``
    (lakeFS's lakectl: ``--allow-empty-message``). With ``prefixes``, only the changes under
    them (a partial commit): the rest stays staged."""
    if not message and not allow_empty_message:
        raise InvalidArgument("a commit message is required (or allow an empty one: --allow-empty-message)")
    under = check_prefixes(prefixes)
    if under and allow_empty:
        raise InvalidArgument(
            "a partial commit (--prefix) commits changes: it cannot be empty (--allow-empty)"
        )
    from lakectl.core.protection import Move

    rid, bid = write_target(lake, repo, branch, Move.COMMIT)
    req = _commit_request(message, metadata, committer, allow_empty)
    event = _commit_event(rid, bid, req, {"prefixes": under} if under else {})
    with announced(lake.events, event):
        moved = Moved(making=making(event))
        done = lake.committer.commit(rid, bid, req, moved, under)
        made = {"commit": commit_record(done), **replayorder.moved(moved.branch, moved.dropped)}
        if under:
            made["prefixes"] = under
    lake.events.after(event.done(commit_id=done.id, payload=made))
    return done


def _commit_request(
    message: str, metadata: Mapping[str, str] | None, committer: str | None, allow_empty: bool
) -> CommitRequest:
    return CommitRequest(
        message=check_message(message),
        committer=check_name(committer or default_committer(), "committer"),
        metadata=check_metadata(metadata or {}, "commit metadata"),
        creation_date=now(),
        allow_empty=allow_empty,
    )


def _commit_event(
    rid: RepositoryId, bid: BranchId, req: CommitRequest, extra: Mapping[str, object] | None = None
) -> Event:
    """A commit's event; its creation date finds the commit if its writer dies (journal recovery)."""
    payload = {"creation_date": req.creation_date, **(extra or {})}
    return Event(
        Verb.COMMIT,
        rid,
        bid,
        source_ref=bid,
        commit_message=req.message,
        committer=req.committer,
        metadata=req.metadata,
        payload=payload,
    )


def check_prefixes(prefixes: Sequence[str]) -> list[str]:
    """The prefixes of a partial commit, each a valid non-empty path prefix, without repeats
    (an empty one would mean everything: a plain commit)."""
    out: list[str] = []
    for prefix in prefixes:
        if not prefix:
            raise InvalidArgument("an empty --prefix would commit everything: leave --prefix out for that")
        check_path(prefix)
        if prefix not in out:
            out.append(prefix)
    return out


def commit_rows(
    lake: Lake,
    repo: str,
    branch: str,
    updates: Sequence[Update],
    message: str,
    metadata: Mapping[str, str] | None = None,
    committer: str | None = None,
) -> Commit:
    """Commit sorted prepared rows (None: delete) onto the branch's head as one commit, without
    staging them: the bulk path of zero-copy import (:mod:`lakectl.core.importing`). The branch
    must have nothing staged (``DirtyBranch``)."""
    from lakectl.core.protection import Move

    rid, bid = write_target(lake, repo, branch, Move.COMMIT)
    req = _commit_request(message, metadata, committer, allow_empty=True)
    b = lake.refs.get_branch(rid, bid)
    if lake.staging.is_dirty(rid, b):
        raise DirtyBranch(f"branch {branch!r} has uncommitted changes; commit or reset them first")
    head = lake.refs.get_commit(rid, b.commit_id)
    event = _commit_event(rid, bid, req)
    with announced(lake.events, event):
        moved = Moved(making=making(event))
        done = lake.committer.commit_tree(rid, bid, [head], updates, req, head.id, moved)
        made = {"commit": commit_record(done), **replayorder.moved(moved.branch, moved.dropped)}
    lake.events.after(event.done(commit_id=done.id, payload=made))
    return done


def check_message(message: str) -> str:
    """A commit message within :data:`~lakectl.core.limits.MAX_MESSAGE_BYTES`, valid text."""
    return check_text(message, "commit message", MAX_MESSAGE_BYTES)


def get_commit(lake: Lake, repo: str, ref: str) -> Commit:
    return resolve(lake, repo, ref).commit
