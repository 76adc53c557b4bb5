"""``lakectl server``: set up and run the lakectl server (the lakeFS-compatible REST API).

The CLI and the ``server`` package are independent layers (import-linter): the commands hand
over to :mod:`server.main` by name, at run time, so ``lakectl`` never imports the server (nor
FastAPI, pydantic, uvicorn) unless one of these commands runs.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, noun

app = noun("Set up and run the lakectl server (lakeFS-compatible REST API).")

ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML configuration file with lakeFS's keys (default: $LAKECTL_SERVER_CONFIG, else none).",
        show_default=False,
    ),
]
DataDirOpt = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        help="The server's data directory (default: $LAKECTL_SERVER_DATA_DIR, else 'server' under "
        "lakectl's user data directory).",
        show_default=False,
    ),
]


def _server() -> Any:
    return importlib.import_module("server.main")


@app.command("setup")
def setup(
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    user_name: Annotated[str, typer.Option("--user-name", help="Name of the first admin user.")] = "admin",
    json_: JsonFlag = False,
) -> None:
    """Create the first admin user and print its access key id and secret.

    The secret is shown this once only: it is stored encrypted. Fails (exit 4) when the server
    is already set up. With --json: {access_key_id, secret_access_key, creation_date, user, data_dir}.
    Like `lakectl init`, setup creates the lake even over a blockstore that holds blocks but
    whose metadata database is missing or empty (`server run` refuses those, exit 9); the
    JSON then has created_over_blocks, and garbage collection refuses to run until told.
    """
    creds = _server().setup(config, data_dir, user_name)
    if creds.get("created_over_blocks") and not json_:
        from lakectl.cli.lake import over_blocks_warning

        render.note(over_blocks_warning(creds["created_over_blocks"]))

    def human(d: dict[str, Any]) -> None:
        render.line(f"Admin user {d['user']['id']!r} created for the server at {d['data_dir']}.")
        render.line(f"access_key_id: {d['access_key_id']}")
        render.line(f"secret_access_key: {d['secret_access_key']}")
        render.note("Keep the secret now: it cannot be shown again.")

    render.emit(creds, json_, human)


@app.command("run")
def run(config: ConfigOpt = None, data_dir: DataDirOpt = None, json_: JsonFlag = False) -> None:
    """Serve the REST API (/api/v1) and the web UI (/ui/) on listen_address and the S3 gateway on
    gateways.s3.listen_address (default: the API's port + 1) until interrupted.

    Configuration errors exit 2 before anything listens. With --json the start-up record
    {listen_address, s3_listen_address, ui_url, data_dir, database} is printed as JSON before the
    server logs anything.
    """

    def announce(settings: Any) -> None:  # a server.config.Settings
        data = {
            "listen_address": settings.listen_address,
            "s3_listen_address": settings.s3.listen_address,
            "ui_url": f"http://{settings.listen_address}/ui/",
            "data_dir": settings.data_dir,
            "database": settings.database.type.value,
        }
        render.emit(
            data,
            json_,
            lambda d: render.note(
                f"lakectl server on http://{d['listen_address']}/api/v1, web UI on {d['ui_url']}, "
                f"S3 gateway on http://{d['s3_listen_address']} (data in {d['data_dir']})"
            ),
        )
        sys.stdout.flush()

    _server().run(config, data_dir, announce)
