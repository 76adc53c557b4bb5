"""lakectl.spark.register on a local master checks the workers' interpreter before any job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import lakectl.spark
from lakectl.errors import InvalidArgument


def test_workers_that_cannot_import_lakectl_are_refused_naming_pyspark_python(
    spark: Any, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    context = spark.sparkContext
    configured = context.pythonExec
    context.pythonExec = python  # as if PYSPARK_PYTHON named that interpreter
    try:
        with pytest.raises(InvalidArgument, match="PYSPARK_PYTHON") as info:
            lakectl.spark.register(spark, home=str(tmp_path / "lake"))
        assert python in str(info.value) and "\n" not in str(info.value)
    finally:
        context.pythonExec = configured
    lakectl.spark.register(spark, home=str(tmp_path / "lake"))  # the session's own interpreter
