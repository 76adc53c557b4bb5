"""Commit latency with lakeFS actions, side by side (embedded lake, in-process ``porcelain.commit``
of one small staged object; median of ``--commits`` commits each):

* no events consumer at all (``NoEvents``: the lake before actions), for reference;
* actions on, no action file (the cost of looking: a listing of ``_lakefs_actions/`` at the ref
  before the commit and at the new commit after it), target: at most 2 ms over the reference;
* an action file whose hook does not match (``pre-commit`` on ``release-*``, committing ``main``);
* a ``pre-commit`` webhook to a local HTTP server (127.0.0.1, answering 200 at once), target: the
  extra over "no action file" at most one bare POST to the same server plus 2 ms (the run's
  records and the event JSON).

The bare POST (urllib, a new connection each time, as the hook makes) is printed too.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _benchutil import Table, fmt_time, median, print_context, temp_dir, verdict

from lakectl.core import actionruns, porcelain
from lakectl.core.events import NoEvents

TARGET_LOOK = 0.002
TARGET_WEBHOOK_EXTRA = 0.002


class Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def commits(lake: porcelain.Lake, repo: str, n: int) -> float:
    """Median seconds of ``n`` commits of one new small object each."""
    samples = []
    for i in range(n):
        porcelain.upload(lake, repo, "main", f"data/part-{i:05d}.csv", f"{i},x\n".encode())
        start = time.perf_counter()
        porcelain.commit(lake, repo, "main", f"commit {i}", committer="bench")
        samples.append(time.perf_counter() - start)
    return median(samples)


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

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        with temp_dir("lakectl-bench-actions-", args.dir) as work:
            lake = porcelain.open_lake(work)
            hooks_sink = lake.events
            try:
                porcelain.create_repo(lake, "warm-up")  # imports, caches and the database file warm
                commits(lake, "warm-up", 5)
                figures: dict[str, float] = {}
                for name, content in (
                    ("none", None),
                    ("no action file", None),
                    ("action file, no match", action(url, ["release-*"])),
                    ("pre-commit webhook", action(url, ["main"])),
                ):
                    repo = name.replace(" ", "-").replace(",", "")[:40].strip("-")
                    porcelain.create_repo(lake, repo)
                    lake.events = NoEvents() if name == "none" else hooks_sink
                    if content is not None:
                        porcelain.upload(lake, repo, "main", "_lakefs_actions/check.yaml", content)
                        porcelain.commit(lake, repo, "main", "action", committer="bench")
                    figures[name] = commits(lake, repo, args.commits)
                runs = len(actionruns.list_runs(lake, "pre-commit-webhook"))
            finally:
                lake.close()
        posts = []
        for _ in range(args.commits):
            start = time.perf_counter()
            request = urllib.request.Request(url, data=b"{}", headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                answer.read()
            posts.append(time.perf_counter() - start)
        post = median(posts)
    finally:
        server.shutdown()
        server.server_close()

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
