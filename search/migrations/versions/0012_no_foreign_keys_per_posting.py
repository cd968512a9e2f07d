"""postings and links without foreign keys

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 05:30:00

The foreign keys of ``postings`` (to ``documents`` and ``words``) and of ``links`` (to
``documents``) are dropped.  A stored page adds a few hundred postings and a few dozen
links, and each row's foreign keys were checked one by one: on PostgreSQL a trigger per
key and row, each locking the parent row it found (``FOR KEY SHARE``), so that every
batch also wrote a lock into the row of every word it used, and two crawl processes
storing into one database locked the same words.  Writing 1,000 pages of 385 postings
took 7.7–8.5 s of the PostgreSQL server's CPU with both keys, 4.1–4.2 s with the key to
``documents`` alone and 0.9–1.0 s with neither; on SQLite the checks were 15–30 % of the
postings' insert (README "Storage", benchmarks/README.md).

Nothing is lost: the store is the only writer of these rows.  It writes a page's
postings and links in the transaction that writes its document row, after deleting the
ones it replaces, and no document or word is ever deleted (the ``ON DELETE CASCADE`` had
nothing to do).

On PostgreSQL the constraints are dropped.  On SQLite, which cannot drop a constraint,
the table definitions are edited in place by the procedure SQLite documents for removing
a foreign key constraint ("Making Other Kinds Of Table Schema Changes" of its ALTER TABLE
page: the definition rewritten in ``sqlite_schema`` under ``writable_schema``, the schema
version bumped), which leaves every row where it is: instant at any size, where copying
the tables would take minutes.  The downgrade puts the constraints back the same ways.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from alembic import op
from sqlalchemy import inspect

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

#: (table, column, referenced table) of each foreign key dropped.
KEYS = (
    ("postings", "document_id", "documents"),
    ("postings", "word_id", "words"),
    ("links", "from_id", "documents"),
)

# One table constraint ``[CONSTRAINT name] FOREIGN KEY(col) REFERENCES t (id) [ON ...]``,
# with the comma before it.
_FK = (
    r",\s*(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY\s*\(\s*\"?{column}\"?\s*\)\s*"
    r"REFERENCES\s+\"?\w+\"?\s*\(\s*\"?\w+\"?\s*\)"
    r"(?:\s+ON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT|RESTRICT|NO\s+ACTION))*"
)


def _sqlite_keys(bind: Any, table: str) -> set[str]:
    return {row[3] for row in bind.exec_driver_sql(f"PRAGMA foreign_key_list({table})")}


def _sqlite_rewrite(bind: Any, edit: Callable[[str, str], str]) -> None:
    """Replace the CREATE TABLE text of each table of :data:`KEYS` by ``edit(table,
    text)`` (SQLite's documented procedure for changes that leave the stored rows as they
    are)."""
    definitions = {
        table: edit(
            table,
            bind.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).scalar_one(),
        )
        for table in _tables()
    }
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        for table, sql in definitions.items():
            bind.exec_driver_sql(
                "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
                (sql, table),
            )
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def _tables() -> list[str]:
    return sorted({table for table, _, _ in KEYS})


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":

        def without_keys(table: str, sql: str) -> str:
            for t, column, _ in KEYS:
                if t == table:
                    sql = re.sub(_FK.format(column=column), "", sql, flags=re.IGNORECASE)
            return sql

        _sqlite_rewrite(bind, without_keys)
        left = {t: _sqlite_keys(bind, t) for t in _tables()}
        if any(left.values()):
            raise RuntimeError(f"foreign keys left after migration 0012: {left}")
        return
    inspector = inspect(bind)
    for table in _tables():
        columns = {column for t, column, _ in KEYS if t == table}
        for fk in inspector.get_foreign_keys(table):
            name = fk.get("name")
            if name and set(fk["constrained_columns"]) <= columns:
                op.drop_constraint(name, table, type_="foreignkey")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":

        def with_keys(table: str, sql: str) -> str:
            # The column list ends at the last ')' before any table option.
            parts = re.match(r"(?s)(.*\))(\s*(?:WITHOUT\s+ROWID)?\s*)$", sql)
            if parts is None:
                raise RuntimeError(f"unexpected definition of {table}: {sql}")
            head, options = parts.groups()
            clauses = "".join(
                f", \n\tCONSTRAINT fk_{table}_{column}_{target} FOREIGN KEY({column}) "
                f"REFERENCES {target} (id) ON DELETE CASCADE"
                for t, column, target in KEYS
                if t == table
            )
            return head[:-1].rstrip() + clauses + "\n)" + options

        _sqlite_rewrite(bind, with_keys)
        return
    for table, column, target in KEYS:
        op.create_foreign_key(
            f"fk_{table}_{column}_{target}", table, target, [column], ["id"], ondelete="CASCADE"
        )
