"""``lakectl tag``: create, list, show and delete tags (immutable names for commits)."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import (
    After,
    Amount,
    JsonFlag,
    backend,
    more,
    noun,
    paged,
    ref_uri,
    repo_uri,
    same_repo,
)

app = noun("Create, list, show and delete tags.")

TagArg = Annotated[str, typer.Argument(help="lakefs://<repository>/<tag>", show_default=False)]


@app.command("create")
def create(
    tag: TagArg,
    ref: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref> to tag", show_default=False)],
    force: Annotated[
        bool, typer.Option("--force", "-f", help="Replace the tag if it exists (delete, then create).")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Create a tag on the commit a ref resolves to."""
    new, target = ref_uri(tag), ref_uri(ref)
    repo = same_repo(new, target)
    assert new.ref is not None and target.ref is not None
    created = backend().create_tag(repo, new.ref, target.ref, force)
    render.emit(
        render.ref_dict(created),
        json_,
        lambda d: render.line(f"Tag {d['id']!r} created on {d['commit_id']}"),
    )


@app.command("list")
def list_(
    repository: Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)],
    amount: Amount = 0,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List the tags of a repository with their commits, by name."""
    repo = repo_uri(repository)
    found, next_offset = paged(lambda n: backend().list_tags(repo, after, n), amount, lambda t: t.name)
    render.emit([render.ref_dict(t) for t in found], json_, render.refs)
    more(amount, next_offset)


@app.command("show")
def show(tag: TagArg, json_: JsonFlag = False) -> None:
    """Show the commit a tag names."""
    uri = ref_uri(tag)
    assert uri.ref is not None
    render.emit(render.ref_dict(backend().get_tag(uri.repo, uri.ref)), json_, render.ref)


@app.command("delete")
def delete(tag: TagArg, json_: JsonFlag = False) -> None:
    """Delete a tag (the commit it names stays)."""
    uri = ref_uri(tag)
    assert uri.ref is not None
    backend().delete_tag(uri.repo, uri.ref)
    render.emit(render.deletion("tag", [uri.ref], f"Tag {uri.ref!r} deleted"), json_, render.message)
