"""What ``lakectl server setup`` and ``lakectl server run`` do, behind the CLI's lazy hand-off."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakectl.errors import StorageError
from server.config import Settings, load_settings

if TYPE_CHECKING:
    from lakectl.core.lake import Lake


def load(config_file: str | None, data_dir: str | None) -> Settings:
    """The settings, after one ``warning:`` line on stderr per group of lakeFS keys ignored."""
    settings = load_settings(config_file, data_dir)
    for line in settings.warnings:
        sys.stderr.write(f"warning: {line}\n")
    return settings


def setup(config_file: str | None, data_dir: str | None, username: str) -> dict[str, Any]:
    """Create the first admin user of the server's lake and return its new access key."""
    from server.app import open_lake
    from server.auth.secret import load_secret_key
    from server.auth.store import lake_auth

    settings = load(config_file, data_dir)
    lake = open_lake(settings, create=True)  # the explicit ask for a new lake, as `lakectl init`
    try:
        auth = lake_auth(lake, load_secret_key(settings.secret_key, settings.data_dir))
        installed = settings.installation
        if installed is None:
            creds = auth.setup(username)
        else:  # the configured first user (lakeFS's installation.*) rather than a random key
            creds = auth.setup(installed.user_name, installed.access_key_id, installed.secret_access_key)
    finally:
        lake.close()
    result = {**creds.to_dict(), "data_dir": settings.data_dir}
    if lake.identity is not None and lake.identity.just_created_over:
        result["created_over_blocks"] = lake.identity.just_created_over
    return result


def listen(settings: Settings, s3: bool = False) -> socket.socket:
    """The listening socket of the REST API (or of the S3 gateway), bound here so that a taken
    address is one clear error."""
    host, port = (settings.s3.host, settings.s3.port) if s3 else (settings.host, settings.port)
    address = settings.s3.listen_address if s3 else settings.listen_address
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family, backlog=2048)
        # Accepted sockets inherit this. asyncio sets it only on sockets created with
        # proto=IPPROTO_TCP, which create_server's are not; without it, a response written in two
        # sends (head, then body) waits for the client's delayed ACK: 40 ms per request.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    except OSError as e:
        raise StorageError(f"cannot listen on {address}: {e.strerror or e}", listen_address=address) from e


def run(
    config_file: str | None, data_dir: str | None, announce: Callable[[Settings], None] | None = None
) -> None:
    """Serve the API on the configured address until interrupted."""
    import uvicorn

    from server.app import Dispatch, create_app, create_gateway
    from server.logs import log_config

    settings = load(config_file, data_dir)
    app = create_app(settings)
    sock = listen(settings)
    try:
        s3_sock = listen(settings, s3=True)
    except StorageError:
        sock.close()
        raise
    s3_port = s3_sock.getsockname()[1]
    config = uvicorn.Config(
        Dispatch(app, create_gateway(app), {s3_port}),
        host=settings.host,
        port=settings.port,
        log_config=log_config(settings.logging),
        log_level=settings.logging.level.lower(),
        server_header=False,
    )
    server = uvicorn.Server(config)
    if announce is not None:
        announce(settings)
    with sock, s3_sock:
        try:
            server.run(sockets=[sock, s3_sock])
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: a clean stop
            return
    if not server.started:
        raise StorageError("the server did not start: see its log")


def open_configured(config_file: str) -> Lake:
    """The lake a server's configuration file describes (its database and blockstore, its
    journal), opened in this process: maintenance from a host that reaches both, as ``lakectl
    fsck``, ``gc run`` and ``admin rebuild`` do with ``--server-config``."""
    from server.app import open_lake

    return open_lake(load(config_file, None))


def rebuild(config_file: str) -> dict[str, Any]:
    """Rebuild the metadata database a server's configuration names from the journal among the
    blocks of its blockstore (:func:`lakectl.core.journal.rebuild.rebuild_database`), its users'
    records verified with the server's secret (without one, a journal holding any is refused)."""
    from lakectl.core.journal.rebuild import rebuild_database
    from server.app import open_blocks
    from server.auth.secret import existing_secret_key, journal_seal

    settings = load(config_file, None)
    secret = existing_secret_key(settings.secret_key, settings.data_dir)
    seal = None if secret is None else journal_seal(secret)
    return rebuild_database(settings.database.url, open_blocks(settings), seal)
