"""Running one hook: a webhook (lakeFS's event JSON POSTed, :mod:`lakectl.core.workflow.webhooks`) or a
command (a local program with the event JSON on stdin); each answers whether it passed and its
output (log), of bounded size, within the hook's timeout."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from lakectl.core.workflow import webhooks
from lakectl.core.workflow.actions import Hook

MAX_OUTPUT = webhooks.MAX_ANSWER
"""Bytes of a hook's output kept (an answer's body, a program's output): the start of it."""
_CHUNK = 1 << 16
ENV_PREFIX = "LAKEFSACTIONS_"
"""lakeFS's rule: ``{{ ENV.X }}`` in a hook's properties reads only variables with this prefix."""
_ENV_REF = re.compile(r"\{\{\s*ENV\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True, slots=True)
class Outcome:
    passed: bool
    output: bytes


class _Failed(Exception):
    pass


def substitute(text: str) -> str:
    """``{{ ENV.LAKEFSACTIONS_X }}`` replaced by the variable; a missing or unprefixed one fails."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if not name.startswith(ENV_PREFIX):
            raise _Failed(f"environment variable {name} is not allowed: names begin with {ENV_PREFIX}")
        if name not in os.environ:
            raise _Failed(f"environment variable {name} is not set")
        return os.environ[name]

    return _ENV_REF.sub(one, text)


def run(
    hook: Hook,
    event: Mapping[str, Any],
    commands: bool,
    env: Mapping[str, str],
    hosts: webhooks.HostPolicy | None = None,
) -> Outcome:
    """Run ``hook`` for ``event`` (lakeFS's event JSON). ``commands``: whether command hooks may
    run here; ``env``: extra variables for a command (where the lake is); ``hosts``: where
    webhooks may go (a server's policy; None: anywhere)."""
    try:
        if hook.type == "webhook":
            return _webhook(hook, event, hosts)
        if not commands:
            raise _Failed(
                "command hooks are disabled on this server (set actions.command.enabled: true to run them)"
            )
        return _command(hook, event, env)
    except _Failed as e:
        return Outcome(False, f"{e}\n".encode())
    except (ValueError, UnicodeError, OSError) as e:  # a URL or header http.client will not send
        return Outcome(False, f"cannot run the hook: {e}\n".encode())


def _webhook(hook: Hook, event: Mapping[str, Any], hosts: webhooks.HostPolicy | None) -> Outcome:
    import urllib.parse

    props = hook.properties
    url = str(props["url"])
    params: list[tuple[str, str]] = []
    for name, value in (props.get("query_params") or {}).items():
        for v in value if isinstance(value, list) else [value]:
            params.append((name, substitute(_scalar(v))))
    if params:
        url += ("&" if urllib.parse.urlsplit(url).query else "?") + urllib.parse.urlencode(params)
    headers = {"Content-Type": "application/json"}
    headers.update({k: substitute(_scalar(v)) for k, v in (props.get("headers") or {}).items()})
    body = json.dumps(event).encode()
    log = f"Request:\nPOST {url}\n"
    try:
        status, reason, data, note = webhooks.post(url, headers, body, hook.timeout, hosts)
    except webhooks.Refused as e:
        return Outcome(False, f"{log}\n{e}\n".encode())
    except OSError as e:
        return Outcome(False, f"{log}\nRequest failed: {e}\n".encode())
    text = f"{log}\nResponse:\n{status} {reason}\n".encode() + data
    if note:
        text += f"\n{note}\n".encode()
    return Outcome(200 <= status < 300, text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _command(hook: Hook, event: Mapping[str, Any], extra: Mapping[str, str]) -> Outcome:
    """Run the program in a session of its own, its output read as it comes (the first
    :data:`MAX_OUTPUT` bytes kept, the rest read and dropped, so that the program neither blocks
    nor dies writing); past the timeout, its whole process group is killed."""
    props = hook.properties
    cmd = props["command"]
    argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
    env = dict(os.environ)
    env.update(extra)
    env.update({f"LAKEFS_{k.upper()}": _scalar(v) for k, v in event.items() if not isinstance(v, dict)})
    env.update({k: substitute(_scalar(v)) for k, v in (props.get("env") or {}).items()})
    deadline = time.monotonic() + hook.timeout
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except OSError as e:
        return Outcome(False, f"cannot run {argv[0]!r}: {e.strerror or e}\n".encode())
    assert proc.stdin is not None and proc.stdout is not None
    status: int | None = None
    try:
        kept, dropped, ended = _exchange(proc.stdin, proc.stdout, json.dumps(event).encode(), deadline)
        if ended:
            status = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.returncode is None:  # timed out (or interrupted): the group, not only the program
            _kill_group(proc)
        proc.stdin.close()  # nothing buffered: never blocks, even if a child holds the pipe
        proc.stdout.close()
    out = bytes(kept)
    if dropped:
        out += f"\noutput cut at its first {MAX_OUTPUT} bytes ({dropped} more dropped)\n".encode()
    if status is None:
        return Outcome(False, out + f"\ntimed out after {hook.timeout:g}s\n".encode())
    if status != 0:
        out += f"\nexit status {status}\n".encode()
    return Outcome(status == 0, out)


def _exchange(
    stdin: IO[bytes], stdout: IO[bytes], data: bytes, deadline: float
) -> tuple[bytearray, int, bool]:
    """Write ``data`` to the program's input as it takes it (a program may exit, or leave a
    child holding its input, without reading it) while reading its output, to the output's end or
    to ``deadline``: the first :data:`MAX_OUTPUT` bytes, how many more were read and dropped, and
    whether the end was reached. One thread, no blocking call: nothing can outlive the hook."""
    kept, dropped, sent = bytearray(), 0, 0
    inp, out = stdin.fileno(), stdout.fileno()
    os.set_blocking(inp, False)
    with selectors.DefaultSelector() as selector:
        selector.register(out, selectors.EVENT_READ)
        selector.register(inp, selectors.EVENT_WRITE)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return kept, dropped, False
            for key, _ in selector.select(left):
                if key.fd == inp:
                    try:
                        sent += os.write(inp, data[sent : sent + _CHUNK])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program exited without reading it all
                        sent = len(data)
                    if sent >= len(data):
                        selector.unregister(inp)
                        stdin.close()
                    continue
                chunk = os.read(out, _CHUNK)
                if not chunk:
                    return kept, dropped, True
                room = MAX_OUTPUT - len(kept)
                kept += chunk[:room]
                dropped += max(0, len(chunk) - room)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the program and every process it started in its session (its process group: one
    that made a session of its own escapes), then reap the program."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the program is not reaped yet: its pid is its group's
    proc.kill()
    proc.wait()
