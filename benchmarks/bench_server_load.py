"""Requests per second and latency of ``lakectl server run`` under load from a second process.

A real server process (``lakectl server setup`` then ``lakectl server run``, default configuration:
SQLite, local blocks, text log at level info written to a file) serves 127.0.0.1. The script
creates repository ``bench`` with one small object committed on ``main``, then drives each
operation for ``--seconds`` from a separate load-generator process (``wrk`` when it is on PATH,
else Python processes with httpx) over ``--connections`` keep-alive connections:

* stat of the small object   ``GET  /repositories/bench/refs/main/objects/stat?path=...``
* read of the small object   ``GET  /repositories/bench/refs/main/objects?path=...``
* upload of a small object   ``POST /repositories/bench/branches/uploads/objects?path=<new>``
* branch creation            ``POST /repositories/bench/branches {"name": <new>, "source": "main"}``

Targets (issue 3, this 2-core machine): reads (stat, read) >= 1,500 req/s with p50 <= 5 ms,
uploads >= 500 req/s, branch creation p50 <= 10 ms, all under the same load. lakeFS publishes
about 10,800 reads/s on two 16-vCPU servers, about 340 reads/s per vCPU, printed for context.
A single-connection pass prints the unloaded latency of each operation beside them.

The load generator shares the 2 cores with the server: the CPU each used is printed.
``--profile`` then repeats each operation under py-spy (sampling the server process) and
prints where the server's time goes, by function (self and inclusive).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from _benchutil import Table, print_context, temp_dir, verdict
from _liveserver import LiveServer, live_server, py_spy_binary

REPO = "bench"
SMALL_PATH = "small/object.txt"
SMALL_SIZE = 1024
TARGET_READ_RPS = 1500
TARGET_READ_P50_MS = 5.0
TARGET_WRITE_RPS = 500
TARGET_BRANCH_P50_MS = 10.0
LAKEFS_READS_PER_VCPU = 10_800 / 32  # lakeFS's published figure: two 16-vCPU servers


@dataclass(frozen=True)
class Op:
    """One kind of request; ``{n}`` in the path or body becomes a unique number per request."""

    name: str
    method: str
    path: str
    body: str = ""
    content_type: str = ""
    kind: str = "read"  # read | write | branch: which targets apply


def operations() -> list[Op]:
    base = f"/api/v1/repositories/{REPO}"
    payload = "x" * SMALL_SIZE
    return [
        Op("stat small object", "GET", f"{base}/refs/main/objects/stat?path={SMALL_PATH}"),
        Op("read small object", "GET", f"{base}/refs/main/objects?path={SMALL_PATH}"),
        Op(
            "upload small object",
            "POST",
            f"{base}/branches/uploads/objects?path=up/{{n}}.txt",
            payload,
            "application/octet-stream",
            "write",
        ),
        Op(
            "create branch",
            "POST",
            f"{base}/branches",
            '{"name": "b-{n}", "source": "main"}',
            "application/json",
            "branch",
        ),
    ]


@dataclass
class Result:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    server_cpu: float
    generator_cpu: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


# -- wrk -------------------------------------------------------------------------------------

_LUA = """
local counter = 0
local tag = "0"
local method = [==[{method}]==]
local path = {{[==[{path_a}]==], [==[{path_b}]==]}}
local body = {{[==[{body_a}]==], [==[{body_b}]==]}}
local unique_path = {unique_path}
local unique_body = {unique_body}
wrk.headers["Authorization"] = [==[{auth}]==]
{content_type}
local threads = {{}}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("tag", tostring(next_id) .. "x{salt}")
  table.insert(threads, thread)
end

function init(args)
  tag = wrk.thread:get("tag") or tag
end

request = function()
  counter = counter + 1
  local n = tag .. "-" .. counter
  local p = path[1]
  if unique_path then p = path[1] .. n .. path[2] end
  local b = nil
  if body[1] ~= "" then
    b = body[1]
    if unique_body then b = body[1] .. n .. body[2] end
  end
  return wrk.format(method, p, nil, b)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\\n{{"requests": %d, "duration_us": %d, "status_errors": %d, "socket_errors": %d, ' ..
    '"p50_us": %d, "p99_us": %d}}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50.0), latency:percentile(99.0)))
end
"""


def _split(template: str) -> tuple[str, str, bool]:
    if "{n}" in template:
        a, b = template.split("{n}", 1)
        return a, b, True
    return template, "", False


def wrk_script(op: Op, auth: str, salt: str) -> str:
    path_a, path_b, unique_path = _split(op.path)
    body_a, body_b, unique_body = _split(op.body)
    content_type = f'wrk.headers["Content-Type"] = "{op.content_type}"' if op.content_type else ""
    return _LUA.format(
        method=op.method,
        path_a=path_a,
        path_b=path_b,
        body_a=body_a,
        body_b=body_b,
        unique_path="true" if unique_path else "false",
        unique_body="true" if unique_body else "false",
        auth=auth,
        content_type=content_type,
        salt=salt,
    )


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(server: LiveServer, op: Op, seconds: float, connections: int, work: str, salt: str) -> Result:
    auth = "Basic " + base64.b64encode(f"{server.key_id}:{server.secret}".encode()).decode()
    script = os.path.join(work, f"op-{salt}.lua")
    with open(script, "w", encoding="utf-8") as f:
        f.write(wrk_script(op, auth, salt))
    cmd = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        script,
        server.url,
    ]
    cpu0, gen0 = server.cpu_seconds(), children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
    server_cpu, generator_cpu = server.cpu_seconds() - cpu0, children_cpu() - gen0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"wrk failed ({proc.returncode}): {proc.stderr[-600:]}{proc.stdout[-600:]}")
    d = json.loads(lines[-1])
    return Result(
        requests=d["requests"],
        seconds=d["duration_us"] / 1e6,
        errors=d["status_errors"] + d["socket_errors"],
        p50_ms=d["p50_us"] / 1000,
        p99_ms=d["p99_us"] / 1000,
        server_cpu=server_cpu,
        generator_cpu=generator_cpu,
    )


# -- Python load generator (when wrk is missing) ----------------------------------------------


async def _worker_loop(spec: dict[str, object]) -> dict[str, object]:
    import httpx

    deadline = time.perf_counter() + float(spec["seconds"])  # type: ignore[arg-type]
    latencies: list[float] = []
    errors = 0
    counter = 0
    tag = str(spec["tag"])
    headers = {"Authorization": str(spec["auth"])}
    if spec["content_type"]:
        headers["Content-Type"] = str(spec["content_type"])
    limits = httpx.Limits(max_connections=int(spec["connections"]))  # type: ignore[call-overload]
    async with httpx.AsyncClient(base_url=str(spec["url"]), limits=limits, timeout=10.0) as client:

        async def one() -> None:
            nonlocal counter, errors
            while time.perf_counter() < deadline:
                counter += 1
                n = f"{tag}-{counter}"
                path = str(spec["path"]).replace("{n}", n)
                body = str(spec["body"]).replace("{n}", n).encode() if spec["body"] else None
                start = time.perf_counter()
                try:
                    r = await client.request(str(spec["method"]), path, content=body, headers=headers)
                    ok = r.status_code < 400
                except Exception:
                    ok = False
                latencies.append(time.perf_counter() - start)
                errors += not ok

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(int(spec["connections"]))))  # type: ignore[call-overload]
        elapsed = time.perf_counter() - start
    return {"latencies": latencies, "errors": errors, "seconds": elapsed}


def worker_main(spec_json: str) -> None:
    out = asyncio.run(_worker_loop(json.loads(spec_json)))
    json.dump(out, sys.stdout)


def run_python(server: LiveServer, op: Op, seconds: float, connections: int, work: str, salt: str) -> Result:
    """``processes`` Python processes (httpx, asyncio), the connections spread over them."""
    auth = "Basic " + base64.b64encode(f"{server.key_id}:{server.secret}".encode()).decode()
    processes = 2 if connections > 1 else 1
    shares = [connections // processes + (i < connections % processes) for i in range(processes)]
    cpu0, gen0 = server.cpu_seconds(), children_cpu()
    procs = []
    for i, share in enumerate(shares):
        spec = {
            "url": server.url,
            "auth": auth,
            "method": op.method,
            "path": op.path,
            "body": op.body,
            "content_type": op.content_type,
            "seconds": seconds,
            "connections": share,
            "tag": f"{salt}p{i}",
        }
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    outs = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=seconds + 60)
        if proc.returncode != 0:
            raise SystemExit(f"a load-generator process failed ({proc.returncode})")
        outs.append(json.loads(stdout))
    server_cpu, generator_cpu = server.cpu_seconds() - cpu0, children_cpu() - gen0
    latencies = sorted(x for o in outs for x in o["latencies"])
    wall = max(o["seconds"] for o in outs)

    def pct(q: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")
        )

    return Result(
        requests=len(latencies),
        seconds=wall,
        errors=sum(o["errors"] for o in outs),
        p50_ms=statistics.median(latencies) * 1000 if latencies else float("nan"),
        p99_ms=pct(0.99),
        server_cpu=server_cpu,
        generator_cpu=generator_cpu,
    )


# -- the lake under test ---------------------------------------------------------------------


def prepare(server: LiveServer) -> None:
    with server.client() as api:
        r = api.post("/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"})
        r.raise_for_status()
        r = api.post(
            f"/repositories/{REPO}/branches/main/objects",
            params={"path": SMALL_PATH},
            content=b"y" * SMALL_SIZE,
            headers={"Content-Type": "text/plain"},
        )
        r.raise_for_status()
        r = api.post(f"/repositories/{REPO}/branches/main/commits", json={"message": "small object"})
        r.raise_for_status()
        r = api.post(f"/repositories/{REPO}/branches", json={"name": "uploads", "source": "main"})
        r.raise_for_status()
        # Every operation answers 2xx before any timing starts.
        for op in operations():
            path = op.path.replace("{n}", "check")
            body = op.body.replace("{n}", "check").encode() if op.body else None
            headers = {"Content-Type": op.content_type} if op.content_type else None
            r = api.request(op.method, path.removeprefix("/api/v1"), content=body, headers=headers)
            if r.status_code >= 300:
                raise SystemExit(f"{op.name}: {r.status_code} {r.text[:300]}")


# -- profiling -------------------------------------------------------------------------------


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:123)`` -> ``module.py:func`` (lines merged)."""
    frame = frame.strip()
    if frame.endswith(")") and " (" in frame:
        func, _, where = frame[:-1].rpartition(" (")
        file = where.rsplit(":", 1)[0]
        parts = file.replace("\\", "/").split("/")
        short = (
            "/".join(parts[-2:])
            if parts[-1] in ("__init__.py", "routing.py", "applications.py")
            else parts[-1]
        )
        for anchor in ("site-packages/", "/work/main/"):
            if anchor in file:
                short = file.split(anchor, 1)[1]
        return f"{short}:{func}"
    return frame


def summarize_profile(
    path: str, top: int, marks: tuple[str, ...] = ()
) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]], dict[str, int]]:
    """Samples, the ``top`` functions by self samples and by inclusive samples, and how many
    samples have each of ``marks`` (a substring of a function name) anywhere in their stack."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    marked: Counter[str] = Counter()
    total = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count_s = line.rstrip("\n").rpartition(" ")
            if not count_s.isdigit():
                continue
            count = int(count_s)
            frames = [
                _frame_name(x) for x in stack.split(";") if x and not x.startswith(("process ", "thread "))
            ]
            if not frames:
                continue
            total += count
            own[frames[-1]] += count
            names = set(frames)
            for name in names:
                if not any(root in name.lower() for root in ROOT_FRAMES):
                    inclusive[name] += count
            for mark in marks:
                if any(mark in name for name in names):
                    marked[mark] += count
    return total, own.most_common(top), inclusive.most_common(top), dict(marked)


ROOT_FRAMES = (
    "typer",
    "core.py:",
    "app.py:main",
    "app.py:lakectlgroup",
    "<module>",
    "main.py:run",
    "server.py:run",
    "server.py:server.run",
    "_compat.py:asyncio_run",
    "runners.py:",
    "base_events.py:baseeventloop.run_",
    "threading.py:thread._bootstrap",
    "_run_once",
    "events.py:handle._run",
    "main.py:get_callback",
)
"""Frames above every request (process start-up, the event loop, thread start), lower case: left
out of the inclusive ranking, where they would only fill the top rows."""

PROFILE_MARKS = (
    "WorkerThread.run",
    "run_in_threadpool",
    "solve_dependencies",
    "serialize_response",
    "current_user",
    "Auth.authenticate",
    "porcelain.py:",
    "SQLiteStore.",
    "LocalAdapter.",
    "logging/",
    "h11_impl.py:H11Protocol.data_received",
    "h11_impl.py:RequestResponseCycle.send",
)


def profile_op(
    server: LiveServer,
    op: Op,
    seconds: float,
    connections: int,
    work: str,
    salt: str,
    generator: str,
    top: int,
) -> None:
    spy = py_spy_binary()
    if spy is None:
        print("  py-spy not found: pip install py-spy into the venv to profile")
        return
    out = os.path.join(work, f"profile-{salt}.txt")
    cmd = [spy, "record", "--pid", str(server.pid), "--duration", str(int(seconds)), "--rate", "250"]
    cmd += ["--format", "raw", "--nonblocking", "--gil", "-o", out]
    spy_proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    runner = run_wrk if generator == "wrk" else run_python
    result = runner(server, op, seconds - 1, connections, work, salt)
    _, err = spy_proc.communicate(timeout=seconds + 60)
    if spy_proc.returncode != 0 or not os.path.exists(out):
        print(f"  py-spy failed: {err.strip()[-400:]}")
        return
    total, own, incl, marked = summarize_profile(out, top, PROFILE_MARKS)
    if not total:
        print(f"  no samples for {op.name}")
        return
    rate_total = 250 * int(seconds)
    print(
        f"\n--- profile: {op.name} ({result.rps:,.0f} req/s under py-spy, {result.requests} requests; "
        f"{total} samples of the thread holding the GIL at 250 Hz: the GIL was held "
        f"{100 * total / rate_total:.0f}% of the time; time with the GIL released (SQLite, syscalls, "
        f"md5 of large buffers) is not sampled)"
    )
    worker = marked.get("WorkerThread.run", 0)
    print(
        f"  event loop thread {100 * (total - worker) / total:.0f}%, thread-pool threads "
        f"{100 * worker / total:.0f}%; "
        + ", ".join(f"{m.rstrip('.:')} {100 * marked.get(m, 0) / total:.0f}%" for m in PROFILE_MARKS[1:])
    )
    table = Table("self %", "function (self)", "incl %", "function (inclusive)")
    for i in range(top):
        a = own[i] if i < len(own) else ("", 0)
        b = incl[i] if i < len(incl) else ("", 0)
        table.add(f"{100 * a[1] / total:5.1f}" if a[0] else "", a[0], f"{100 * b[1] / total:5.1f}", b[0])
    table.print()
    kept = os.environ.get("LAKECTL_BENCH_KEEP_PROFILES")
    if kept:
        os.makedirs(kept, exist_ok=True)
        shutil.copy(out, os.path.join(kept, f"{op.name.replace(' ', '_')}.txt"))


# -- main ------------------------------------------------------------------------------------


def fmt_ms(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f} ms"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="timed load per operation (default 10)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--warmup", type=float, default=2, help="untimed load before each operation")
    parser.add_argument(
        "--single-seconds", type=float, default=3, help="one-connection pass per op (0: skip)"
    )
    parser.add_argument("--generator", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--profile", action="store_true", help="then profile each operation with py-spy")
    parser.add_argument("--profile-seconds", type=float, default=8)
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile")
    parser.add_argument("--only", default="", help="comma-separated operation kinds: read,write,branch")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    parser.add_argument(
        "--server-command",
        default="",
        help="for experiments: a command run instead of 'lakectl' for 'server setup' and 'server run' "
        "(e.g. 'python my_patched_lakectl.py')",
    )
    args = parser.parse_args()

    generator = args.generator
    if generator == "auto":
        generator = "wrk" if shutil.which("wrk") else "python"
    if generator == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not on PATH (apt-get install wrk), or use --generator python")
    runner = run_wrk if generator == "wrk" else run_python
    ops = operations()
    if args.only:
        kinds = set(args.only.split(","))
        ops = [op for op in ops if op.kind in kinds]

    print_context("bench_server_load")
    print(
        f"load generator: {generator}"
        + (" (1 thread)" if generator == "wrk" else " (2 processes, httpx + asyncio; heavier than wrk)")
        + f", {args.connections} keep-alive connections, {args.seconds:.0f} s per operation after "
        f"{args.warmup:.0f} s of warm-up. It runs on the same 2 cores as the server: the CPU each "
        "used is printed (server CPU / wall time above 100% is time outside the GIL)."
    )
    results: dict[str, Result] = {}
    singles: dict[str, Result] = {}
    with (
        temp_dir("lakectl-bench-server-", args.dir) as work,
        live_server(work, command=shlex.split(args.server_command) or None) as server,
    ):
        prepare(server)
        what = f"'{args.server_command}'" if args.server_command else "lakectl server run"
        print(
            f"server: {what}, pid {server.pid} on {server.url}; log at level info to a file (default config)"
        )
        for i, op in enumerate(ops):
            if args.warmup > 0:
                runner(server, op, args.warmup, args.connections, work, f"w{i}")
            results[op.name] = runner(server, op, args.seconds, args.connections, work, f"t{i}")
            r = results[op.name]
            print(
                f"  {op.name}: {r.rps:,.0f} req/s, p50 {fmt_ms(r.p50_ms)}, p99 {fmt_ms(r.p99_ms)}, "
                f"{r.errors} errors; server CPU {100 * r.server_cpu / r.seconds:.0f}%, "
                f"generator CPU {100 * r.generator_cpu / r.seconds:.0f}% of one core",
                flush=True,
            )
            if args.single_seconds > 0:
                singles[op.name] = runner(server, op, args.single_seconds, 1, work, f"s{i}")

        table = Table(
            "operation", "req/s", "p50", "p99", "errors", "server CPU/req", "1-conn p50", "target", "result"
        )
        for op in ops:
            r = results[op.name]
            single = singles.get(op.name)
            if op.kind == "read":
                ok = r.rps >= TARGET_READ_RPS and r.p50_ms <= TARGET_READ_P50_MS and r.errors == 0
                target = f">= {TARGET_READ_RPS:,} req/s, p50 <= {TARGET_READ_P50_MS:.0f} ms"
            elif op.kind == "write":
                ok = r.rps >= TARGET_WRITE_RPS and r.errors == 0
                target = f">= {TARGET_WRITE_RPS} req/s"
            else:
                ok = r.p50_ms <= TARGET_BRANCH_P50_MS and r.errors == 0
                target = f"p50 <= {TARGET_BRANCH_P50_MS:.0f} ms"
            cpu_per = f"{1e6 * r.server_cpu / r.requests:,.0f} us" if r.requests else "n/a"
            table.add(
                op.name,
                f"{r.rps:,.0f}",
                fmt_ms(r.p50_ms),
                fmt_ms(r.p99_ms),
                r.errors,
                cpu_per,
                fmt_ms(single.p50_ms) if single else "-",
                target,
                verdict(ok),
            )
        table.print(
            f"Server under load ({args.connections} connections, {generator}); targets judged on the loaded "
            f"figures. lakeFS for context: ~{LAKEFS_READS_PER_VCPU:.0f} reads/s per vCPU "
            f"(= ~{2 * LAKEFS_READS_PER_VCPU:.0f} on 2 vCPUs)"
        )
        reads = [results[op.name].rps for op in ops if op.kind == "read"]
        if reads:
            print(
                f"reads per vCPU here: {min(reads) / 2:,.0f}-{max(reads) / 2:,.0f} req/s "
                f"(the server uses at most one core for Python: one process, one GIL), "
                f"lakeFS ~{LAKEFS_READS_PER_VCPU:.0f}"
            )

        if args.profile:
            print(f"\nProfiling the server with py-spy ({args.profile_seconds:.0f} s per operation)...")
            for i, op in enumerate(ops):
                profile_op(
                    server, op, args.profile_seconds, args.connections, work, f"p{i}", generator, args.top
                )
        if server.process.poll() is not None:
            print(f"the server died during the run:\n{server.log_tail()}")


if __name__ == "__main__":
    main()
