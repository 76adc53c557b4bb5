"""Zero-copy import of N objects: from a local directory (default 1M), from an S3 server that
lists a bucket of 1M objects as S3 does (default 1M), and from moto's S3 server.

For each source the script times the import through the core verb (``tasks.start``, run in this
process: list the source, build the external rows, commit them on ``_main_imported``), then
reads one imported object back and checks that the block store did not grow by the data.
Creating the source is not timed. Targets: 1M local objects <= 60 s, 1M S3 objects <= 120 s
(scaled linearly to N).

The S3 figure needs a server that lists a page of a big bucket in time independent of the
bucket's size, as S3 does. moto does not: it lists each page in time proportional to the whole
bucket (0.29 s a page at 10k objects, 1.35 s at 100k), so it is measured at 100k objects
(``--moto-objects``) and reported as moto's. The 1M figure (``--s3-objects``) imports from a
real ``lakectl server run``'s S3 gateway: a bucket is a repository, ``s3://src/main/`` a
branch's committed objects, listed from its tree (one small block shared by all 1M objects, so
that creating the source is not the benchmark). Each source's rate is reported next to a bare
boto3 listing of the same bucket.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _benchutil import Table, fmt_time, print_context, temp_dir, timed, verdict

from lakectl.core import opening, porcelain, writes
from lakectl.core.importing import tasks

REPO = "bench"
TARGET_LOCAL = 60.0
TARGET_S3 = 120.0


def layout(i: int) -> str:
    """Data-lake shaped keys: 100 tables x 20 days x 500 parts per 1M."""
    t, rest = divmod(i, 10_000)
    d, p = divmod(rest, 500)
    return f"tables/t{t}/date=2026-01-{d + 1:02d}/part-{p:06d}.csv"


def make_local(root: Path, n: int) -> None:
    made: set[Path] = set()
    for i in range(n):
        path = root / layout(i)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(b"%d\n" % i)


def du(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def import_once(home: str, source: str, n: int, first: int | None = None) -> tuple[float, float, int]:
    """(import seconds, first read seconds, bytes the block store grew by); the object read is
    number ``first`` of the layout (default: the last)."""
    lake = opening.open_lake(home)
    try:
        porcelain.create_repo(lake, REPO)
        before = du(os.path.join(home, "blocks"))
        loc = tasks.Location(source, "")
        seconds, st = timed(
            lambda: tasks.start(lake, REPO, "main", [loc], "bench", background=False, merge=False)
        )
        assert st.completed and st.ingested == n, st.to_dict()
        grown = du(os.path.join(home, "blocks")) - before
        t0 = time.perf_counter()
        which = n - 1 if first is None else first
        data = b"".join(porcelain.read(lake, REPO, "_main_imported", layout(which)))
        read = time.perf_counter() - t0
        assert data == b"%d\n" % which, data
        return seconds, read, grown
    finally:
        lake.close()


def bench_local(n: int, base: str | None, table: Table) -> None:
    with temp_dir("lakectl-bench-import-", base) as work:
        src = Path(work) / "src"
        t_make, _ = timed(make_local, src, n)
        print(f"local: created {n:,} files in {fmt_time(t_make)} (not timed)", flush=True)
        seconds, read, grown = import_once(os.path.join(work, "lake"), str(src), n)
        report(table, "local", "a local directory", TARGET_LOCAL, n, seconds, read, grown)


def report(
    table: Table,
    tag: str,
    source: str,
    per_million: float,
    n: int,
    seconds: float,
    read: float,
    grown: int,
    bare: float | None = None,
) -> None:
    """An import's rows: its time against the target (``per_million`` seconds scaled to ``n``),
    beside it the bare listing of an S3 source, the block store's growth and the first read."""
    print(f"{tag}: imported {n:,} objects in {fmt_time(seconds)}", flush=True)
    target = per_million * n / 1_000_000
    table.add(
        f"import of {n:,} objects from {source}",
        f"{fmt_time(seconds)} ({n / seconds:,.0f}/s)",
        f"<= {target:g} s",
        verdict(seconds <= target),
    )
    if bare is not None:
        listing = f"{fmt_time(bare)} ({n / bare:,.0f}/s)"
        table.add("  of which a bare boto3 listing of the bucket", listing, "-", "info")
    table.add("  block store growth (range files only)", f"{grown / 1e6:.1f} MB", "no data", "info")
    first_read = "  first read of an imported object" + (" (GET with If-Match)" if bare is not None else "")
    table.add(first_read, fmt_time(read), "-", "info")


def fill_gateway_source(home: str, n: int) -> None:
    """``n`` objects in repository ``src`` of the lake at ``home``, committed on ``main``: one
    uploaded object, whose entry the rest repeat (staged in batches, then one commit)."""
    lake = opening.open_lake(home)
    try:
        porcelain.create_repo(lake, "src")
        seed = writes.upload(lake, "src", "main", layout(0), b"%d\n" % 0).entry
        assert seed is not None
        row = seed.to_row()
        batch = 100_000
        for start in range(1, n, batch):
            rows = [(layout(i), row) for i in range(start, min(n, start + batch))]
            writes.stage_rows(lake, "src", "main", rows)
        porcelain.commit(lake, "src", "main", "the source bucket")
    finally:
        lake.close()


def bench_s3_gateway(n: int, base: str | None, table: Table) -> None:
    import boto3
    from _liveserver import live_server
    from botocore.config import Config

    with temp_dir("lakectl-bench-import-gw-", base) as work:
        with live_server(work) as server:
            t_fill, _ = timed(fill_gateway_source, server.data_dir, n)
            print(f"s3 gateway: {n:,} objects committed in {fmt_time(t_fill)} (not timed)", flush=True)
            os.environ.update(
                AWS_ENDPOINT_URL=server.s3_url,
                AWS_ACCESS_KEY_ID=server.key_id,
                AWS_SECRET_ACCESS_KEY=server.secret,
                AWS_DEFAULT_REGION="us-east-1",
            )
            client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
            t0 = time.perf_counter()
            pages = client.get_paginator("list_objects_v2").paginate(Bucket="src", Prefix="main/")
            listed = sum(len(page.get("Contents", ())) for page in pages)
            bare = time.perf_counter() - t0
            assert listed == n, listed
            seconds, read, grown = import_once(os.path.join(work, "lake"), "s3://src/main/", n, first=0)
        report(table, "s3 gateway", "S3 (lakectl's S3 gateway)", TARGET_S3, n, seconds, read, grown, bare)


def bench_s3(n: int, base: str | None, table: Table) -> None:
    import logging
    import threading

    import boto3
    from botocore.config import Config
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    threading.Thread(target=server.start, daemon=True).start()
    while True:
        try:
            host, port = server.get_host_and_port()
            break
        except Exception:
            time.sleep(0.05)
    endpoint = f"http://{host}:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
    client.create_bucket(Bucket="src")
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.put_object(Bucket="src", Key=layout(i), Body=b"%d\n" % i), range(n)))
    print(f"s3: put {n:,} objects into moto in {fmt_time(time.perf_counter() - t0)} (not timed)", flush=True)
    t0 = time.perf_counter()
    listed = sum(
        len(page.get("Contents", ()))
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="src")
    )
    bare = time.perf_counter() - t0
    assert listed == n
    try:
        with temp_dir("lakectl-bench-import-s3-", base) as work:
            seconds, read, grown = import_once(os.path.join(work, "lake"), "s3://src/", n)
        report(table, "s3", "S3 (moto)", TARGET_S3, n, seconds, read, grown, bare)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=1_000_000, help="local objects (default 1M)")
    parser.add_argument(
        "--s3-objects", type=int, default=1_000_000, help="objects behind lakectl's S3 gateway (default 1M)"
    )
    parser.add_argument("--moto-objects", type=int, default=100_000, help="S3 objects in moto (default 100k)")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--skip-moto", action="store_true")
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("zero-copy import")
    table = Table("phase", "measured", "target", "result")
    if not args.skip_local:
        bench_local(args.objects, args.dir, table)
    if not args.skip_s3:
        bench_s3_gateway(args.s3_objects, args.dir, table)
    if not args.skip_moto:
        bench_s3(args.moto_objects, args.dir, table)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    table.add("peak memory of this process (all phases)", f"{peak:,.0f} MB", "-", "info")
    table.print("Zero-copy import (targets scaled linearly to the object count)")


if __name__ == "__main__":
    main()
