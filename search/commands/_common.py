"""What the commands share: one-line failures, exit statuses, the storage options, and
opening the database and the index they name.

:mod:`search.cli` and every command import from here (never the commands from the CLI).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from search import config, db
from search.index import Index

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CLIError(Exception):
    """A failure to report as one line (exit status in ``code``)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


#: The storage options (:func:`add_common`): every command takes them, and they may come
#: before the command's name too (:func:`search.cli.normalize_argv`).
STORAGE_OPTIONS = ("--data-dir", "--database-url", "--index-dir")


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


def open_engine(
    args: argparse.Namespace,
    upgrade: bool = True,
    create: bool | None = None,
    write: bool = False,
) -> Any:
    """The database of the storage options, as one-line errors when it cannot be used.

    With ``upgrade=False`` (or ``create=False``) a database that is not there yet is an
    error (read-only commands must not create an empty database, nor a rebuild one of
    nothing): a missing SQLite file, an empty one (``touch``: zero bytes), a database
    without a table (:class:`search.db.EmptyDatabase`); and so is one that holds tables
    but not this project's schema.  With ``upgrade=False`` the database is read once (its
    schema's revision), so that one that cannot be opened fails here.  With *write* (a
    command that writes: ``reindex``, ``check`` without ``--dry-run``) a SQLite file that
    cannot be written (nor its folder, where SQLite keeps its journal) is an error here,
    before the command touches the index (a rebuild would replace the index and then fail
    to mark its documents).
    """
    url = config.database_url(args.database_url, args.data_dir)
    existing = not (upgrade if create is None else create)
    if existing and url.startswith("sqlite:///"):
        # Before SQLite opens it: it would write a header into an empty file.
        path = url[len("sqlite:///") :]
        if not os.path.exists(path) or db.empty_sqlite(Path(path)):
            raise CLIError(_nothing_crawled(url))
    if write:
        try:
            db.probe(url)
        except db.DatabaseError as exc:
            raise CLIError(_one_line(str(exc))) from None
    try:
        engine = db.connect(url, upgrade=upgrade and not existing)
        if existing:
            # Read now, so that a server that cannot be reached or a file that is not a
            # database is one line here, not a traceback from the command's first query;
            # and a database with no table is one that nothing was crawled into yet.
            db.stored_revision(engine)
            if upgrade:
                db.migrate(engine)
    except db.EmptyDatabase:
        raise CLIError(_nothing_crawled(url)) from None
    except db.DatabaseError as exc:
        raise CLIError(_one_line(str(exc))) from None
    except DBAPIError as exc:
        raise CLIError(_one_line(f"cannot open database {make_url(url)!r}: {exc.orig}")) from None
    return engine


def _nothing_crawled(url: str) -> str:
    """What a command that reads says when nothing was crawled into the database *url*
    (no SQLite file, an empty one, a database without a table)."""
    if url.startswith("sqlite:///"):
        where = f"no database at {url[len('sqlite:///') :]}"
    else:
        where = f"no tables in the database {db.describe(url)}"
    return f"{where} yet: crawl a site first (scrapy crawl site -a seeds=URL)"


#: What :func:`printable` writes for each control character a terminal acts on: C0 but
#: tab, DEL and C1 (ESC and C1's CSI start the escape sequences that set a window's title,
#: recolour, make links; a newline or carriage return would make a line that seems the
#: command's own).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0))}
_CONTROLS.update({0x0A: "\\n", 0x0D: "\\r"})
#: The bidirectional controls (Unicode's Bidi_Control: the embeddings, overrides and
#: isolates, and the marks), which reorder what a terminal shows of the rest of a line: a
#: title holding U+202E shows the text after it backwards ("Trojan Source", CVE-2021-42574).
BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS.update({c: f"\\u{c:04x}" for c in BIDI_CONTROLS})
_CONTROLS[ord("\\")] = "\\\\"
#: JSON's escapes of DEL, C1 and the bidirectional controls, which
#: ``json.dumps(ensure_ascii=False)`` writes as they are (it escapes C0 only).
_JSON_CONTROLS = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *BIDI_CONTROLS)}


def printable(text: object) -> str:
    """*text* safe to print on a terminal: each control character but tab shown as an
    escape (``\\x1b``, ``\\n``), each bidirectional control as ``\\u202e``, and a backslash
    as two, so that an escape shown is never text that only looks like one (a title that
    says ``\\x1b`` in letters prints as ``\\\\x1b``).  Every string that comes from a crawl
    (a title, a URL, a snippet, a server's error message) or from the database goes through
    it before a command prints it as text; a page may hold any character."""
    return str(text).translate(_CONTROLS)


def write_json(data: Any, out: TextIO, ensure_ascii: bool = False) -> None:
    """*data* as indented JSON on *out*, with every control character escaped (C1 and the
    bidirectional controls too)."""
    out.write(json.dumps(data, ensure_ascii=ensure_ascii, indent=2).translate(_JSON_CONTROLS))
    out.write("\n")


def _one_line(message: str) -> str:
    """*message* on one line (a driver's message may run over several)."""
    return " ".join(message.split())


def open_index(args: argparse.Namespace) -> Index:
    return Index(config.index_dir(args.index_dir, args.data_dir))
