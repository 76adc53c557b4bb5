"""The ``rows`` merge strategy's merges as a Spark job: each unit (a partition directory both
sides changed, or an object both changed in place) merged on an executor.

The driver plans the units from the two sides' changes (:func:`lakectl.core.tablemerge.plan_units`,
a cost that follows the changes) and applies the outcomes to the merge commit, exactly as
in-process. Each executor task reads a unit's base, source and destination objects from the
local block directory, merges them with the core's own function
(:func:`lakectl.core.tablemerge.merge_unit`, so the rows, the conflicts and the written object
are the same as in-process), writes the merged object's blocks there and syncs them before it
reports. A table's partitions spread over the cluster; one partition is merged by one task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakectl.core import tablemerge
from lakectl.core.lake import Lake
from lakectl.errors import LakectlError, from_code
from lakectl.sparkjobs.session import executor_blocks, local_root, shared, translate

MAX_TASKS = 10_000
"""The most units one job schedules as tasks of their own (more share tasks)."""


def runner(master: str = "local[2]") -> tablemerge.UnitRunner:
    """A :class:`~lakectl.core.tablemerge.UnitRunner` that merges the units on Spark on
    ``master`` (the session Spark jobs share, :func:`lakectl.sparkjobs.session.shared`).
    ``InvalidArgument`` when the lake's blocks are not in a local block directory."""

    def on_spark(lake: Lake, units: Sequence[tablemerge.Unit]) -> list[tablemerge.Outcome]:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        root = local_root(lake, "merge --spark merges tables", "merge without --spark")
        with shared(master) as spark:
            tasks = spark.sparkContext.parallelize(list(enumerate(units)), min(len(units), MAX_TASKS))
            spark.sparkContext.setJobDescription(f"lakectl merge by rows: {len(units)} unit(s)")
            try:
                done = dict(tasks.map(lambda task: _merge(root, task)).collect())
            except (PySparkException, Py4JError) as exc:
                raise translate(exc, "the Spark table merge job") from exc
            finally:
                spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
        outcomes: list[tablemerge.Outcome] = []
        for i in range(len(units)):
            outcome = done[i]
            if isinstance(outcome, _Failed):
                raise from_code(outcome.code, outcome.message, outcome.details)
            outcomes.append(outcome)
        return outcomes

    return on_spark


class _Failed:
    """An error an executor met, as data: rebuilt on the driver as the same exception class."""

    def __init__(self, error: LakectlError) -> None:
        self.code, self.message, self.details = error.code, error.message, dict(error.details)


def _merge(root: str, task: tuple[int, tablemerge.Unit]) -> tuple[int, Any]:
    index, unit = task
    try:
        blocks = executor_blocks(root)
        outcome = tablemerge.merge_unit(blocks, unit)
    except LakectlError as e:
        return index, _Failed(e)
    blocks.sync()  # durable before the driver's commit names them
    return index, outcome
