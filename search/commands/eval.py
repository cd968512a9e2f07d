"""``python -m search eval``: search quality against judged queries (MAP, nDCG@10, P@10).

    python -m search eval --queries queries.tsv --qrels qrels.txt [--per-query]
                          [--save-run run.txt] [-k 1000]
    python -m search eval --qrels qrels.txt --run run.txt       # score an existing run

Every query (``qid<TAB>text``) that has judgments is ranked against the index, top *k*
(1000); documents are named by their URL path (``/doc/12.html``), as in the qrels.  The
measures are computed by ir-measures (on pytrec_eval, i.e. trec_eval's own code), with
trec_eval's conventions: ties in score are broken by document name, descending; MAP is the
mean of AP over the top *k*; a judged query that retrieves nothing counts as 0 (trec_eval
``-c``).  Queries without judgments are not scored.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

from search.commands._common import EXIT_USAGE, CLIError, open_engine, open_index
from search.commands.query import add_ranking_options

NAME = "eval"

#: A run: query id -> document name -> score.
Run = dict[str, dict[str, float]]
#: Judgments: query id -> document name -> relevance grade.
Qrels = dict[str, dict[str, int]]

MEASURE_NAMES = ("MAP", "nDCG@10", "P@10")


def add_parser(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="measure search quality against judged queries",
        description="Rank judged queries against the index and print MAP (top k), nDCG@10 "
        "and P@10 as trec_eval computes them. Documents are named by their URL path.",
    )
    p.add_argument("--queries", metavar="FILE", help="queries, one a line: qid<TAB>text")
    p.add_argument(
        "--qrels", metavar="FILE", required=True, help="TREC judgments: qid 0 docname grade"
    )
    p.add_argument(
        "--run",
        metavar="FILE",
        help="score this TREC run file (qid Q0 docname rank score tag) instead of searching",
    )
    p.add_argument(
        "--save-run", metavar="FILE", help="write the ranking as a TREC run file (for trec_eval)"
    )
    p.add_argument("--per-query", action="store_true", help="also print each query's figures")
    p.add_argument(
        "-k", type=int, default=1000, metavar="K", help="documents ranked per query (default 1000)"
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    add_ranking_options(p)
    common(p)


# -- files ----------------------------------------------------------------------------


def _lines(path: str) -> Iterable[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip() and not line.startswith("#"):
                    yield number, line.rstrip("\n")
    except OSError as exc:
        raise CLIError(f"{path}: {exc.strerror or exc}", EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not a UTF-8 text file", EXIT_USAGE) from None


def read_queries(path: str) -> dict[str, str]:
    """``qid<TAB>text`` lines -> {qid: text}."""
    queries: dict[str, str] = {}
    for number, line in _lines(path):
        qid, sep, text = line.partition("\t")
        if not sep or not qid.strip():
            raise CLIError(f"{path}:{number}: expected qid<TAB>query text", EXIT_USAGE)
        queries[qid.strip()] = text.strip()
    return queries


def read_qrels(path: str) -> Qrels:
    """TREC qrels (``qid iter docname grade``) -> {qid: {docname: grade}}."""
    qrels: Qrels = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise CLIError(f"{path}:{number}: expected 'qid 0 docname grade'", EXIT_USAGE)
        try:
            grade = int(parts[3])
        except ValueError:
            raise CLIError(
                f"{path}:{number}: grade {parts[3]!r} is not an integer", EXIT_USAGE
            ) from None
        qrels.setdefault(parts[0], {})[parts[2]] = grade
    return qrels


def read_run(path: str) -> Run:
    """A TREC run file (``qid Q0 docname rank score tag``) -> {qid: {docname: score}}."""
    run: Run = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise CLIError(f"{path}:{number}: expected 'qid Q0 docname rank score tag'", EXIT_USAGE)
        try:
            score = float(parts[4])
        except ValueError:
            raise CLIError(
                f"{path}:{number}: score {parts[4]!r} is not a number", EXIT_USAGE
            ) from None
        run.setdefault(parts[0], {})[parts[2]] = score
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, then document name descending."""
    return sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def write_run(run: Run, out: TextIO, tag: str = "spidersite") -> None:
    for qid in sorted(run, key=_qid_key):
        for rank, (doc, score) in enumerate(ranked(run[qid]), 1):
            out.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")


def _qid_key(qid: str) -> tuple[int, str]:
    return (int(qid), "") if qid.isdigit() else (sys.maxsize, qid)


def doc_name(url: str) -> str:
    """A document's name in qrels: its URL path (with the query string, if any)."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


# -- measures -------------------------------------------------------------------------


@dataclass(slots=True)
class Evaluation:
    queries: int
    mean: dict[str, float]
    per_query: dict[str, dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, **self.mean, "per_query": self.per_query}


def evaluate(qrels: Qrels, run: Run, k: int = 1000) -> Evaluation:
    """MAP (AP over the top *k*), nDCG@10 and P@10 of *run*, on the judged queries."""
    import ir_measures
    from ir_measures import AP, P, nDCG

    measures = {"MAP": AP @ k, "nDCG@10": nDCG @ 10, "P@10": P @ 10}
    judged = {q: docs for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    # trec_eval reads at most k documents per query; keep its order when cutting.
    cut = {q: dict(ranked(run.get(q, {}))[:k]) for q in judged}
    per_query: dict[str, dict[str, float]] = {q: dict.fromkeys(measures, 0.0) for q in judged}
    by_measure = {m: name for name, m in measures.items()}
    nonempty = {q: docs for q, docs in cut.items() if docs}
    if nonempty:
        for metric in ir_measures.iter_calc(list(measures.values()), judged, nonempty):
            per_query[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    n = len(judged)
    mean = {name: (sum(v[name] for v in per_query.values()) / n if n else 0.0) for name in measures}
    return Evaluation(n, mean, per_query)


# -- ranking --------------------------------------------------------------------------


def search_run(
    args: argparse.Namespace, queries: Mapping[str, str], k: int
) -> tuple[Run, list[str]]:
    """Rank every query against the index; returns the run and the queries not searchable."""
    from search.query import QueryError, parse_query
    from search.searcher import Searcher

    index = open_index(args)
    if not index.exists():
        raise CLIError(
            f"no search index at {index.path} yet: crawl a site first "
            f"(scrapy crawl site -a seeds=URL) or rebuild it (python -m search reindex)"
        )
    engine = open_engine(args, upgrade=False)
    searcher = Searcher(engine, index)
    run: Run = {}
    skipped: list[str] = []
    with searcher.session() as session:
        for qid, text in queries.items():
            try:
                parsed = parse_query(text, language=args.language)
            except QueryError:
                skipped.append(qid)
                run[qid] = {}
                continue
            docs: dict[str, float] = {}
            for hit in session.rank(parsed, k, expand=getattr(args, "expand", True)):
                docs.setdefault(doc_name(hit.url), hit.score)
            run[qid] = docs
    return run, skipped


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.k < 1:
        raise CLIError("-k must be at least 1", EXIT_USAGE)
    if not args.run and not args.queries:
        raise CLIError("give --queries FILE (to search) or --run FILE (to score)", EXIT_USAGE)
    qrels = read_qrels(args.qrels)
    skipped: list[str] = []
    if args.run:
        the_run = read_run(args.run)
    else:
        queries = read_queries(args.queries)
        judged = {q: t for q, t in queries.items() if q in qrels}
        if not judged:
            raise CLIError(f"no query of {args.queries} has judgments in {args.qrels}", EXIT_USAGE)
        the_run, skipped = search_run(args, judged, args.k)
    if args.save_run:
        try:
            with open(args.save_run, "w", encoding="utf-8") as f:
                write_run(the_run, f)
        except OSError as exc:
            raise CLIError(f"{args.save_run}: {exc.strerror or exc}") from None
    result = evaluate(qrels, the_run, args.k)
    if args.json:
        data = result.as_dict()
        if not args.per_query:
            data.pop("per_query")
        json.dump(data, out, indent=2)
        out.write("\n")
        return 0
    if args.per_query:
        out.write(f"{'query':<10} " + " ".join(f"{m:>8}" for m in MEASURE_NAMES) + "\n")
        for qid in sorted(result.per_query, key=_qid_key):
            values = result.per_query[qid]
            out.write(f"{qid:<10} " + " ".join(f"{values[m]:>8.4f}" for m in MEASURE_NAMES) + "\n")
        out.write("\n")
    out.write(f"queries   {result.queries}\n")
    for name in MEASURE_NAMES:
        out.write(f"{name:<9} {result.mean[name]:.4f}\n")
    if skipped:
        out.write(f"({len(skipped)} queries had no searchable word: {', '.join(skipped)})\n")
    return 0
