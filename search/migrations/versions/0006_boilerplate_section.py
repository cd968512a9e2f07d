"""boilerplate section

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 11:30:00

``postings.boilerplate_count``: a word's occurrences outside its page's main content
(navigation, header, breadcrumbs, sidebars, footer: :mod:`search.content`), weighed with
the server's ``boilerplateweight``.  Postings stored before have 0 there (their words all
count as body, as they did).  A column is only added (no table copy on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "postings",
        sa.Column("boilerplate_count", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_column("postings", "boilerplate_count")
