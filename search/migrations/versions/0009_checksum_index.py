"""checksum index

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 23:50:00

``ix_documents_checksum``: every batch the store writes looks its pages' checksums up
among the stored pages, to mark exact duplicates (clones).  Without an index that is a
scan of the documents table, whose rows hold the pages' text, for every batch: the
crawl's cost a page grew with the pages stored (12 % of the worker's time by 100,000
pages on SQLite).  With it, one lookup a page.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_documents_checksum", "documents", ["checksum"])


def downgrade() -> None:
    op.drop_index("ix_documents_checksum", table_name="documents")
