"""The command line: ``python -m search "query words"`` and its subcommands.

    python -m search [OPTIONS] "query words"      search (same as: python -m search query ...)
    python -m search reindex [--new]              rebuild the index from the database
    python -m search status                       what is stored and indexed

Errors are one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from search import __version__, config, db
from search.index import Index, IndexError_

COMMANDS = ("query", "reindex", "status")

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CLIError(Exception):
    """A failure to report as one line (exit status in ``code``)."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def _common(parser: argparse.ArgumentParser) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m search",
        description="Search the pages spidersite has crawled, and manage the index.",
        epilog="A first argument that is not a command is a query: python -m search "
        '"vacuum full lock". To search for a command\'s name, use: '
        "python -m search query reindex",
    )
    parser.add_argument("--version", action="version", version=f"spidersite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    q = sub.add_parser(
        "query",
        help="search (the default command)",
        description="Ranked search. Words typed first weigh more. "
        'Syntax: words, "quoted phrases", -excluded, site:host.',
    )
    q.add_argument("words", nargs="+", help="query words")
    q.add_argument(
        "-n", "--limit", type=int, default=10, metavar="N", help="results per page (default: 10)"
    )
    q.add_argument("--page", type=int, default=1, metavar="P", help="page of results (default: 1)")
    q.add_argument(
        "--all",
        dest="require_all",
        action="store_true",
        help="every word must match (default: any word)",
    )
    q.add_argument("--json", action="store_true", help="print JSON for machines")
    q.add_argument(
        "--language",
        metavar="LANG",
        help="language of the query words for stemming (default: English)",
    )
    _common(q)

    r = sub.add_parser(
        "reindex",
        help="rebuild the search index from the database",
        description="Rebuild the Whoosh index from the database, which is "
        "the record. With --new, only add the stored documents "
        "that are not searchable yet.",
    )
    r.add_argument("--new", action="store_true", help="only index documents not yet in the index")
    r.add_argument(
        "--batch-size",
        type=int,
        default=2000,
        metavar="N",
        help="documents between progress updates (default: 2000)",
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    _common(r)

    st = sub.add_parser(
        "status",
        help="documents stored and indexed",
        description="Counts of stored documents by kind and status, and of documents in the index.",
    )
    st.add_argument("--json", action="store_true", help="print JSON for machines")
    _common(st)
    return parser


def _normalize_argv(argv: list[str]) -> list[str]:
    """Insert the implicit ``query`` command when the first argument is not a command."""
    if not argv:
        return argv
    if argv[0] in ("-h", "--help", "--version"):
        return argv
    if argv[0] in COMMANDS:
        return argv
    return ["query", *argv]


def _engine(args: argparse.Namespace, upgrade: bool = True) -> Any:
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


def _index(args: argparse.Namespace) -> Index:
    return Index(config.index_dir(args.index_dir, args.data_dir))


def cmd_query(args: argparse.Namespace, out: TextIO) -> int:
    from search.query import QueryError, parse_query
    from search.searcher import Searcher

    if args.limit < 1:
        raise CLIError("-n must be at least 1", EXIT_USAGE)
    if args.page < 1:
        raise CLIError("--page must be at least 1", EXIT_USAGE)
    text = " ".join(args.words)
    try:
        parsed = parse_query(text, require_all=args.require_all, language=args.language)
    except QueryError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    index = _index(args)
    if not index.exists():
        raise CLIError(
            f"no search index at {index.path} yet: crawl a site first "
            f"(scrapy crawl site -a seeds=URL) or rebuild it "
            f"(python -m search reindex)"
        )
    engine = _engine(args, upgrade=False)
    result = Searcher(engine, index).search(parsed, page=args.page, per_page=args.limit)
    if args.json:
        json.dump(result.as_dict(), out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    color = out.isatty() and not os.environ.get("NO_COLOR")
    mark = ("\033[1m", "\033[0m") if color else ("[", "]")
    first = (result.page - 1) * result.per_page + 1
    if not result.hits:
        out.write(f"No results for {text!r} ({result.seconds * 1000:.0f} ms).\n")
        return 0
    last = first + len(result.hits) - 1
    out.write(
        f"Results {first}-{last} of {result.total} for {text!r} "
        f"({result.seconds * 1000:.0f} ms)\n\n"
    )
    for hit in result.hits:
        out.write(f"{hit.rank:>3}. {hit.title or '(no title)'}  [score {hit.score:.3f}]\n")
        out.write(f"     {hit.url}\n")
        snippet = hit.snippet_text(mark)
        if snippet:
            out.write(f"     {snippet}\n")
        out.write("\n")
    return 0


def cmd_reindex(args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    from search.indexer import count_indexable, reindex

    engine = _engine(args)
    index = _index(args)
    total = count_indexable(engine, only_unindexed=args.new)
    bar = tqdm(total=total, unit="doc", desc="reindex", disable=args.quiet, file=sys.stderr)
    try:
        done = reindex(
            engine, index, full=not args.new, batch_size=args.batch_size, progress=bar.update
        )
    except IndexError_ as exc:
        raise CLIError(str(exc)) from None
    finally:
        bar.close()
    out.write(f"Indexed {done} documents into {index.path}\n")
    return 0


def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    from sqlalchemy import func, select

    from search.models import Crawl, CrawlError, Document, Server

    engine = _engine(args, upgrade=False)
    index = _index(args)
    with engine.connect() as conn:
        by_kind = conn.execute(
            select(Document.kind, Document.status, func.count()).group_by(
                Document.kind, Document.status
            )
        ).all()
        indexed = conn.execute(select(func.count()).where(Document.indexed.is_(True))).scalar_one()
        servers = conn.execute(select(func.count()).select_from(Server)).scalar_one()
        errors = conn.execute(select(func.count()).select_from(CrawlError)).scalar_one()
        crawls = conn.execute(select(func.count()).select_from(Crawl)).scalar_one()
    data = {
        "database": engine.url.render_as_string(hide_password=True),
        "index": str(index.path),
        "documents": {f"{k}/{s}": n for k, s, n in by_kind},
        "documents_total": sum(n for _, _, n in by_kind),
        "marked_indexed": indexed,
        "in_index": index.doc_count(),
        "servers": servers,
        "crawl_errors": errors,
        "crawls": crawls,
    }
    if args.json:
        json.dump(data, out, indent=2)
        out.write("\n")
        return 0
    for key, value in data.items():
        if isinstance(value, dict):
            out.write(f"{key}:\n")
            for k, v in sorted(value.items()):
                out.write(f"  {k:<20} {v}\n")
        else:
            out.write(f"{key + ':':<18} {value}\n")
    return 0


HANDLERS = {"query": cmd_query, "reindex": cmd_reindex, "status": cmd_status}


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    argv = _normalize_argv(list(sys.argv[1:] if argv is None else argv))
    if not argv:
        parser.print_usage(sys.stderr)
        sys.stderr.write("error: give a query or a command (python -m search --help)\n")
        return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        return HANDLERS[args.command](args, out)
    except CLIError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
