"""A streaming driver run as its own process, so a test can kill it with SIGKILL mid-stream:
``python -m tests.spark.stream_driver CONNECT SOURCE CHECKPOINT URI`` reads the JSON Lines files of
SOURCE one per micro-batch and writes each batch as one commit at URI (``availableNow``), on the
lake CONNECT names (JSON: ``home``, or ``endpoint`` and keys)."""

from __future__ import annotations

import json
import sys

import lakectl.spark
from lakectl.sparkjobs.session import session


def main(connect: str, source: str, checkpoint: str, uri: str) -> int:
    spark = session("local[2]", "lakectl-stream-driver")
    lakectl.spark.register(spark, **json.loads(connect))
    stream = spark.readStream.schema("id long, name string").option("maxFilesPerTrigger", 1).json(source)
    query = (
        stream.writeStream.format("lakefs")
        .option("checkpointLocation", checkpoint)
        .option("format", "json")
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()
    spark.stop()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
