"""Which lake a script works on: :class:`Client`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakectl.exceptions import NoAuthenticationFound, api_errors

if TYPE_CHECKING:
    from lakectl.client import Backend


class Client:
    """A lake, as the CLI would open it: ``Client()`` takes the server of the configuration
    (``LAKECTL_SERVER_ENDPOINT_URL``, ``~/.lakectl.yaml``) and else the embedded lake at
    ``LAKECTL_HOME``; ``Client(host=..., username=..., password=...)`` a server, as lakeFS's
    ``lakefs.Client`` (``username`` and ``password`` are an access key's id and secret);
    ``Client(home=...)`` (lakectl's) the embedded lake in that directory. Every call goes
    through the CLI's :class:`~lakectl.client.Backend`: the same verbs, the same checks."""

    def __init__(
        self,
        host: str | None = None,
        username: str | None = None,
        password: str | None = None,
        *,
        home: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        if backend is not None:
            self._backend = backend
        elif host:
            if not username or not password:
                raise NoAuthenticationFound(None, f"a server ({host}) needs username and password")
            from lakectl.client.remote import RemoteBackend

            with api_errors():
                self._backend = RemoteBackend(host, username, password)
        elif home is not None:
            from lakectl.client.local import LocalBackend

            self._backend = LocalBackend(home)
        else:
            from lakectl.client import get_backend

            with api_errors():
                self._backend = get_backend()

    @property
    def backend(self) -> Backend:
        """The backend every call of this client goes through."""
        return self._backend

    @property
    def version(self) -> str:
        """lakectl's version (lakeFS's wrapper: the server's)."""
        from lakectl._version import __version__

        return __version__

    def close(self) -> None:
        """Release the lake (the embedded one's database, a server's connections)."""
        self._backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


_default: Client | None = None


def default_client() -> Client:
    """The client of calls that name none: ``Client()``, made on first use and kept."""
    global _default
    if _default is None:
        _default = Client()
    return _default
