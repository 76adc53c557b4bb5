"""Alembic environment: migrate the connection the caller passes, or a URL from -x url= / the ini."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

config = context.config
if config.config_file_name is not None:  # run by hand: log as alembic.ini says
    fileConfig(config.config_file_name, disable_existing_loggers=False)

# No autogenerate: the schema is one hand-written table per revision.
target_metadata = None


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database URL: pass -x url=... or set sqlalchemy.url")
    return url


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    # When the caller already opened a transaction (SQLiteStore does, BEGIN IMMEDIATE),
    # alembic runs inside it and leaves the commit to the caller.
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given: Connection | None = config.attributes.get("connection")
    if given is not None:
        _migrate(given)
        return
    engine = create_engine(_url(), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            _migrate(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
