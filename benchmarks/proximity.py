"""What the term-proximity re-ranking adds to a query's time, on a crawl (its data folder).

    python benchmarks/proximity.py --data-dir DATA QUERIES [--column 2] [--depth 100 …]
                                   [--rounds 3]

*QUERIES* is a file of tab-separated lines (``qid<TAB>text`` as CISI's queries:
``--column 2``; ``query<TAB>page`` as ``tests/navigational.tsv``: ``--column 1``).  Each
query is ranked for its top 10 (:meth:`search.searchsession.SearchSession.rank`, what a
result page asks before it reads titles and snippets), the product's defaults otherwise,
with proximity off and on (weight 1) at each depth, the settings taking turns query by
query, *rounds* times.  Prints, per setting, the median and 95th percentile of a query,
the mean over the queries of two words or more (the others are not re-ranked), and the
mean time of the one database read of the candidates' texts.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search import db, ranking  # noqa: E402
from search.index import Index  # noqa: E402
from search.query import QueryError, parse_query  # noqa: E402
from search.searcher import Searcher  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("queries", type=Path)
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--column", type=int, default=2, help="the query's column, from 1")
    p.add_argument("--depth", type=int, nargs="+", default=[20, 100])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    parsed = []
    for line in args.queries.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            with contextlib.suppress(QueryError):
                parsed.append(parse_query(line.split("\t")[args.column - 1]))
    engine = db.create(f"sqlite:///{args.data_dir / 'spidersite.db'}")
    searcher = Searcher(engine, Index(args.data_dir / "index"))
    settings = [("off", ranking.DEFAULT.with_values(proximity=0))]
    settings += [
        (f"on, depth {d}", ranking.DEFAULT.with_values(proximity=1, proximity_depth=d))
        for d in args.depth
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in settings}
    longer: dict[str, list[float]] = {name: [] for name, _ in settings}
    reads: dict[str, list[float]] = {name: [] for name, _ in settings}
    for _, params in settings:  # warm: arrays, linkranks, the database's statements
        with searcher.session(params) as session:
            session.rank(parsed[0], 10)
    for _ in range(args.rounds):
        for q in parsed:
            for name, params in settings:
                with searcher.session(params) as session:
                    _time_reads(session, reads[name])
                    started = time.perf_counter()
                    session.rank(q, 10)
                    elapsed = time.perf_counter() - started
                times[name].append(elapsed)
                if len(set(q.stems)) > 1:
                    longer[name].append(elapsed)
    words = statistics.mean(len(set(q.stems)) for q in parsed)
    print(f"{len(parsed)} queries ({words:.1f} distinct stems on average), {args.rounds} rounds")
    print(f"{'setting':<16} {'p50 ms':>8} {'p95 ms':>8} {'mean 2+ words':>14} {'read ms':>8}")
    for name, _ in settings:
        values = sorted(times[name])
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        mean_read = statistics.mean(reads[name]) * 1000 if reads[name] else 0.0
        print(
            f"{name:<16} {statistics.median(values) * 1000:>8.2f} {p95 * 1000:>8.2f} "
            f"{statistics.mean(longer[name] or [0.0]) * 1000:>14.2f} {mean_read:>8.2f}"
        )
    searcher.close()


def _time_reads(session: Any, into: list[float]) -> None:
    """Time the session's read of the candidates' texts, if it reads any."""
    read = session.documents
    if read is None:
        return

    def timed(ids: list[int]) -> Any:
        started = time.perf_counter()
        rows = read(ids)
        into.append(time.perf_counter() - started)
        return rows

    session.documents = timed


if __name__ == "__main__":
    main()
