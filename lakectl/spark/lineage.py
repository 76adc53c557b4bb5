"""OpenLineage run events for the commits the ``lakefs`` data source makes, so that Marquez and
other lineage tools see lakectl's pipelines.

When ``OPENLINEAGE_URL`` is set, or ``openlineage.url`` in the lakectl configuration (read where
:func:`lakectl.spark.register` runs), each commit the source makes is announced as a ``COMPLETE``
run event through the ``openlineage-python`` client (the ``spark`` extra): its inputs (what the
commit records in ``lakectl_inputs``) and its output as datasets, in namespace
``lakefs://<repository>`` with the path as name and the commit id as the dataset version, and the
code it records as the job. The commit is made whatever becomes of the event: a lineage server
that cannot be reached costs a warning, never the data.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import UTC, datetime
from typing import Any

from lakectl.core.graph.inputs import Input, code_of, inputs_of
from lakectl.core.model import Commit

PRODUCER = "urn:lakectl:spark"
NAMESPACE = "lakectl"
"""The namespace of the jobs events name."""

log = logging.getLogger(__name__)


def configured_url() -> str | None:
    """Where events go: ``$OPENLINEAGE_URL``, else ``openlineage.url`` in the configuration."""
    url = os.environ.get("OPENLINEAGE_URL")
    if not url:
        from lakectl import config

        url = config.get("openlineage.url")
    return str(url) if url else None


def announce(url: str, repo: str, path: str, commit: Commit) -> None:
    """Emit the run event of ``commit``, which wrote ``path`` in ``repo``; a failure is a warning."""
    try:
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport.http import HttpConfig, HttpTransport

        client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, retry={"total": 2})))
        client.emit(run_event(repo, path, commit))
    except Exception as exc:
        log.warning("could not send the OpenLineage event of commit %s to %s: %s", commit.id[:12], url, exc)


def run_event(repo: str, path: str, commit: Commit) -> Any:
    """The ``COMPLETE`` run event of ``commit``: its recorded inputs and its output as datasets."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    code = code_of(commit) or {}
    job = os.path.basename(str(code.get("script") or "spark-application"))
    inputs = [InputDataset(**_dataset(i)) for i in inputs_of(commit)]
    output = OutputDataset(**_dataset(Input(repo, commit.id, path)))  # type: ignore[arg-type]
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace=NAMESPACE, name=job),
        inputs=inputs,
        outputs=[output],
        producer=PRODUCER,
    )


def _dataset(found: Input) -> dict[str, Any]:
    from openlineage.client.facet_v2 import dataset_version_dataset

    version = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=found.commit)
    return {
        "namespace": f"lakefs://{found.repository}",
        "name": found.path or "/",
        "facets": {"version": version},
    }
