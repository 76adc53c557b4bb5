"""The web UI's pages on a large lake, served by a real ``lakectl server run`` process.

Repository ``bench``: a ``main`` branch of 1M committed objects (rows without data, staged with
``writes.stage_rows`` as in ``bench_commit_1m.py``: 100 tables x 20 days x 500 parts), a
history of a few hundred small commits on top, and one 1 GiB Parquet file (random int64/double
columns, row groups of 1Mi rows, ~32 MiB each) uploaded with ``writes.upload`` from a file, so
that it is stored in 64 MiB blocks. The lake is built through a second handle on the server's data
directory while the server idles (SQLite in WAL mode), not timed.

One client signed in through the sign-in form (its CSRF token, as a browser) GETs each page N
times over one keep-alive loopback connection, after 3 warm-up GETs: the repository page, the
first page of the log, a deeper log page, the object browser at the root, at ``tables/`` (100
directories over the 1M objects) and deep in the tree (a directory of 500 objects: one page of
100), and the Parquet file's object page with its preview. The figures are client-side latency
(request sent to body read), which is server time plus well under a millisecond of loopback.

``--profile`` runs cProfile in-process over the UI application on the same data directory (the
server stopped) for each page, and prints the top functions: where a page that misses its target
spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import statistics
import time
from typing import Any
from urllib.parse import quote

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from _benchutil import Table, fmt_time, make_rows, print_context, temp_dir, timed, verdict
from _liveserver import live_server

from lakectl.core import porcelain, writes
from server.app import open_lake
from server.config import load_settings

REPO = "bench"
PARQUET = "data/events-1gib.parquet"
TARGET_PAGE = 0.050
TARGET_PARQUET = 0.300
WARMUP = 3


def _random(kind: pa.DataType, n: int) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(os.urandom(8 * n))])


def write_parquet(path: str, size_mib: int, rows_per_group: int) -> tuple[int, int]:
    """A Parquet file of about ``size_mib`` MiB of random 8-byte columns; (bytes, row groups)."""
    schema = pa.schema(
        [("id", pa.int64()), ("user", pa.int64()), ("value", pa.float64()), ("ts", pa.int64())]
    )
    groups = max(1, size_mib * 1024 * 1024 // (rows_per_group * 8 * len(schema)))
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for g in range(groups):
            ids = pa.array(range(g * rows_per_group, (g + 1) * rows_per_group), pa.int64())
            columns = [ids, _random(pa.int64(), rows_per_group)]
            columns += [_random(pa.float64(), rows_per_group), _random(pa.int64(), rows_per_group)]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema), row_group_size=rows_per_group)
    return os.path.getsize(path), groups


def build(data_dir: str, work: str, entries: int, commits: int, size_mib: int, rows_per_group: int) -> None:
    settings = load_settings(None, data_dir, environ={})
    lake = open_lake(settings)
    try:
        porcelain.create_repo(lake, REPO, "main", f"local://{REPO}")
        t_rows, rows = timed(make_rows, entries)
        t_stage, _ = timed(writes.stage_rows, lake, REPO, "main", rows)
        del rows
        t_commit, _ = timed(porcelain.commit, lake, REPO, "main", f"{entries:,} objects", {}, "bench")
        start = time.perf_counter()
        for i in range(commits):
            body = f"run {i}\n".encode()
            writes.upload(lake, REPO, "main", f"runs/run-{i:04d}.txt", body, "text/plain")
            porcelain.commit(lake, REPO, "main", f"run {i}", {"run": str(i)}, "bench")
        t_history = time.perf_counter() - start
        local = os.path.join(work, "events.parquet")
        t_write, (size, groups) = timed(write_parquet, local, size_mib, rows_per_group)
        with open(local, "rb") as f:
            t_upload, _ = timed(
                writes.upload, lake, REPO, "main", PARQUET, f, "application/vnd.apache.parquet"
            )
        os.remove(local)
        porcelain.commit(lake, REPO, "main", "events", {}, "bench")
        blocks = len(porcelain.stat(lake, REPO, "main", PARQUET).entry.locators)  # type: ignore[union-attr]
    finally:
        lake.close()
    print(
        f"built: {entries:,} rows in {fmt_time(t_rows)}, staged in {fmt_time(t_stage)}, committed in "
        f"{fmt_time(t_commit)}; {commits} commits in {fmt_time(t_history)}; Parquet {size / 2**20:.0f} MiB, "
        f"{groups} row groups, {blocks} blocks (written {fmt_time(t_write)}, uploaded {fmt_time(t_upload)})",
        flush=True,
    )


def pages(entries: int, commit_ids: list[str]) -> list[tuple[str, str, float]]:
    """(name, path, target) of each page timed."""
    deep_table = min(57, max(0, entries // 10_000 - 1))
    deep = f"tables/t{deep_table}/date=2026-01-13/"
    base = f"/ui/repos/{REPO}"
    older = commit_ids[min(len(commit_ids) - 1, 199)]
    return [
        ("repository page", base, TARGET_PAGE),
        ("log, first page (50 commits)", f"{base}/refs/main/log", TARGET_PAGE),
        ("log, 5th page (after commit 200)", f"{base}/refs/main/log?after={older}", TARGET_PAGE),
        ("objects at the root", f"{base}/refs/main/objects", TARGET_PAGE),
        ("objects under tables/ (100 dirs)", f"{base}/refs/main/objects?prefix=tables%2F", TARGET_PAGE),
        (f"objects under {deep}", f"{base}/refs/main/objects?prefix={quote(deep, safe='')}", TARGET_PAGE),
        (
            "Parquet object page (preview)",
            f"{base}/refs/main/object?path={quote(PARQUET, safe='')}",
            TARGET_PARQUET,
        ),
    ]


def sign_in(client: httpx.Client, key_id: str, secret: str) -> None:
    form = client.get("/ui/login")
    token = re.search(r'name="csrf" value="([^"]*)"', form.text)
    assert token is not None, "the sign-in page has no CSRF field"
    done = client.post(
        "/ui/login",
        data={"access_key_id": key_id, "secret_access_key": secret, "csrf": token.group(1)},
        follow_redirects=False,
    )
    if done.status_code != 303:
        raise SystemExit(f"sign-in failed: {done.status_code} {done.text[:300]}")


def measure(client: httpx.Client, path: str, n: int) -> list[float]:
    times = []
    for i in range(WARMUP + n):
        start = time.perf_counter()
        r = client.get(path)
        elapsed = time.perf_counter() - start
        if r.status_code != 200:
            raise SystemExit(f"GET {path}: {r.status_code} {r.text[:500]}")
        if i >= WARMUP:
            times.append(elapsed)
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def profile(data_dir: str, key_id: str, secret: str, targets: list[tuple[str, str, float]], n: int) -> None:
    """cProfile of each page's requests, in-process: the application over the same data, called
    through httpx's ASGI transport on this thread, with the work FastAPI hands to its thread pool
    (``def`` routes) run inline, so that the profile sees the route functions."""
    import asyncio

    import anyio.to_thread

    from server.app import create_app

    async def inline(func: Any, *args: Any, **_: Any) -> Any:
        return func(*args)

    anyio.to_thread.run_sync = inline  # type: ignore[assignment]
    app = create_app(load_settings(None, data_dir, environ={}))

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            form = await client.get("/ui/login")
            token = re.search(r'name="csrf" value="([^"]*)"', form.text)
            assert token is not None
            creds = {"access_key_id": key_id, "secret_access_key": secret, "csrf": token.group(1)}
            assert (await client.post("/ui/login", data=creds)).status_code == 303
            for name, path, _ in targets:
                assert (await client.get(path)).status_code == 200
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(n):
                    await client.get(path)
                prof.disable()
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
                print(f"\ncProfile of {n} GETs of {name} (cumulative, top 40):\n{out.getvalue()}", flush=True)

    asyncio.run(run())
    app.state.lake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=300, help="small commits of history")
    parser.add_argument("--parquet-mib", type=int, default=1024)
    parser.add_argument("--rows-per-group", type=int, default=1024 * 1024)
    parser.add_argument("--requests", type=int, default=30, help="timed GETs per page")
    parser.add_argument("--profile", action="store_true", help="cProfile each page in-process afterwards")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("web UI pages on a 1M-object branch")

    results: list[tuple[str, float, list[float]]] = []
    with temp_dir("lakectl-bench-ui-", args.dir) as work:
        with live_server(work) as server:
            build(server.data_dir, work, args.entries, args.commits, args.parquet_mib, args.rows_per_group)
            with server.client() as api:
                log = api.get(f"/repositories/{REPO}/refs/main/commits", params={"amount": 300}).json()
            commit_ids = [c["id"] for c in log["results"]]
            targets = pages(args.entries, commit_ids)
            with httpx.Client(base_url=server.url, timeout=120.0) as client:
                sign_in(client, server.key_id, server.secret)
                for name, path, target in targets:
                    times = measure(client, path, args.requests)
                    results.append((name, target, times))
                    print(f"{name}: p50 {fmt_time(statistics.median(times))}", flush=True)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if args.profile:
            profile(server.data_dir, server.key_id, server.secret, targets, max(3, args.requests // 3))

    table = Table("page", "p50", "p95", "target (p50)", "result")
    for name, target, times in results:
        p50 = statistics.median(times)
        table.add(
            name, fmt_time(p50), fmt_time(p95(times)), f"<= {target * 1000:.0f} ms", verdict(p50 <= target)
        )
    scaled = "" if args.entries == 1_000_000 else f" (scaled: {args.entries:,} objects)"
    table.print(
        f"Web UI pages, {args.requests} GETs each over one keep-alive loopback connection, client-side "
        f"latency{scaled}; load average at the end {load}"
    )


if __name__ == "__main__":
    main()
