"""One local[2] Spark session for every Spark test (the JVM and the Python workers cost seconds).

Spark needs pyspark (a test dependency) and Java 17+ (``scripts/ensure-java.sh`` installs it
under ``make test``). Where the machine truly lacks Java the tests skip with that reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    if shutil.which("java") is None:
        pytest.skip("SKIPPED LOUDLY: no `java` on PATH; run scripts/ensure-java.sh (make test does)")
    pytest.importorskip("pyspark", reason="pyspark is a test dependency: pip install -e '.[test]'")
    from lakectl.sparkjobs.session import session

    spark = session("local[2]", "lakectl-tests")
    yield spark
    spark.stop()
