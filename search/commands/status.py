"""``python -m search status``: what is stored and what is searchable."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from search.commands._common import open_engine, open_index, printable

NAME = "status"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="documents stored and indexed",
        description="Counts of stored documents by kind and status, and of documents in the index.",
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from sqlalchemy import func, select

    from search.index import FORMAT, SearchIndexError
    from search.models import Crawl, CrawlError, Document, Server

    engine = open_engine(args, upgrade=False)
    index = open_index(args)
    try:
        in_index: int | None = index.doc_count()
        index_format = f"{FORMAT} (current)" if index.exists() else "no index yet"
    except SearchIndexError as exc:
        in_index, index_format = None, str(exc)
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
        "in_index": in_index,
        "index_format": index_format,
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
                out.write(f"  {printable(k):<20} {v}\n")
        else:
            out.write(f"{key + ':':<18} {'-' if value is None else printable(value)}\n")
    return 0
