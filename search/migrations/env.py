"""Alembic environment: the engine is handed in by :func:`search.db.migrate`, or built
from ``DATABASE_URL`` when Alembic is run by hand (``alembic -x`` is not needed)."""

from __future__ import annotations

from alembic import context

from search import db
from search.models import Base

engine = context.config.attributes.get("engine") or db.create()

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
