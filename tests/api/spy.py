"""A backend that counts what its reads hand out: how tests see that a reader fetched only a range."""

from __future__ import annotations


class Recording:
    """A backend that counts the bytes its reads hand out, and passes everything on."""

    def __init__(self, backend: object) -> None:
        self._backend = backend
        self.handed = 0

    def read(self, *args: object, **kwargs: object) -> object:
        for chunk in self._backend.read(*args, **kwargs):  # type: ignore[attr-defined]
            self.handed += len(chunk)
            yield chunk

    def __getattr__(self, name: str) -> object:
        return getattr(self._backend, name)
