"""admin server configuration

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 10:00:00

The web admin keeps the fields a user entered for a server (``servers.admin_config``),
apart from the effective settings the crawler writes into ``servers.settings`` on every
crawl.  A column is only added (no table copy on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("servers", sa.Column("admin_config", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("servers", "admin_config")
