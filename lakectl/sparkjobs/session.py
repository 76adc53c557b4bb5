"""A local Spark session set up the way lakectl's jobs and tests need it; the session the jobs
(garbage collection, fsck, table diff and merge) share; the block directory their executors read;
and their failures as lakectl errors.

Spark's Python workers start ``python3`` from PATH unless told otherwise, which is not the
interpreter (or virtualenv) lakectl runs in; and on a machine with several addresses the driver
may bind one the executors cannot reach. Both are pinned here before the JVM starts.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from lakectl import errors
from lakectl.errors import InvalidArgument, LakectlError, StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.lake import Lake

APP_NAME = "lakectl-jobs"

INSTALL = "pip install 'pyspark>=4.2' (the spark extra: pip install -e '.[spark]' in a clone of lakectl)"
"""How to get Spark support, as every message that needs it says: the first form works wherever
lakectl came from; the second installs the extra from a checkout."""


def session(master: str = "local[2]", app_name: str = "lakectl", **conf: str) -> SparkSession:
    """A SparkSession on ``master`` whose Python workers run this interpreter."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
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


def local_root(lake: Lake, doing: str, instead: str) -> str:
    """The absolute path of the lake's local block directory, which a Spark job's executors
    read at the same path. ``InvalidArgument`` when the lake keeps its blocks elsewhere, saying
    what the job does there (``doing``: "fsck --spark verifies blocks") and what to run
    ``instead`` ("run fsck without --spark")."""
    from lakectl.core.blocks.local import LocalAdapter

    if not isinstance(lake.blocks, LocalAdapter):
        raise InvalidArgument(
            f"{doing} in a local block directory (the embedded lake's, or a server's with one local "
            f"path); this lake keeps them in {lake.blocks!r}: {instead}"
        )
    return os.path.abspath(lake.blocks.root)


class _Shared:
    """The session jobs started here, and how many are using it: the last one out stops it.
    Concurrent jobs (threads of a server) share it instead of stopping it under each other."""

    lock = threading.Lock()
    session: SparkSession | None = None
    users = 0


@contextlib.contextmanager
def shared(master: str) -> Iterator[SparkSession]:
    """The active session (a notebook's, a test's: left running), else the one jobs started,
    else a new one on ``master``, stopped when the last job using it ends."""
    with _Shared.lock:
        if _Shared.session is None:
            active = _active()
            if active is not None:
                ours = False
            else:
                _Shared.session = _start(master)
                ours = True
        else:
            ours = True
        if ours:
            _Shared.users += 1
        spark = _Shared.session if ours else active
    assert spark is not None
    try:
        yield spark
    finally:
        if ours:
            with _Shared.lock:
                _Shared.users -= 1
                if _Shared.users == 0 and _Shared.session is not None:
                    _Shared.session.stop()
                    _Shared.session = None


def _active() -> SparkSession | None:
    try:
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    try:
        return SparkSession.active()
    except PySparkException:
        return None


def _start(master: str) -> SparkSession:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        return session(master, APP_NAME)  # raises InvalidArgument: install pyspark
    try:
        return session(master, APP_NAME)
    except PySparkException as exc:
        raise InvalidArgument(f"cannot start Spark on {master!r} (Java 17+ on PATH?): {exc}") from exc


_WORKER_ERROR = re.compile(r"lakectl\.errors\.(\w+): (.*)")


def translate(exc: Exception, job: str) -> LakectlError:
    """A failed Spark job as the lakectl error an executor raised (``BlockNotFound`` for a
    missing range, ``CorruptBlock``, ``StorageError``...), else as a ``StorageError`` saying
    which ``job`` ("the Spark garbage-collection job") failed."""
    found = _WORKER_ERROR.findall(str(exc))
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, LakectlError):
            try:
                return cls(message)
            except TypeError:
                pass
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return StorageError(f"{job} failed: {first}")


def executor_blocks(root: str) -> LocalAdapter:
    """The block directory ``root`` as an executor opens it: one that does not see it fails,
    where ``LocalAdapter`` would create an empty one (and a job would list nothing)."""
    from lakectl.core.blocks.local import LocalAdapter

    if not os.path.isdir(root):
        raise StorageError(f"the block directory {root} is not visible on this executor")
    return LocalAdapter(root)
