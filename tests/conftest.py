"""Fixtures for every test suite: a real PostgreSQL server (defined in tests/pg.py, registered here)."""

from tests.pg import pg_url, postgres_server

__all__ = ["pg_url", "postgres_server"]
