"""Which table an object belongs to, by its path alone (no I/O, no pyarrow: the CLI uses it)."""

from __future__ import annotations

import re

from lakectl.core.tables.deltalog import table_root

TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")
_PARTITION = re.compile(r"[^/=]+=[^/]*/")


def table_of(path: str) -> str:
    """The table an object is part of: the Delta table whose log holds it (``tables/orders/`` of
    ``tables/orders/_delta_log/00000000000000000003.json``), the prefix above its first hive-style
    partition directory (``tables/orders/`` of ``tables/orders/date=1/part-0.parquet``), the
    object itself when it is a table file outside partitions, or "" when it is no table file."""
    root = table_root(path)
    if root is not None:
        return root
    if not path.endswith(TABLE_SUFFIXES):
        return ""
    found = _PARTITION.search(path)
    return path[: found.start()] if found is not None and found.start() > 0 else path
