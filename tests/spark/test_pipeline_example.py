"""examples/pipeline.py, run as written: a good run lands on main, a bad one leaves main untouched."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import lakectl
import lakectl.spark
from lakectl.client import Backend

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline.py"


@pytest.fixture(scope="module")
def pipeline() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pipeline_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree(backend: Backend, ref: str) -> dict[str, str]:
    return {o.path: o.entry.checksum for o in backend.list_objects("analytics", ref) if o.entry}


def test_a_good_run_is_validated_committed_and_merged(
    spark: Any, pipeline: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = lakectl.Client(home=str(tmp_path / "lake"))
    backend = client.backend
    lakectl.spark.register(spark, home=str(tmp_path / "lake"))
    assert pipeline.run(spark, client) is True
    out = capsys.readouterr().out
    assert "validated 7 rows" in out and "added    marts/daily_revenue/part-00000-" in out
    mart = spark.read.format("lakefs").load("lakefs://analytics/main/marts/daily_revenue")
    rows = sorted(mart.collect())
    assert [r.day for r in rows] == list(range(1, 8))
    assert all(r.orders == 1000 for r in rows)
    assert rows[0].revenue == sum((i % 97) * 1.5 for i in range(1000))
    head = backend.get_commit("analytics", "main")
    assert head.message.startswith("Merge etl-") and len(head.parents) == 2
    assert [b.name for b in backend.list_branches("analytics")] == ["main"]
    backend.close()


def test_a_failing_validation_deletes_the_branch_and_leaves_main_untouched(
    spark: Any, pipeline: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = lakectl.Client(home=str(tmp_path / "lake"))
    backend = client.backend
    lakectl.spark.register(spark, home=str(tmp_path / "lake"))
    pipeline.seed(client)
    before, head = tree(backend, "main"), backend.get_commit("analytics", "main").id
    assert pipeline.run(spark, client, break_it=True) is False
    assert "validation failed: 7 day(s) with negative revenue" in capsys.readouterr().out
    assert tree(backend, "main") == before
    assert backend.get_commit("analytics", "main").id == head
    assert backend.diff_uncommitted("analytics", "main") == []
    assert [b.name for b in backend.list_branches("analytics")] == ["main"]
    backend.close()
