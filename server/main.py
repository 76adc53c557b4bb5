"""What ``lakectl server setup`` and ``lakectl server run`` do, behind the CLI's lazy hand-off."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from lakectl.errors import StorageError
from server.config import Settings, load_settings


def setup(config_file: str | None, data_dir: str | None, username: str) -> dict[str, Any]:
    """Create the first admin user of the server's lake and return its new access key."""
    from server.app import open_lake
    from server.auth import Auth, load_secret_key

    settings = load_settings(config_file, data_dir)
    lake = open_lake(settings)
    try:
        creds = Auth(lake.kv, load_secret_key(settings.secret_key, settings.data_dir)).setup(username)
    finally:
        lake.close()
    return {**creds.to_dict(), "data_dir": settings.data_dir}


def listen(settings: Settings) -> socket.socket:
    """The listening socket, bound here so that a taken address is one clear error."""
    try:
        family = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((settings.host, settings.port), family=family, backlog=2048)
        # Accepted sockets inherit this. asyncio sets it only on sockets created with
        # proto=IPPROTO_TCP, which create_server's are not; without it, a response written in two
        # sends (head, then body) waits for the client's delayed ACK: 40 ms per request.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    except OSError as e:
        raise StorageError(
            f"cannot listen on {settings.listen_address}: {e.strerror or e}",
            listen_address=settings.listen_address,
        ) from e


def run(
    config_file: str | None, data_dir: str | None, announce: Callable[[Settings], None] | None = None
) -> None:
    """Serve the API on the configured address until interrupted."""
    import uvicorn

    from server.app import create_app
    from server.logs import log_config

    settings = load_settings(config_file, data_dir)
    app = create_app(settings)
    sock = listen(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=log_config(settings.logging),
        log_level=settings.logging.level.lower(),
        server_header=False,
    )
    server = uvicorn.Server(config)
    if announce is not None:
        announce(settings)
    with sock:
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: a clean stop
            return
    if not server.started:
        raise StorageError("the server did not start: see its log")
