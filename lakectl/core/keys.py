"""Every KV key layout of the lake, in one place."""

from __future__ import annotations

from lakectl.core.model import BranchId, CommitId, RepositoryId, StagingToken, TagId

REPOSITORIES = "repositories"
"""Partition of repository records, key = repository name."""

LAKE = "lake"
"""Partition of lake-wide settings."""
SIGNING_SECRET = "signing-secret"
IDENTITY = "identity"
"""Key, in :data:`LAKE`, of the lake's identity record (``lakectl.core.identity``):
``{"lake_id", "creation_date", "created_over_blocks"?}``."""


def repo_partition(repo: RepositoryId) -> str:
    """Partition of one repository's refs and commits."""
    return f"repo/{repo}"


def branch_key(branch: BranchId) -> str:
    return f"branch/{branch}"


BRANCH_PREFIX = "branch/"


def tag_key(tag: TagId) -> str:
    return f"tag/{tag}"


TAG_PREFIX = "tag/"


def commit_key(commit: CommitId) -> str:
    return f"commit/{commit}"


COMMIT_PREFIX = "commit/"

ANCESTRY_POSITIONS = 10**12
"""Positions on a lineage stay below this; merge keys count down from it so that a scan from a
position finds the merges below it, highest first."""


def ancestry_place_key(commit: CommitId) -> str:
    """Key, in the repository's partition, of a commit's place (``lakectl.core.graph.ancestry``):
    ``"<lineage> <position>"``."""
    return f"ancestry/place/{commit}"


def ancestry_slot_key(lineage: CommitId, position: int) -> str:
    """Key of the commit that holds ``position`` on ``lineage`` (claimed by compare-and-swap)."""
    return f"ancestry/slot/{lineage}/{position:012d}"


def ancestry_merge_prefix(lineage: CommitId) -> str:
    return f"ancestry/merge/{lineage}/"


def ancestry_merge_key(lineage: CommitId, position: int) -> str:
    """Key of the merge commit at ``position`` on ``lineage``; keys sort highest position first."""
    return f"{ancestry_merge_prefix(lineage)}{ANCESTRY_POSITIONS - position:013d}"


def ancestry_merge_position(key: str) -> int:
    return ANCESTRY_POSITIONS - int(key.rsplit("/", 1)[1])


PROVENANCE = "provenance"
"""Lake-wide partition of the reverse index of commits' inputs (``lakectl.core.graph.inputs``):
``<input repository>/<input commit>/<repository>/<commit>`` → empty."""


def provenance_prefix(repo: RepositoryId, commit: CommitId) -> str:
    return f"{repo}/{commit}/"


def provenance_key(repo: RepositoryId, commit: CommitId, made_repo: RepositoryId, made: CommitId) -> str:
    return f"{provenance_prefix(repo, commit)}{made_repo}/{made}"


def staging_partition(repo: RepositoryId, token: StagingToken) -> str:
    """Partition of one staging token: key = object path, value = row or tombstone."""
    return f"staging/{repo}/{token}"


def multipart_partition(repo: RepositoryId) -> str:
    """Partition of a repository's multipart uploads in flight:
    ``upload/<id>`` → the upload, ``part/<id>/<number, 5 digits>`` → one uploaded part."""
    return f"multipart/{repo}"


UPLOAD_PREFIX = "upload/"


def upload_key(upload_id: str) -> str:
    return f"upload/{upload_id}"


def part_prefix(upload_id: str) -> str:
    return f"part/{upload_id}/"


def part_key(upload_id: str, number: int) -> str:
    return f"part/{upload_id}/{number:05d}"


DUMP_PREFIX = "dump/"


def dump_key(dump_id: str) -> str:
    """Key, in the repository's partition, of a refs dump (``lakectl.core.upkeep.refsdump``): its manifest
    and the locators of its blocks, which garbage collection keeps."""
    return f"{DUMP_PREFIX}{dump_id}"


def task_key(task_id: str) -> str:
    """Key, in the repository's partition, of a finished refs dump or restore task (lakeFS's
    asynchronous ``/dump`` and ``/restore``): its JSON status."""
    return f"task/{task_id}"


def gc_prepare_key(task_id: str) -> str:
    """Key, in the repository's partition, of a garbage-collection preparation task (lakeFS's
    ``gc/prepare_commits/async``): its JSON status (``lakectl.core.upkeep.gcprepare``)."""
    return f"gc-prepare/{task_id}"


def import_key(import_id: str) -> str:
    """Key, in the repository's partition, of a zero-copy import's status (``lakectl.core.importing``)."""
    return f"import/{import_id}"


def import_cancel_key(import_id: str) -> str:
    """Key, in the repository's partition, set when a user cancels a running import."""
    return f"import-cancel/{import_id}"


GC_RULES = "settings/gc_rules"
"""Key, in the repository's partition, of its garbage-collection retention rules."""

REPOSITORY_METADATA = "settings/repository_metadata"
"""Key, in the repository's partition, of its metadata (a JSON object of strings)."""

BRANCH_PROTECTION = "settings/branch_protection"
"""Key, in the repository's partition, of its branch protection rules (``[{"pattern"}]``)."""

ACTION_RUN_PREFIX = "actions/run/"
"""Prefix, in the repository's partition, of its action runs (``lakectl.core.workflow.actionruns``):
``actions/run/<run id>`` → the run; run ids sort newest first."""


def action_run_key(run_id: str) -> str:
    return f"{ACTION_RUN_PREFIX}{run_id}"


def hook_run_prefix(run_id: str) -> str:
    """Prefix of a run's hook runs: ``actions/hook/<run id>/<hook run id>`` → the hook run."""
    return f"actions/hook/{run_id}/"


def hook_output_key(run_id: str, hook_run_id: str) -> str:
    """Key of one hook run's output (its log: the request and answer, or the program's output)."""
    return f"actions/output/{run_id}/{hook_run_id}"


def commit_runs_prefix(commit_id: str) -> str:
    """Prefix of the runs of one commit: ``actions/commit/<commit id>/<run id>`` → empty."""
    return f"actions/commit/{commit_id}/"


PULL_SEQUENCE = "pulls/sequence"
"""Key, in the repository's partition, of the last pull request number given (a decimal)."""

PULL_PREFIX = "pulls/pr/"
"""Prefix of the repository's pull requests: ``pulls/pr/<number, 10 digits>`` → the record, so
they list in number order."""


def pull_key(number: int) -> str:
    return f"{PULL_PREFIX}{number:010d}"


def pull_open_key(source: str, destination: str) -> str:
    """Key of the open pull request between two branches (its number), so that two are never open
    at once: ``pulls/open/<source>/<destination>`` (branch names hold no ``/``)."""
    return f"pulls/open/{source}/{destination}"


def pull_comment_sequence_key(number: int) -> str:
    """Key of the last comment number given on one pull request."""
    return f"pulls/comment-sequence/{number:010d}"


def pull_comment_prefix(number: int) -> str:
    """Prefix of one pull request's comments: ``pulls/comment/<pr>/<comment, 10 digits>``."""
    return f"pulls/comment/{number:010d}/"


def pull_review_prefix(number: int) -> str:
    """Prefix of one pull request's reviews, one per reviewer: ``pulls/review/<pr>/<user id>``."""
    return f"pulls/review/{number:010d}/"


JOURNAL = "journal"
"""Partition of the journal's shared records (``lakectl.core.journal``, docs/decisions/0009):
``cursor`` (the next logical timestamp, the last sealed batch, the generation),
``batch/<generation, 6 digits>/<first timestamp, 20 digits>`` (one sealed Parquet batch),
``writer/<id>`` (a process that wrote entries)."""
JOURNAL_CURSOR = "cursor"
JOURNAL_WRITER_PREFIX = "writer/"
JOURNAL_SETTING = "journal"
"""Key, in :data:`LAKE`, of the journal's switch: ``{"enabled", "since"}``."""


def journal_writer_key(writer: str) -> str:
    return f"{JOURNAL_WRITER_PREFIX}{writer}"


def journal_batch_key(first: int, generation: int = 0) -> str:
    """A sealed batch of the journal's ``generation`` (each compaction starts the next)."""
    return f"{journal_batch_prefix(generation)}{first:020d}"


def journal_batch_prefix(generation: int = 0) -> str:
    return f"batch/{generation:06d}/"


def journal_live_partition(writer: str) -> str:
    """Partition of one writer's unsealed entries: key = ``<clock hex>-<seq hex>``."""
    return f"journal/live/{writer}"


LEASES = "leases"
"""Partition of short leases (``lakectl.core.leases``): one key per thing held, its value the
holder and an expiry. A lease is deleted by its holder as soon as its work is done."""


def append_lease_key(repo: RepositoryId, branch: BranchId, path: str) -> str:
    """The lease appenders to one object on one branch serialize on (names hold no ``/``)."""
    return f"append/{repo}/{branch}/{path}"
