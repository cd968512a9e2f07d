"""postings without an index by stem

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 22:30:00

``ix_postings_word_id`` is dropped.  Every page stored adds a few hundred postings, and
each went into that index at a random place: once the index outgrew the database's page
cache, its upkeep was most of the cost of storing a page, and grew with the crawl (on
SQLite, 3.1 ms a page of 600 words at 10,000 pages, 4.3 ms at 30,000; 0.85 and 0.8 ms
without it).  Nothing reads postings by stem any more: the searcher's spelling
suggestions read a stem's surface forms in a sample of the documents that hold it, by
the primary key (document, word); no word is ever deleted, so the foreign key's cascade
needs no index either.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_postings_word_id", table_name="postings")


def downgrade() -> None:
    op.create_index("ix_postings_word_id", "postings", ["word_id"])
