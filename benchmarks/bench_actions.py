"""Commit latency with lakeFS actions, side by side (embedded lake, in-process ``porcelain.commit``
of one small staged object; median of ``--commits`` commits each):

* no events consumer at all (``NoEvents``: the lake before actions), for reference;
* actions on, no action file (the cost of looking: a listing of ``_lakefs_actions/`` at the ref
  before the commit and at the new commit after it), target: at most 2 ms over the reference;
* an action file whose hook does not match (``pre-commit`` on ``release-*``, committing ``main``);
* a ``pre-commit`` webhook to a local HTTP server (127.0.0.1, its own process, answering 200
  at once), target: the extra over "no action file" at most one bare POST to the same server
  plus 2 ms (the run's records and the event JSON).

The bare POST (urllib, a new connection each time, as the hook makes) is measured in turn with
the commits and printed too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request

from _benchutil import Table, fmt_time, median, print_context, temp_dir, verdict

from lakectl.core import opening, porcelain, writes
from lakectl.core.events import NoEvents
from lakectl.core.lake import Lake
from lakectl.core.workflow import actionruns

TARGET_LOOK = 0.002
TARGET_WEBHOOK_EXTRA = 0.002


WEBHOOK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Answer(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
"""A webhook answering 200 at once, in a process of its own as a real one would be (in this
process it would compete with the commit for the interpreter lock)."""


def commit_one(lake: Lake, repo: str, i: int) -> float:
    """Seconds of one commit of one new small object."""
    writes.upload(lake, repo, "main", f"data/part-{i:05d}.csv", f"{i},x\n".encode())
    start = time.perf_counter()
    porcelain.commit(lake, repo, "main", f"commit {i}", committer="bench")
    return time.perf_counter() - start


def bare_post(url: str) -> float:
    """Seconds of one POST of a small JSON body, on a new connection as a hook makes it."""
    start = time.perf_counter()
    request = urllib.request.Request(url, data=b"{}", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
    return time.perf_counter() - start


def action(url: str, branches: list[str]) -> bytes:
    hook = {"id": "check", "type": "webhook", "properties": {"url": url}}
    return json.dumps({"on": {"pre-commit": {"branches": branches}}, "hooks": [hook]}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--dir", default=None, help="where to put temp data (default: system temp)")
    args = parser.parse_args()
    print_context("Commit latency with actions")

    server = subprocess.Popen([sys.executable, "-c", WEBHOOK], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    url = f"http://127.0.0.1:{server.stdout.readline().strip()}/hook"
    try:
        with temp_dir("lakectl-bench-actions-", args.dir) as work:
            lake = opening.open_lake(work)
            hooks_sink = lake.events
            try:
                porcelain.create_repo(lake, "warm-up")  # imports, caches and the database file warm
                for i in range(5):
                    commit_one(lake, "warm-up", i)
                cases = {
                    "none": None,
                    "no action file": None,
                    "action file, no match": action(url, ["release-*"]),
                    "pre-commit webhook": action(url, ["main"]),
                }
                repos = {name: name.replace(" ", "-").replace(",", "") for name in cases}
                for name, content in cases.items():
                    porcelain.create_repo(lake, repos[name])
                    if content is not None:
                        writes.upload(lake, repos[name], "main", "_lakefs_actions/check.yaml", content)
                        porcelain.commit(lake, repos[name], "main", "action", committer="bench")
                samples: dict[str, list[float]] = {name: [] for name in [*cases, "post"]}
                names = list(samples)
                # The cases take turns, each first in turn, so that the load of this shared
                # machine falls on all alike; the bare POST takes its turn with them.
                for i in range(args.commits):
                    for name in names[i % len(names) :] + names[: i % len(names)]:
                        if name == "post":
                            samples[name].append(bare_post(url))
                            continue
                        lake.events = NoEvents() if name == "none" else hooks_sink
                        samples[name].append(commit_one(lake, repos[name], i))
                figures = {name: median(times) for name, times in samples.items()}
                runs = len(actionruns.list_runs(lake, "pre-commit-webhook"))
            finally:
                lake.close()
        post = figures["post"]
    finally:
        server.terminate()
        server.wait(timeout=10)

    print(f"check: {runs} runs recorded on the webhook's repository ({args.commits} gated commits + 1)")
    look = figures["no action file"] - figures["none"]
    extra = figures["pre-commit webhook"] - figures["no action file"]
    table = Table("case", f"median commit ({args.commits})", "over reference", "target", "result")
    table.add("no events consumer (reference)", fmt_time(figures["none"]), "-", "-", "info")
    table.add(
        "actions, no action file",
        fmt_time(figures["no action file"]),
        fmt_time(look),
        fmt_time(TARGET_LOOK),
        verdict(look <= TARGET_LOOK),
    )
    nomatch = figures["action file, no match"]
    table.add(
        "action file, hook not matching", fmt_time(nomatch), fmt_time(nomatch - figures["none"]), "-", "info"
    )
    table.add(
        "pre-commit webhook (127.0.0.1)",
        fmt_time(figures["pre-commit webhook"]),
        f"{fmt_time(extra)} over no file",
        f"<= {fmt_time(post + TARGET_WEBHOOK_EXTRA)}",
        verdict(extra <= post + TARGET_WEBHOOK_EXTRA),
    )
    table.add("bare POST to the same webhook", fmt_time(post), "-", "-", "info")
    table.print("Commit latency with lakeFS actions (embedded, in-process)")


if __name__ == "__main__":
    main()
