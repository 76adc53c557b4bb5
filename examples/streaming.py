"""A streaming pipeline on Spark: ingest on a branch, clean exactly once, merge after a check.

    python examples/streaming.py               # one round: produce, stream, check, merge
    python examples/streaming.py --rounds 3    # three rounds; each streams only what is new

A producer lands raw click events on the ``ingest`` branch, one JSON Lines file and one commit at
a time. A Structured Streaming query reads ``ingest`` incrementally (each new commit is input,
offsets are commit ids), drops malformed events and writes the cleaned table to the ``staging``
branch, one commit per micro-batch, exactly once (a restarted query skips the batches it already
committed). A final step checks ``staging`` and merges it into ``main``; a failed check leaves
``main`` untouched. The checkpoint (``--checkpoint``, kept between runs) is what makes a second
run read only the commits made since the first. Works on the embedded lake ($LAKECTL_HOME) or a
lakectl server, like the CLI. Needs PySpark (``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import lakectl.spark
from lakectl.client import Backend, get_backend
from lakectl.errors import LakectlError, NotFound

REPO = "clicks"
RAW = "raw/clicks"
CLEAN = "clean/clicks"
EVENTS_PER_FILE = 200
SCHEMA = "event_id long, user_id string, amount double"


class CheckFailed(Exception):
    pass


def seed(backend: Backend, repo: str = REPO) -> None:
    """The repository and its two work branches, once."""
    try:
        backend.get_repo(repo)
        return
    except NotFound:
        backend.create_repo(repo)
    backend.create_branch(repo, "ingest", "main")
    backend.create_branch(repo, "staging", "main")


def produce(backend: Backend, repo: str, number: int) -> str:
    """One file of raw events on ``ingest``, committed: every tenth event is malformed (no user,
    or a negative amount), as real feeds are. Returns the commit id."""
    lines = []
    for i in range(EVENTS_PER_FILE):
        event_id = number * EVENTS_PER_FILE + i
        user = None if i % 20 == 0 else f"u{event_id % 37}"
        amount = -1.0 if i % 20 == 10 else round((event_id % 50) * 0.25, 2)
        lines.append(json.dumps({"event_id": event_id, "user_id": user, "amount": amount}))
    body = ("\n".join(lines) + "\n").encode()
    backend.upload(
        repo, "ingest", f"{RAW}/batch-{number:05d}.json", body, content_type="application/x-ndjson"
    )
    return backend.commit(repo, "ingest", f"ingest batch {number}", {"events": str(EVENTS_PER_FILE)}).id


def stream(spark: Any, repo: str, checkpoint: str) -> None:
    """Every commit on ``ingest`` not yet read, cleaned onto ``staging``: one commit per
    micro-batch, exactly once; ends when it has read what is there (``availableNow``)."""
    raw = (
        spark.readStream.format("lakefs")
        .schema(SCHEMA)
        .option("format", "json")
        .option("startingCommit", "earliest")
        .load(f"lakefs://{repo}/ingest/{RAW}")
    )
    clean = raw.where("user_id IS NOT NULL AND amount >= 0")
    query = (
        clean.writeStream.format("lakefs")
        .option("checkpointLocation", checkpoint)
        .option("commit_message", "cleaned clicks")
        .trigger(availableNow=True)
        .start(f"lakefs://{repo}/staging/{CLEAN}")
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")


def check(spark: Any, repo: str) -> int:
    """The cleaned table on ``staging`` as main may take it: no malformed event, no event twice.
    Returns its rows."""
    table = spark.read.format("lakefs").load(f"lakefs://{repo}/staging/{CLEAN}")
    rows = table.count()
    bad = table.where("user_id IS NULL OR amount < 0").count()
    if bad:
        raise CheckFailed(f"{bad} malformed event(s) on staging")
    distinct = table.select("event_id").distinct().count()
    if distinct != rows:
        raise CheckFailed(f"{rows - distinct} event(s) landed twice")
    return rows


def promote(spark: Any, backend: Backend, repo: str) -> bool:
    """Merge ``staging`` into ``main`` when the check passes; True when merged."""
    try:
        rows = check(spark, repo)
    except CheckFailed as e:
        print(f"check failed: {e}; main untouched")
        return False
    if not list(backend.diff_refs(repo, "main", "staging")):
        print(f"nothing new on staging ({rows} rows); main is up to date")
        return True
    merged = backend.merge(repo, "staging", "main", message=f"Promote cleaned clicks ({rows} rows)")
    print(f"checked {rows} rows on staging; merged into main as {merged.commit.id[:12]}")
    return True


def run(spark: Any, backend: Backend, checkpoint: str, rounds: int = 1, repo: str = REPO) -> bool:
    """``rounds`` files produced, streamed and promoted; True when main took them."""
    seed(backend, repo)
    first = sum(1 for o in backend.list_objects(repo, "ingest", RAW + "/"))
    for number in range(first, first + rounds):
        print(f"ingest: batch {number} committed as {produce(backend, repo, number)[:12]}")
    stream(spark, repo, checkpoint)
    batches = [c for c in backend.log(repo, "staging", first_parent=True) if "lakectl_batch_id" in c.metadata]
    print(f"staging: {len(batches)} streaming commit(s) so far")
    return promote(spark, backend, repo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="files to produce before streaming (default 1)")
    parser.add_argument(
        "--checkpoint",
        default=str(Path.home() / ".lakectl-streaming-example"),
        help="the query's checkpoint directory, kept between runs",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)
    from lakectl.spark.session import session

    try:
        spark = session(args.master, "lakectl-streaming")
    except LakectlError as e:  # no pyspark, or no Java: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    lakectl.spark.register(spark)
    backend = get_backend()
    try:
        return 0 if run(spark, backend, args.checkpoint, args.rounds) else 1
    finally:
        backend.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
