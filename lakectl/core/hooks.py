"""Running one hook: a webhook (lakeFS's event JSON POSTed with urllib) or a command (a local
program with the event JSON on stdin); each answers whether it passed and its output (log)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.core.actions import Hook

MAX_OUTPUT = 1 << 20
"""Bytes of a hook's output kept (an answer's body, a program's output): the start of it."""
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


def run(hook: Hook, event: Mapping[str, Any], commands: bool, env: Mapping[str, str]) -> Outcome:
    """Run ``hook`` for ``event`` (lakeFS's event JSON). ``commands``: whether command hooks may
    run here; ``env``: extra variables for a command (where the lake is)."""
    try:
        if hook.type == "webhook":
            return _webhook(hook, event)
        if not commands:
            raise _Failed(
                "command hooks are disabled on this server (set actions.command.enabled: true to run them)"
            )
        return _command(hook, event, env)
    except _Failed as e:
        return Outcome(False, f"{e}\n".encode())
    except (ValueError, UnicodeError, OSError) as e:  # a URL or header urllib will not send
        return Outcome(False, f"cannot run the hook: {e}\n".encode())


def _webhook(hook: Hook, event: Mapping[str, Any]) -> Outcome:
    import urllib.error  # here: http.client and ssl cost a commit 12 ms, and most have no webhook
    import urllib.parse
    import urllib.request

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
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    log = [f"Request:\nPOST {url}\n"]
    try:
        with urllib.request.urlopen(request, timeout=hook.timeout) as answer:
            status, reason, data = answer.status, answer.reason, answer.read(MAX_OUTPUT)
    except urllib.error.HTTPError as e:
        status, reason, data = e.code, e.reason, e.read(MAX_OUTPUT)
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        log.append(f"\nRequest failed: {reason}\n")
        return Outcome(False, "".join(log).encode())
    log.append(f"\nResponse:\n{status} {reason}\n")
    text = "".join(log).encode() + data
    return Outcome(200 <= status < 300, text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _command(hook: Hook, event: Mapping[str, Any], extra: Mapping[str, str]) -> Outcome:
    props = hook.properties
    cmd = props["command"]
    argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
    env = dict(os.environ)
    env.update(extra)
    env.update({f"LAKEFS_{k.upper()}": _scalar(v) for k, v in event.items() if not isinstance(v, dict)})
    env.update({k: substitute(_scalar(v)) for k, v in (props.get("env") or {}).items()})
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(event).encode(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=hook.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = e.output or b""
        return Outcome(False, out[:MAX_OUTPUT] + f"\ntimed out after {hook.timeout:g}s\n".encode())
    except OSError as e:
        return Outcome(False, f"cannot run {argv[0]!r}: {e.strerror or e}\n".encode())
    out = done.stdout[:MAX_OUTPUT]
    if done.returncode != 0:
        out += f"\nexit status {done.returncode}\n".encode()
    return Outcome(done.returncode == 0, out)
