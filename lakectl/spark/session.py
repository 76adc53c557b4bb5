"""A local Spark session set up the way lakectl's jobs and tests need it.

Spark's Python workers start ``python3`` from PATH unless told otherwise, which is not the
interpreter (or virtualenv) lakectl runs in; and on a machine with several addresses the driver
may bind one the executors cannot reach. Both are pinned here before the JVM starts.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INSTALL = "pip install 'pyspark>=4.1' (the spark extra: pip install -e '.[spark]' in a clone of lakectl)"
"""How to get Spark support, as every message that needs it says: the first form works wherever
lakectl came from; the second installs the extra from a checkout."""


def session(master: str = "local[2]", app_name: str = "lakectl", **conf: str) -> SparkSession:
    """A SparkSession on ``master`` whose Python workers run this interpreter."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        from lakectl.errors import InvalidArgument

        raise InvalidArgument(f"Spark support needs pyspark: {INSTALL}; and Java 17+") from None
    # PySpark 4.3 warns about pandas 3 on every session; lakectl's Spark paths use Arrow, not pandas.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Spark's stage progress bar on a terminal only: quiet in pipes and logs, as lakectl is.
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
