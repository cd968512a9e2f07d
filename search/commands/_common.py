"""What the commands share: one-line failures, exit statuses, the storage options, and
opening the database and the index they name.

:mod:`search.cli` and every command import from here (never the commands from the CLI).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from search import config, db
from search.index import Index

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CLIError(Exception):
    """A failure to report as one line (exit status in ``code``)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def add_common(parser: argparse.ArgumentParser) -> None:
    """The storage options every command takes."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder of the embedded database and index (default: $SPIDERSITE_DATA_DIR or ./data)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="SQLAlchemy database URL (default: $DATABASE_URL or "
        "sqlite:///<data dir>/spidersite.db)",
    )
    parser.add_argument(
        "--index-dir",
        metavar="DIR",
        help="Whoosh index folder (default: $SPIDERSITE_INDEX_DIR or <data dir>/index)",
    )


def open_engine(args: argparse.Namespace, upgrade: bool = True) -> Any:
    """The database of the storage options, as one-line errors when it cannot be used.

    With ``upgrade=False`` a missing SQLite file is an error (read-only commands must not
    create an empty database).
    """
    url = config.database_url(args.database_url, args.data_dir)
    if url.startswith("sqlite:///") and not upgrade:
        path = url[len("sqlite:///") :]
        if not os.path.exists(path):
            raise CLIError(
                f"no database at {path} yet: crawl a site first (scrapy crawl site -a seeds=URL)"
            )
    try:
        return db.connect(url, upgrade=upgrade)
    except db.DatabaseError as exc:
        raise CLIError(str(exc)) from None


def open_index(args: argparse.Namespace) -> Index:
    return Index(config.index_dir(args.index_dir, args.data_dir))
