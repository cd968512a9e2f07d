"""a document's postings in one row

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07 10:00:00

``postings`` held a row a document and stem (``document_id, word_id`` the key; the surface
form, six counts and the weight); it now holds a row a document, its stems' word ids,
surface forms, counts and weights packed into four binary columns
(:mod:`search.postingcodec`).  Every reader reads the postings by document.  At 10,000
pages on PostgreSQL the rows a stem (385 a page) and their key's entries were 72 % of the
write-ahead log a crawl wrote (the key alone 38 %) and 416 of the database's 563 MB
(benchmarks/README.md).

The upgrade renames the old table, creates the new one and converts the old rows in
batches of whole documents of about :data:`BATCH_POSTINGS` postings (memory bounded by a
batch, whatever the database's size), then drops the old table: it needs the disk space
of both tables while it runs.  The downgrade converts them back the same way (on SQLite
into a ``WITHOUT ROWID`` table, as migration 0011 left it).
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from search import postingcodec

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: Old rows (postings) converted at a time, in whole documents (a document of more
#: postings is converted alone); Alembic's ``config.attributes["postings_batch"]``
#: overrides it (the tests' small batches).
BATCH_POSTINGS = 50_000
#: New rows (documents) converted back at a time by the downgrade (overridden the same
#: way).
BATCH_DOCUMENTS = 200

_SECTIONS = ("body", "title", "url", "desc", "keywords", "boilerplate")
_OLD_COLUMNS = (
    "document_id",
    "word_id",
    "surface",
    *(f"{s}_count" for s in _SECTIONS),
    "weight",
)


def _set_aside(bind: Any, name: str) -> None:
    """Rename ``postings`` to *name* (on PostgreSQL its key too, whose name the new table
    takes)."""
    op.rename_table("postings", name)
    if bind.dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {name} RENAME CONSTRAINT pk_postings TO pk_{name}")


def _packed_table() -> sa.Table:
    return op.create_table(
        "postings",
        sa.Column("document_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("word_ids", sa.LargeBinary(), nullable=False),
        sa.Column("surfaces", sa.LargeBinary(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("document_id", name=op.f("pk_postings")),
    )


def _row_table() -> sa.Table:
    return op.create_table(
        "postings",
        sa.Column("document_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("word_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("surface", sa.String(length=128), nullable=False),
        *(sa.Column(f"{s}_count", sa.Integer(), nullable=False) for s in _SECTIONS[:-1]),
        sa.Column("boilerplate_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("document_id", "word_id", name=op.f("pk_postings")),
        sqlite_with_rowid=False,
    )


def _batch(default: int) -> int:
    return int(context.config.attributes.get("postings_batch", default))


def upgrade() -> None:
    bind = op.get_bind()
    batch = _batch(BATCH_POSTINGS)
    _set_aside(bind, "_postings_rows")
    table = _packed_table()
    names = ", ".join(_OLD_COLUMNS)
    last = -1
    while True:
        # The last document of the next BATCH_POSTINGS rows (or of the rest).
        high = bind.execute(
            sa.text(
                "SELECT document_id FROM _postings_rows WHERE document_id > :last "
                "ORDER BY document_id LIMIT 1 OFFSET :skip"
            ),
            {"last": last, "skip": batch - 1},
        ).scalar()
        if high is None:
            high = bind.execute(
                sa.text("SELECT max(document_id) FROM _postings_rows WHERE document_id > :last"),
                {"last": last},
            ).scalar()
            if high is None:
                break
        rows = bind.execute(
            sa.text(
                f"SELECT {names} FROM _postings_rows WHERE document_id > :last "
                "AND document_id <= :high ORDER BY document_id, word_id"
            ),
            {"last": last, "high": high},
        ).all()
        values = []
        for did, group in groupby(rows, key=itemgetter(0)):
            posts = list(group)
            packed = postingcodec.encode(
                [p[1] for p in posts],
                [p[2] or "" for p in posts],
                [c or 0 for p in posts for c in p[3:9]],
                [p[9] or 0.0 for p in posts],
            )
            values.append(
                {
                    "document_id": did,
                    "word_ids": packed.word_ids,
                    "surfaces": packed.surfaces,
                    "counts": packed.counts,
                    "weights": packed.weights,
                }
            )
        del rows
        bind.execute(sa.insert(table), values)
        last = high
    op.drop_table("_postings_rows")


def downgrade() -> None:
    bind = op.get_bind()
    batch = _batch(BATCH_DOCUMENTS)
    _set_aside(bind, "_postings_packed")
    table = _row_table()
    last = -1
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT document_id, word_ids, surfaces, counts, weights FROM _postings_packed "
                "WHERE document_id > :last ORDER BY document_id LIMIT :n"
            ),
            {"last": last, "n": batch},
        ).all()
        if not rows:
            break
        values = []
        for did, word_ids, surfaces, counts, weights in rows:
            posts = postingcodec.decode(word_ids, counts, surfaces, weights)
            assert posts.surfaces is not None and posts.weights is not None
            for wid, surface, row, weight in zip(
                posts.word_ids.tolist(),
                posts.surfaces,
                posts.counts.tolist(),
                posts.weights.tolist(),
                strict=True,
            ):
                value = dict(zip(_OLD_COLUMNS, (did, wid, surface, *row, weight), strict=True))
                values.append(value)
        if values:
            bind.execute(sa.insert(table), values)
        last = rows[-1][0]
    op.drop_table("_postings_packed")
