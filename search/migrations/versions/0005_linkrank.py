"""link-graph prior

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 10:00:00

``linkrank``: each document's PageRank over the stored links, scaled so that the mean over
the documents is 1 (:mod:`search.linkrank`); None until it is first computed.  A column is
only added (no table copy on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("linkrank", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("documents", "linkrank")
