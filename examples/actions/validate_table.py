"""A pre-merge hook (lakeFS action, ``type: command``): the Parquet table about to be merged keeps
its schema and has enough rows, or the merge is refused.

It reads lakeFS's event JSON on stdin, and the table at the merge's source ref through the
``lakectl`` CLI (``fs ls``, ``fs cat``), so it runs wherever lakectl runs: against the embedded
lake (``LAKECTL_HOME``, which the hook inherits) or a server. Settings, from the action file's
``env``: ``TABLE`` (the table's prefix), ``COLUMNS`` (``name:type,...``, pyarrow type names) and
``MIN_ROWS``. Exit 0 passes; anything printed is the hook's output (``lakectl cat-hook-output``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq


def lakectl(*args: str) -> bytes:
    return subprocess.run(["lakectl", *args], check=True, capture_output=True).stdout


def main() -> int:
    event = json.load(sys.stdin)
    base = f"lakefs://{event['repository_id']}/{event['source_ref']}/"
    table = os.environ["TABLE"].strip("/") + "/"
    expected = dict(c.split(":", 1) for c in os.environ["COLUMNS"].split(","))
    min_rows = int(os.environ.get("MIN_ROWS", "1"))
    parts = [o["path"] for o in json.loads(lakectl("fs", "ls", "--recursive", "--json", base + table))]
    parts = [p for p in parts if p.endswith(".parquet")]
    if not parts:
        print(f"{table}: no Parquet files at {event['source_ref']}")
        return 1
    rows, problems = 0, []
    for path in parts:
        meta = pq.read_metadata(io.BytesIO(lakectl("fs", "cat", base + path)))
        schema = meta.schema.to_arrow_schema()
        found = {f.name: str(f.type) for f in schema}
        if found != expected:
            problems.append(f"{path}: columns {found}, expected {expected}")
        rows += meta.num_rows
    if rows < min_rows:
        problems.append(f"{table}: {rows} rows, expected at least {min_rows}")
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{table}: {len(parts)} file(s), {rows} rows, schema as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
