"""``lakectl tables``: declare a table's key once, in the repository (declare, undeclare, list).

The declarations are one committed file, ``_lakectl/tables.yaml``
(:mod:`lakectl.core.tables.declared`): these commands read it at the branch, change it and
upload it there as an uncommitted change, like any other object; commit it to share it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, path_uri, ref_uri
from lakectl.errors import ObjectNotFound

app = noun(
    "Declare a table's key once, for diffs, pull requests and merges.\n\n"
    "The declarations are a file of the repository, _lakectl/tables.yaml, versioned with the "
    "data: `diff --table`, pull requests (page and `pr show`), the web UI and the rows merge "
    "strategy (`--strategy 'GLOB=rows'`) use a table's declared key when none is given."
)

TableArg = Annotated[
    str,
    typer.Argument(
        help="lakefs://<repository>/<branch>/<table>: a table's prefix, or one table object",
        show_default=False,
    ),
]
KeyOption = Annotated[
    str,
    typer.Option("--key", help="The key columns, comma-separated: unique on every row of the table."),
]


def read_declared(repo: str, ref: str) -> dict[str, tuple[str, ...]]:
    """The tables declared at a ref, with their keys (none when the file is not there)."""
    from lakectl.core.tables import declared

    try:
        data = b"".join(backend().read(repo, ref, declared.PATH))
    except ObjectNotFound:
        return {}
    return declared.parse(data, f"{declared.PATH} at {ref}")


def _write(repo: str, branch: str, tables: dict[str, tuple[str, ...]]) -> None:
    from lakectl.core.tables import declared

    backend().upload(repo, branch, declared.PATH, declared.render(tables), declared.CONTENT_TYPE)


def _row(table: str, key: tuple[str, ...]) -> dict[str, Any]:
    return {"table": table, "key": list(key)}


@app.command("declare")
def declare(table: TableArg, key: KeyOption, json_: JsonFlag = False) -> None:
    """Declare the key of the table at a path, on a branch (an uncommitted change to
    _lakectl/tables.yaml: commit it to share it). Declaring it again replaces the key."""
    from lakectl.core.tables import declared

    uri = path_uri(table)
    assert uri.ref is not None
    name, columns = declared.table_name(uri.path), declared.key_columns(key)
    tables = read_declared(uri.repo, uri.ref)
    tables[name] = columns
    _write(uri.repo, uri.ref, tables)
    text = (
        f"Table {name!r} keyed by {', '.join(columns)} on {uri.ref!r} (uncommitted: commit {declared.PATH})"
    )
    render.emit({**_row(name, columns), "message": text}, json_, render.message)


@app.command("undeclare")
def undeclare(table: TableArg, json_: JsonFlag = False) -> None:
    """Remove a table's declaration, on a branch (exit 3 when it has none)."""
    from lakectl.core.tables import declared

    uri = path_uri(table)
    assert uri.ref is not None
    name = declared.table_name(uri.path)
    tables = read_declared(uri.repo, uri.ref)
    if name not in tables:
        raise ObjectNotFound(f"table {name!r} is not declared in {declared.PATH} at {uri.ref}")
    del tables[name]
    _write(uri.repo, uri.ref, tables)
    text = f"Table {name!r} no longer declared on {uri.ref!r} (uncommitted: commit {declared.PATH})"
    render.emit(render.deletion("table", [name], text), json_, render.message)


RefArg = Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>", show_default=False)]


@app.command("list")
def list_(ref: RefArg, json_: JsonFlag = False) -> None:
    """List the tables declared at a ref, each with its key."""
    uri = ref_uri(ref)
    assert uri.ref is not None
    rows = [_row(t, k) for t, k in sorted(read_declared(uri.repo, uri.ref).items())]
    render.emit(rows, json_, _listed)


def _listed(rows: list[dict[str, Any]]) -> None:
    render.table(["Table", "Key"], [[r["table"], ", ".join(r["key"])] for r in rows])
