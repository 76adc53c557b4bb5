"""``lakectl admin``: operations on the lake as a whole (``rebuild --from-journal``)."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, ServerConfigOpt, backend, noun
from lakectl.errors import InvalidArgument


def _server() -> Any:
    """The server's maintenance functions, handed over by name (as ``lakectl server`` does)."""
    return importlib.import_module("server.main")


app = noun("Operations on the lake as a whole: rebuild its metadata.")


@app.command("rebuild")
def rebuild(
    from_journal: Annotated[
        bool,
        typer.Option("--from-journal", help="Rebuild from the blocks and the journal alone (required)."),
    ] = False,
    server_config: ServerConfigOpt = None,
    json_: JsonFlag = False,
) -> None:
    """Build a new metadata database for the embedded lake from its blocks and its journal.

    For a lake whose lake.db is lost: the journal's sealed batches are found among the blocks
    and replayed in order -- repositories, branches, tags, commits, staged objects, settings,
    and a server's users, groups, policies and access keys (the server that serves the
    rebuilt lake needs the same auth.encrypt.secret_key to read the keys). Every change is in
    the blocks before it is acknowledged. An existing lake.db is never overwritten (move it
    aside first: exit 4); a lake whose journal was off has nothing to rebuild from (exit 3);
    against a server, refused (exit 2): run it where the lake's directory is. With
    --server-config, the database that server configuration names is rebuilt from its
    blockstore (SQLite, or a PostgreSQL database that holds no lake yet), the users' records
    verified with the server's secret: start the servers again with the same configuration. A
    journal holding a server's users is rebuilt only so (exit 2 otherwise).
    """
    if not from_journal:
        raise InvalidArgument("say what to rebuild from: --from-journal")
    if server_config is not None:
        done = _server().rebuild(server_config)
    else:
        done = backend().rebuild_from_journal()
    render.emit(
        done,
        json_,
        lambda d: render.line(
            f"rebuilt {d['database']}: {d['repositories']} repositories from {d['entries']} journal "
            f"entries in {d['batches']} batches (last logical timestamp {d['last_logical_timestamp']})"
        ),
    )
