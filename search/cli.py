"""The command line: ``python -m search "query words"`` and its subcommands.

    python -m search [OPTIONS] "query words"      search (same as: python -m search query ...)
    python -m search COMMAND [OPTIONS]            see python -m search --help

Each subcommand is a module of :mod:`search.commands`.  This module only builds the parser,
dispatches, and turns failures into one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from search import __version__, config, db
from search.index import Index, SearchIndexError

EXIT_USAGE = 2
EXIT_FAILURE = 1
DEFAULT_COMMAND = "query"


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


def commands() -> dict[str, ModuleType]:
    """Command word -> module, for every module of :mod:`search.commands`."""
    import search.commands as package

    found = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"search.commands.{info.name}")
        found[module.NAME] = module
    return found


def build_parser(modules: dict[str, ModuleType] | None = None) -> argparse.ArgumentParser:
    modules = modules if modules is not None else commands()
    parser = argparse.ArgumentParser(
        prog="python -m search",
        description="Search the pages spidersite has crawled, and manage the index.",
        epilog="A first argument that is not a command is a query: python -m search "
        '"vacuum full lock". To search for a command\'s name, use: '
        "python -m search query reindex",
    )
    parser.add_argument("--version", action="version", version=f"spidersite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in modules.values():
        module.add_parser(sub, add_common)
    return parser


def normalize_argv(argv: list[str], names: Sequence[str]) -> list[str]:
    """Insert the implicit ``query`` command when the first argument is not a command."""
    if not argv or argv[0] in ("-h", "--help", "--version") or argv[0] in names:
        return argv
    return [DEFAULT_COMMAND, *argv]


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


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    modules = commands()
    parser = build_parser(modules)
    args_list = normalize_argv(list(sys.argv[1:] if argv is None else argv), list(modules))
    if not args_list:
        parser.print_usage(sys.stderr)
        sys.stderr.write("error: give a query or a command (python -m search --help)\n")
        return EXIT_USAGE
    args = parser.parse_args(args_list)
    try:
        return int(modules[args.command].run(args, out))
    except CLIError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.code
    except SearchIndexError as exc:  # missing, outdated, being written
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
