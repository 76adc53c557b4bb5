"""``lakectl import``: zero-copy import of an S3 prefix or a local directory onto a branch, and
the status and cancel of an import (lakeFS's ``lakectl import`` and ImportApi)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, parse_metadata, path_uri, ref_uri
from lakectl.errors import InvalidArgument, LakectlError, from_code

POLL = 0.3
"""Seconds between two status polls while an import runs."""

app = typer.Typer(
    help="Import objects without copying them: an S3 prefix or a local directory onto a branch.\n\n"
    "lakectl import --from <source> --to lakefs://<repository>/<branch>/<prefix> [--merge]\n\n"
    "Each object becomes an entry that points at its source (address, size, and ETag or mtime), "
    "committed on _<branch>_imported (created from the branch when missing), where the destination "
    "prefix is replaced by the source's objects; --merge then merges it into the branch. A read of "
    "an imported object whose source changed or vanished fails (exit 7), never serving other bytes. "
    "With --json: the import's status (lakeFS's ImportStatus fields and ours).",
    invoke_without_command=True,
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


@app.callback()
def import_(
    ctx: typer.Context,
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="What to import: s3://bucket/prefix, or a local directory (local:///abs/dir or a "
            "path). On a server, the server's own directories and S3 credentials are used.",
            show_default=False,
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to", help="lakefs://<repository>/<branch>/<prefix> to import into.", show_default=False
        ),
    ] = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Merge the import branch _<branch>_imported into the branch once the import is committed.",
        ),
    ] = False,
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message of the import.")] = "",
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Commit metadata key=value; repeatable.")
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Import objects where they are, without copying a byte (see the group's help)."""
    if ctx.invoked_subcommand is not None:
        return
    if source is None or to is None:
        raise InvalidArgument(
            "an import needs --from <source> and --to lakefs://<repository>/<branch>/<prefix>"
        )
    uri = path_uri(to, required=False)
    assert uri.ref is not None
    paths = [{"path": source, "destination": uri.path, "type": "common_prefix"}]
    b = backend()
    st = b.import_start(uri.repo, uri.ref, paths, message, parse_metadata(meta), merge=merge)
    bar = not (json_ or no_progress)
    with render.progress_count("importing", bar) as advance:
        try:
            while st["completed"] is False and st["error"] is None:
                advance(int(st["ingested_objects"] or 0))
                time.sleep(POLL)
                st = b.import_status(uri.repo, uri.ref, st["id"])
        except KeyboardInterrupt:
            b.import_cancel(uri.repo, uri.ref, st["id"])
            raise InvalidArgument(f"import {st['id']} canceled") from None
    _raise_failed(st)
    render.emit(st, json_, render.import_status)


def _raise_failed(st: dict[str, Any]) -> None:
    err = st.get("error")
    if err:
        exc: LakectlError = from_code(str(err.get("code", "internal")), str(err.get("message", "")))
        exc.message = f"import {st['id']} failed: {exc.message}"
        raise exc


Branch = Annotated[
    str, typer.Argument(help="lakefs://<repository>/<branch> the import went to", show_default=False)
]
ImportId = Annotated[str, typer.Argument(metavar="ID", help="The import's id.", show_default=False)]


@app.command("status")
def status(branch: Branch, import_id: ImportId, json_: JsonFlag = False) -> None:
    """Show an import's status: running (objects so far), completed (its commit), or failed.

    An import whose process ended before it completed is reported as failed; run it again.
    """
    uri = ref_uri(branch)
    assert uri.ref is not None
    st = backend().import_status(uri.repo, uri.ref, import_id)
    render.emit(st, json_, render.import_status)


@app.command("cancel")
def cancel(branch: Branch, import_id: ImportId, json_: JsonFlag = False) -> None:
    """Cancel a running import: nothing of it is committed (exit 5 if it already ended)."""
    uri = ref_uri(branch)
    assert uri.ref is not None
    backend().import_cancel(uri.repo, uri.ref, import_id)
    render.emit(
        {"id": import_id, "canceled": True}, json_, lambda d: render.line(f"Canceled import {d['id']}")
    )


@app.command("copy")
def copy(
    dest: Annotated[
        str,
        typer.Argument(
            help="lakefs://<repository>/<branch>[/<prefix>] of imported objects", show_default=False
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Copy imported objects into the lake: their bytes (read from the source, checked against
    its guard) become owned, deduplicated blocks, staged on the branch in place of the imported
    entries; commit them as any change. All or nothing: a changed source fails it (exit 7).
    With --json: {"paths", "count"}.
    """
    uri = path_uri(dest, required=False)
    assert uri.ref is not None
    paths = backend().import_copy(uri.repo, uri.ref, uri.path)
    render.emit({"paths": paths, "count": len(paths)}, json_, _copied)


def _copied(data: dict[str, Any]) -> None:
    for path in data["paths"]:
        render.line(f"copied {path}")
    render.note(f"{data['count']} imported object(s) copied into the lake and staged")
