"""``python -m search check``: does the index agree with the database? Repair it if not."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from search.commands._common import open_engine, open_index

NAME = "check"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="check that the index agrees with the database, and repair it",
        description="Compare the documents the database says are searchable with the "
        "documents in the Whoosh index. Missing ones are indexed from the database, extra "
        "ones removed (the database is the record). Exit status 0 when they agree (after "
        "repair), 1 when they differ and --dry-run was given.",
    )
    p.add_argument("--dry-run", action="store_true", help="only report, change nothing")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from search.reindex import check

    engine = open_engine(args, upgrade=False, write=not args.dry_run)
    index = open_index(args)
    if not index.exists() and not args.dry_run:  # a dry run reads no index as empty
        index.open(create=True)
    result = check(engine, index, repair=not args.dry_run)
    if args.json:
        json.dump(
            {
                "in_database": result.in_database,
                "in_index": result.in_index,
                "missing": result.missing,
                "extra": result.extra,
                "unmarked": result.unmarked,
                "stale_marks": result.stale_marks,
                "orphaned": result.orphaned,
                "consistent": result.consistent,
                "repaired": result.repaired,
            },
            out,
            indent=2,
        )
        out.write("\n")
    else:
        out.write(f"searchable in the database: {result.in_database}\n")
        out.write(f"in the index:               {result.in_index}\n")
        out.write(f"missing from the index:     {len(result.missing)}\n")
        out.write(f"extra in the index:         {len(result.extra)}\n")
        out.write(f"in the index, not marked:   {len(result.unmarked)}\n")
        out.write(f"marked, not indexable:      {len(result.stale_marks)}\n")
        out.write(f"duplicates of no original:  {len(result.orphaned)}\n")
        if result.consistent:
            out.write("The index agrees with the database.\n")
        elif result.repaired:
            out.write("Repaired: the index now agrees with the database.\n")
        else:
            out.write(
                "The index does not agree with the database (run without --dry-run to repair).\n"
            )
    return 1 if (not result.consistent and not result.repaired) else 0
