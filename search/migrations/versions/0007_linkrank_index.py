"""linkrank index

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 14:30:00

``ix_documents_linkrank``: the searcher reads every document's linkrank (once per index
generation and :data:`search.searcher.LINKRANK_MAX_AGE`).  Without an index that read is a
scan of the documents table, whose rows hold the pages' text: on SQLite it reads every
page's text (13 s for 100,000 pages on a loaded two-core machine); with it, the index
alone (SQLite's index entries hold the row id, the document's id).
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_documents_linkrank", "documents", ["linkrank"])


def downgrade() -> None:
    op.drop_index("ix_documents_linkrank", table_name="documents")
