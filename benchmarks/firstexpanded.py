"""A process's first expanded query: its cost in fresh processes, against the first query
not expanded and against expanded queries once warm.

    python benchmarks/firstexpanded.py --data-dir DATA QUERIES [--column 2] [--processes 6]
                                       [--warm 20] [--setting fb_min_words=1]

*QUERIES* is a file of tab-separated lines (``qid<TAB>text``; ``rankcost.py``'s).  Of its
queries of four distinct words or more (those the defaults expand), each fresh process
takes its own: it opens the index, ranks a one-word query for its top 10 (what opening
and warming a server does: the array postings read), then times one query expanded (the
process's first expanded query), in another process the same query not expanded, and
then, in the first, ``--warm`` other queries expanded.  Prints each first query and the
median and 95th percentile of the warm ones.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search import ranking  # noqa: E402
from search.index import Index  # noqa: E402
from search.indexquery import open_searcher  # noqa: E402
from search.query import ParsedQuery, QueryError, parse_query  # noqa: E402
from search.searchsession import SearchSession  # noqa: E402

LONG_WORDS = 4


def long_queries(path: Path, column: int) -> list[str]:
    """The texts of the queries of *path* of at least :data:`LONG_WORDS` distinct words."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = line.split("\t")
        if len(cells) < column or not cells[column - 1].strip():
            continue
        try:
            q = parse_query(cells[column - 1])
        except QueryError:
            continue
        if len(set(q.all_stems)) >= LONG_WORDS:
            out.append(cells[column - 1])
    return out


def child(data_dir: Path, texts: list[str], expand: bool, setting: str) -> dict[str, Any]:
    """In a fresh process: the first query of *texts* (expanded or not), then the others
    expanded."""
    params = ranking.DEFAULT
    if setting:
        params = params.with_values(**dict(item.split("=", 1) for item in setting.split(",")))
    started = time.perf_counter()
    session = SearchSession(open_searcher(Index(data_dir / "index")), params)
    first_word = parse_query(texts[0]).terms[0].surface
    session.rank(parse_query(first_word), 10)  # opening and warming, as a server does
    opened = time.perf_counter() - started
    queries: list[ParsedQuery] = [parse_query(t) for t in texts]
    started = time.perf_counter()
    session.rank(queries[0], 10, expand=expand)
    first = time.perf_counter() - started
    expanded = session.expanded_weights(queries[0]) != session.query(queries[0]).weights
    warm = []
    if expand:
        for q in queries[1:]:
            started = time.perf_counter()
            session.rank(q, 10)
            warm.append((time.perf_counter() - started) * 1000)
    return {
        "open_ms": opened * 1000,
        "first_ms": first * 1000,
        "warm_ms": warm,
        "expanded": expanded,
    }


def run(args: argparse.Namespace, texts: list[str], expand: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--data-dir", str(args.data_dir), "--child"]
    command += ["--expand"] if expand else []
    command += ["--setting", args.setting] if args.setting else []
    done = subprocess.run(
        [*command, str(args.queries)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("queries", type=Path)
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument("--column", type=int, default=2, help="the query's column, from 1")
    p.add_argument("--processes", type=int, default=6)
    p.add_argument("--warm", type=int, default=20, help="expanded queries timed once warm")
    p.add_argument("--setting", default="", metavar="NAME=VALUE,…")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--expand", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        texts = json.loads(sys.stdin.read())
        print(json.dumps(child(args.data_dir, texts, args.expand, args.setting)))
        return 0
    queries = long_queries(args.queries, args.column)
    step = args.warm + 1
    firsts, plains, warm = [], [], []
    print(f"{'query':<44} {'open ms':>8} {'first expanded':>15} {'not expanded':>13}")
    for i in range(args.processes):
        texts = queries[i * step : (i + 1) * step]
        if not texts:
            break
        expanded = run(args, texts, expand=True)
        plain = run(args, texts[:1], expand=False)
        firsts.append(expanded["first_ms"])
        plains.append(plain["first_ms"])
        warm += expanded["warm_ms"]
        mark = "" if expanded["expanded"] else " (not expanded: answered)"
        print(
            f"{texts[0][:44]:<44} {expanded['open_ms']:>8.0f} "
            f"{firsts[-1]:>15.1f} {plains[-1]:>13.1f}{mark}"
        )
    print(
        f"first expanded: median {statistics.median(firsts):.1f} ms, max {max(firsts):.1f}; "
        f"first not expanded: median {statistics.median(plains):.1f} ms"
    )
    if len(warm) > 1:
        p95 = statistics.quantiles(warm, n=20)[-1]
        print(
            f"warm expanded ({len(warm)}): median {statistics.median(warm):.2f} ms, p95 {p95:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
