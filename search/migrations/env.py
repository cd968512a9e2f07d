"""Alembic environment: the engine is handed in by :func:`search.db.migrate`, or built
from ``DATABASE_URL`` when Alembic is run by hand."""

from __future__ import annotations

from alembic import context

from search import db
from search.models import Base

engine = context.config.attributes.get("engine") or db.create()

with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # A batch migration copies a table and drops the old one; with foreign keys on,
        # that drop would cascade into the tables that reference it.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    try:
        context.configure(
            connection=connection, target_metadata=Base.metadata, render_as_batch=sqlite
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
