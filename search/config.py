"""Where the database and the index live, resolved the same way by crawler and CLI.

Order of precedence: an explicit value (command-line option or Scrapy setting), then the
environment (``DATABASE_URL``, ``SPIDERSITE_INDEX_DIR``, ``SPIDERSITE_DATA_DIR``), then the
embedded default under ``./data``.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATA_DIR = "data"


def data_dir(value: str | os.PathLike[str] | None = None) -> Path:
    return Path(value or os.environ.get("SPIDERSITE_DATA_DIR") or DEFAULT_DATA_DIR)


def database_url(value: str | None = None, data: str | os.PathLike[str] | None = None) -> str:
    """The SQLAlchemy URL of the database (default: ``sqlite:///<data dir>/spidersite.db``)."""
    url = value or os.environ.get("DATABASE_URL")
    if url:
        # Plain "postgresql://" URLs select psycopg2 in SQLAlchemy; we ship psycopg 3.
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        return url
    return f"sqlite:///{data_dir(data) / 'spidersite.db'}"


def index_dir(
    value: str | os.PathLike[str] | None = None, data: str | os.PathLike[str] | None = None
) -> Path:
    """The Whoosh index folder (default: ``<data dir>/index``)."""
    if value:
        return Path(value)
    env = os.environ.get("SPIDERSITE_INDEX_DIR")
    return Path(env) if env else data_dir(data) / "index"
