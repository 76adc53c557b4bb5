"""``lakectl annotate``: entries under a path, each with the last commit that changed it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, path_uri

MESSAGE_CHARS = 200
"""A message is cut to this many characters, at its first line (as lakeFS's lakectl)."""


def annotate(
    path: Annotated[
        str, typer.Argument(help="lakefs://<repository>/<ref>[/<path or prefix>]", show_default=False)
    ],
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Every object under the prefix, not one level.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """List entries under a path, each with the last commit that changed it.

    The path is a prefix, as in lakeFS: without --recursive, the objects and common prefixes
    ("directories") one level under it, a prefix with the last commit that changed anything
    under it. An object only staged on a branch has no commit (JSON: "commit": null). With
    --json: [{path, path_type, commit}].
    """
    uri = path_uri(path, required=False)
    assert uri.ref is not None
    found = backend().annotate(uri.repo, uri.ref, uri.path, recursive)
    render.emit([a.to_dict() for a in found], json_, _lines)


def _lines(data: list[dict[str, Any]]) -> None:
    for d in data:
        c = d["commit"]
        if c is None:
            render.line(d["path"])
            continue
        message = c["message"].split("\n", 1)[0]
        if len(message) > MESSAGE_CHARS:
            message = message[: MESSAGE_CHARS - 3] + "..."
        when = render.when(c["creation_date"])
        render.line(f"{d['path']:<15} {c['committer']:<20} {c['id'][:16]:<20} {when}  {message}")
