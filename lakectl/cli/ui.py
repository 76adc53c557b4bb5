"""``lakectl ui``: the web UI over the embedded lake, on this machine only.

As ``lakectl server``, the command hands over to :mod:`server.ui.serve` by name, at run time: the
CLI never imports the server (nor FastAPI, Jinja2, uvicorn) unless this command runs.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag
from lakectl.errors import InvalidArgument


def ui(
    port: Annotated[
        int, typer.Option("--port", help="Port to listen on, on 127.0.0.1 (default: a free one).")
    ] = 0,
    open_: Annotated[
        bool, typer.Option("--open/--no-browser", help="Open the sign-in link in a web browser.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Serve the web UI over the embedded lake, with a one-time sign-in link.

    Serves the UI (and the REST API) on 127.0.0.1 only, until interrupted, over the lake in
    $LAKECTL_HOME (the embedded lake other commands use), and prints a link that signs you in
    as the lake's admin user (created on first use): it works once, within 10 minutes; run
    `lakectl ui` again for a new one. With --json: {url, home}. The UI of a shared lake is
    `lakectl server run`'s, at /ui/ (sign in with an access key). See docs/ui.md.
    """
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"--port {port} is no port (0-65535; 0: a free one)")

    def announce(data: dict[str, Any]) -> None:
        render.emit(data, json_, lambda d: render.line(d["url"]))
        if not json_:
            render.note(
                f"lakectl UI on the lake at {data['home']}: open the link above (once). Ctrl-C stops it."
            )
        sys.stdout.flush()
        if open_:
            import webbrowser

            webbrowser.open(data["url"])

    importlib.import_module("server.ui.serve").run(port, announce)
