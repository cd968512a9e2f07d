"""the links by target kept without write-ahead log on PostgreSQL

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 01:00:00

``inlinks`` is derived data: every link analysis (a crawl's end, ``python -m search
reindex``) empties it and writes it again from ``links`` and ``documents``.  Written to
PostgreSQL's write-ahead log, those rows were most of the log a crawl's end wrote: 374 MB
for the 3 million links of 100,000 pages, of ~540 MB in all, and the checkpoint that log
triggered slowed the queries answered after the crawl (benchmarks/README.md).  An
``UNLOGGED`` table writes no log.  What it gives up: after a crash of the server,
PostgreSQL empties it (the next link analysis fills it again; the crawl does not skip
that analysis while the table is empty, :meth:`search.crawldb.CrawlDB.links_analyzed`),
and a streaming replica does not have it.  SQLite has no such tables: nothing to do there.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE inlinks SET UNLOGGED")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE inlinks SET LOGGED")
