"""``lakectl repo``: create, list, show and delete repositories."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import After, Amount, JsonFlag, YesFlag, backend, confirm, more, noun, paged, repo_uri

app = noun("Create, list, show and delete repositories.")

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]


NamespaceArg = Annotated[
    str,
    typer.Argument(
        help="Storage namespace to record on the repository: local://<location> or "
        "s3://<bucket>[/<prefix>] (default local://<repository>). The lake's block store holds the data.",
        show_default=False,
    ),
]
DefaultBranchOpt = Annotated[str, typer.Option("--default-branch", "-d", help="Name of the default branch.")]


@app.command("create")
def create(
    repository: RepoArg,
    storage_namespace: NamespaceArg = "",
    default_branch: DefaultBranchOpt = "main",
    json_: JsonFlag = False,
) -> None:
    """Create a repository, with one branch holding an empty initial commit."""
    repo = backend().create_repo(repo_uri(repository), default_branch, storage_namespace)
    render.emit(
        render.repo_dict(repo),
        json_,
        lambda d: render.line(
            f"Repository {d['id']!r} created, default branch {d['default_branch']!r}, "
            f"storage namespace {d['storage_namespace']!r}"
        ),
    )


@app.command("create-bare")
def create_bare(
    repository: RepoArg,
    storage_namespace: NamespaceArg = "",
    default_branch: DefaultBranchOpt = "main",
    json_: JsonFlag = False,
) -> None:
    """Create a repository with no commit and no branch, the default branch's name only recorded:
    the target of `lakectl refs-restore`."""
    repo = backend().create_repo(repo_uri(repository), default_branch, storage_namespace, bare=True)
    render.emit(
        render.repo_dict(repo),
        json_,
        lambda d: render.line(
            f"Bare repository {d['id']!r} created, default branch {d['default_branch']!r} (not created), "
            f"storage namespace {d['storage_namespace']!r}"
        ),
    )


@app.command("list")
def list_(amount: Amount = 0, after: After = "", json_: JsonFlag = False) -> None:
    """List repositories, by name."""
    found, next_offset = paged(lambda n: backend().list_repos(after, n), amount, lambda r: r.name)
    render.emit([render.repo_dict(r) for r in found], json_, render.repos)
    more(amount, next_offset)


@app.command("show")
def show(repository: RepoArg, json_: JsonFlag = False) -> None:
    """Show a repository: its default branch, storage namespace and creation date."""
    render.emit(render.repo_dict(backend().get_repo(repo_uri(repository))), json_, render.repo)


@app.command("delete")
def delete(
    repository: RepoArg,
    yes: YesFlag = False,
    json_: JsonFlag = False,
) -> None:
    """Delete a repository with all its branches, tags, commits and staged changes."""
    name = repo_uri(repository)
    b = backend()
    b.get_repo(name)
    confirm(f"Delete repository {name!r} and all its history?", yes)
    b.delete_repo(name)
    render.emit(render.deletion("repository", [name], f"Repository {name!r} deleted"), json_, render.message)
