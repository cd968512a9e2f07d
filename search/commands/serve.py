"""``python -m search serve``: the web application (search page, document pages, admin),
served by waitress, a production WSGI server (Werkzeug's own server is for development).
Its searches rank with the ranking options, ``query``'s and ``eval``'s."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import logging
import sys
import threading
from typing import Any, TextIO

from search.commands._common import EXIT_USAGE, CLIError
from search.commands.query import add_ranking_options, ranking_options, ranking_params

NAME = "serve"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="run the web application (search page and crawl admin)",
        description="Serve the search page, document pages and the crawl admin over HTTP. "
        "The admin needs SPIDERSITE_ADMIN_PASSWORD or SPIDERSITE_ADMIN_PASSWORD_FILE. "
        "The search page and /api/search rank with the ranking options (--k1 … as query's).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument(
        "--threads",
        type=int,
        default=8,
        help="requests served at once, one thread each (default: 8)",
    )
    p.add_argument(
        "--hash-password",
        action="store_true",
        help="read a password on stdin, print its hash for SPIDERSITE_ADMIN_PASSWORD_FILE, exit",
    )
    add_ranking_options(p, language=False)
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from search.web.settings import SettingsError, WebSettings, hash_password

    if args.hash_password:
        password = getpass.getpass("Admin password: ")
        if not password:
            raise CLIError("empty password", EXIT_USAGE)
        out.write(hash_password(password) + "\n")
        return 0
    if not 0 < args.port < 65536:
        raise CLIError(f"--port must be between 1 and 65535, not {args.port}", EXIT_USAGE)
    if not 0 < args.threads <= 1024:
        raise CLIError(f"--threads must be between 1 and 1024, not {args.threads}", EXIT_USAGE)
    params = ranking_params(args)
    from search import analysis, db
    from search.process import freeze_startup
    from search.web import create_app

    try:
        settings = WebSettings.from_env(
            args.data_dir, args.database_url, args.index_dir, ranking=params
        )
        engine = db.connect(settings.database_url)
    except (SettingsError, db.DatabaseError) as exc:
        raise CLIError(str(exc)) from None
    # A server answers queries for long: its cache of stems holds more of the index's
    # vocabulary than a crawl's processes may (the snippets stem every distinct word of
    # each hit's text).
    analysis.set_stem_cache_bytes(settings.stem_cache_bytes)
    app = create_app(settings, engine)
    # A read-only data folder (a deployed copy) is served: what cannot work there is said.
    sqlite = db.sqlite_path(settings.database_url)
    for note in settings.read_only_notes(sqlite is not None and db.read_only_sqlite(sqlite)):
        sys.stderr.write(f"warning: {note}\n")
    # The dictionary loads while the index warms up; the server listens once both are
    # done: a query that came meanwhile competed with the dictionary's loading for the
    # interpreter (a first /api/search of 0.7 s against 0.01 s, benchmarks/README.md).
    warm_up(app).join()
    # What start-up built (modules, the application, the warmed searcher) lives as long as
    # the process: kept out of the collector's full collections, each of those costs ~2 ms
    # instead of ~37 at 100,000 documents, in the middle of some query (benchmarks/README.md).
    freeze_startup()
    from waitress.server import create_server

    # Logins, refused logins and waitress's own warnings go to standard error.
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s [%(name)s] %(levelname)s: %(message)s"
    )
    try:
        server: Any = create_server(app, host=args.host, port=args.port, threads=args.threads)
    except OSError as exc:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    admin = "admin enabled" if settings.admin_password_hash else "admin disabled (no password)"
    runner = f"Scrapyd at {settings.scrapyd_url}" if settings.scrapyd_url else "local scrapy"
    # Searches that rank otherwise than `query` does by default: the operator sees how.
    changed = ranking_options(settings.ranking)
    if changed:
        out.write(f"Ranking: {' '.join(changed)} (the other parameters at their defaults)\n")
    out.write(
        f"Serving on http://{args.host}:{server.effective_port}/ with waitress, "
        f"{args.threads} threads ({admin}; crawls: {runner})\n"
    )
    out.flush()
    try:
        server.run()
    finally:
        server.close()
    return 0


def warm_up(app: Any) -> threading.Thread:
    """Open the index and read what every query needs (array postings, linkranks) before
    listening, so that the first query costs what the next ones do; an index that is
    missing or outdated is left to the searches to report.

    The Chinese segmenter's dictionary (jieba's, 1-3.5 s to load, ~70 MB) loads on a
    thread of its own, returned, while the index warms up; ``serve`` joins it before it
    listens (a query answered meanwhile would compete with it for the interpreter), and a
    query that meets Chinese text before it is loaded waits for the rest of it (jieba's
    lock)."""
    from search import analysis
    from search.index import SearchIndexError

    segmenter = threading.Thread(target=analysis.warm_segmenter, name="warm-segmenter", daemon=True)
    segmenter.start()
    if app.extensions["spidersite.index"].exists():
        with contextlib.suppress(SearchIndexError):
            app.extensions["spidersite.searchers"].warm()
    return segmenter
