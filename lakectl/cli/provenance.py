"""``lakectl provenance``: what data was made from, recursively, and what was made from it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, path_uri

Data = dict[str, Any]


def provenance(
    src: Annotated[
        str,
        typer.Argument(
            help="lakefs://<repository>/<ref>/[<path>] (an object or a prefix)", show_default=False
        ),
    ],
    depth: Annotated[int, typer.Option("--depth", help="Levels of inputs to follow.", min=0, max=50)] = 5,
    downstream: Annotated[
        bool,
        typer.Option(
            "--downstream", help="List the commits made from the ref's commit (its data under <path>)."
        ),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Show what data was made from (the inputs and code its commits record), or what was made from it.

    The tree starts at the commit that last wrote the path (merges aside), with the code it
    records, and goes on to the same for each of its inputs, --depth levels deep. Commits record
    their inputs and code in their lakectl_inputs and lakectl_code metadata (the lakefs Spark
    data source records them for every commit it makes). With --downstream, the commits made
    from the ref's commit instead. Against a server, repositories you may not read
    show only what the commit naming them records. With --json: the tree as an object
    {repository, ref, path, readable, commit, code, inputs, more}, or the list of commits.
    """
    uri = path_uri(src, required=False)
    assert uri.ref is not None
    b = backend()
    if downstream:
        render.emit(b.downstream(uri.repo, uri.ref, uri.path), json_, _made)
    else:
        render.emit(b.provenance(uri.repo, uri.ref, uri.path, depth), json_, _tree)


def _tree(data: Data) -> None:
    render.lines(_tree_lines(data, "", ""))


def _tree_lines(node: Data, lead: str, rest: str) -> list[str]:
    out = [lead + _node(node)]
    inputs = node["inputs"]
    for i, child in enumerate(inputs):
        last = i == len(inputs) - 1 and not node["more"]
        out += _tree_lines(child, rest + ("└── " if last else "├── "), rest + ("    " if last else "│   "))
    if node["more"]:
        out.append(rest + "└── …")
    return out


def _node(node: Data) -> str:
    where = f"lakefs://{node['repository']}/{node['ref']}/{node['path']}"
    commit = node["commit"]
    if not node["readable"]:
        return f"{where}  (repository not readable)"
    if commit is None:
        return f"{where}  (no commit wrote it)"
    return f"{where}  ← {commit['id'][:12]} {commit['message']!r}{_code(node['code'])}"


def _code(code: Data | None) -> str:
    if not code:
        return ""
    script, sha = code.get("script"), code.get("git_commit")
    at = f" @ {str(sha)[:12]}" if sha else ""
    dirty = " (dirty)" if code.get("dirty") else ""
    return f"  [{script}{at}{dirty}]" if script else ""


def _made(data: list[Data]) -> None:
    if not data:
        render.note("no commit records this commit among its inputs")
    for node in data:
        render.line(_node(node))
