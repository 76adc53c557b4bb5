"""Remote upload of one 1 GiB file over loopback through RemoteBackend (target >= 250 MB/s), then
the same file again: no block may cross the network the second time.

A real server process (``lakectl server setup`` + ``lakectl server run``, default configuration)
serves 127.0.0.1; this process is the client: ``RemoteBackend.upload`` of the file (hash the
64 MiB blocks, ``POST /blocks/missing``, ``PUT /blocks/<md5>`` for the missing ones in parallel,
then link the object). An httpx transport wrapper counts the requests, the bytes sent, and when
the block requests started and ended, which splits the wall time into phases. The re-upload of
the same file to the same path must send 0 blocks (``PUT /blocks``): the server proves the client
holds each block by a challenge instead.

Client and server share the 2 cores. ``--profile`` samples the server with py-spy during one more
upload and prints where its time goes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from _benchutil import Table, print_context, temp_dir, verdict
from _liveserver import LiveServer, live_server, py_spy_binary
from bench_server_load import summarize_profile
from bench_upload_1gib import drop_from_cache, make_source, md5_file

from lakectl.client.remote import RemoteBackend

REPO = "bench"
TARGET_MB_S = 250
TARGET_REUPLOAD_BLOCKS = 0


@dataclass
class Traffic:
    """What went over the wire, by request kind (``PUT /blocks`` etc.), with the time span of
    the block uploads."""

    counts: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    first_start: dict[str, float] = field(default_factory=dict)
    last_end: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()
            self.sent.clear()
            self.first_start.clear()
            self.last_end.clear()


def kind_of(request: httpx.Request) -> str:
    path = request.url.path
    if path.startswith("/blocks/"):
        tail = path[len("/blocks/") :]
        name = tail if tail in ("missing", "prove") else "<block>"
        return f"{request.method} /blocks/{name}"
    return f"{request.method} {path.rsplit('/', 1)[-1] if '/objects/' in path else path}"


class CountingTransport(httpx.BaseTransport):
    def __init__(self, traffic: Traffic) -> None:
        self._inner = httpx.HTTPTransport()
        self._traffic = traffic

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        kind = kind_of(request)
        size = int(request.headers.get("content-length", "0") or 0)
        start = time.perf_counter()
        response = self._inner.handle_request(request)
        response.read()
        end = time.perf_counter()
        t = self._traffic
        with t.lock:
            t.counts[kind] += 1
            t.sent[kind] += size
            t.first_start.setdefault(kind, start)
            t.first_start[kind] = min(t.first_start[kind], start)
            t.last_end[kind] = max(t.last_end.get(kind, end), end)
        return response

    def close(self) -> None:
        self._inner.close()


@dataclass
class Upload:
    seconds: float
    client_cpu: float
    server_cpu: tuple[float, float]
    """User and system CPU seconds of the server process."""
    counts: Counter[str]
    sent: Counter[str]
    phases: dict[str, float]

    def blocks_sent(self) -> int:
        return self.counts.get("PUT /blocks/<block>", 0)


def upload_once(server: LiveServer, backend: RemoteBackend, traffic: Traffic, src: str, path: str) -> Upload:
    traffic.reset()
    cpu0, (user0, sys0) = time.process_time(), server.cpu_split()
    start = time.perf_counter()
    with open(src, "rb") as f:
        backend.upload(REPO, "main", path, f, content_type="application/octet-stream")
    end = time.perf_counter()
    (user1, sys1) = server.cpu_split()
    cpu, scpu = time.process_time() - cpu0, (user1 - user0, sys1 - sys0)
    with traffic.lock:
        counts, sent = Counter(traffic.counts), Counter(traffic.sent)
        first, last = dict(traffic.first_start), dict(traffic.last_end)
    phases: dict[str, float] = {}
    missing = "POST /blocks/missing"
    if missing in first:
        phases["read + hash the file on the client (until POST /blocks/missing)"] = first[missing] - start
        blocks_kinds = [k for k in ("PUT /blocks/<block>", "POST /blocks/prove") if k in first]
        if blocks_kinds:
            b0 = min(first[k] for k in blocks_kinds)
            b1 = max(last[k] for k in blocks_kinds)
            phases["POST /blocks/missing"] = b0 - first[missing]
            label = " + ".join(blocks_kinds) + " (4 in parallel)"
            phases[label] = b1 - b0
            phases["link the object (objects/link) and return"] = end - b1
    return Upload(end - start, cpu, scpu, counts, sent, phases)


def profile_upload(server: LiveServer, backend: RemoteBackend, traffic: Traffic, src: str, work: str) -> None:
    spy = py_spy_binary()
    if spy is None:
        print("py-spy not found: pip install py-spy into the venv to profile")
        return
    out = os.path.join(work, "profile-upload.txt")
    cmd = [spy, "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw"]
    cmd += ["--nonblocking", "--gil", "-o", out]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    up = upload_once(server, backend, traffic, src, "profiled.bin")
    proc.send_signal(2)  # py-spy writes its output on SIGINT
    _, err = proc.communicate(timeout=60)
    if not os.path.exists(out):
        print(f"py-spy failed: {err.strip()[-400:]}")
        return
    total, own, incl, _ = summarize_profile(out, 20)
    print(
        f"\n--- profile of the server during one more upload ({up.seconds:.2f} s; {total} samples of "
        f"the thread holding the GIL, at 250 Hz: {total / 250:.1f} s of {up.seconds:.1f} s; "
        "native work with the GIL released, such as md5 of large buffers and file writes, is not "
        "counted)"
    )
    table = Table("self %", "function (self)", "incl %", "function (inclusive)")
    for i in range(max(len(own), len(incl))):
        a = own[i] if i < len(own) else ("", 0)
        b = incl[i] if i < len(incl) else ("", 0)
        table.add(f"{100 * a[1] / total:5.1f}" if a[0] else "", a[0], f"{100 * b[1] / total:5.1f}", b[0])
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024, help="file size (default 1 GiB)")
    parser.add_argument("--runs", type=int, default=3, help="first uploads, each to a new path (median)")
    parser.add_argument("--cold", action="store_true", help="evict the source from the page cache first")
    parser.add_argument("--profile", action="store_true", help="then profile one more upload with py-spy")
    parser.add_argument("--dir", default=None, help="where to work (default: system temp dir)")
    args = parser.parse_args()
    size = args.size_mib * 1024 * 1024
    mb = size / 1e6

    print_context("bench_remote_upload")
    with temp_dir("lakectl-bench-remote-", args.dir) as work:
        src = os.path.join(work, "source.bin")
        make_source(src, size)
        t0 = time.perf_counter()
        md5_file(src)
        t_md5 = time.perf_counter() - t0
        print(
            f"file: {args.size_mib} MiB (MB = 10^6 bytes), source {'cold' if args.cold else 'warm'} in "
            f"the page cache; md5 of it on one thread {mb / t_md5:,.0f} MB/s (client and server each "
            "hash every block once). Client and server share the 2 cores."
        )
        with live_server(work) as server:
            traffic = Traffic()
            backend = RemoteBackend(
                server.url, server.key_id, server.secret, transport=CountingTransport(traffic)
            )
            try:
                backend.create_repo(REPO)
                firsts: list[Upload] = []
                for run in range(args.runs):
                    # Each first upload must send every block: new content per run (the pieces of
                    # a run share nothing with the pieces of other runs).
                    if run:
                        make_source(src, size)
                    if args.cold:
                        drop_from_cache(src)
                    up = upload_once(server, backend, traffic, src, f"big-{run}.bin")
                    firsts.append(up)
                    print(
                        f"run {run + 1}: {mb / up.seconds:,.0f} MB/s ({up.seconds:.2f} s; "
                        f"{up.blocks_sent()} blocks sent, {up.sent['PUT /blocks/<block>'] / 1e6:,.0f} MB; "
                        f"client CPU {up.client_cpu:.2f} s, server CPU {up.server_cpu[0]:.2f} s user + "
                        f"{up.server_cpu[1]:.2f} s system)",
                        flush=True,
                    )
                    for phase, secs in up.phases.items():
                        print(f"         {secs:6.2f} s  {phase}")
                last = args.runs - 1
                if args.cold:
                    drop_from_cache(src)
                again = upload_once(server, backend, traffic, src, f"big-{last}.bin")
                print(
                    f"re-upload of the same file to the same path: {mb / again.seconds:,.0f} MB/s "
                    f"({again.seconds:.2f} s; requests: "
                    + ", ".join(f"{k} x{n}" for k, n in sorted(again.counts.items()))
                    + f"; {sum(again.sent.values()) / 1e6:,.2f} MB sent)"
                )
                for phase, secs in again.phases.items():
                    print(f"         {secs:6.2f} s  {phase}")
                stat = backend.stat(REPO, "main", f"big-{last}.bin")
                assert stat.entry is not None and stat.entry.size == size, stat

                figure = statistics.median(mb / u.seconds for u in firsts)
                runs = " / ".join(f"{mb / u.seconds:,.0f}" for u in firsts)
                table = Table("figure", "measured", "target", "result")
                table.add(
                    f"remote upload of {args.size_mib} MiB over loopback (median of {args.runs})",
                    f"{figure:,.0f} MB/s (runs {runs})",
                    f">= {TARGET_MB_S} MB/s",
                    verdict(figure >= TARGET_MB_S if args.size_mib >= 1024 else None),
                )
                table.add(
                    "blocks sent again by the re-upload (PUT /blocks)",
                    str(again.blocks_sent()),
                    str(TARGET_REUPLOAD_BLOCKS),
                    verdict(again.blocks_sent() == TARGET_REUPLOAD_BLOCKS),
                )
                table.print("Remote upload through RemoteBackend (a real server process on 127.0.0.1)")
                if args.size_mib < 1024:
                    print("(throughput not judged below 1 GiB)")
                if args.profile:
                    make_source(src, size)
                    profile_upload(server, backend, traffic, src, work)
            finally:
                backend.close()
            if server.process.poll() is not None:
                print(f"the server died during the run:\n{server.log_tail()}")


if __name__ == "__main__":
    main()
