"""postings WITHOUT ROWID on SQLite

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 23:20:00

On SQLite a table with a primary key of two columns is a b-tree by row id plus an index
of the key beside it: each posting was written twice.  The postings table is rebuilt
WITHOUT ROWID, its rows kept in the key's b-tree in (document, word) order.  At 30,000
pages of 385 postings (``benchmarks/postings.py``) that is 21.6 → 14.7 kB of postings a
page and 1.77 → 1.53 ms of CPU to insert a page's postings.  The upgrade copies every
posting (with the disk space of a second copy while it runs).  PostgreSQL has no row
ids: nothing changes there.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_COLUMNS = (
    "document_id, word_id, surface, body_count, title_count, url_count, desc_count, "
    "keywords_count, boilerplate_count, weight"
)


def _rebuild(with_rowid: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    create = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'postings'"
    ).scalar_one()
    create = create.rstrip().removesuffix("WITHOUT ROWID").rstrip()
    if not with_rowid:
        create += " WITHOUT ROWID"
    op.execute("ALTER TABLE postings RENAME TO _postings_old")
    op.execute(create)
    op.execute(
        f"INSERT INTO postings ({_COLUMNS}) SELECT {_COLUMNS} FROM _postings_old "
        "ORDER BY document_id, word_id"
    )
    op.execute("DROP TABLE _postings_old")


def upgrade() -> None:
    _rebuild(with_rowid=False)


def downgrade() -> None:
    _rebuild(with_rowid=True)
