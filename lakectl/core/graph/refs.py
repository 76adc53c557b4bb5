"""Repositories, branches, tags and commits in the KV store, and resolution of ref expressions."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from lakectl.core import keys
from lakectl.core.graph import inputs
from lakectl.core.graph.ancestry import Ancestry
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import scan_prefix
from lakectl.core.model import (
    Branch,
    BranchId,
    Commit,
    CommitId,
    MetaRangeId,
    Repository,
    RepositoryId,
    StagingToken,
    Tag,
    TagId,
)
from lakectl.errors import (
    AlreadyExists,
    BranchNotFound,
    CommitNotFound,
    InvalidName,
    InvalidRef,
    KeyNotFound,
    PredicateFailed,
    RefNotFound,
    RepositoryNotFound,
    TagNotFound,
)

# \Z, not $: a $ also matches before a trailing newline, and "main\n" would be a branch name.
REPO_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}\Z")
BRANCH_NAME = re.compile(r"^\w[-\w]{0,254}\Z", re.ASCII)
TAG_NAME = re.compile(r"^\w[-\w.]{0,254}\Z", re.ASCII)
COMMIT_ID = re.compile(r"^[0-9a-f]{64}\Z")
COMMIT_PREFIX = re.compile(r"^[0-9a-f]{4,64}\Z")
_MODIFIER = re.compile(r"([~^])(\d*)")


def check_repo_name(name: str) -> RepositoryId:
    if not REPO_NAME.match(name):
        raise InvalidName(
            f"invalid repository name {name!r}: 3-63 characters of a-z, 0-9 and '-', "
            "starting with a letter or digit"
        )
    return RepositoryId(name)


def check_branch_name(name: str) -> BranchId:
    if not BRANCH_NAME.match(name):
        raise InvalidName(
            f"invalid branch name {name!r}: letters, digits, '_' and '-', not starting with '-'"
        )
    return BranchId(name)


def check_tag_name(name: str) -> TagId:
    if not TAG_NAME.match(name) or ".." in name or name.endswith((".", ".lock")):
        raise InvalidName(
            f"invalid tag name {name!r}: letters, digits, '_', '-' and '.', "
            "not starting with '-' or '.', no '..'"
        )
    return TagId(name)


def commit_id_of(
    parents: tuple[CommitId, ...],
    meta_range_id: MetaRangeId,
    message: str,
    committer: str,
    metadata: Mapping[str, str],
    creation_date: int,
) -> CommitId:
    """Content hash of a commit, as lakeFS: equal content gives an equal id."""
    canonical = json.dumps(
        {
            "parents": list(parents),
            "meta_range_id": meta_range_id,
            "message": message,
            "committer": committer,
            "metadata": dict(sorted(metadata.items())),
            "creation_date": creation_date,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return CommitId(hashlib.sha256(canonical.encode()).hexdigest())


@dataclass(frozen=True, slots=True)
class RefExpr:
    """A parsed ref expression: ``base`` (branch, tag or commit id), ``committed_only`` for
    ``branch@``, the ``~N`` / ``^N`` steps in order (kind, N), and ``staging`` for ``branch$``
    (lakeFS: the branch's staging area, so a diff to it includes the uncommitted changes)."""

    base: str
    committed_only: bool
    steps: tuple[tuple[str, int], ...]
    staging: bool = False


def parse_ref(text: str) -> RefExpr:
    if not text:
        raise InvalidRef("empty ref")
    cut = min((i for i in (text.find("~"), text.find("^")) if i >= 0), default=len(text))
    base, rest = text[:cut], text[cut:]
    committed_only = base.endswith("@")
    staging = base.endswith("$")
    if committed_only or staging:
        base = base[:-1]
    if staging and rest:
        raise InvalidRef(f"invalid ref {text!r}: '$' names a staging area, which has no ~ or ^ steps")
    if (
        not base
        or not (BRANCH_NAME.match(base) or TAG_NAME.match(base))
        or ".." in base
        or base.endswith((".", ".lock"))
    ):
        raise InvalidRef(f"invalid ref {text!r}")
    steps: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        m = _MODIFIER.match(rest, pos)
        if m is None:
            raise InvalidRef(f"invalid ref {text!r}: bad modifier at {rest[pos:]!r}")
        steps.append((m.group(1), int(m.group(2)) if m.group(2) else 1))
        pos = m.end()
    return RefExpr(base, committed_only, tuple(steps), staging)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A ref resolved to a commit; ``branch`` is set when reads must include its staged changes."""

    commit: Commit
    branch: Branch | None = None


class RefStore:
    """CRUD of repositories, branches, tags and commits; every update of a branch is a CAS."""

    def __init__(self, kv: KVStore) -> None:
        self.kv = kv
        self.ancestry = Ancestry(kv, self.get_commit)

    # -- repositories ---------------------------------------------------------------------

    def get_repo(self, name: RepositoryId) -> Repository:
        try:
            return Repository.decode(self.kv.get(keys.REPOSITORIES, name))
        except KeyNotFound:
            raise RepositoryNotFound(f"repository {name!r} not found") from None

    def create_repo(self, repo: Repository) -> None:
        try:
            self.kv.set_if(keys.REPOSITORIES, repo.name, repo.encode(), None)
        except PredicateFailed:
            raise AlreadyExists(f"repository {repo.name!r} already exists") from None

    def delete_repo_record(self, name: RepositoryId) -> None:
        self.kv.delete(keys.REPOSITORIES, name)

    def list_repos(self, after: str = "") -> Iterator[Repository]:
        for key, raw in self.kv.scan(keys.REPOSITORIES, after):
            if key != after or not after:
                yield Repository.decode(raw)

    # -- branches -------------------------------------------------------------------------

    def get_branch_raw(self, repo: RepositoryId, name: BranchId) -> tuple[Branch, bytes]:
        try:
            raw = self.kv.get(keys.repo_partition(repo), keys.branch_key(name))
        except KeyNotFound:
            raise BranchNotFound(f"branch {name!r} not found in repository {repo!r}") from None
        return Branch.decode(raw), raw

    def get_branch(self, repo: RepositoryId, name: BranchId) -> Branch:
        return self.get_branch_raw(repo, name)[0]

    def create_branch(self, repo: RepositoryId, branch: Branch) -> None:
        try:
            self.kv.set_if(keys.repo_partition(repo), keys.branch_key(branch.name), branch.encode(), None)
        except PredicateFailed:
            raise AlreadyExists(f"branch {branch.name!r} already exists") from None

    def swap_branch(self, repo: RepositoryId, old_raw: bytes, new: Branch) -> None:
        """Replace the branch record if it is still ``old_raw``; raise PredicateFailed if not."""
        self.kv.set_if(keys.repo_partition(repo), keys.branch_key(new.name), new.encode(), old_raw)

    def delete_branch(self, repo: RepositoryId, name: BranchId) -> None:
        self.kv.delete(keys.repo_partition(repo), keys.branch_key(name))

    def list_branches(self, repo: RepositoryId) -> Iterator[Branch]:
        for _, raw in scan_prefix(self.kv, keys.repo_partition(repo), keys.BRANCH_PREFIX):
            yield Branch.decode(raw)

    # -- tags -----------------------------------------------------------------------------

    def get_tag(self, repo: RepositoryId, name: TagId) -> Tag:
        try:
            raw = self.kv.get(keys.repo_partition(repo), keys.tag_key(name))
        except KeyNotFound:
            raise TagNotFound(f"tag {name!r} not found in repository {repo!r}") from None
        return Tag(name, CommitId(raw.decode()))

    def create_tag(self, repo: RepositoryId, tag: Tag) -> None:
        try:
            self.kv.set_if(keys.repo_partition(repo), keys.tag_key(tag.name), tag.commit_id.encode(), None)
        except PredicateFailed:
            raise AlreadyExists(f"tag {tag.name!r} already exists (tags are immutable)") from None

    def replace_tag(self, repo: RepositoryId, tag: Tag) -> None:
        """Create the tag, or point an existing one elsewhere (lakeFS ``tag create --force``: a
        delete then a create, here one write, so a reader never finds the tag missing)."""
        self.kv.set(keys.repo_partition(repo), keys.tag_key(tag.name), tag.commit_id.encode())

    def delete_tag(self, repo: RepositoryId, name: TagId) -> None:
        self.get_tag(repo, name)
        self.kv.delete(keys.repo_partition(repo), keys.tag_key(name))

    def list_tags(self, repo: RepositoryId) -> Iterator[Tag]:
        for key, raw in scan_prefix(self.kv, keys.repo_partition(repo), keys.TAG_PREFIX):
            yield Tag(TagId(key[len(keys.TAG_PREFIX) :]), CommitId(raw.decode()))

    # -- commits --------------------------------------------------------------------------

    def get_commit(self, repo: RepositoryId, cid: CommitId) -> Commit:
        try:
            return Commit.decode(self.kv.get(keys.repo_partition(repo), keys.commit_key(cid)))
        except KeyNotFound:
            raise CommitNotFound(f"commit {cid!r} not found in repository {repo!r}") from None

    def put_commit(self, repo: RepositoryId, commit: Commit) -> None:
        """Store the record and the commit's place in the ancestry index (before any branch can
        name it). Commits are content-addressed: writing the same id twice writes the same bytes."""
        self.kv.set(keys.repo_partition(repo), keys.commit_key(commit.id), commit.encode())
        self.index_commits(repo, [commit])

    def index_commits(self, repo: RepositoryId, commits: Iterable[Commit]) -> None:
        """Keep the indexes derived from commit records for ``commits``, stored: their places
        in the ancestry index and the reverse edges of their inputs (a restore stores records
        in batches, then calls this)."""
        listed = list(commits)
        self.ancestry.record_all(repo, listed)
        inputs.index(self.kv, repo, listed)

    def find_commit(self, repo: RepositoryId, prefix: str) -> Commit | None:
        """The commit whose id starts with ``prefix``; None if there is none; InvalidRef if several."""
        start = keys.commit_key(CommitId(prefix))
        found = [
            raw
            for key, raw in self.kv.scan(keys.repo_partition(repo), start, limit=2)
            if key.startswith(start)
        ]
        if len(found) > 1:
            raise InvalidRef(f"ambiguous commit id prefix {prefix!r}")
        return Commit.decode(found[0]) if found else None

    # -- resolution -----------------------------------------------------------------------

    def resolve(self, repo: RepositoryId, text: str) -> Resolved:
        """Resolve ``main``, ``main@``, ``main$``, a tag, a (prefix of a) commit id, then
        ``~N``/``^N``."""
        expr = parse_ref(text)
        resolved: Resolved | None = None
        try:
            branch = self.get_branch(repo, BranchId(expr.base))
            commit = self.get_commit(repo, branch.commit_id)
            resolved = Resolved(commit, None if expr.committed_only else branch)
        except BranchNotFound:
            if expr.committed_only or expr.staging:
                mark = "@" if expr.committed_only else "$"
                raise InvalidRef(f"{text!r}: '{mark}' applies to branches only") from None
        if resolved is None:
            try:
                tag = self.get_tag(repo, TagId(expr.base))
                resolved = Resolved(self.get_commit(repo, tag.commit_id))
            except TagNotFound:
                pass
        if resolved is None and COMMIT_PREFIX.match(expr.base):
            found = self.find_commit(repo, expr.base)
            if found is not None:
                resolved = Resolved(found)
        if resolved is None:
            self.get_repo(repo)
            raise RefNotFound(f"ref {expr.base!r} not found in repository {repo!r}")
        if not expr.steps:
            return resolved
        commit = resolved.commit
        for kind, n in expr.steps:
            if kind == "~":
                for _ in range(n):
                    commit = self._parent(repo, commit, 1, text)
            else:
                commit = self._parent(repo, commit, n, text) if n else commit
        return Resolved(commit)

    def _parent(self, repo: RepositoryId, commit: Commit, n: int, text: str) -> Commit:
        if n > len(commit.parents):
            raise RefNotFound(f"{text!r}: commit {commit.id[:12]} has no parent number {n}")
        return self.get_commit(repo, commit.parents[n - 1])


_TOKEN_CLOCK = [0]
_TOKEN_LOCK = threading.Lock()  # this process's token clock only, never shared metadata


def new_staging_token(at: int | None = None) -> StagingToken:
    """A fresh staging token that says when it was made: ``<ns since the epoch, 16 hex>-<16 random
    hex>``. A branch's tokens are made between reading the record and the compare-and-swap that
    installs one, so on one host their times follow the branch's CAS chain: a rebuild from the
    journal orders branch records by them (docs/decisions/0009-journal.md). ``at``: a token
    dated then (a rebuild replaying an entry of an older journal)."""
    import secrets  # here: a command that writes nothing does not import it (~1.6 ms)

    if at is not None:
        return StagingToken(f"{at:016x}-{secrets.token_hex(8)}")
    with _TOKEN_LOCK:
        _TOKEN_CLOCK[0] = max(_TOKEN_CLOCK[0] + 1, time.time_ns())
        made = _TOKEN_CLOCK[0]
    return StagingToken(f"{made:016x}-{secrets.token_hex(8)}")


def token_time(token: str) -> int | None:
    """When ``token`` was made (ns since the epoch); None for a token of the older random form."""
    if len(token) != 33 or token[16] != "-":
        return None
    try:
        return int(token[:16], 16)
    except ValueError:
        return None
