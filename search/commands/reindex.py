"""``python -m search reindex``: rebuild the index from the database, with a progress bar,
and recompute the link-graph prior (:mod:`search.linkrank`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from search.commands._common import CLIError, open_engine, open_index

NAME = "reindex"


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="rebuild the search index from the database",
        description="Rebuild the Whoosh index from the database, which is the record, "
        "and recompute each document's linkrank (PageRank over the stored links). "
        "With --new, only add the stored documents that are not searchable yet.",
    )
    p.add_argument("--new", action="store_true", help="only index documents not yet in the index")
    p.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="documents read from the database at a time, and between progress updates; "
        "at most 500 (default: 500)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--processes",
        type=int,
        choices=(1, 2),
        default=None,
        metavar="N",
        help="a full rebuild: 2 reads the database (and recomputes the linkranks) in a "
        "second process while this one writes the index; 1 does all in one "
        "(default: 2 from 2,000 documents on a machine of 2 cores or more)",
    )
    p.add_argument(
        "--no-linkrank",
        dest="linkrank",
        action="store_false",
        help="do not recompute the linkranks (PageRank over the stored links)",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep the index in step with the database: every --interval seconds, index "
        "what crawlers stored (crawlers run with -s INDEX_ENABLED=False) and remove what "
        "left the database's searchable set; stop with Ctrl-C",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=10.0,
        metavar="S",
        help="with --follow: seconds between rounds (default: 10)",
    )
    p.add_argument(
        "--commit-docs",
        type=int,
        default=1000,
        metavar="N",
        help="with --follow: commit once N documents wait to be indexed, or sooner when "
        "nothing was stored since the last round or --max-delay has passed (default: 1000)",
    )
    p.add_argument(
        "--max-delay",
        type=float,
        default=60.0,
        metavar="S",
        help="with --follow: seconds after which what waits is committed, and the whole "
        "index checked against the database, even while crawlers keep storing (default: 60)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=0,
        metavar="N",
        help="with --follow: stop after N rounds (default: 0, never)",
    )
    common(p)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from tqdm import tqdm

    from search.reindex import READ_PAGE, count_indexable, rebuild, reindex, use_reader
    from search.store import vacuum_dead_rows

    if args.batch_size is None:
        args.batch_size = READ_PAGE
    if args.batch_size < 1:
        raise CLIError("--batch-size must be at least 1", 2)
    if args.follow:
        return follow(args, out)
    # A rebuild of no database is a mistyped path; one that cannot be written is refused
    # before the index is touched.
    engine = open_engine(args, create=False, write=True)
    index = open_index(args)
    total = count_indexable(engine, only_unindexed=args.new)
    bar = tqdm(total=total, unit="doc", desc="reindex", disable=args.quiet, file=sys.stderr)
    if args.processes is None:
        reader = not args.new and use_reader(engine, total)
    else:
        reader = args.processes > 1
    try:
        if args.new:
            done = reindex(
                engine, index, full=False, batch_size=args.batch_size, progress=bar.update
            )
        else:
            result = rebuild(
                engine,
                index,
                batch_size=args.batch_size,
                progress=bar.update,
                linkrank=args.linkrank,
                reader=reader,
            )
            done = result.documents
    finally:
        bar.close()
    out.write(f"Indexed {done} documents into {index.path}\n")
    if args.new and args.linkrank:
        write_linkrank(engine, out)
    elif not args.new and result.linkrank is not None:
        print_linkrank(result.linkrank, out)
    vacuumed = vacuum_dead_rows(engine)  # PostgreSQL without autovacuum only
    if vacuumed:
        out.write(f"Vacuumed {', '.join(vacuumed)} (autovacuum is off)\n")
    return 0


def write_linkrank(engine: Any, out: TextIO) -> None:
    from search.linkrank import update_linkrank

    print_linkrank(update_linkrank(engine), out)


def print_linkrank(result: Any, out: TextIO) -> None:
    out.write(
        f"Linkrank of {result.documents} documents over {result.links} links, "
        f"{result.written} changed ({result.seconds:.1f} s)\n"
    )


def follow(args: argparse.Namespace, out: TextIO) -> int:
    """The indexer of a scaled-out setup: crawlers write only to the database, this one
    process (Whoosh has one writer) keeps the index in step with it.

    A commit's cost grows with the distinct words of what it adds, so documents are
    gathered as a crawl's own indexer gathers them: a round commits when ``--commit-docs``
    documents wait, when the database has gone quiet (nothing stored since the last
    round) or ``--max-delay`` seconds after the last commit.  The check of the whole index
    against the database (what left the searchable set is removed) reads every document
    of both, so it runs on the first round, on a quiet round after a commit, and at least
    every ``--max-delay`` seconds, not every round.

    It stops on Ctrl-C (SIGINT) and on SIGTERM (what a service manager sends, and what
    reaches it when it was started in the background, where SIGINT is ignored) alike."""
    if args.interval <= 0:
        raise CLIError("--interval must be greater than 0", 2)
    if args.commit_docs < 1:
        raise CLIError("--commit-docs must be at least 1", 2)
    if args.max_delay <= 0:
        raise CLIError("--max-delay must be greater than 0", 2)
    engine = open_engine(args, write=True)
    index = open_index(args)
    index.open(create=True)
    restore = _stop_on_sigterm()
    try:
        return _follow(args, out, engine, index)
    finally:
        restore()


def _stop_on_sigterm() -> Callable[[], None]:
    """SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does, until the
    returned function puts back what was there (nothing is changed off the main thread:
    only it may set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)

    def restore() -> None:
        if previous is not None:  # None: a handler not set from Python, left as it is
            signal.signal(signal.SIGTERM, previous)

    return restore


def _follow(args: argparse.Namespace, out: TextIO, engine: Any, index: Any) -> int:
    """:func:`follow`'s rounds, until Ctrl-C or SIGTERM (or ``--rounds``)."""
    import time

    from search.crawldb import CrawlDB
    from search.indexer import LOCK_WAIT
    from search.reindex import Stems, check, count_indexable, reindex

    rounds = 0
    stems = Stems(CrawlDB(engine))  # read once, then only the words stored since
    # The linkranks are recomputed once the database is quiet: after a round that changed
    # nothing, when an earlier one (or the start) did.
    stale = args.linkrank
    waited = -1  # documents waiting at the end of the last round
    committed = checked = time.monotonic()
    unchecked = True  # a commit since the last check
    try:
        while True:
            waiting = count_indexable(engine, only_unindexed=True)
            quiet = waiting == waited
            now = time.monotonic()
            added = removed = again = 0
            if waiting and (
                rounds == 0
                or quiet
                or waiting >= args.commit_docs
                or now - committed >= args.max_delay
            ):
                added = reindex(engine, index, full=False, wait=LOCK_WAIT, stems=stems)
                committed, unchecked = time.monotonic(), True
                waiting = count_indexable(engine, only_unindexed=True)
            waited = waiting
            searchable = None
            if rounds == 0 or (quiet and unchecked) or now - checked >= args.max_delay:
                result = check(engine, index, repair=True, stems=stems)
                checked, unchecked = time.monotonic(), False
                removed = len(result.extra)
                again = len(result.missing) + len(result.unmarked)
                searchable = result.in_database
            changed = bool(added or removed or again)
            if changed:
                stale = args.linkrank
            elif stale and quiet and not unchecked:
                write_linkrank(engine, out)
                out.flush()
                stale = False
            if changed or rounds == 0:
                if searchable is None:
                    searchable = count_indexable(engine) - waiting
                out.write(
                    f"{time.strftime('%H:%M:%S')} indexed {added + again}, "
                    f"removed {removed}; {searchable} searchable\n"
                )
                out.flush()
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        out.write("stopped\n")
        return 0
