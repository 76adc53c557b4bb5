"""``lakectl branch``: create, list, show, delete, reset and revert branches."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import merge, render
from lakectl.cli.common import (
    After,
    Amount,
    JsonFlag,
    YesFlag,
    backend,
    confirm,
    more,
    noun,
    paged,
    ref_uri,
    repo_uri,
    same_repo,
)

app = noun("Create, list, show, delete, reset and revert branches.")

BranchArg = Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)]


@app.command("create")
def create(
    branch: BranchArg,
    source: Annotated[
        str,
        typer.Option(
            "--source", "-s", help="lakefs://<repository>/<ref> to branch from.", show_default=False
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Create a branch at the commit of a ref (branch, tag, commit id or main~N)."""
    new, src = ref_uri(branch), ref_uri(source)
    repo = same_repo(new, src)
    assert new.ref is not None and src.ref is not None
    created = backend().create_branch(repo, new.ref, src.ref)
    render.emit(
        render.ref_dict(created),
        json_,
        lambda d: render.line(f"Branch {d['id']!r} created at {d['commit_id']}"),
    )


@app.command("list")
def list_(
    repository: Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)],
    amount: Amount = 0,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List the branches of a repository with the commit each points to, by name."""
    repo = repo_uri(repository)
    found, next_offset = paged(lambda n: backend().list_branches(repo, after, n), amount, lambda b: b.name)
    render.emit([render.ref_dict(b) for b in found], json_, render.refs)
    more(amount, next_offset)


@app.command("show")
def show(branch: BranchArg, json_: JsonFlag = False) -> None:
    """Show the commit a branch points to."""
    uri = ref_uri(branch)
    assert uri.ref is not None
    render.emit(render.ref_dict(backend().get_branch(uri.repo, uri.ref)), json_, render.ref)


@app.command("delete")
def delete(
    branch: BranchArg,
    yes: YesFlag = False,
    json_: JsonFlag = False,
) -> None:
    """Delete a branch and its uncommitted changes (the default branch is protected)."""
    uri = ref_uri(branch)
    assert uri.ref is not None
    b = backend()
    b.get_branch(uri.repo, uri.ref)
    confirm(f"Delete branch {uri.ref!r} of {uri.repo!r}?", yes)
    b.delete_branch(uri.repo, uri.ref)
    render.emit(render.deletion("branch", [uri.ref], f"Branch {uri.ref!r} deleted"), json_, render.message)


app.command("reset")(merge.branch_reset)
app.command("revert")(merge.revert)
