"""The CLI's client of a lake: the :class:`~lakectl.client.protocol.Backend` protocol, and the
backend this process uses (:func:`get_backend`): the embedded lake (``LocalBackend``) or a
lakectl server (``RemoteBackend``). Imported by the CLI at start-up: it imports nothing heavy."""

from __future__ import annotations

from lakectl.client.protocol import Backend, ByteProgress, Progress

__all__ = ["Backend", "ByteProgress", "Progress", "get_backend", "server_settings"]


def get_backend() -> Backend:
    """The backend this process should use: a lakectl server when ``server.endpoint_url`` is set
    (``$LAKECTL_SERVER_ENDPOINT_URL`` or ``~/.lakectl.yaml``, as lakeFS's lakectl), else the
    embedded lake at ``$LAKECTL_HOME``."""
    server = server_settings()
    if server is not None:
        from lakectl.client.remote import RemoteBackend

        return RemoteBackend(*server)
    from lakectl.client.local import LocalBackend

    return LocalBackend(None)


def server_settings() -> tuple[str, str, str] | None:
    """``(endpoint, access key id, secret)`` of the configured server, None for the embedded lake."""
    import os

    endpoint = os.environ.get("LAKECTL_SERVER_ENDPOINT_URL")
    key_id = os.environ.get("LAKECTL_CREDENTIALS_ACCESS_KEY_ID")
    secret = os.environ.get("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY")
    if not endpoint or not key_id or not secret:
        from lakectl import config

        endpoint = endpoint or config.get("server.endpoint_url")
        key_id = key_id or config.get("credentials.access_key_id")
        secret = secret or config.get("credentials.secret_access_key")
    if endpoint:
        return str(endpoint), str(key_id or ""), str(secret or "")
    return None
