"""The KV stores by URL: the one place that knows every driver (a driver knows only the
protocol of :mod:`lakectl.core.kv`)."""

from __future__ import annotations

from lakectl.core.kv import KVStore
from lakectl.errors import InvalidArgument


def open_store(url: str) -> KVStore:
    """Open a KV store by URL: ``memory://``, ``sqlite:///path/to/lake.db`` or
    ``postgresql://user:password@host:port/database`` (``postgres://`` too)."""
    if url.startswith("memory://"):
        from lakectl.core.kv.memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite:///"):
        from lakectl.core.kv.sqlite import SQLiteStore

        return SQLiteStore(url[len("sqlite:///") :])
    if url.startswith(("postgresql://", "postgres://")):
        from lakectl.core.kv.postgres import PostgresStore

        return PostgresStore(url)
    raise InvalidArgument(f"unsupported metadata database URL: {url!r}")
