"""The KV table: (partition, key) -> value, ordered by the UTF-8 bytes of the key.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # IF NOT EXISTS: a lake whose kv table predates alembic_version is adopted, not broken.
    if op.get_context().dialect.name == "sqlite":
        # WITHOUT ROWID stores rows in primary-key order: ordered scans ~5x faster and no
        # second index to maintain. SQLAlchemy cannot emit it, hence raw DDL.
        op.execute(
            "CREATE TABLE IF NOT EXISTS kv ("
            " partition TEXT NOT NULL,"
            " key TEXT NOT NULL,"
            " value BLOB NOT NULL,"
            " PRIMARY KEY (partition, key)"
            ") WITHOUT ROWID"
        )
        return
    # Elsewhere (PostgreSQL) collation "C" makes ORDER BY key the byte order the protocol
    # promises, whatever the database's locale.
    text = sa.Text(collation="C") if op.get_context().dialect.name == "postgresql" else sa.Text()
    op.create_table(
        "kv",
        sa.Column("partition", text, nullable=False),
        sa.Column("key", text, nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("partition", "key"),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_table("kv")
