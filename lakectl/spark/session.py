"""The SparkSession users start for the ``lakefs`` data source: ``lakectl.spark.session.session(master)``.

The builder itself lives with the jobs (:mod:`lakectl.sparkjobs.session`), which start the same
sessions below the client; this module keeps the path docs/spark.md and examples/pipeline.py
show users.
"""

from __future__ import annotations

from lakectl.sparkjobs.session import INSTALL, session

__all__ = ["INSTALL", "session"]
