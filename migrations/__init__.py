"""Alembic migrations of the KV schema; ``SQLiteStore`` runs them on open, ``alembic`` by hand."""
