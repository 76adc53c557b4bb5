"""Hooks a server can run for anyone who may write an action file: a server's webhooks do not
reach its own network unless its operator allows the host, no webhook follows a redirect or
outlives its timeout, and a command hook's output is bounded while it is read and its whole
process group dies at the timeout.

Each test runs embedded and against a live server (``both``) unless it is about the server's
host policy; webhooks go to real HTTP servers on 127.0.0.1 started here, command hooks are real
processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakectl.core.workflow.hooks import MAX_OUTPUT
from server.config import load_settings
from tests.cli.both import Lakectl, both
from tests.cli.test_actions import command, head, put_action, runs, webhook
from tests.server.conftest import LOOPBACK_HOOKS, Live, free_port, serve

__all__ = ["both"]

SECRET = b"internal-only: db password hunter2"
SLOW_S = 10.0
"""How long the slow servers and programs below would hold a hook without a total deadline."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The server of ``both``: command hooks enabled, webhooks to 127.0.0.1 allowed (as an
    operator allows its own receivers: ``actions.webhook.allowed_hosts``)."""
    env = {"LAKECTL_SERVER_ACTIONS_COMMAND_ENABLED": "true", **LOOPBACK_HOOKS}
    with serve(load_settings(None, str(tmp_path_factory.mktemp("server-bounds")), environ=env)) as server:
        yield server


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server on the default settings: no host allowed besides public addresses."""
    with serve(load_settings(None, str(tmp_path_factory.mktemp("server-strict")), environ={})) as server:
        yield server


@contextmanager
def http_server(handle: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 answering every GET and POST with ``handle``: its base
    URL, and the method and path of each request it received."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            handle(self)

        do_GET = do_POST = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def reply(status: int, body: bytes, **headers: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def handle(h: BaseHTTPRequestHandler) -> None:
        if h.command == "POST":
            h.rfile.read(int(h.headers["Content-Length"]))
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return handle


def gate(cli: Lakectl, hook: dict[str, Any]) -> tuple[str, str]:
    """Run ``hook`` as the pre-commit hook of a commit to ``feat``: the commit's stderr (empty
    when it passed) and the hook's stored output."""
    put_action(cli, "feat", "gate", {"on": {"pre-commit": None}, "hooks": [hook]}, commit=False)
    done = cli("commit", f"lakefs://{cli.repo}/feat", "-m", "gated", code=None)
    (run, *_) = runs(cli, "--branch", "feat")
    out = cli("cat-hook-output", f"lakefs://{cli.repo}", run["run_id"], "0000_0000").stdout
    return (done.stderr if done.exit_code else ""), out


def longest(char: str, text: str) -> int:
    """The length of the longest run of ``char`` in ``text``."""
    return max(map(len, re.findall(f"{re.escape(char)}+", text)), default=0)


def remote(server: Live, work: Path) -> Lakectl:
    """The CLI against ``server``, with a repository as ``both`` makes one."""
    cli = Lakectl("remote", {**server.cli_env(work), "LAKECTL_BASE_URI": ""}, work, repo=f"s{time.time_ns()}")
    cli("repo", "create", f"lakefs://{cli.repo}")
    cli("branch", "create", f"lakefs://{cli.repo}/feat", "--source", f"lakefs://{cli.repo}/main")
    return cli


# -- where a server's webhooks may go -------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("127.0.0.1", "loopback address 127.0.0.1"),
        ("localhost", "loopback address 127.0.0.1 (localhost)"),
        ("2130706433", "loopback address 127.0.0.1 (2130706433)"),  # 127.0.0.1 as one number
        ("[::ffff:127.0.0.1]", "loopback address ::ffff:127.0.0.1"),
    ],
)
def test_a_server_refuses_a_webhook_to_its_own_network(
    strict: Live, tmp_path: Path, host: str, shown: str
) -> None:
    cli = remote(strict, tmp_path)
    with http_server(reply(200, SECRET)) as (base, seen):
        port = base.rsplit(":", 1)[1]
        before = head(cli, "feat")
        stderr, out = gate(cli, webhook("peek", f"http://{host}:{port}/secret"))
    assert f"Request refused: {shown}" in out and "actions.webhook.allowed_hosts" in out
    assert "refused" in stderr and SECRET.decode() not in stderr + out
    assert seen == []  # nothing was sent to the internal server
    assert head(cli, "feat") == before


def test_a_host_the_operator_allows_is_called(both: Lakectl) -> None:
    """``both``'s server allows 127.0.0.1 (and the embedded lake has no policy): the internal
    receiver is called and its answer stored."""
    with http_server(reply(200, SECRET)) as (base, seen):
        stderr, out = gate(both, webhook("peek", f"{base}/secret"))
    assert stderr == "" and seen == ["POST /secret"]
    assert "200 OK" in out and SECRET.decode() in out


# -- what any webhook does ------------------------------------------------------------------------


def test_a_redirect_fails_the_hook_and_is_not_followed(both: Lakectl) -> None:
    with http_server(reply(200, SECRET)) as (elsewhere, elsewhere_seen):
        moved = reply(302, b"moved", Location=f"{elsewhere}/secret")
        with http_server(moved) as (base, seen):
            stderr, out = gate(both, webhook("hop", f"{base}/hook"))
    assert seen == ["POST /hook"] and elsewhere_seen == []  # not fetched, by GET or by POST
    assert "302 Found" in out and f"redirect to {elsewhere}/secret not followed" in out
    assert stderr.startswith("error: pre-commit hook aborted") and SECRET.decode() not in out


def test_a_dripping_answer_is_cut_at_the_hooks_timeout(both: Lakectl) -> None:
    """An answer sent a byte at a time (each read well within the timeout) is cut when the whole
    call's time is up: the server finds its connection closed long before it is done."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    pause = SLOW_S / len(answer)
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def drip(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers["Content-Length"]))
        sent = 0
        try:
            for byte in answer:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                sent += 1
                time.sleep(pause)
        except OSError as e:
            outcome["closed"] = type(e).__name__
        outcome["sent"] = sent
        finished.set()

    with http_server(drip) as (base, _):
        stderr, out = gate(both, webhook("drip", f"{base}/", timeout="1s"))
        assert finished.wait(SLOW_S * 3)
    assert "Request failed: timed out after 1s" in out and "timed out" in stderr
    assert "closed" in outcome and outcome["sent"] < len(answer), outcome


def test_a_long_answer_is_read_only_to_the_cap(both: Lakectl) -> None:
    body = b"x" * (3 * MAX_OUTPUT)
    with http_server(reply(200, body)) as (base, _):
        stderr, out = gate(both, webhook("big", f"{base}/"))
    assert stderr == ""
    assert longest("x", out) == MAX_OUTPUT and f"answer cut at its first {MAX_OUTPUT} bytes" in out


# -- command hooks ---------------------------------------------------------------------------------


def test_a_commands_output_is_cut_at_the_cap_and_the_program_runs_to_its_end(both: Lakectl) -> None:
    code = "import sys\nfor _ in range(48): sys.stdout.write('y' * 65536)\nsys.exit(3)"
    stderr, out = gate(both, command("loud", code))
    assert longest("y", out) == MAX_OUTPUT
    assert f"output cut at its first {MAX_OUTPUT} bytes ({48 * 65536 - MAX_OUTPUT} more dropped)" in out
    assert "exit status 3" in out and "aborted" in stderr  # read to its end: its status decides


def test_a_timed_out_command_leaves_no_process_behind(both: Lakectl, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"echo $$ > {pids}; sleep {SLOW_S * 4:g} & echo $! >> {pids}; sleep {SLOW_S * 4 - 5:g}"
    hook = {
        "id": "linger",
        "type": "command",
        "properties": {"command": ["sh", "-c", script], "timeout": "1s"},
    }
    stderr, out = gate(both, hook)
    assert "timed out after 1s" in out and "aborted" in stderr
    shell, background = (int(p) for p in pids.read_text().split())
    for pid in (shell, background):
        assert gone(pid), f"process {pid} outlived its hook"


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (reaped, or a zombie waiting for its parent), waiting a while."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    return False


def test_a_loud_commands_output_does_not_fill_the_memory_of_the_lake(tmp_path: Path) -> None:
    """A pre-commit command printing 200 MB, run by the ``lakectl`` command (an embedded lake):
    the peak memory of every process of the run stays far below what the hook printed."""
    size = 200 << 20
    code = (
        f"import sys\nblock = b'z' * (1 << 20)\nfor _ in range({size >> 20}): sys.stdout.buffer.write(block)"
    )
    env = {
        **os.environ,
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
        "LAKECTL_BASE_URI": "",
    }
    cli = Lakectl("embedded", env, tmp_path, repo="loud")
    cli("repo", "create", "lakefs://loud")
    put_action(
        cli, "main", "gate", {"on": {"pre-commit": None}, "hooks": [command("loud", code)]}, commit=False
    )
    # A process of its own runs lakectl, and reports the peak resident size of its children
    # (lakectl, and the hook lakectl ran) in KiB.
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    lakectl = str(Path(sys.executable).with_name("lakectl"))
    argv = [sys.executable, "-c", measure, lakectl, "commit", "lakefs://loud/main", "-m", "loud"]
    status, peak_kib = subprocess.run(
        argv, env=env, capture_output=True, check=True, text=True
    ).stdout.split()
    assert status == "0"
    assert int(peak_kib) * 1024 < size / 2, f"peak {int(peak_kib) >> 10} MiB for a {size >> 20} MiB output"
    (run,) = runs(cli, "--branch", "main")
    out = cli("cat-hook-output", "lakefs://loud", run["run_id"], "0000_0000").stdout
    assert longest("z", out) == MAX_OUTPUT and f"({size - MAX_OUTPUT} more dropped)" in out


def test_a_hook_ends_with_its_program_though_a_child_holds_its_unread_input(
    both: Lakectl, tmp_path: Path
) -> None:
    """The program starts a child that keeps the hook's standard input open and never reads it,
    then exits 0; the event (over 64 KiB, more than a pipe holds) is never read whole. The hook
    passes when its program ends: the commit is made while that child still runs."""
    pid_file = tmp_path / "child"
    code = (
        "import subprocess, sys\nfrom subprocess import DEVNULL\n"
        f"child = subprocess.Popen(['sleep', '{SLOW_S * 3:g}'], stdin=sys.stdin,"
        " stdout=DEVNULL, stderr=DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))"
    )
    hook = command("quick", code)
    hook["properties"]["timeout"] = f"{SLOW_S * 2:g}s"
    put_action(both, "feat", "gate", {"on": {"pre-commit": None}, "hooks": [hook]}, commit=False)
    try:
        meta = [arg for i in range(7) for arg in ("--meta", f"k{i}={'m' * 4000}")]
        both.js("commit", f"lakefs://{both.repo}/feat", "-m", "e" * 60_000, *meta)
        child = int(pid_file.read_text())
        assert running(child), "the commit waited for the hook's child"
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)


def running(pid: int) -> bool:
    """Whether ``pid`` runs (neither ended nor a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_loud_command_hook_does_not_fill_the_memory_of_a_server(tmp_path: Path) -> None:
    """The same hook run by a server (``lakectl server run``, a process of its own, command hooks
    enabled): the server's peak resident size (VmHWM) grows far less than what the hook printed.
    The hook prints as many MiB as the commit message says; a first commit of 1 MiB warms up."""
    size = 200 << 20
    code = (
        "import os, sys\n"
        "for _ in range(int(os.environ['LAKEFS_COMMIT_MESSAGE'])): sys.stdout.write('z' * (1 << 20))"
    )
    port = free_port()
    conf = tmp_path / "server.yaml"
    conf.write_text(
        f"listen_address: 127.0.0.1:{port}\ngateways: {{s3: {{listen_address: '127.0.0.1:{free_port()}'}}}}\n"
        "actions: {command: {enabled: true}}\nlogging: {level: error}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
    env["LAKECTL_SERVER_DATA_DIR"] = str(tmp_path / "data")
    lakectl = str(Path(sys.executable).with_name("lakectl"))
    setup = [lakectl, "server", "setup", "--config", str(conf), "--json"]
    creds = json.loads(subprocess.run(setup, env=env, capture_output=True, check=True).stdout)
    proc = subprocess.Popen([lakectl, "server", "run", "--config", str(conf)], env=env)
    try:
        url = f"http://127.0.0.1:{port}/api/v1"
        server = Live(url, creds["access_key_id"], creds["secret_access_key"], tmp_path)
        wait_for(server, proc)
        cli = Lakectl("remote", {**server.cli_env(tmp_path), "LAKECTL_BASE_URI": ""}, tmp_path, repo="loud")
        cli("repo", "create", "lakefs://loud")
        action = {"on": {"pre-commit": None}, "hooks": [command("loud", code)]}
        put_action(cli, "main", "gate", action, commit=False)
        cli("commit", "lakefs://loud/main", "-m", "1")
        before = peak_kib(proc.pid)
        cli("fs", "upload", "lakefs://loud/main/more.txt", "-s", "-", input=b"more")
        cli("commit", "lakefs://loud/main", "-m", str(size >> 20))
        grown = (peak_kib(proc.pid) - before) << 10
        loud, _ = runs(cli, "--branch", "main")
        out = cli("cat-hook-output", "lakefs://loud", loud["run_id"], "0000_0000").stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert grown < size / 4, f"the server's peak grew {grown >> 20} MiB for a {size >> 20} MiB output"
    assert longest("z", out) == MAX_OUTPUT and f"({size - MAX_OUTPUT} more dropped)" in out


def peak_kib(pid: int) -> int:
    """The peak resident size of process ``pid`` so far (Linux's VmHWM), in KiB."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1])


def wait_for(server: Live, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    with server.client() as anon:
        while True:
            assert proc.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not answer in time"
            try:
                if anon.get("/healthcheck", timeout=1).status_code == 204:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
