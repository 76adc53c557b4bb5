"""The opened lake: its stores and the plumbing built on them, and what every verb module shares.

The floor between the version graph and the verbs (ARCHITECTURE.md, "Layers"): it knows the
events seam (:mod:`lakectl.core.events`) and nothing above it. The journal and the actions hear
the verbs through that seam, installed by whoever opens the lake
(:func:`lakectl.core.opening.open_lake` embedded, ``server.app`` served), never by this module.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakectl.core.blocks import BlockAdapter
from lakectl.core.events import EventSink, NoEvents, release
from lakectl.core.graph.commits import Committer
from lakectl.core.graph.ranges import RangeStore
from lakectl.core.graph.refs import RefStore, check_branch_name, check_repo_name
from lakectl.core.graph.staging import Staging
from lakectl.core.graph.tree import Trees
from lakectl.core.hostpaths import Confinement
from lakectl.core.identity import Identity, open_metadata
from lakectl.core.kv import KVStore
from lakectl.core.model import BranchId, RepositoryId
from lakectl.errors import BranchNotFound, InvalidArgument, InvalidName, InvalidRef, NotFound, StorageError

if TYPE_CHECKING:
    # Imported by the verbs that write: a read (`fs stat`, `branch list`) is done before it would load.
    from lakectl.core import protection

Progress = Callable[[int], None]
"""Called with a number of bytes (or files) just done."""

NewBlocks = Callable[[str, int], None]
"""Called with the bare locator and size of each block an upload stored that the store did not
hold before: what deduplication did not save. Two puts of one block that race may both tell it;
a caller that adds sizes keys them by locator."""

PROGRESS_EVERY = 64
"""Small files are reported to a progress callback in groups of this many (a large one at
once): a progress bar's update costs more than reading and hashing a 4 KiB file."""

LIST_PAGE = 1000

READ_AHEAD = 2
"""Blocks a whole-file read verifies ahead of its caller: one per core here (docs/decisions/0015)."""


@dataclass
class Lake:
    """An opened lake: its KV store and block adapter, and the plumbing built from them."""

    kv: KVStore
    blocks: BlockAdapter
    home: str = ""
    identity: Identity | None = None
    """Its identity record, when opened by :func:`open_bare` or a server."""
    events: EventSink = field(default_factory=NoEvents)
    """Where mutating verbs announce themselves (:mod:`lakectl.core.events`)."""
    confinement: Confinement | None = None
    """The host paths imported objects may be read from: a server's; ``None`` (embedded): any."""

    def __post_init__(self) -> None:
        self.ranges = RangeStore(self.blocks)
        self.trees = Trees(self.ranges)
        self.refs = RefStore(self.kv)
        self.staging = Staging(self.kv, self.refs, self.trees)
        self.committer = Committer(self.refs, self.staging, self.trees, self.blocks)

    def close(self) -> None:
        release(self.events)  # while the store is still open: the journal decides its intents
        self.kv.close()


def default_home() -> str:
    """``LAKECTL_HOME``, else lakectl's directory under the user's data directory."""
    home = os.environ.get("LAKECTL_HOME")
    if home:
        return home
    from platformdirs import user_data_dir

    return user_data_dir("lakectl", appauthor=False)


def open_bare(home: str | None = None, create: bool = False) -> Lake:
    """Open the embedded lake at ``home``: SQLite metadata (``lake.db``) + block directory, with
    no consumer of its events yet (:func:`lakectl.core.opening.open_lake` wires them in).

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
    return Lake(kv=kv, blocks=blocks, home=home, identity=identity)


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


clock: Callable[[], float] = time.time
"""The verbs' clock, read through :func:`now` at each call: a test that sets it sets every verb's."""


def now() -> int:
    """The time now in whole seconds (commit dates, entries' mtimes, retention), by :data:`clock`."""
    return int(clock())


# -- the branch a write goes to --------------------------------------------------------------


def branch_target(lake: Lake, repo: str, branch: str) -> tuple[RepositoryId, BranchId]:
    """The branch a write goes to; a ref that exists but is no branch is a clear InvalidRef."""
    rid = lake.refs.get_repo(check_repo_name(repo)).name
    try:
        bid = check_branch_name(branch)
        lake.refs.get_branch(rid, bid)
    except (BranchNotFound, InvalidName) as missing:
        try:
            resolved = lake.refs.resolve(rid, branch)
        except (NotFound, InvalidArgument):
            raise missing from None
        if resolved.branch is not None:  # deleted, then created again between the two looks
            raise missing from None
        raise InvalidRef(f"{branch!r} is not a branch: only branches can be written to") from None
    return rid, bid


def write_target(lake: Lake, repo: str, branch: str, move: protection.Move) -> tuple[RepositoryId, BranchId]:
    """The branch a verb moves (``move``: staging, a commit, a merge...), refused with
    ``ProtectedBranch`` when a protection rule forbids that move (:func:`protection.guard`,
    the one check every verb that moves a branch goes through)."""
    from lakectl.core import protection

    rid, bid = branch_target(lake, repo, branch)
    protection.guard(lake.kv, rid, bid, move)
    return rid, bid
