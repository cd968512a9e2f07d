"""near duplicates and the page store

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 16:50:00

``near_duplicate_of_id``: the earlier page whose simhash is within the near-duplicate
threshold; ``warc_file`` and ``warc_offset``: where the page store (WARC) keeps the
fetched response.  Columns are only added (no table copy on SQLite).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("near_duplicate_of_id", sa.Integer(), nullable=True))
    op.add_column("documents", sa.Column("warc_file", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("warc_offset", sa.BigInteger(), nullable=True))
    op.create_index(
        op.f("ix_documents_near_duplicate_of_id"), "documents", ["near_duplicate_of_id"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_documents_near_duplicate_of_id"), table_name="documents")
    for column in ("warc_offset", "warc_file", "near_duplicate_of_id"):
        op.drop_column("documents", column)
