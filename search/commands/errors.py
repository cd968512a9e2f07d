"""``python -m search errors``: the crawl log (the ``crawl_errors`` table), filterable."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from search.commands._common import EXIT_USAGE, CLIError, open_engine, printable
from search.models import CrawlError

NAME = "errors"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="list crawl failures (newest first)",
        description="The crawl log: every fetch or parse failure, newest first.",
    )
    p.add_argument("--server", metavar="URL", help="only this server (e.g. https://example.org/)")
    p.add_argument(
        "--kind",
        choices=CrawlError.KINDS,
        metavar="KIND",
        help=f"only this kind: {', '.join(CrawlError.KINDS)}",
    )
    p.add_argument("--crawl", type=int, metavar="ID", help="only this crawl (see status)")
    p.add_argument(
        "-n", "--limit", type=int, default=50, metavar="N", help="at most N rows (default: 50)"
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from sqlalchemy import func, select

    from search.models import CrawlError, Server
    from search.urls import check_url, origin

    if args.limit < 1:
        raise CLIError("-n must be at least 1", EXIT_USAGE)
    engine = open_engine(args, upgrade=False)
    q = select(
        CrawlError.time,
        CrawlError.kind,
        CrawlError.url,
        CrawlError.message,
        CrawlError.crawl_id,
        Server.url.label("server"),
    ).outerjoin(Server, Server.id == CrawlError.server_id)
    if args.server:
        try:
            q = q.where(Server.url == origin(check_url(args.server)))
        except ValueError:
            raise CLIError(
                f"--server: {args.server!r} is not a URL (e.g. https://example.org/)", EXIT_USAGE
            ) from None
    if args.kind:
        q = q.where(CrawlError.kind == args.kind)
    if args.crawl is not None:
        q = q.where(CrawlError.crawl_id == args.crawl)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(q.subquery())).scalar_one()
        rows = conn.execute(
            q.order_by(CrawlError.time.desc(), CrawlError.id.desc()).limit(args.limit)
        ).all()
    if args.json:
        errors = [
            {
                "time": r.time.isoformat() if r.time else None,
                "kind": r.kind,
                "url": r.url,
                "message": r.message,
                "crawl": r.crawl_id,
                "server": r.server,
            }
            for r in rows
        ]
        json.dump({"total": total, "errors": errors}, out, indent=2)
        out.write("\n")
        return 0
    if not rows:
        out.write("No crawl errors.\n")
        return 0
    for r in rows:
        when = r.time.strftime("%Y-%m-%d %H:%M:%S") if r.time else "-"
        # A URL and a server's message are crawled text: printable() shows its escapes.
        kind, url, message = (printable(v) for v in (r.kind, r.url, r.message))
        out.write(f"{when}  {kind:<9} {url}\n    {message}\n")
    if total > len(rows):
        out.write(f"({len(rows)} of {total}; use -n to see more)\n")
    return 0
