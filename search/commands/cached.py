"""``python -m search cached URL``: the stored copy of a page, from the page store."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from search.commands._common import CLIError, open_engine, printable

NAME = "cached"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="print the stored copy of a page (crawled with PAGESTORE_ENABLED)",
        description="Print the page as it was fetched, from the WARC page store, without "
        "fetching it again: the body as bytes on standard output (or the headers).",
    )
    p.add_argument("url", help="the page's URL, as stored")
    p.add_argument(
        "--headers",
        action="store_true",
        help="print the status and HTTP headers instead of the body",
    )
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from sqlalchemy import select

    from search.models import Document
    from search.pagestore import PageStoreError, read_response

    engine = open_engine(args, upgrade=False)
    with engine.connect() as conn:
        row = conn.execute(
            select(Document.warc_file, Document.warc_offset).where(Document.url == args.url)
        ).first()
    if row is None:
        raise CLIError(f"no stored document with the URL {args.url!r}")
    if row.warc_file is None or row.warc_offset is None:
        raise CLIError(f"{args.url} has no stored copy (crawl with -s PAGESTORE_ENABLED=True)")
    try:
        stored = read_response(row.warc_file, row.warc_offset)
    except PageStoreError as exc:
        raise CLIError(str(exc)) from None
    if args.headers:  # a server's headers, through printable(): they may hold escapes
        out.write(f"{stored.status} {printable(stored.url)} ({printable(stored.date)})\n")
        for name, value in stored.headers:
            out.write(f"{printable(name)}: {printable(value)}\n")
        return 0
    out.flush()
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        buffer.write(stored.body)
        buffer.flush()
    else:  # a text stream (tests)
        out.write(stored.body.decode("utf-8", "replace"))
    return 0
