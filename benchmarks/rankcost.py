"""What a ranking method costs a query, side by side, on a crawl (its data folder).

    python benchmarks/rankcost.py --data-dir DATA QUERIES [--column 2] [--rounds 3]
                                  [--setting expansion=bo1 --setting model=dph,fuse=none …]

*QUERIES* is a file of tab-separated lines (``qid<TAB>text`` as CISI's queries:
``--column 2``).  Each query is ranked for its top 10
(:meth:`search.searchsession.SearchSession.rank`), once per setting (the product's defaults
changed by ``name=value,…``, :class:`search.ranking.Params`' names; the first setting is
the defaults), the settings taking turns query by query, *rounds* times.  Prints, per
setting, the mean, median and 95th percentile of a query and the mean over the queries of
four distinct words or more (``4+ words``: those the product expanded when only they were
expanded, before 2026-12-07).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search import ranking  # noqa: E402
from search.index import Index  # noqa: E402
from search.indexquery import open_searcher  # noqa: E402
from search.query import QueryError, parse_query  # noqa: E402
from search.searchsession import SearchSession  # noqa: E402

#: The distinct words of a query counted in the last column.
LONG_WORDS = 4


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("queries", type=Path)
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--column", type=int, default=2, help="the query's column, from 1")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE,…")
    args = p.parse_args()
    settings = {"defaults": ranking.DEFAULT}
    for spec in args.setting:
        values = dict(item.split("=", 1) for item in spec.split(","))
        settings[spec] = ranking.DEFAULT.with_values(**values)
    queries = []
    for line in args.queries.read_text(encoding="utf-8").splitlines():
        cells = line.split("\t")
        if len(cells) >= args.column and cells[args.column - 1].strip():
            try:
                queries.append(parse_query(cells[args.column - 1]))
            except QueryError:
                continue
    searcher = open_searcher(Index(args.data_dir / "index"))
    sessions = {name: SearchSession(searcher, params) for name, params in settings.items()}
    for session in sessions.values():  # warm: the arrays, the page lengths
        session.rank(queries[0], 10)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    long_queries: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(args.rounds):
        for q in queries:
            long = len(set(q.all_stems)) >= LONG_WORDS
            for name, session in sessions.items():
                started = time.perf_counter()
                session.rank(q, 10)
                ms = (time.perf_counter() - started) * 1000
                times[name].append(ms)
                if long:
                    long_queries[name].append(ms)
    print(f"{len(queries)} queries, {args.rounds} rounds; ms a query")
    print(f"{'setting':<40} {'mean':>7} {'median':>7} {'p95':>7} {'4+ words':>9}")
    for name, values in times.items():
        p95 = statistics.quantiles(values, n=20)[-1]
        long_mean = statistics.fmean(long_queries[name]) if long_queries[name] else 0.0
        print(
            f"{name:<40} {statistics.fmean(values):>7.2f} {statistics.median(values):>7.2f} "
            f"{p95:>7.2f} {long_mean:>9.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
