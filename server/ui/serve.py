"""What ``lakectl ui`` does: the UI (and the REST API) over the embedded lake, on 127.0.0.1 only,
with a one-time sign-in link for the lake's admin user."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from lakectl.core import opening
from lakectl.core.lake import default_home
from lakectl.errors import AlreadyExists
from server.auth.store import META, SETUP_KEY, Auth
from server.config import load_settings
from server.configkeys import Keys, env_name
from server.ui import links

ADMIN = "admin"
"""The user ``lakectl ui`` sets the embedded lake up with, when no admin exists yet."""


def admin_of(auth: Auth) -> str:
    """The id of the first admin user, set up now if there is none (its secret is not kept: the
    UI signs in with one-time links; ``lakectl auth`` against a server makes access keys)."""
    if not auth.is_set_up():
        with suppress(AlreadyExists):  # another `lakectl ui` set it up meanwhile
            auth.setup(ADMIN)
    return auth.kv.get(META, SETUP_KEY).decode()


def run(port: int, announce: Callable[[dict[str, Any]], None]) -> None:
    """Serve until interrupted; ``announce`` gets ``{url, home}`` once the socket listens."""
    import uvicorn

    from server.app import create_app
    from server.main import listen

    home = os.path.abspath(default_home())
    # The lake opened as the CLI opens it, action hooks included (command hooks too, as
    # `lakectl commit` runs them on this machine): the server does not install its own.
    settings = load_settings(
        None,
        home,
        environ={
            env_name(Keys.LISTEN_ADDRESS.name): f"127.0.0.1:{port}",
            env_name(Keys.ACTIONS_ENABLED.name): "false",
        },
    )
    lake = opening.open_lake(home)
    try:
        app = create_app(settings, lake)
        auth: Auth = app.state.auth
        user = auth.get_user(admin_of(auth))
        sock = listen(settings)
    except BaseException:
        lake.close()
        raise
    bound = sock.getsockname()[1]
    token = links.issue(auth, user)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    announce({"url": f"http://127.0.0.1:{bound}/ui/login?token={token}", "home": home})
    with sock:
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: a clean stop
            return
