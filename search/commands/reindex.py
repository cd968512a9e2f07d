"""``python -m search reindex``: rebuild the index from the database, with a progress bar."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from search.cli import CLIError, open_engine, open_index
from search.index import IndexError_

NAME = "reindex"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="rebuild the search index from the database",
        description="Rebuild the Whoosh index from the database, which is the record. "
        "With --new, only add the stored documents that are not searchable yet.",
    )
    p.add_argument("--new", action="store_true", help="only index documents not yet in the index")
    p.add_argument(
        "--batch-size",
        type=int,
        default=2000,
        metavar="N",
        help="documents between progress updates (default: 2000)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    from search.indexer import count_indexable, reindex

    if args.batch_size < 1:
        raise CLIError("--batch-size must be at least 1", 2)
    engine = open_engine(args)
    index = open_index(args)
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
