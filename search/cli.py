"""The command line: ``python -m search "query words"`` and its subcommands.

    python -m search [OPTIONS] "query words"      search (same as: python -m search query ...)
    python -m search COMMAND [OPTIONS]            see python -m search --help

Each subcommand is a module of :mod:`search.commands`.  This module only builds the parser,
dispatches, and turns failures into one line on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TextIO

from sqlalchemy.exc import SQLAlchemyError

from search import __version__, db
from search.commands._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    STORAGE_OPTIONS,
    CLIError,
    add_common,
    printable,
)
from search.index import SearchIndexError

DEFAULT_COMMAND = "query"


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
    """Insert the implicit ``query`` command when the first argument is not a command;
    storage options given before the command's name go after it
    (``--data-dir D status`` is ``status --data-dir D``)."""
    lead: list[str] = []
    rest = list(argv)
    while rest and rest[0].partition("=")[0] in STORAGE_OPTIONS:
        take = 1 if "=" in rest[0] else 2
        lead, rest = lead + rest[:take], rest[take:]
    if lead:
        if rest and rest[0] in names:
            return [rest[0], *lead, *rest[1:]]
        return [DEFAULT_COMMAND, *lead, *rest]
    if not argv or argv[0] in ("-h", "--help", "--version") or argv[0] in names:
        return argv
    return [DEFAULT_COMMAND, *argv]


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
    except CLIError as exc:  # may quote a stored URL or path: printable()
        sys.stderr.write(f"error: {printable(exc)}\n")
        return exc.code
    except SearchIndexError as exc:  # missing, outdated, damaged, being written
        sys.stderr.write(f"error: {printable(exc)}\n")
        return EXIT_FAILURE
    except SQLAlchemyError as exc:  # the database failed a command under way
        sys.stderr.write(f"error: the database failed: {db.driver_message(exc)}\n")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
