"""User-level verbs: one function per verb, turning user input (names, refs, paths) into plumbing."""

from __future__ import annotations

import dataclasses
import getpass
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, BinaryIO

# protection, refdiff and graph.merge are imported by the verbs that write, diff or merge:
# a read (`fs stat`, `show commit`, `branch list`) is done before they would have loaded.
from lakectl.core import history, journal, keys, reads, replayorder
from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.data import (
    SMALL_OBJECT,
    Packer,
    WrittenObject,
    parse_segment,
    read_object,
    read_small,
    write_bytes,
    write_object,
)
from lakectl.core.events import CARRIED, Event, EventSink, NoEvents, Verb, announced
from lakectl.core.graph.commits import (
    CommitRequest,
    Committer,
    Moved,
    make_commit,
    merge_base,
    walk_log,
)
from lakectl.core.graph.ranges import RangeStore
from lakectl.core.graph.refs import (
    RefStore,
    Resolved,
    check_branch_name,
    check_repo_name,
    check_tag_name,
    new_staging_token,
    parse_ref,
)
from lakectl.core.graph.staging import Carry, Staging, staged_values
from lakectl.core.graph.tree import Trees, Update, prefix_end
from lakectl.core.identity import Identity, open_metadata
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import drop_partition
from lakectl.core.limits import (
    MAX_MESSAGE_BYTES,
    address_problem,
    check_content_type,
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
    Change,
    Commit,
    DiffType,
    Entry,
    ObjectInfo,
    PathType,
    Repository,
    RepositoryId,
    ResetKind,
    Row,
    StagingToken,
    Tag,
    same_row,
)
from lakectl.core.uri import check_new_path, check_path
from lakectl.errors import (
    AlreadyExists,
    BlockNotFound,
    BranchNotFound,
    DirtyBranch,
    Gone,
    InvalidArgument,
    InvalidName,
    InvalidRef,
    LakectlError,
    MergeConflict,
    MissingData,
    NotFound,
    ObjectNotFound,
    PredicateFailed,
    ProtectedBranch,
    RepositoryNotFound,
    StorageError,
    TagNotFound,
    TooManyRetries,
)

if TYPE_CHECKING:
    from lakectl.core import tablemerge

Progress = Callable[[int], None]
"""Called with a number of bytes (or files) just done."""

PROGRESS_EVERY = 64
"""Small files are reported to a progress callback in groups of this many (a large one at
once): a progress bar's update costs more than reading and hashing a 4 KiB file."""

READ_ATTEMPTS = 20


@dataclass
class Lake:
    """An opened lake: its KV store and block adapter, and the plumbing built from them."""

    kv: KVStore
    blocks: BlockAdapter
    home: str = ""
    identity: Identity | None = None
    """Its identity record, when opened by :func:`open_lake` or a server."""
    events: EventSink = field(default_factory=NoEvents)
    """Where mutating verbs announce themselves (:mod:`lakectl.core.events`)."""

    def __post_init__(self) -> None:
        self.ranges = RangeStore(self.blocks)
        self.trees = Trees(self.ranges)
        self.refs = RefStore(self.kv)
        self.staging = Staging(self.kv, self.refs, self.trees)
        self.committer = Committer(self.refs, self.staging, self.trees, self.blocks)

    def close(self) -> None:
        journal.release(self)  # while the store is still open
        self.kv.close()


def default_home() -> str:
    """``LAKECTL_HOME``, else lakectl's directory under the user's data directory."""
    home = os.environ.get("LAKECTL_HOME")
    if home:
        return home
    from platformdirs import user_data_dir

    return user_data_dir("lakectl", appauthor=False)


def open_lake(home: str | None = None, create: bool = False) -> Lake:
    """Open the embedded lake at ``home``: SQLite metadata (``lake.db``) + block directory.

    A new lake is created on first use, but a missing or empty ``lake.db`` over stored blocks is
    refused (``StorageError``) unless ``create`` asks for a new lake over them
    (:mod:`lakectl.core.identity`)."""
    from lakectl.core.blocks.local import LocalAdapter

    home = os.path.abspath(home or default_home())
    if os.path.exists(home) and not os.path.isdir(home):
        raise StorageError(f"the lake's home {home} is a file, not a directory (see LAKECTL_HOME)", path=home)
    try:
        os.makedirs(home, exist_ok=True)
    except OSError as e:
        raise StorageError(f"cannot create the lake's home {home}: {e.strerror or e}", path=home) from e
    blocks = LocalAdapter(os.path.join(home, "blocks"))
    kv, identity = open_metadata("sqlite:///" + os.path.join(home, "lake.db"), blocks, create)
    lake = Lake(kv=kv, blocks=blocks, home=home, identity=identity)
    # lakeFS actions; command hooks run too (the user's own machine), and find this lake.
    lake.events = _Actions(lake, {"LAKECTL_HOME": home})
    journal.install(lake)  # after the actions: its intent is written once they let the verb go
    return lake


class _Actions:
    """The embedded lake's actions, :class:`lakectl.core.actionruns.ActionHooks`, made on the
    first verb that has hooks, the only events it acts on: a command that only reads never
    imports the actions' modules (~3 ms of its start-up)."""

    def __init__(self, lake: Lake, env: Mapping[str, str]) -> None:
        self._lake = lake
        self._env = env
        self._hooks: EventSink | None = None

    def _made(self) -> EventSink:
        if self._hooks is None:
            from lakectl.core.actionruns import ActionHooks

            self._hooks = ActionHooks(self._lake, env=self._env)
        return self._hooks

    def before(self, event: Event) -> None:
        if event.verb.has_hooks:
            self._made().before(event)

    def after(self, event: Event) -> None:
        if event.verb.has_hooks:
            self._made().after(event)

    def failed(self, event: Event, error: BaseException) -> None:
        if self._hooks is not None:
            self._hooks.failed(event, error)


def default_committer() -> str:
    """``LAKECTL_COMMITTER``, else ``user.name`` of the configuration file, else the login name."""
    name = os.environ.get("LAKECTL_COMMITTER")
    if name:
        return name
    from lakectl import config

    configured = config.get("user.name")
    if configured:
        return str(configured)
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def now() -> int:
    return int(time.time())


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
    with announced(lake.events, event):
        default = Branch(branch_id, first.id, new_staging_token())
        try:
            lake.refs.create_branch(repo_id, default)
        except AlreadyExists:
            # Another process is creating the same repository right now.
            raise AlreadyExists(f"repository {name!r} already exists") from None
        # The repository record goes last: a repository is visible only once it is whole.
        lake.refs.create_repo(repo)
        done = {**event.payload, "commit": _record(first), **replayorder.moved(default)}
    lake.events.after(event.done(commit_id=first.id, payload=done))
    return repo


def first_commit(lake: Lake, repo: Repository) -> Commit:
    """The commit a repository is created with (its id follows from the repository's record)."""
    req = CommitRequest(INITIAL_COMMIT_MESSAGE, "", {}, repo.creation_date, allow_empty=True)
    return make_commit((), [], lake.trees.empty(), req)


def _record(commit: Commit) -> str:
    """A commit as the KV stores it: what a replay of the journal puts back."""
    return commit.encode().decode()


def _stage(
    lake: Lake, rid: RepositoryId, bid: BranchId, updates: Sequence[Update], verb: Verb = Verb.WRITE_OBJECTS
) -> None:
    """Stage rows on the branch as one announced change (one journal entry for a whole batch)."""
    rows = [[path, list(row) if row is not None else None] for path, row in updates]
    carried: list[Carry] = []
    event = Event(verb, rid, bid, payload={"rows": rows}, notes={CARRIED: carried})

    def carry(tokens: Sequence[StagingToken]) -> list[tuple[str, str, bytes]]:
        return [row for consumer in carried for row in consumer(tokens)]

    with announced(lake.events, event):
        tokens = lake.staging.write_values(rid, bid, staged_values(updates), carry if carried else None)
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


def create_branch(lake: Lake, repo: str, name: str, source: str) -> Branch:
    r = get_repo(lake, repo)
    bid = check_branch_name(name)
    commit = lake.refs.resolve(r.name, source).commit
    if _tag_exists(lake, r.name, bid):
        raise AlreadyExists(
            f"a tag named {name!r} exists in {r.name!r}: a branch of the same name would change "
            "what that ref means"
        )
    branch = Branch(bid, commit.id, new_staging_token())
    event = Event(Verb.CREATE_BRANCH, r.name, bid, source_ref=source, commit_id=commit.id)
    with announced(lake.events, event):
        lake.refs.create_branch(r.name, branch)
    lake.events.after(event.done(payload=replayorder.moved(branch)))
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


def list_branches(lake: Lake, repo: str, after: str = "", amount: int | None = None) -> list[Branch]:
    """Branches by name after ``after``; at most ``amount`` (None: all)."""
    check_after(after)
    found = lake.refs.list_branches(get_repo(lake, repo).name)
    return list(islice((b for b in found if b.name > after), amount))


def delete_branch(lake: Lake, repo: str, name: str) -> None:
    r = get_repo(lake, repo)
    branch = lake.refs.get_branch(r.name, check_branch_name(name))
    if branch.name == r.default_branch:
        raise ProtectedBranch(f"cannot delete the default branch {branch.name!r} of {r.name!r}")
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


def _lookup(lake: Lake, repo: str, ref: str, path: str) -> Row | None:
    """The row of ``path`` at a ref. On a branch, retry until the branch record did not change
    under the read (a commit may move staged rows into the tree between the two looks)."""
    return _lookup_at(lake, repo, ref, path)[0]


def _lookup_at(lake: Lake, repo: str, ref: str, path: str) -> tuple[Row | None, Resolved]:
    rid = get_repo(lake, repo).name
    for _ in range(READ_ATTEMPTS):
        res = lake.refs.resolve(rid, ref)
        try:
            if res.branch is None:
                return lake.trees.lookup(res.commit.meta_range_id, path), res
            row = lake.staging.lookup(rid, res.branch, path)
        except (BlockNotFound, MissingData) as exc:  # a range file of the tree is gone
            raise explain_missing(lake, rid, res, exc) from exc
        if lake.refs.get_branch(rid, res.branch.name) == res.branch:
            return row, res
    raise TooManyRetries(f"could not read {ref!r}: the branch kept changing")


def explain_missing(lake: Lake, rid: RepositoryId, res: Resolved, exc: LakectlError) -> LakectlError:
    """What a block missing under a read at ``res`` means: data a garbage collection removed on
    purpose, because the commit is past its repository's retention (``Gone``); else lost data
    (``MissingData``, a storage failure)."""
    from lakectl.core import gc  # gc is built on porcelain

    if res.branch is None and not gc.is_retained(lake, rid, res.commit.id):
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
    lake: Lake, repo: str, ref: str, path: str, offset: int = 0, length: int | None = None
) -> Iterator[bytes]:
    """The object's bytes (or a range of them), block by block, md5-verified. A block gone
    from under a commit past its retention is ``Gone``, from anywhere else ``MissingData``.
    For a reader of whole files (a download): the next blocks are read and verified on two
    threads while the caller writes one (:func:`read_object`'s ``ahead``)."""
    found, res = _open_at(lake, repo, ref, path)
    return _explained(lake, found.repo, res, read_opened(lake, found, offset, length, ahead=_READ_AHEAD))


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
    lake: Lake, found: reads.ObjectRead, offset: int = 0, length: int | None = None, ahead: int = 0
) -> Iterator[bytes]:
    """The bytes of an object :func:`open_object` found: every read of an object's bytes comes
    here, once per request, and is announced to the journal when the lake audits reads."""
    reads.announce(lake, found, offset, length)
    return read_entry(lake, found.entry, offset, length, ahead)


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


def _explained(lake: Lake, rid: RepositoryId, res: Resolved, chunks: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from chunks
    except MissingData as exc:
        raise explain_missing(lake, rid, res, exc) from exc


def read_entry(
    lake: Lake, entry: Entry, offset: int = 0, length: int | None = None, ahead: int = 0
) -> Iterator[bytes]:
    """The bytes of an entry :func:`stat` returned: a reader that sends the stat (size, ETag)
    before the bytes gets the same version of an object that is being overwritten meanwhile.
    An imported entry is read from its source, through its guard (``SourceChanged``)."""
    if entry.external is not None:
        from lakectl.core.importing.sources import read_external

        return read_external(entry, offset, length, lake.blocks)
    return read_object(lake.blocks, entry.locators, offset, length, ahead)


_READ_AHEAD = 2
"""Blocks :func:`read` verifies ahead of its caller: one per core here (docs/decisions/0015)."""


def _iter_view(
    lake: Lake, res: Resolved, rid: RepositoryId, start: str, prefix: str
) -> Iterator[tuple[str, Row]]:
    if res.branch is not None:
        return lake.staging.iter_view(rid, res.branch, start, prefix)
    return lake.trees.iter(res.commit.meta_range_id, start, prefix)


LIST_PAGE = 1000


def list_objects(
    lake: Lake,
    repo: str,
    ref: str,
    prefix: str = "",
    delimiter: str = "",
    after: str = "",
    amount: int | None = None,
) -> Iterator[ObjectInfo]:
    """Objects (and, with a delimiter, common prefixes) under ``prefix`` in path order, after
    ``after``. On a branch, each page is read from one state of the branch: a page during which
    the branch record changed (a commit moved staged rows into the tree) is read again."""
    check_path(prefix, allow_empty=True)
    check_after(after)
    rid = get_repo(lake, repo).name
    count = 0
    cursor = after
    while amount is None or count < amount:
        want = LIST_PAGE if amount is None else min(LIST_PAGE, amount - count)
        for _ in range(READ_ATTEMPTS):
            res = lake.refs.resolve(rid, ref)
            page = list(islice(_list_view(lake, res, rid, prefix, delimiter, cursor), want))
            if res.branch is None or lake.refs.get_branch(rid, res.branch.name) == res.branch:
                break
        else:
            raise TooManyRetries(f"could not list {ref!r}: the branch kept changing")
        yield from page
        count += len(page)
        if len(page) < want:
            return
        cursor = page[-1].path


def _list_view(
    lake: Lake, res: Resolved, rid: RepositoryId, prefix: str, delimiter: str, after: str
) -> Iterator[ObjectInfo]:
    """Every listing entry after ``after`` in one state of the ref; a common prefix is listed
    once and then skipped by seeking past it, so listing a huge directory reads one row.

    Where nothing is staged under the prefix, the directories that follow one another are
    stepped over by their paths alone (:meth:`Trees.next_key`), never decoding their rows: a
    page of 100 directories that each start in another range costs 100 path reads, not 100
    range decodes."""
    start = after + "\x00" if after else ""
    committed_only = (
        res.branch is None
        or next(lake.staging.iter_staged(rid, res.branch.tokens, prefix=prefix), None) is None
    )
    while True:
        seek = None
        for path, row in _iter_view(lake, res, rid, start, prefix):
            if delimiter:
                cut = path.find(delimiter, len(prefix))
                if cut >= 0:
                    common = path[: cut + len(delimiter)]
                    if common > after:
                        yield ObjectInfo(common, PathType.COMMON_PREFIX)
                    seek = prefix_end(common)
                    break
            yield ObjectInfo(path, PathType.OBJECT, Entry.from_row(row))
        while seek is not None and committed_only:
            key = lake.trees.next_key(res.commit.meta_range_id, seek, prefix)
            if key is None:
                return
            cut = key.find(delimiter, len(prefix))
            if cut < 0:
                break  # an object: its row is read by the view from here
            common = key[: cut + len(delimiter)]
            if common > after:
                yield ObjectInfo(common, PathType.COMMON_PREFIX)
            seek = prefix_end(common)
        if seek is None:
            return
        start = seek


# -- writing objects ------------------------------------------------------------------------


def _branch_target(lake: Lake, repo: str, branch: str) -> tuple[RepositoryId, BranchId]:
    """The branch a write goes to; a ref that exists but is no branch is a clear InvalidRef."""
    r = get_repo(lake, repo)
    try:
        bid = check_branch_name(branch)
        lake.refs.get_branch(r.name, bid)
    except (BranchNotFound, InvalidName) as missing:
        try:
            resolved = lake.refs.resolve(r.name, branch)
        except (NotFound, InvalidArgument):
            raise missing from None
        if resolved.branch is not None:  # deleted, then created again between the two looks
            raise missing from None
        raise InvalidRef(f"{branch!r} is not a branch: only branches can be written to") from None
    return r.name, bid


def _write_target(lake: Lake, repo: str, branch: str) -> tuple[RepositoryId, BranchId]:
    """The branch a direct write (staging, commit, reset) goes to, refused with
    ``ProtectedBranch`` when a protection rule covers it (:mod:`lakectl.core.protection`)."""
    from lakectl.core import protection

    rid, bid = _branch_target(lake, repo, branch)
    protection.check(lake.kv, rid, bid)
    return rid, bid


def entry_for(
    size: int,
    checksum: str,
    locators: tuple[str, ...],
    content_type: str | None,
    metadata: Mapping[str, str] | None,
) -> Entry:
    """A new object entry stamped now, with its content type and metadata checked."""
    return Entry(
        size=size,
        checksum=checksum,
        locators=locators,
        mtime=now(),
        content_type=check_content_type(content_type),
        metadata=check_metadata(metadata or {}),
    )


def upload(
    lake: Lake,
    repo: str,
    branch: str,
    path: str,
    source: BinaryIO | bytes | memoryview,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    etag: str | None = None,
) -> ObjectInfo:
    """Store the bytes as blocks (deduplicated), make them durable, then stage the object.
    ``etag`` is the md5 of the whole body, computed by the caller as it received it (the S3
    gateway): recorded as the object's checksum, and used as the block's hash when the body
    is one block."""
    path = check_new_path(path)
    rid, bid = _write_target(lake, repo, branch)
    content_type = check_content_type(content_type)  # refused before any block is written
    metadata = check_metadata(metadata or {})
    if isinstance(source, bytes | memoryview):
        written = write_bytes(lake.blocks, source, md5=etag)
    else:
        written = write_object(lake.blocks, source)
    entry = entry_for(written.size, etag or written.checksum, written.locators, content_type, metadata)
    lake.blocks.sync()
    _stage(lake, rid, bid, [(path, entry.to_row())])
    return ObjectInfo(path, PathType.OBJECT, entry)


def upload_files(
    lake: Lake,
    repo: str,
    branch: str,
    files: Sequence[tuple[str, str]],
    content_type: str | None = None,
    progress: Progress | None = None,
) -> list[ObjectInfo]:
    """Upload many local files ``(path in the lake, local file)``: blocks first, one durability
    barrier, then one staging batch, so a crash never leaves staged objects without data.

    Small files are read and hashed in path order by this thread, one ``open``/``read``/
    ``close`` each; a second thread hashes and writes the packs they fill (see :class:`Packer`),
    then syncs. More reader threads only slow this down: each 4 KiB read and md5 gives the GIL
    up and must win it back, so threads queue for it instead of working. Large files are
    streamed into blocks of their own."""
    from concurrent.futures import ThreadPoolExecutor

    rid, bid = _write_target(lake, repo, branch)
    content_type = check_content_type(content_type)
    ordered = sorted(files)
    for path, _ in ordered:
        check_new_path(path)
    written: dict[str, WrittenObject] = {}
    with ThreadPoolExecutor(1, thread_name_prefix="lakectl-packs") as pool:
        packer = Packer(lake.blocks, pool)
        unreported = 0
        for path, local in ordered:
            data = read_small(local, SMALL_OBJECT)
            if data is not None:
                packer.add(path, data)
            else:
                with open(local, "rb") as f:
                    written[path] = write_object(lake.blocks, f)
            unreported += 1
            if progress is not None and (data is None or unreported == PROGRESS_EVERY):
                progress(unreported)
                unreported = 0
        written.update(packer.close())
        if progress is not None and unreported:
            progress(unreported)
        # The durability barrier waits on the disk, not the GIL: it runs on the pack thread
        # while this one builds the rows, and nothing is staged before it has returned.
        synced = pool.submit(lake.blocks.sync)
        mtime = now()
        infos: list[ObjectInfo] = []
        updates: list[Update] = []
        for path, _ in ordered:
            w = written[path]
            # Built directly: the content type is checked above and there is no metadata.
            entry = Entry(
                size=w.size, checksum=w.checksum, locators=w.locators, mtime=mtime, content_type=content_type
            )
            infos.append(ObjectInfo(path, PathType.OBJECT, entry))
            updates.append((path, entry.to_row()))
        synced.result()
    _stage(lake, rid, bid, updates)
    return infos


def touch_blocks(lake: Lake, entry: Entry) -> None:
    """Touch every block of an entry that is about to be staged again without its data being
    written (a copy, a link): a garbage collection running meanwhile then spares them
    (docs/decisions/0008). ``BlockNotFound`` if one is gone, and the caller stages nothing."""
    for token in entry.locators:
        bare, _, _, length = parse_segment(token)
        if length and not lake.blocks.touch(bare):
            raise BlockNotFound(f"block {bare} is no longer stored", locator=bare)


def copy_object(lake: Lake, repo: str, branch: str, path: str, source: Entry) -> Entry:
    """Stage ``source`` (an entry of any ref, of any repository of the lake) at ``path`` on the
    branch, stamped now: the copy shares the source's blocks, no byte is written. Returns the
    staged entry. The REST API's and the S3 gateway's copies both come here."""
    path = check_new_path(path)
    rid, bid = _write_target(lake, repo, branch)
    entry = dataclasses.replace(source, mtime=now())
    touch_blocks(lake, entry)
    _stage(lake, rid, bid, [(path, entry.to_row())])
    return entry


def stage_rows(lake: Lake, repo: str, branch: str, updates: Sequence[Update]) -> None:
    """Stage prepared rows (library fast path for bulk staging: no data is written)."""
    rid, bid = _write_target(lake, repo, branch)
    _stage(lake, rid, bid, updates)


def check_writable(lake: Lake, repo: str, branch: str) -> None:
    """Raise what a write to ``branch`` would: no repository, no such branch, a ref that exists
    but is no branch (InvalidRef), a protected branch -- before a caller reads a body it would
    then refuse."""
    _write_target(lake, repo, branch)


def delete_existing(lake: Lake, repo: str, branch: str, paths: Sequence[str]) -> list[str]:
    """Delete those of ``paths`` that exist on the branch (S3 and lakeFS batch deletes: a missing
    path is no error); return them. A path deleted concurrently gets a second tombstone: the
    same change."""
    rid, bid = _write_target(lake, repo, branch)
    present = sorted({p for p in paths if _lookup(lake, repo, branch, check_path(p)) is not None})
    if present:
        _stage(lake, rid, bid, [(p, None) for p in present], Verb.DELETE_OBJECTS)
    return present


def delete_objects(lake: Lake, repo: str, branch: str, paths: Sequence[str]) -> None:
    rid, bid = _write_target(lake, repo, branch)
    missing = [p for p in paths if _lookup(lake, repo, branch, check_path(p)) is None]
    if missing:
        raise ObjectNotFound(f"object {missing[0]!r} not found on branch {branch!r}")
    _stage(lake, rid, bid, [(p, None) for p in sorted(paths)], Verb.DELETE_OBJECTS)


def delete_prefix(lake: Lake, repo: str, branch: str, prefix: str) -> list[str]:
    """Delete every object under ``prefix`` on the branch; returns the deleted paths."""
    check_path(prefix, allow_empty=True)
    rid, bid = _write_target(lake, repo, branch)
    paths = [o.path for o in list_objects(lake, repo, branch, prefix)]
    if paths:
        _stage(lake, rid, bid, [(p, None) for p in paths], Verb.DELETE_OBJECTS)
    return paths


# -- commits and history --------------------------------------------------------------------


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
    rid, bid = _write_target(lake, repo, branch)
    req = _commit_request(message, metadata, committer, allow_empty)
    event = _commit_event(rid, bid, req, {"prefixes": under} if under else {})
    with announced(lake.events, event):
        moved = Moved()
        done = lake.committer.commit(rid, bid, req, moved, under)
        made = {"commit": _record(done), **replayorder.moved(moved.branch, moved.dropped)}
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
    rid, bid = _write_target(lake, repo, branch)
    req = _commit_request(message, metadata, committer, allow_empty=True)
    b = lake.refs.get_branch(rid, bid)
    if lake.staging.is_dirty(rid, b):
        raise DirtyBranch(f"branch {branch!r} has uncommitted changes; commit or reset them first")
    head = lake.refs.get_commit(rid, b.commit_id)
    event = _commit_event(rid, bid, req)
    with announced(lake.events, event):
        moved = Moved()
        done = lake.committer.commit_tree(rid, bid, [head], updates, req, head.id, moved)
        made = {"commit": _record(done), **replayorder.moved(moved.branch, moved.dropped)}
    lake.events.after(event.done(commit_id=done.id, payload=made))
    return done


def check_message(message: str) -> str:
    """A commit message within :data:`~lakectl.core.limits.MAX_MESSAGE_BYTES`, valid text."""
    return check_text(message, "commit message", MAX_MESSAGE_BYTES)


def get_commit(lake: Lake, repo: str, ref: str) -> Commit:
    return resolve(lake, repo, ref).commit


def log(
    lake: Lake,
    repo: str,
    ref: str,
    amount: int | None = None,
    first_parent: bool = False,
    no_merges: bool = False,
    objects: Sequence[str] = (),
    prefixes: Sequence[str] = (),
    *,
    after: str = "",
    since: str = "",
    stop_at: str = "",
) -> Iterator[Commit]:
    """Commits reachable from ``ref``, newest first, filtered as ``git log`` would; then, as
    lakeFS's log: created ``since`` an RFC 3339 date-time, up to and including ``stop_at``'s
    commit, and the page that follows the commit ``after`` (ids or any ref)."""
    objects = [check_path(o) for o in objects]
    prefixes = [check_path(p, allow_empty=True) for p in prefixes]
    if amount is not None and amount < 0:
        raise InvalidArgument(f"the number of commits must not be negative, got {amount}")
    floor = history.parse_since(since)
    rid = get_repo(lake, repo).name
    start = resolve(lake, repo, ref).commit
    last = resolve(lake, repo, stop_at).commit.id if stop_at else None
    offset = resolve(lake, repo, after).commit.id if after else None
    # As lakeFS's log: ``after`` and ``stop_at`` place the page in the walk itself, so a commit
    # the filters leave out still marks where a page starts or the walk ends.
    walk: Iterator[Commit] = walk_log(lake.refs, rid, start, first_parent)
    if offset is not None:
        walk = history.after(walk, offset)
    if last is not None:
        walk = history.stop_at(walk, last)
    found = (
        c
        for c in walk
        if not (no_merges and len(c.parents) > 1)
        and (floor is None or c.creation_date >= floor)
        and (not (objects or prefixes) or _touches(lake, rid, c, objects, prefixes))
    )
    yield from islice(found, amount)


def _touches(
    lake: Lake, rid: RepositoryId, c: Commit, objects: Sequence[str], prefixes: Sequence[str]
) -> bool:
    parent_mid = lake.refs.get_commit(rid, c.parents[0]).meta_range_id if c.parents else lake.trees.empty()
    for path in objects:
        before = lake.trees.lookup(parent_mid, path)
        after = lake.trees.lookup(c.meta_range_id, path)
        if not same_row(before, after):
            return True
    return any(
        next(lake.trees.diff(parent_mid, c.meta_range_id, prefix), None) is not None for prefix in prefixes
    )


# -- diff -----------------------------------------------------------------------------------


def diff_uncommitted(lake: Lake, repo: str, branch: str, prefix: str = "") -> list[Change]:
    rid, bid = _branch_target(lake, repo, branch)
    check_path(prefix, allow_empty=True)
    for _ in range(READ_ATTEMPTS):
        before = lake.refs.get_branch(rid, bid)
        changes = list(lake.staging.changes(rid, before, prefix))
        if lake.refs.get_branch(rid, bid) == before:
            return changes
    raise TooManyRetries(f"could not diff branch {branch!r}: it kept changing")


def find_merge_base(lake: Lake, repo: str, left: str, right: str) -> Commit | None:
    """The best common ancestor of two refs' commits (None when their histories never meet)."""
    rid = get_repo(lake, repo).name
    return merge_base(lake.refs, rid, resolve(lake, repo, left).commit, resolve(lake, repo, right).commit)


def diff_refs(
    lake: Lake, repo: str, left: str, right: str, two_way: bool = False, prefix: str = ""
) -> Iterator[Change]:
    """Changes from ``left`` to ``right``: three-dot (since their merge base) by default, or
    two-dot with ``two_way``. A branch is its last commit (``main``, ``main@``); ``main$`` is
    its staging area, uncommitted changes included, as lakeFS's ref expressions say."""
    from lakectl.core import refdiff

    check_path(prefix, allow_empty=True)
    rid = get_repo(lake, repo).name
    for _ in range(READ_ATTEMPTS):
        lres, rres = resolve(lake, repo, left), resolve(lake, repo, right)
        lc, rc = lres.commit, rres.commit
        base = lc
        if not two_way:
            found = merge_base(lake.refs, rid, lc, rc)
            base = found if found is not None else lc
        lstaged = lres.branch if two_way and parse_ref(left).staging else None
        rstaged = rres.branch if parse_ref(right).staging else None
        if lstaged is None and rstaged is None:
            return lake.trees.diff(base.meta_range_id, rc.meta_range_id, prefix)
        views = [
            refdiff.View(
                mid,
                refdiff.staged_rows(lake.staging, rid, b, prefix) if b is not None else {},
            )
            for mid, b in ((base.meta_range_id, lstaged), (rc.meta_range_id, rstaged))
        ]
        # A commit may move staged rows into the tree between the reads: read both again.
        if all(lake.refs.get_branch(rid, b.name) == b for b in (lstaged, rstaged) if b is not None):
            return refdiff.diff_views(lake.trees, views[0], views[1], prefix)
    raise TooManyRetries(f"could not diff {left!r} and {right!r}: the branch kept changing")


# -- merge, revert, cherry-pick, reset ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MergeResult:
    commit: Commit
    changed: bool
    """False when there was nothing to merge (the destination already had the source)."""


def merge(
    lake: Lake,
    repo: str,
    source: str,
    dest: str,
    strategies: Sequence[str] = (),
    message: str | None = None,
    committer: str | None = None,
    metadata: Mapping[str, str] | None = None,
    squash: bool = False,
    through_pull: bool = False,
    rows_runner: tablemerge.UnitRunner | None = None,
) -> MergeResult:
    """Three-way merge of ``source`` into the destination branch, as a merge commit; with
    ``squash`` (lakeFS's ``squash_merge``), as a commit whose one parent is the destination's.
    A destination whose protection rule gates pull requests takes only merges made
    ``through_pull`` (by :func:`lakectl.core.pulls.merge_pull`, which checked the gate).
    ``rows_runner`` runs the ``rows`` strategy's merges (in-process by default; on Spark with
    :func:`lakectl.spark.tablemerge.runner`)."""
    from lakectl.core import protection
    from lakectl.core.graph.merge import StrategyRules, plan_merge

    rid, bid = _branch_target(lake, repo, dest)
    if not through_pull:
        protection.check_direct_merge(lake.kv, rid, bid)
    row_rules: list[tablemerge.RowRule] = []
    if any("=rows:" in s for s in strategies):
        from lakectl.core import tablemerge

        row_rules, strategies = tablemerge.split_strategies(strategies)
    rules = StrategyRules.parse(strategies)
    src = resolve(lake, repo, source).commit
    branch = lake.refs.get_branch(rid, bid)
    if lake.staging.is_dirty(rid, branch):
        raise DirtyBranch(f"branch {dest!r} has uncommitted changes; commit or reset them first")
    dst = lake.refs.get_commit(rid, branch.commit_id)
    base = merge_base(lake.refs, rid, src, dst)
    if base is not None and base.id == src.id:
        return MergeResult(dst, changed=False)
    base_mid = base.meta_range_id if base is not None else lake.trees.empty()
    plan = plan_merge(lake.trees, base_mid, src.meta_range_id, dst.meta_range_id, rules)
    noted = dict(metadata or {})
    if row_rules:
        from lakectl.core import tablemerge

        what = f"merge of {source!r} into {dest!r}"
        mids = (base_mid, src.meta_range_id, dst.meta_range_id)
        noted.update(tablemerge.settle(lake, *mids, plan, row_rules, rows_runner, what))
    if plan.conflicts:
        raise MergeConflict(
            f"merge of {source!r} into {dest!r} has {len(plan.conflicts)} conflicting path(s)",
            paths=plan.conflicts,
        )
    req = CommitRequest(
        message=check_message(message or f"Merge '{source}' into '{dest}'"),
        committer=check_name(committer or default_committer(), "committer"),
        metadata=check_metadata(noted, "commit metadata"),
        creation_date=now(),
    )
    parents = [dst] if squash else [dst, src]
    event = Event(
        Verb.MERGE,
        rid,
        bid,
        source_ref=source,
        commit_message=req.message,
        committer=req.committer,
        metadata=req.metadata,
        payload={
            "source_commit_id": src.id,
            "destination_commit_id": dst.id,
            "squash": squash,
            "creation_date": req.creation_date,
        },
    )
    with announced(lake.events, event):
        moved = Moved()
        new = lake.committer.commit_tree(rid, bid, parents, plan.updates, req, dst.id, moved)
        made = {**event.payload, "commit": _record(new), **replayorder.moved(moved.branch, moved.dropped)}
    lake.events.after(event.done(commit_id=new.id, payload=made))
    return MergeResult(new, changed=True)


def _apply_commit_change(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int,
    revert: bool,
    committer: str | None,
) -> Commit:
    from lakectl.core.graph.merge import StrategyRules, plan_merge

    rid, bid = _branch_target(lake, repo, branch)
    target = resolve(lake, repo, ref).commit
    if len(target.parents) > 1 and parent_number < 1:
        raise InvalidArgument(
            f"commit {target.id[:12]} is a merge commit: give -m/--parent-number "
            f"(1..{len(target.parents)}) to say which parent the change is relative to"
        )
    number = parent_number or 1
    if target.parents and not 1 <= number <= len(target.parents):
        raise InvalidArgument(f"commit {target.id[:12]} has no parent number {number}")
    parent_mid = (
        lake.refs.get_commit(rid, target.parents[number - 1]).meta_range_id
        if target.parents
        else lake.trees.empty()
    )
    head_branch = lake.refs.get_branch(rid, bid)
    if lake.staging.is_dirty(rid, head_branch):
        raise DirtyBranch(f"branch {branch!r} has uncommitted changes; commit or reset them first")
    head = lake.refs.get_commit(rid, head_branch.commit_id)
    # Revert = merge the parent's tree with the commit as base; cherry-pick the reverse.
    base, source = (target.meta_range_id, parent_mid) if revert else (parent_mid, target.meta_range_id)
    plan = plan_merge(lake.trees, base, source, head.meta_range_id, StrategyRules())
    verb = "revert" if revert else "cherry-pick"
    if plan.conflicts:
        raise MergeConflict(
            f"{verb} of {target.id[:12]} conflicts on {len(plan.conflicts)} path(s)",
            paths=plan.conflicts,
        )
    message = f'Revert "{target.message}"' if revert else target.message
    req = CommitRequest(
        message=message,
        committer=committer or default_committer(),
        metadata={} if revert else dict(target.metadata),
        creation_date=now(),
    )
    verb_of = Verb.REVERT if revert else Verb.CHERRY_PICK
    event = Event(
        verb_of,
        rid,
        bid,
        source_ref=ref,
        commit_message=req.message,
        committer=req.committer,
        payload={"creation_date": req.creation_date},
    )
    with announced(lake.events, event):
        moved = Moved()
        new = lake.committer.commit_tree(rid, bid, [head], plan.updates, req, head.id, moved)
        made = {"commit": _record(new), **replayorder.moved(moved.branch, moved.dropped)}
    lake.events.after(event.done(commit_id=new.id, payload=made))
    return new


def revert(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int = 0,
    committer: str | None = None,
) -> Commit:
    return _apply_commit_change(lake, repo, branch, ref, parent_number, True, committer)


def cherry_pick(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int = 0,
    committer: str | None = None,
) -> Commit:
    return _apply_commit_change(lake, repo, branch, ref, parent_number, False, committer)


def reset(lake: Lake, repo: str, branch: str, kind: ResetKind = ResetKind.ALL, path: str = "") -> int:
    """Discard uncommitted changes (all, under a prefix, or one object); returns how many."""
    rid, bid = _write_target(lake, repo, branch)
    if kind is ResetKind.ALL:
        for _ in range(READ_ATTEMPTS):
            b, raw = lake.refs.get_branch_raw(rid, bid)
            n = sum(1 for _ in lake.staging.changes(rid, b))
            payload = {"kind": kind.value, "staging_token": b.staging_token}
            event = Event(Verb.RESET, rid, bid, payload=payload)
            lake.events.before(event)
            fresh = Branch(b.name, b.commit_id, new_staging_token())
            try:
                lake.refs.swap_branch(rid, raw, fresh)
            except PredicateFailed:
                continue
            lake.events.after(event.done(payload={**event.payload, **replayorder.moved(fresh, b.tokens)}))
            lake.staging.drop_tokens(rid, b.tokens)
            return n
        raise TooManyRetries(f"could not reset branch {branch!r}: it kept changing")
    check_path(path, allow_empty=kind is ResetKind.PREFIX)
    b = lake.refs.get_branch(rid, bid)
    if kind is ResetKind.OBJECT:
        changed = [c for c in lake.staging.changes(rid, b, path) if c.path == path]
    else:
        changed = list(lake.staging.changes(rid, b, path))
    # Sealed tokens are immutable (a commit may be reading them): restage committed values.
    updates: list[Update] = [(c.path, c.old) for c in changed]
    if updates:
        _stage(lake, rid, bid, updates, Verb.RESET)
    return len(updates)


def summarize(changes: Sequence[Change]) -> dict[str, int]:
    out = {t.value: 0 for t in (DiffType.ADDED, DiffType.REMOVED, DiffType.CHANGED)}
    for c in changes:
        out[c.type.value] += 1
    return out
