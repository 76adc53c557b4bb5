"""Peers side by side: the keyed table diff in pyarrow (Acero's hash join, as the product does it)
against DuckDB reading the same Arrow tables, interleaved in one run.

Two versions of a 5-column table are built in memory (``k`` int64 key, ``x`` and ``y`` doubles,
``s`` string, ``d`` date32; ``--rows`` rows, 10M by default, in 20 partitions of consecutive
keys). The right side rewrites one partition: 1% of the table's rows changed (every one in
``x``, every 4th also in ``s``, every 10th in ``y``, every 7th in ``d``), 0.1% removed and 0.1%
added (new keys inside the partition's range). ``y`` holds nulls and NaNs on both sides, unchanged,
so the comparison must be null- and NaN-safe to find no change there.

Each engine diffs (a) the changed partition only (``rows / 20`` a side: what ``diff_table``
reads) and (b) the whole table (``rows`` a side: a full rewrite):

- ``pyarrow``: the product's keyed diff (``lakectl/core/tables/rows.py``) reduced to its essence:
  key uniqueness per side (``group_by`` count), a full outer ``Table.join`` of (key, position)
  tables, both sides taken by position, the 4 value columns compared null- and NaN-safely, counts
  of added, removed, changed rows and of changes per column.
- ``duckdb``: the two Arrow tables registered as views (``con.register``, no copy), the same
  uniqueness check, one ``FULL OUTER JOIN`` on the key with ``IS DISTINCT FROM`` per column and
  the same counts as one aggregate row, fetched as Arrow. ``duckdb-1GB`` is the same with
  ``SET memory_limit='1GB'`` (DuckDB spills its join to ``--dir``; the Arrow inputs are the
  caller's memory, outside that limit).

Every engine x case run is a fresh child process (this script with ``--child``), runs interleaved
round by round (engine order reversed every other round) so that the load of the machine falls on
both alike. A child builds its tables (not timed; deterministic, so every child diffs the same
data), resets its peak RSS (``/proc/self/clear_refs``), times the diff and prints its wall time,
the RSS of its data, its ``VmHWM`` and the counts. The counts are checked against the
construction and between engines. It does not import lakectl: it runs in any venv with pyarrow
and numpy; without duckdb it says so and runs pyarrow alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARTITIONS = 20
CHANGED_PART = PARTITIONS // 2
VALUES = ("x", "y", "s", "d")
CASES = {"partition": "changed partition", "whole": "whole table"}
ENGINES = ("pyarrow", "duckdb", "duckdb-1GB")
SEED = 14


# -- data ----------------------------------------------------------------------------------


def _edits(rows: int) -> tuple[int, int, int]:
    """Rows changed, removed, added: 1%, 0.1%, 0.1% of the table."""
    return rows // 100, rows // 1000, rows // 1000


def _partition(p: int, per: int) -> dict[str, Any]:
    """Partition ``p`` of the left side as numpy arrays (seeded by ``p``: the same alone or whole)."""
    rng = np.random.default_rng(SEED + p)
    y = np.round(rng.random(per) * 1000, 3)
    y[rng.random(per) < 0.005] = np.nan
    return {
        "k": np.arange(p * per, (p + 1) * per, dtype=np.int64) * 2,  # even keys; odd ones are added
        "x": np.round(rng.random(per) * 1000, 2),
        "y": y,
        "y_null": rng.random(per) < 0.01,
        "s": rng.integers(0, 1000, per),
        "d": (20_000 + rng.integers(0, 3650, per)).astype(np.int32),
    }


def _table(c: dict[str, Any]) -> pa.Table:
    names = pa.array([f"name-{i:04d}" for i in range(1000)])
    strings = names.take(pa.array(c["s"])) if c["s"].dtype.kind == "i" else pa.array(c["s"])
    return pa.table(
        {
            "k": c["k"],
            "x": c["x"],
            "y": pa.array(c["y"], mask=c["y_null"]),
            "s": strings,
            "d": pa.array(c["d"], pa.date32()),
        }
    )


def _edited(rows: int, per: int) -> pa.Table:
    """The changed partition on the right: its edits applied, removed rows gone, added rows last."""
    n_changed, n_removed, n_added = _edits(rows)
    c = _partition(CHANGED_PART, per)
    rng = np.random.default_rng(SEED + 1000)
    picked = rng.choice(per, n_changed + n_removed, replace=False)
    at, gone = np.sort(picked[:n_changed]), picked[n_changed:]
    names = pa.array([f"name-{i:04d}" for i in range(1000)]).take(pa.array(c["s"]))
    s = np.array(names.to_pylist(), dtype=object)
    j = np.arange(n_changed)
    c["x"][at] += 1.0
    c["s"] = s
    s[at[j % 4 == 0]] = "changed"
    c["y"][at[j % 10 == 0]] = -1.0 - j[j % 10 == 0]
    c["y_null"][at[j % 10 == 0]] = False
    c["d"][at[j % 7 == 0]] += 1
    keep = np.ones(per, dtype=bool)
    keep[gone] = False
    c = {name: v[keep] for name, v in c.items()}
    base = CHANGED_PART * per * 2
    odd = base + 1 + 2 * np.sort(rng.choice(per, n_added, replace=False)).astype(np.int64)
    new = _partition(PARTITIONS + 1, n_added)
    new["k"], new["s"] = odd, np.array(["added"] * n_added, dtype=object)
    return pa.concat_tables([_table(c), _table(new)])


def build(case: str, rows: int) -> tuple[pa.Table, pa.Table]:
    """Left and right of ``case``: the changed partition alone, or the whole table."""
    per = rows // PARTITIONS
    right_part = _edited(rows, per)
    if case == "partition":
        return _table(_partition(CHANGED_PART, per)), right_part
    lefts = [_table(_partition(p, per)) for p in range(PARTITIONS)]
    rights = [*lefts[:CHANGED_PART], right_part, *lefts[CHANGED_PART + 1 :]]
    return pa.concat_tables(lefts), pa.concat_tables(rights)


def expected(rows: int) -> dict[str, Any]:
    n_changed, n_removed, n_added = _edits(rows)
    per_column = {
        "x": n_changed,
        "y": len(range(0, n_changed, 10)),
        "s": len(range(0, n_changed, 4)),
        "d": len(range(0, n_changed, 7)),
    }
    return {"added": n_added, "removed": n_removed, "changed": n_changed, "columns": per_column}


# -- engines -------------------------------------------------------------------------------


def _differ(a: Any, b: Any) -> Any:
    """Where two columns differ, null equals null and NaN equals NaN (as ``rows.differ``)."""
    diff = pc.or_(pc.not_equal(pc.is_null(a), pc.is_null(b)), pc.invert(pc.fill_null(pc.equal(a, b), True)))
    if pa.types.is_floating(a.type):
        nan = pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))
        diff = pc.and_(diff, pc.invert(nan))
    return diff


def _unique(keys: pa.Table, index: str) -> None:
    counts = keys.group_by(["k"], use_threads=False).aggregate([(index, "count")])
    if pc.max(counts[f"{index}_count"]).as_py() > 1:
        raise SystemExit("key is not unique")


def diff_pyarrow(left: pa.Table, right: pa.Table) -> dict[str, Any]:
    lkeys = pa.table({"k": left["k"], "_l": np.arange(left.num_rows, dtype=np.int64)})
    rkeys = pa.table({"k": right["k"], "_r": np.arange(right.num_rows, dtype=np.int64)})
    _unique(lkeys, "_l")
    _unique(rkeys, "_r")
    joined = lkeys.join(rkeys, keys=["k"], join_type="full outer", coalesce_keys=True)
    li, ri = joined["_l"], joined["_r"]
    both = joined.filter(pc.and_(pc.is_valid(li), pc.is_valid(ri)))
    lb, rb = left.take(both["_l"]), right.take(both["_r"])
    any_diff = pa.repeat(pa.scalar(False), both.num_rows)
    columns = {}
    for name in VALUES:
        mask = _differ(lb[name], rb[name])
        columns[name] = pc.sum(mask).as_py() or 0
        any_diff = pc.or_(any_diff, mask)
    return {
        "added": pc.sum(pc.is_null(li)).as_py() or 0,
        "removed": pc.sum(pc.is_null(ri)).as_py() or 0,
        "changed": pc.sum(any_diff).as_py() or 0,
        "columns": columns,
    }


_DUCK_SQL = """
SELECT
  count(*) FILTER (WHERE l.k IS NULL) AS added,
  count(*) FILTER (WHERE r.k IS NULL) AS removed,
  count(*) FILTER (WHERE l.k IS NOT NULL AND r.k IS NOT NULL AND ({any})) AS changed,
  {per_column}
FROM lt AS l FULL OUTER JOIN rt AS r ON l.k = r.k
"""


def diff_duckdb(left: pa.Table, right: pa.Table, memory_limit: str, spill: str) -> dict[str, Any]:
    import duckdb  # imported by the child before the clock starts, as pyarrow is

    con = duckdb.connect()
    con.execute(f"SET temp_directory = '{spill}'")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    con.register("lt", left)
    con.register("rt", right)
    for side in ("lt", "rt"):
        dups = con.sql(f"SELECT count(*) FROM (SELECT k FROM {side} GROUP BY k HAVING count(*) > 1)")
        if dups.fetchall()[0][0]:
            raise SystemExit("key is not unique")
    distinct = {c: f"l.{c} IS DISTINCT FROM r.{c}" for c in VALUES}
    per_column = ",\n  ".join(
        f"count(*) FILTER (WHERE l.k IS NOT NULL AND r.k IS NOT NULL AND {d}) AS c_{c}"
        for c, d in distinct.items()
    )
    sql = _DUCK_SQL.format(any=" OR ".join(distinct.values()), per_column=per_column)
    row = con.sql(sql).to_arrow_table().to_pylist()[0]
    con.close()
    return {
        "added": row["added"],
        "removed": row["removed"],
        "changed": row["changed"],
        "columns": {c: row[f"c_{c}"] for c in VALUES},
    }


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024


def child(engine: str, case: str, rows: int, spill: str) -> None:
    if engine != "pyarrow":
        import duckdb  # noqa: F401 (its import is not the diff's time)
    left, right = build(case, rows)
    data = _status_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:  # the peak from here on: the diff's
        f.write("5")
    start = time.perf_counter()
    if engine == "pyarrow":
        counts = diff_pyarrow(left, right)
    else:
        counts = diff_duckdb(left, right, "1GB" if engine == "duckdb-1GB" else "", spill)
    seconds = time.perf_counter() - start
    out = {"seconds": seconds, "data_mib": data, "peak_mib": _status_mib("VmHWM"), "counts": counts}
    print(json.dumps(out), flush=True)


# -- parent --------------------------------------------------------------------------------


def run_child(engine: str, case: str, rows: int, spill: str) -> dict[str, Any]:
    argv = [sys.executable, os.path.abspath(__file__), "--child", engine, case]
    argv += ["--rows", str(rows), "--dir", spill]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the table (default 10M)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each engine x case (default 3)")
    parser.add_argument("--cases", default="partition,whole", help="partition, whole or both")
    parser.add_argument("--no-limit", action="store_true", help="skip duckdb with memory_limit 1GB")
    parser.add_argument("--dir", default=None, help="where DuckDB spills (default: a temp dir)")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.rows, args.dir or tempfile.gettempdir())
        return
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_table_diff_engines: {os.cpu_count()} CPU(s), load average {load}, ", end="")
    print(f"Python {sys.version.split()[0]}, pyarrow {pa.__version__}", end="")
    try:
        import duckdb

        print(f", duckdb {duckdb.__version__}", flush=True)
        engines = [e for e in ENGINES if not (args.no_limit and e == "duckdb-1GB")]
    except ImportError:
        print("\nduckdb: not installed, skipped", flush=True)
        engines = ["pyarrow"]
    cases = [c for c in args.cases.split(",") if c]
    want = expected(args.rows)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="lakectl-bench-engines-", dir=args.dir) as spill:
        for r in range(max(1, args.runs)):
            order = engines if r % 2 == 0 else engines[::-1]
            for case in cases:
                for engine in order:
                    out = run_child(engine, case, args.rows, spill)
                    results.setdefault((engine, case), []).append(out)
                    said = out.get("error") or f"{fmt(out['seconds'])}, peak {out['peak_mib']:,.0f} MiB"
                    print(f"  run {r + 1} {case:9} {engine:10} {said}", flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    headers = ["case", "engine", "median (runs)", "peak RSS (data + diff)", "vs pyarrow", "counts"]
    rows = []
    for case in cases:
        base = None
        for engine in engines:
            runs = results[(engine, case)]
            good = [o for o in runs if "error" not in o]
            if not good:
                rows.append([CASES[case], engine, "failed: " + runs[0]["error"][:60], "", "", ""])
                continue
            seconds = statistics.median(o["seconds"] for o in good)
            base = seconds if engine == "pyarrow" else base
            peak = max(o["peak_mib"] for o in good)
            data = max(o["data_mib"] for o in good)
            same = all(o["counts"] == want for o in good)
            rows.append(
                [
                    CASES[case],
                    engine,
                    f"{fmt(seconds)} ({' / '.join(fmt(o['seconds']) for o in good)})",
                    f"{peak:,.0f} MiB ({data:,.0f} + {peak - data:,.0f})",
                    f"{seconds / base:.2f}x" if base else "",
                    "as built" if same else "WRONG: " + json.dumps(good[0]["counts"]),
                ]
            )
    n_changed, n_removed, n_added = _edits(args.rows)
    print(
        f"\nKeyed diff, {args.rows:,} rows x 5 columns in {PARTITIONS} partitions; one partition "
        f"rewritten: {n_changed:,} changed, {n_removed:,} removed, {n_added:,} added"
    )
    print_table(headers, rows)
    print(f"expected counts: {json.dumps(want)}; load average at the end {load}")


if __name__ == "__main__":
    main()
