"""Provenance recorded by the ``lakefs`` data source: what an application read, and what code ran,
written into the metadata of every commit it makes (``lakectl_inputs``, ``lakectl_code``: see
:mod:`lakectl.core.graph.inputs`; ``lakectl provenance`` reads them back).

Spark plans a Python data source's reads and commits its writes in Python processes of their own,
not in the process that registered the source; but all of them run on the driver's machine. So the
record is a file there, named after the Spark application (:func:`lakectl.spark.register` captures
its id and the code identity): each read the source plans appends its repository, resolved commit
and path; each commit the source makes records what was read since the application's previous
commit through it, then starts the record afresh. Two chained jobs in one application thus record
one link each: the second job's output names the first job's output, not the raw data under it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from lakectl.core.graph.inputs import CODE, INPUTS, Input, encode_inputs


@dataclass(frozen=True)
class Recorder:
    """The provenance record of one Spark application (picklable: it travels with the source)."""

    application: str
    code: dict[str, Any] | None = None
    lineage: str | None = None
    """Where OpenLineage events of its commits go (:mod:`lakectl.spark.lineage`), if anywhere."""

    @property
    def path(self) -> str:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in self.application)
        return os.path.join(tempfile.gettempdir(), f"lakectl-spark-{safe}.inputs")

    def read(self, found: Input) -> None:
        """Note a read the source planned (one line, appended whole)."""
        line = json.dumps(found.to_dict(), separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # not between a commit's read of the record and its reset
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def metadata(self) -> dict[str, str]:
        """What a commit the source is about to make records: the inputs read since the
        application's previous commit (the record then starts afresh) and the code."""
        out = {CODE: json.dumps(self.code, separators=(",", ":"))} if self.code else {}
        inputs = self._take()
        if inputs:
            out[INPUTS] = encode_inputs(inputs)
        return out

    def _take(self) -> list[Input]:
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return []
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "rb") as f:
                lines = f.read().splitlines()
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        found = []
        for line in lines:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                d = json.loads(line)
                found.append(Input(d["repository"], d["commit"], d["path"]))
        return list(dict.fromkeys(found))


def code_identity(script: str) -> dict[str, Any] | None:
    """The running code: the script's absolute path and, in a git checkout, its commit and
    whether the tree differs from it (None for an interactive session, which has no script)."""
    if not script or script in ("-c", "-") or not os.path.isfile(script):
        return None
    path = os.path.abspath(script)
    out: dict[str, Any] = {"script": path}
    where = os.path.dirname(path)
    try:
        head = subprocess.run(
            ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode == 0:
            status = subprocess.run(
                ["git", "-C", where, "status", "--porcelain"], capture_output=True, text=True, timeout=30
            )
            out["git_commit"] = head.stdout.strip()
            out["dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass  # no git here: the script's path alone
    return out
