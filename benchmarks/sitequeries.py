"""A search's time on a crawled site, and where it goes: ranking, the hits' rows, snippets.

    python benchmarks/sitequeries.py --data-dir DATA QUERIES [QUERIES ...] [--rounds 3]
                                     [--profile] [--set NAME=VALUE ...]

*QUERIES* are files of one query a line (a tab and anything after it ignored: the
navigational sets' ``query<TAB>page``).  Each query is searched as ``python -m search``
searches it (:meth:`search.searcher.Searcher.search`: the ranking, the count, the spelling
check, the ten hits' rows and snippets), in this process, once to warm up and then
*rounds* times; the mean, median and 95th percentile of a search are printed, and the
share of that time spent making snippets (:func:`search.snippets.make_snippet`, timed
around each call).  ``--profile`` prints cProfile's heaviest functions of one more round.

What ``apisearch.py`` measures on synthetic pages of ~7,000 characters, measured here on
real ones (the corpus's documentation pages run to 40,000 characters and more, of which
a snippet reads the first :data:`search.snippets.SCAN_LIMIT`).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search import db, ranking, searcher  # noqa: E402
from search.index import Index  # noqa: E402
from search.query import QueryError, parse_query  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("queries", type=Path, nargs="+")
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="cProfile one more round")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = p.parse_args()
    params = ranking.DEFAULT.with_values(**dict(s.split("=", 1) for s in args.set))
    queries = []
    for path in args.queries:
        for line in path.read_text(encoding="utf-8").splitlines():
            text = line.split("\t", 1)[0].strip()
            if text and not text.startswith("#"):
                try:
                    queries.append(parse_query(text))
                except QueryError:
                    continue
    if not queries:
        raise SystemExit("no query in the files given")
    engine = db.create(f"sqlite:///{args.data_dir / 'spidersite.db'}")
    search = searcher.Searcher(engine, Index(args.data_dir / "index"), params)

    # The snippets' share: each call timed where the searcher makes it.
    snippet_seconds = [0.0]
    make_snippet = searcher.make_snippet

    def timed_snippet(*a: object, **k: object) -> object:
        started = time.perf_counter()
        try:
            return make_snippet(*a, **k)  # type: ignore[arg-type]
        finally:
            snippet_seconds[0] += time.perf_counter() - started

    searcher.make_snippet = timed_snippet  # type: ignore[assignment]
    for q in queries:  # warm: the arrays, the stems, the database's pages
        search.search(q)
    snippet_seconds[0] = 0.0
    times = []
    for _ in range(args.rounds):
        for q in queries:
            started = time.perf_counter()
            search.search(q)
            times.append((time.perf_counter() - started) * 1000)
    total = sum(times) / 1000
    p95 = statistics.quantiles(times, n=20)[-1]
    print(
        f"{len(queries)} queries, {args.rounds} rounds: a search mean "
        f"{statistics.fmean(times):.2f} ms, median {statistics.median(times):.2f}, p95 "
        f"{p95:.2f}; snippets {snippet_seconds[0] / total:.0%} of the time"
    )
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for q in queries:
            search.search(q)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    search.close()
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
