"""``lakectl manifest``: export a tree as a Keep manifest, import one onto a branch."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, path_uri, read_input
from lakectl.errors import InvalidManifest

app = noun(
    "Export and import Keep manifests.\n\n"
    "A Keep manifest v1 is a text list of the blocks and files of a tree."
)


@app.command("export")
def export(
    src: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>[/<prefix>]", show_default=False)],
    signed: Annotated[
        bool,
        typer.Option(
            "--signed",
            help="Name blocks by locators the server signs for you (valid two weeks): what "
            "`manifest import` on a server requires. The embedded lake needs no signatures.",
        ),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Print the normalized Keep manifest v1 of the objects under a ref or prefix.

    Paths in the manifest are relative to the prefix; each object is listed as its blocks.
    With --json: {"ref", "prefix", "manifest"}.
    """
    uri = path_uri(src, required=False)
    assert uri.ref is not None
    text = backend().export_manifest(uri.repo, uri.ref, uri.path, signed=signed)
    if json_:
        render.print_json({"ref": uri.ref, "prefix": uri.path, "manifest": text})
    else:
        typer.echo(text, nl=False)


@app.command("import")
def import_(
    dest: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>/<prefix>", show_default=False)],
    manifest_file: Annotated[
        str, typer.Argument(metavar="FILE", help="Manifest file, or - for stdin.", show_default=False)
    ],
    json_: JsonFlag = False,
) -> None:
    """Stage the files a Keep manifest describes under a prefix of a branch, all or nothing.

    Every block the manifest names must already be in the lake (else exit 3, nothing staged).
    On a lakectl server every block must also be named by a locator signed for you, as
    `manifest export --signed` prints (else exit 8, nothing staged).
    """
    uri = path_uri(dest, required=False)
    assert uri.ref is not None
    raw = read_input(manifest_file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidManifest(f"{manifest_file!r} is not UTF-8 text: {exc}") from exc
    paths = backend().import_manifest(uri.repo, uri.ref, uri.path, text)
    render.emit(paths, json_, _imported)


def _imported(paths: list[str]) -> None:
    for path in paths:
        render.line(f"staged {path}")
    render.note(f"{len(paths)} object(s) staged")
