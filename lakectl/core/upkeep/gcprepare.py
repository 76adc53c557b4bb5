"""Garbage-collection preparation as lakeFS's GC client asks for it: a run's commits (expired or
not) and the repository's uncommitted addresses, stored as blocks, and the run's tasks.

lakeFS writes these files to the storage namespace for its Spark job. Here they are computed by
this lake's own collector (:mod:`lakectl.core.upkeep.gc`: the same rules, retention and uncommitted
blocks a collection keeps) and stored as blocks of the lake's block store:

- the commits, a CSV with the header ``commit_id,expired,metarange_id`` and one row per commit
  of the repository (``expired`` is ``true`` or ``false``), in commit id order;
- the uncommitted addresses, a Parquet file of lakeFS's schema (``physical_address`` string,
  ``creation_date`` int64): the ``local://<locator>`` address of every block that a staged entry
  or a part of a multipart upload in flight references, with the run's time (seconds).

Nothing refers to these blocks: a collection keeps them for its grace period after they were
written (``gc.GRACE_SECONDS``), like any other unreferenced block, then deletes them.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from lakectl.core import keys
from lakectl.core.blocks.data import write_bytes
from lakectl.core.lake import Lake
from lakectl.core.model import BLOCK_ADDRESS_SCHEME, BLOCK_SIZE
from lakectl.core.porcelain import get_repo
from lakectl.core.upkeep import gc, retention
from lakectl.errors import KeyNotFound, LakectlError, NotFound, PreconditionFailed

COMMITS_HEADER = ("commit_id", "expired", "metarange_id")
TASK_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True, slots=True)
class PreparedCommits:
    """One run's commits file: its run id and the block that holds the CSV."""

    run_id: str
    commits: str
    """Bare locator of the commits CSV."""

    def to_dict(self) -> dict[str, str]:
        return {"run_id": self.run_id, "commits": self.commits}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> PreparedCommits:
        return PreparedCommits(str(d["run_id"]), str(d["commits"]))


@dataclass(frozen=True, slots=True)
class PreparedUncommitted:
    """One run's uncommitted addresses: its run id and the block of the Parquet file, or None
    when nothing is uncommitted (lakeFS then writes no file)."""

    run_id: str
    addresses: str | None
    count: int


def prepare_commits(lake: Lake, repo: str, now: float | None = None) -> PreparedCommits:
    """Store the repository's commits with their expiry under its rules (``now`` dates them) as
    the commits CSV of a new run."""
    rid = get_repo(lake, repo).name
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COMMITS_HEADER)
    for commit, kept in retention.retention(lake, rid, now):
        writer.writerow((commit.id, "false" if kept else "true", commit.meta_range_id))
    return PreparedCommits(uuid.uuid4().hex, _store(lake, out.getvalue().encode(), "commits list"))


def prepare_uncommitted(lake: Lake, repo: str) -> PreparedUncommitted:
    """Store the addresses of every block the repository's staged entries and multipart uploads
    in flight reference as the uncommitted-addresses file of a new run."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rid = get_repo(lake, repo).name
    at = int(time.time())
    found: set[str] = set()
    for _, _, locators in gc.staged_blocks(lake, rid):
        found.update(locators)
    for _, _, locators in gc.upload_blocks(lake, rid):
        found.update(locators)
    run_id = uuid.uuid4().hex
    if not found:
        return PreparedUncommitted(run_id, None, 0)
    addresses = sorted(BLOCK_ADDRESS_SCHEME + locator for locator in found)
    table = pa.table(
        {
            "physical_address": pa.array(addresses, pa.string()),
            "creation_date": pa.array([at] * len(addresses), pa.int64()),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return PreparedUncommitted(run_id, _store(lake, out.getvalue(), "uncommitted addresses"), len(addresses))


def _store(lake: Lake, data: bytes, what: str) -> str:
    if len(data) > BLOCK_SIZE:
        raise PreconditionFailed(
            f"the {what} of this repository is larger than one block ({len(data)} bytes): "
            "collect it with `lakectl gc run` (or its Spark job) instead"
        )
    [locator] = write_bytes(lake.blocks, data).locators
    lake.blocks.sync()
    return locator


# -- tasks: lakeFS's asynchronous preparation ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Task:
    """lakeFS's ``PrepareGarbageCollectionCommitsStatus``, with the result's block unsigned."""

    task_id: str
    completed: bool
    update_time: float
    result: PreparedCommits | None = None
    error: dict[str, str] | None = None
    """``{code, message}`` of a preparation that failed."""

    def encode(self) -> bytes:
        return json.dumps(
            {
                "task_id": self.task_id,
                "completed": self.completed,
                "update_time": self.update_time,
                "result": self.result.to_dict() if self.result is not None else None,
                "error": self.error,
            },
            sort_keys=True,
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> Task:
        d = json.loads(raw)
        result = PreparedCommits.from_dict(d["result"]) if d.get("result") else None
        return Task(d["task_id"], d["completed"], d["update_time"], result, d.get("error"))


def submit(lake: Lake, repo: str, now: float | None = None) -> Task:
    """Prepare a run's commits and record the outcome (its result, or the error it failed with)
    under a new task id. The work runs in the caller, so the task is complete when it is
    returned; its record stays in the repository's partition for :func:`status`."""
    rid = get_repo(lake, repo).name
    task_id = uuid.uuid4().hex
    try:
        task = Task(task_id, True, time.time(), result=prepare_commits(lake, rid, now))
    except LakectlError as exc:
        task = Task(task_id, True, time.time(), error={"code": exc.code, "message": exc.message})
    lake.kv.set(keys.repo_partition(rid), keys.gc_prepare_key(task_id), task.encode())
    return task


def status(lake: Lake, repo: str, task_id: str) -> Task:
    """The task's record; ``NotFound`` for an id this repository never issued."""
    rid = get_repo(lake, repo).name
    missing = NotFound(f"no garbage-collection preparation task {task_id[:80]!r} in repository {rid!r}")
    if not TASK_ID.fullmatch(task_id):
        raise missing
    try:
        return Task.decode(lake.kv.get(keys.repo_partition(rid), keys.gc_prepare_key(task_id)))
    except KeyNotFound:
        raise missing from None
