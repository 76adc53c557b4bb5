"""Provenance recorded by the ``lakefs`` data source on a real local[2] Spark, embedded and against
a server: two chained jobs of one application each record what they read since the previous
commit (resolved commit ids and paths) and the code that ran, and ``provenance`` follows the
chain from the last output back to the raw data."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakectl.core.graph.inputs import CODE, INPUTS
from lakectl.spark.provenance import Recorder
from tests.server.conftest import unique
from tests.spark.test_source import Lake, events, lake, parquet

__all__ = ["lake"]


def head(lake: Lake, repo: str, branch: str = "main") -> Any:
    return lake.backend.get_commit(repo, branch)


def test_two_chained_jobs_record_their_inputs_and_code(lake: Lake, spark: Any) -> None:
    raw, etl, marts = (unique(stem) for stem in ("raw", "etl", "marts"))
    for repo in (raw, etl, marts):
        lake.backend.create_repo(repo)
    lake.backend.upload(raw, "main", "events/day=1/part-0.parquet", parquet(events(1)))
    ingest = lake.backend.commit(raw, "main", "ingest")
    lake.register(spark)
    Recorder(str(spark.sparkContext.applicationId)).metadata()  # what earlier tests read: not ours

    source = spark.read.format("lakefs").load(f"lakefs://{raw}/main/events")
    clean = source.where("score >= 1")
    clean.write.format("lakefs").mode("overwrite").option("commit_message", "clean").save(
        f"lakefs://{etl}/main/clean"
    )
    cleaned = head(lake, etl)
    assert json.loads(cleaned.metadata[INPUTS]) == [
        {"repository": raw, "commit": ingest.id, "path": "events"}
    ]
    assert json.loads(cleaned.metadata[CODE])["script"]

    daily = spark.read.format("lakefs").load(f"lakefs://{etl}/main/clean").groupBy("name").count()
    daily.write.format("lakefs").mode("overwrite").option("commit_message", "daily").save(
        f"lakefs://{marts}/main/daily"
    )
    made = head(lake, marts)
    assert json.loads(made.metadata[INPUTS]) == [{"repository": etl, "commit": cleaned.id, "path": "clean"}]

    tree = lake.backend.provenance(marts, "main", "daily")
    assert tree["commit"]["id"] == made.id
    [from_etl] = tree["inputs"]
    assert from_etl["commit"]["id"] == cleaned.id
    [from_raw] = from_etl["inputs"]
    assert from_raw["commit"]["id"] == ingest.id and from_raw["inputs"] == []
    [downstream] = lake.backend.downstream(raw, ingest.id)
    assert (downstream["repository"], downstream["commit"]["id"]) == (etl, cleaned.id)


class Receiver(http.server.BaseHTTPRequestHandler):
    """An OpenLineage endpoint: keeps every event POSTed to it."""

    events: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).events.append(json.loads(body))
        self.send_response(201)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.events = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_each_commit_is_an_openlineage_run_event_when_a_url_is_set(
    lake: Lake, spark: Any, receiver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, out = unique("raw"), unique("out")
    for repo in (raw, out):
        lake.backend.create_repo(repo)
    lake.backend.upload(raw, "main", "events/part-0.parquet", parquet(events(2)))
    ingest = lake.backend.commit(raw, "main", "ingest")
    monkeypatch.setenv("OPENLINEAGE_URL", receiver)
    lake.register(spark)
    Recorder(str(spark.sparkContext.applicationId)).metadata()
    try:
        spark.read.format("lakefs").load(f"lakefs://{raw}/main/events").write.format("lakefs").mode(
            "overwrite"
        ).option("commit_message", "copy").save(f"lakefs://{out}/main/copy")
    finally:
        monkeypatch.delenv("OPENLINEAGE_URL")
        lake.register(spark)  # later tests announce nothing
    made = head(lake, out)
    [event] = Receiver.events
    assert event["eventType"] == "COMPLETE" and event["job"]["namespace"] == "lakectl"
    [output] = event["outputs"]
    assert (output["namespace"], output["name"]) == (f"lakefs://{out}", "copy")
    assert output["facets"]["version"]["datasetVersion"] == made.id
    [source] = event["inputs"]
    assert (source["namespace"], source["name"]) == (f"lakefs://{raw}", "events")
    assert source["facets"]["version"]["datasetVersion"] == ingest.id


def test_a_stream_from_a_branch_into_a_branch_records_each_batch_input(
    lake: Lake, spark: Any, tmp_path: Path
) -> None:
    repo = unique("streamprov")
    b = lake.backend
    b.create_repo(repo)
    b.create_branch(repo, "out", "main")
    b.upload(repo, "main", "in/a.json", b'{"n": 1}\n')
    first = b.commit(repo, "main", "a").id
    lake.register(spark)
    Recorder(str(spark.sparkContext.applicationId)).metadata()  # what earlier tests read: not ours
    stream = spark.readStream.format("lakefs").option("format", "json").option("startingCommit", "earliest")
    query = (
        stream.load(f"lakefs://{repo}/main/in")
        .writeStream.format("lakefs")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .option("format", "json")
        .trigger(availableNow=True)
        .start(f"lakefs://{repo}/out/copied")
    )
    assert query.awaitTermination(180) and query.exception() is None
    made = head(lake, repo, "out")
    assert json.loads(made.metadata[INPUTS]) == [{"repository": repo, "commit": first, "path": "in"}]
    [downstream] = lake.backend.downstream(repo, first)
    assert downstream["commit"]["id"] == made.id
