"""The S3 gateway on 127.0.0.1: 1 GiB through it, and small-object load.

- PUT of a 1 GiB object by multipart with boto3's defaults (``upload_file``: 8 MiB parts, 10
  threads, signed payloads and CRC32 checksums), and with pyarrow's S3 writer (unsigned
  streaming payloads, crc64nvme trailers) beside it: target >= 250 MB/s.
- GET of that object through the gateway (one stream, as ``get_object``) against reading the
  same bytes from the local blockstore in-process (``porcelain.read``, md5-verified as the
  gateway's reads are): throughput ratio target >= 0.5.
- 4 KiB objects: GET and PUT by ``wrk`` (1 thread, 8 connections) over presigned SigV4 URLs
  (query authentication: the same signature work as headers, on a fixed URL). Each PUT sends
  new content to the same key (a presigned PUT's payload is unsigned). Targets: >= 1,000 GET/s
  and >= 400 PUT/s.

A real ``lakectl server run`` process serves both the REST API and the gateway (on a port of
its own). Client and server share the 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from typing import Any

import boto3
from _benchutil import Table, print_context, temp_dir, verdict
from _liveserver import LiveServer, live_server
from bench_upload_1gib import make_source
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

REPO = "bench"
TARGET_PUT_MB_S = 250
TARGET_GET_RATIO = 0.5
TARGET_SMALL_GET = 1000
TARGET_SMALL_PUT = 400
SMALL = 4096

_LUA = """
local counter = 0
local method = "{method}"
local path = [==[{path}]==]
local body = {body}
request = function()
  counter = counter + 1
  local b = nil
  if body then b = string.format("%08d", counter) .. string.rep("x", {size} - 8) end
  return wrk.format(method, path, nil, b)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\n{{"requests": %d, "duration_us": %d, "errors": %d, "p50_us": %d, "p99_us": %d}}\\n',
    summary.requests, summary.duration, e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50.0), latency:percentile(99.0)))
end
"""


def s3_client(server: LiveServer, **config: Any) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=server.s3_url,
        aws_access_key_id=server.key_id,
        aws_secret_access_key=server.secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, **config),
    )


def local_read_mb_s(server: LiveServer, key: str, size: int) -> float:
    """The same object read from the server's blockstore in this process (porcelain.read)."""
    from lakectl.core import porcelain
    from server.app import open_lake
    from server.config import load_settings

    lake = open_lake(load_settings(None, server.data_dir, environ={}))
    try:
        ref, _, path = key.partition("/")
        start = time.perf_counter()
        got = sum(len(chunk) for chunk in porcelain.read(lake, REPO, ref, path))
        seconds = time.perf_counter() - start
    finally:
        lake.close()
    assert got == size
    return size / 1e6 / seconds


def pyarrow_put_mb_s(server: LiveServer, key: str, size: int, salt: int) -> float:
    """The same PUT by pyarrow's S3 writer (aws-sdk-cpp): multipart with unsigned streaming
    payloads and a crc64nvme trailer, a lighter client than boto3's signed payloads."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        access_key=server.key_id,
        secret_key=server.secret,
        endpoint_override=server.s3_url.removeprefix("http://"),
        scheme="http",
        region="us-east-1",
    )
    piece = bytearray(os.urandom(8 * 1024 * 1024))
    start = time.perf_counter()
    with s3.open_output_stream(f"{REPO}/{key}") as out:
        for i in range(size // len(piece)):
            piece[:8] = (salt * 100_000 + i).to_bytes(8, "big")  # every piece differs
            out.write(piece)
    return size / 1e6 / (time.perf_counter() - start)


def gateway_get_mb_s(s3: Any, key: str, size: int) -> float:
    start = time.perf_counter()
    body = s3.get_object(Bucket=REPO, Key=key)["Body"]
    got = sum(len(chunk) for chunk in body.iter_chunks(1024 * 1024))
    seconds = time.perf_counter() - start
    assert got == size
    return size / 1e6 / seconds


def wrk(url: str, method: str, seconds: float, connections: int, work: str, put: bool) -> dict[str, float]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    script = os.path.join(work, f"{method}.lua")
    path = parts.path + "?" + parts.query
    with open(script, "w", encoding="utf-8") as f:
        f.write(_LUA.format(method=method, path=path, body="true" if put else "false", size=SMALL))
    base = f"{parts.scheme}://{parts.netloc}"
    cmd = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        script,
        base,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"wrk failed ({proc.returncode}): {proc.stderr[-600:]}{proc.stdout[-600:]}")
    d = json.loads(lines[-1])
    rps = d["requests"] / (d["duration_us"] / 1e6)
    return {"rps": rps, "p50": d["p50_us"] / 1000, "p99": d["p99_us"] / 1000, "errors": d["errors"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024, help="the large object (default 1 GiB)")
    parser.add_argument("--runs", type=int, default=3, help="large PUTs and GETs (median)")
    parser.add_argument("--seconds", type=float, default=10, help="small-object load per operation")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    size = args.size_mib * 1024 * 1024
    mb = size / 1e6
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed for the small-object load: apt-get install wrk (make bench does)")

    print_context("bench_gateway")
    with temp_dir("lakectl-bench-gateway-", args.dir) as work, live_server(work) as server:
        with server.client() as api:
            r = api.post("/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"})
            r.raise_for_status()
        s3 = s3_client(server)
        src = os.path.join(work, "source.bin")
        puts, arrow_puts, gets, locals_ = [], [], [], []
        for run in range(args.runs):
            make_source(src, size)  # new content each run: every block is written
            key = f"main/big-{run}.bin"
            start = time.perf_counter()
            s3.upload_file(src, REPO, key, Config=TransferConfig())
            puts.append(mb / (time.perf_counter() - start))
            gets.append(gateway_get_mb_s(s3, key, size))
            locals_.append(local_read_mb_s(server, key, size))
            arrow_puts.append(pyarrow_put_mb_s(server, f"main/arrow-{run}.bin", size, run))
            print(
                f"run {run + 1}: PUT boto3 {puts[-1]:,.0f} MB/s, pyarrow {arrow_puts[-1]:,.0f} MB/s; "
                f"GET {gets[-1]:,.0f} MB/s; local blockstore read {locals_[-1]:,.0f} MB/s",
                flush=True,
            )
        os.remove(src)

        s3.put_object(Bucket=REPO, Key="main/small.bin", Body=os.urandom(SMALL))
        presigner = s3_client(server, signature_version="s3v4")
        get_url = presigner.generate_presigned_url(
            "get_object", Params={"Bucket": REPO, "Key": "main/small.bin"}, ExpiresIn=3600
        )
        put_url = presigner.generate_presigned_url(
            "put_object", Params={"Bucket": REPO, "Key": "main/put.bin"}, ExpiresIn=3600
        )
        small_get = wrk(get_url, "GET", args.seconds, args.connections, work, put=False)
        small_put = wrk(put_url, "PUT", args.seconds, args.connections, work, put=True)
        for name, d in (("GET 4 KiB", small_get), ("PUT 4 KiB", small_put)):
            print(f"{name}: {d['rps']:,.0f} req/s, p50 {d['p50']:.2f} ms, p99 {d['p99']:.2f} ms", end="")
            print(f", {d['errors']} errors")

        put_mb, get_mb, local_mb = (
            statistics.median(puts),
            statistics.median(gets),
            statistics.median(locals_),
        )
        judged = args.size_mib >= 1024
        table = Table("figure", "measured", "target", "result")
        table.add(
            f"PUT {args.size_mib} MiB by multipart (boto3 upload_file defaults), median of {args.runs}",
            f"{put_mb:,.0f} MB/s (runs {' / '.join(f'{x:,.0f}' for x in puts)})",
            f">= {TARGET_PUT_MB_S} MB/s",
            verdict(put_mb >= TARGET_PUT_MB_S if judged else None),
        )
        arrow_mb = statistics.median(arrow_puts)
        table.add(
            f"PUT {args.size_mib} MiB by multipart (pyarrow S3FileSystem), median of {args.runs}",
            f"{arrow_mb:,.0f} MB/s (runs {' / '.join(f'{x:,.0f}' for x in arrow_puts)})",
            f">= {TARGET_PUT_MB_S} MB/s",
            verdict(arrow_mb >= TARGET_PUT_MB_S if judged else None),
        )
        table.add(
            f"GET {args.size_mib} MiB through the gateway / local blockstore read",
            f"{get_mb / local_mb:.2f} ({get_mb:,.0f} / {local_mb:,.0f} MB/s)",
            f">= {TARGET_GET_RATIO}",
            verdict(get_mb / local_mb >= TARGET_GET_RATIO if judged else None),
        )
        table.add(
            "GET 4 KiB (wrk, presigned)",
            f"{small_get['rps']:,.0f} req/s, p50 {small_get['p50']:.2f} ms, p99 {small_get['p99']:.2f} ms",
            f">= {TARGET_SMALL_GET:,} req/s",
            verdict(small_get["rps"] >= TARGET_SMALL_GET and small_get["errors"] == 0),
        )
        table.add(
            "PUT 4 KiB (wrk, presigned, new content each)",
            f"{small_put['rps']:,.0f} req/s, p50 {small_put['p50']:.2f} ms, p99 {small_put['p99']:.2f} ms",
            f">= {TARGET_SMALL_PUT:,} req/s",
            verdict(small_put["rps"] >= TARGET_SMALL_PUT and small_put["errors"] == 0),
        )
        table.print("S3 gateway (a real server process on 127.0.0.1)")
        if not judged:
            print("(large-object figures not judged below 1 GiB)")
        if server.process.poll() is not None:
            print(f"the server died during the run:\n{server.log_tail()}")


if __name__ == "__main__":
    main()
