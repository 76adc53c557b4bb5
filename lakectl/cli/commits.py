"""History: ``lakectl commit``, ``lakectl log`` and ``lakectl show commit``."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, parse_metadata, ref_uri

show_app = noun("Show a commit.")


def commit(
    branch: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)],
    message: Annotated[
        str, typer.Option("--message", "-m", help="Commit message (required unless --allow-empty-message).")
    ] = "",
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Metadata key=value to record; repeatable.")
    ] = None,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="Commit even when nothing is staged.")
    ] = False,
    allow_empty_message: Annotated[
        bool, typer.Option("--allow-empty-message", help="Allow a commit with an empty message.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Commit the staged changes of a branch, atomically.

    The committer is $LAKECTL_COMMITTER, else `user.name` from ~/.lakectl.yaml, else the login name.
    """
    uri = ref_uri(branch)
    assert uri.ref is not None
    c = backend().commit(uri.repo, uri.ref, message, parse_metadata(meta), allow_empty, allow_empty_message)
    render.emit(c.to_dict(), json_, render.commit)


def log(
    ref: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>", show_default=False)],
    amount: Annotated[
        int | None, typer.Option("--amount", "-n", help="Show at most N commits.", min=0)
    ] = None,
    first_parent: Annotated[
        bool, typer.Option("--first-parent", help="Follow only the first parent of merge commits.")
    ] = False,
    no_merges: Annotated[bool, typer.Option("--no-merges", help="Leave out merge commits.")] = False,
    objects: Annotated[
        list[str] | None, typer.Option("--objects", help="Only commits that changed this object; repeatable.")
    ] = None,
    prefixes: Annotated[
        list[str] | None,
        typer.Option("--prefixes", help="Only commits that changed something under this prefix; repeatable."),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Show the commits reachable from a ref, newest first."""
    uri = ref_uri(ref)
    assert uri.ref is not None
    found = backend().log(uri.repo, uri.ref, amount, first_parent, no_merges, objects or (), prefixes or ())
    if json_:
        render.print_json([c.to_dict() for c in found])
        return
    # Human output streams: the first commits show before the walk ends.
    for i, c in enumerate(found):
        if i:
            render.line("")
        render.commit(c.to_dict())


@show_app.command("commit")
def show_commit(
    ref: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>", show_default=False)],
    show_meta_range_id: Annotated[
        bool, typer.Option("--show-meta-range-id", help="Also print the commit's meta range ID.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Show one commit: id, parents, committer, date, message and metadata (JSON: everything)."""
    uri = ref_uri(ref)
    assert uri.ref is not None
    data = backend().get_commit(uri.repo, uri.ref).to_dict()
    render.emit(data, json_, lambda d: render.commit_full(d, show_meta_range_id))
