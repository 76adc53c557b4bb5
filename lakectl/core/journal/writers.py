"""Who writes the journal: a writer's registration record (where it runs, when it last showed
it lives) and whether the writer of a record may still be writing. Recovery decides what a dead
writer left open (:mod:`.recovery`); the living one is left alone."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from typing import Any

LEASE = 60.0
"""A writer on another host whose heartbeat is older than this is taken for dead."""


def _process_start(pid: int) -> int | None:
    """When the process started (clock ticks since boot), so that a reused pid is told apart;
    None where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


@functools.cache
def host() -> str:
    """This machine's name, as writer records give it (asked once; socket is imported here,
    not by every command that opens a lake)."""
    import socket

    return socket.gethostname()


def writer_record() -> dict[str, Any]:
    """What a writer's registration says: where it runs and when it last showed it lives."""
    return {
        "host": host(),
        "pid": os.getpid(),
        "start": _process_start(os.getpid()),
        "heartbeat": time.time(),
    }


def is_alive(record: Mapping[str, Any], now: float | None = None) -> bool:
    """Whether the writer of ``record`` may still be writing: on this host, its process exists
    (and is the same process: its start time agrees); elsewhere, its heartbeat is recent."""
    if record.get("closed"):
        return False  # closed with entries left for the next seal: nothing more comes from it
    if "pid" not in record:
        return True  # a record that cannot say is never taken for dead
    if record.get("host") != host():
        return (now if now is not None else time.time()) - float(record.get("heartbeat", 0)) < LEASE
    pid = int(record["pid"])
    started = _process_start(pid)
    if started is not None:
        return record.get("start") in (None, started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
