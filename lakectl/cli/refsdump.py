"""``lakectl refs-dump`` and ``lakectl refs-restore``: a repository's commits, branches and tags
stored in the lake and loaded into a bare repository (lakeFS's backup and migration commands)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, local_error, read_input, repo_uri
from lakectl.errors import InvalidArgument

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]


def refs_dump(
    repository: RepoArg,
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="Write the manifest to this file (default: standard output)."),
    ] = "",
    json_: JsonFlag = False,
) -> None:
    """Store a repository's refs (commits, branches, tags) in the lake and print their manifest.

    The manifest (lakeFS's: commits_meta_range_id, tags_meta_range_id, branches_meta_range_id)
    is what `lakectl refs-restore` takes. Uncommitted changes are not part of the dump.
    """
    refs = backend().dump_refs(repo_uri(repository))
    if output and output != "-":
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(json.dumps(refs, indent=2) + "\n")
        except OSError as exc:
            raise local_error(exc, output, "write") from exc
        if not json_:
            render.line(f"Refs manifest written to {output}")
            return
    render.print_json(refs)


def refs_restore(
    repository: RepoArg,
    manifest: Annotated[
        str,
        typer.Option(
            "--manifest",
            help="A refs manifest as `lakectl refs-dump` prints it: a file, or - for standard input.",
            show_default=False,
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Restore refs (commits, branches, tags) from a manifest into a bare repository.

    The repository must be bare (made by `lakectl repo create-bare`, else exit 5) and the
    dump must hold its default branch. Commit ids and branch heads come out identical.
    """
    name = repo_uri(repository)
    raw = read_input(manifest)
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument(f"the refs manifest {manifest!r} is not JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise InvalidArgument(f"the refs manifest {manifest!r} is not a JSON object")
    backend().restore_refs(name, parsed)
    render.emit({"id": name, "message": "All references restored successfully!"}, json_, render.message)
