"""A working copy inside a git repository: its data ignored by git, its ref file kept (as lakeFS does)."""

from __future__ import annotations

import os
import subprocess

from lakectl.client.workcopy.index import REF_FILE
from lakectl.errors import InvalidArgument

MARKER = "# ignored by lakectl local:"
"""The header of the .gitignore section lakeFS's lakectl writes: the same one, so both tools
share the section."""


def git_root(directory: str) -> str | None:
    """The top of the git work tree holding ``directory`` (which must exist); None outside git
    or without git installed."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=directory,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return os.path.realpath(done.stdout.strip())


def check_not_git_root(directory: str) -> None:
    """lakeFS refuses to link a git repository's own root: its data would hide the code."""
    if os.path.isdir(directory) and git_root(directory) == os.path.realpath(directory):
        raise InvalidArgument(
            f"directory {directory!r} is a git repository, please specify a sub-directory",
            path=directory,
        )


def ignore(directory: str) -> str | None:
    """Add ``<dir>/*`` and ``!<dir>/.lakefs_ref.yaml`` to the section of the git root's
    .gitignore (created if missing); return that file, or None outside git."""
    top = git_root(directory)
    if top is None:
        return None
    rel = os.path.relpath(os.path.realpath(directory), top).replace(os.sep, "/")
    entries = [f"{rel}/*", f"!{rel}/{REF_FILE}"]
    path = os.path.join(top, ".gitignore")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    if MARKER in lines:
        at = lines.index(MARKER) + 1
        end = at
        while end < len(lines) and lines[end].strip():
            end += 1
        section = [line for line in lines[at:end] if line not in entries] + entries
        lines = lines[:at] + section + lines[end:]
    else:
        if lines and lines[-1].strip():
            lines.append("")
        lines += [MARKER, *entries]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
