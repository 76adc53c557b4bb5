"""lakectl on Spark: the ``lakefs`` data source, which reads and writes a lake through the client.

    import lakectl.spark
    lakectl.spark.register(spark)
    df = spark.read.format("lakefs").load("lakefs://repo/main/events")
    df.write.format("lakefs").mode("overwrite").option("commit_message", "daily").save(
        "lakefs://repo/etl/events")

Needs PySpark 4.2+ (the ``spark`` extra: :data:`lakectl.spark.session.INSTALL`) and Java 17+.

This package is the floor above :mod:`lakectl.client`: its modules import the client. The Spark
jobs the backends and the server run (garbage collection, fsck, table diff and merge) are in
:mod:`lakectl.sparkjobs`, below the client.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(
    spark: Any,
    *,
    home: str | None = None,
    endpoint: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
) -> None:
    """Register the ``lakefs`` format on ``spark``, bound to one lake: ``home`` (embedded),
    ``endpoint`` and credentials (a lakectl server), else the lake the CLI would use here.

    The lake is captured now, on the driver, and travels with the data source to the executors
    (which do not see this process's environment)."""
    import sys

    from lakectl.spark.lake import Connection
    from lakectl.spark.lineage import configured_url
    from lakectl.spark.provenance import Recorder, code_identity
    from lakectl.spark.streaming import LakeFSStreamingSource

    context = spark.sparkContext
    if str(context.master).startswith("local"):
        check_workers_import_lakectl(str(context.pythonExec))
    connection = Connection.resolve(home, endpoint, access_key_id, secret_access_key)
    parallelism = int(spark.sparkContext.defaultParallelism)
    script = sys.argv[0] if sys.argv else ""
    recorder = Recorder(str(context.applicationId), code_identity(script), configured_url())
    # A subclass carries the lake: Spark pickles the registered class by value.
    attributes = {"connection": connection, "parallelism": parallelism, "provenance": recorder}
    bound = type("LakeFSDataSource", (LakeFSStreamingSource,), {**attributes, "__module__": __name__})
    spark.dataSource.register(bound)


def check_workers_import_lakectl(python: str) -> None:
    """Refuse, with the one line that says what to do, a local session whose Python workers run
    an interpreter that cannot import lakectl: every read would otherwise fail deep in a task
    with a worker traceback. (On a cluster the workers' interpreters are not this machine's.)"""
    import subprocess
    import sys

    from lakectl.errors import InvalidArgument

    try:
        found = subprocess.run(
            [python, "-c", "import lakectl.spark.source"], capture_output=True, timeout=60
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        found = -1
    if found != 0:
        raise InvalidArgument(
            f"Spark's Python workers run {python!r}, which cannot import lakectl: start the session "
            f"with PYSPARK_PYTHON={sys.executable} (lakectl.spark.session.session() does), or "
            "install lakectl for that interpreter"
        )
