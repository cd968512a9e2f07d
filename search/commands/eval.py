"""``python -m search eval``: search quality against judged queries (MAP, nDCG@10, P@10).

    python -m search eval --queries queries.tsv --qrels qrels.txt [--per-query]
                          [--save-run run.txt] [-k 1000]
    python -m search eval --qrels qrels.txt --run run.txt       # score an existing run
    python -m search eval --queries q.tsv --qrels qrels.txt --sweep k1=0.6:2.0:0.2,b=0.3:0.9:0.1
    python -m search eval --queries q.tsv --qrels qrels.txt --sweep k1=0.9/1.2 --folds 2

Every query (``qid<TAB>text``) that has judgments is ranked against the index, top *k*
(1000); documents are named by their URL path (``/doc/12.html``), as in the qrels.  The
measures are computed by ir-measures (on pytrec_eval, i.e. trec_eval's own code), with
trec_eval's conventions: ties in score are broken by document name, descending; MAP is the
mean of AP over the top *k*; a judged query that retrieves nothing counts as 0 (trec_eval
``-c``).  Queries without judgments are not scored.

``--sweep`` ranks the queries once per combination of a grid of ranking parameters
(:class:`search.ranking.Params`) and prints each combination's figures; ``--folds N`` then
cross-validates: the queries are dealt into N folds, and each fold is scored with the
combination of best MAP on the other folds (fitted), so that the held-out figure is one
no query chose its own parameters for.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

from search.commands._common import EXIT_USAGE, CLIError, open_engine, open_index
from search.commands.query import add_ranking_options, ranking_params

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
    p.add_argument(
        "--sweep",
        metavar="SPEC",
        help="rank once per combination of parameter values and print the grid: "
        "name=start:stop:step or name=v1/v2/..., comma-separated "
        "(names: k1, b, decay, fb_docs, fb_terms, fb_weight, expansion)",
    )
    p.add_argument(
        "--folds",
        type=int,
        default=0,
        metavar="N",
        help="with --sweep: cross-validate over N folds of the queries (choose on N-1, "
        "report on the one left out) and print fitted against held-out figures",
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


def parse_sweep(spec: str, base: Any) -> tuple[list[str], list[Any]]:
    """The names swept and the grid of :class:`search.ranking.Params` of a ``--sweep``
    *spec* around *base*: ``name=start:stop:step`` (stop included) or ``name=v1/v2/...``,
    comma-separated."""
    axes: list[tuple[str, list[str]]] = []
    for item in spec.split(","):
        name, sep, values = item.strip().partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name or not values.strip():
            raise CLIError(f"--sweep: expected name=start:stop:step or name=v1/v2, not {item!r}")
        if any(name == n for n, _ in axes):
            raise CLIError(f"--sweep: {name} is given twice")
        axes.append((name, _sweep_values(values.strip(), item)))
    grid: list[Any] = []
    swept = [n for n, _ in axes]
    for combination in itertools.product(*(values for _, values in axes)):
        try:
            grid.append(base.with_values(**dict(zip(swept, combination, strict=True))))
        except ValueError as exc:
            raise CLIError(f"--sweep: {exc}", EXIT_USAGE) from None
    return swept, grid


def _sweep_values(values: str, item: str) -> list[str]:
    if ":" not in values:
        return [v.strip() for v in values.split("/")]
    try:
        start, stop, step = (float(v) for v in values.split(":"))
    except ValueError:
        raise CLIError(f"--sweep: {item!r}: expected start:stop:step numbers") from None
    if step <= 0 or stop < start:
        raise CLIError(f"--sweep: {item!r}: the step must be positive, stop >= start")
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > 1000:
        raise CLIError(f"--sweep: {item!r}: {count} values (at most 1000)")
    return [f"{round(start + i * step, 10):g}" for i in range(count)]


def search_run(
    args: argparse.Namespace, queries: Mapping[str, str], k: int, grid: list[Any]
) -> tuple[list[Run], list[str]]:
    """Rank every query against the index once per parameters of *grid*; returns the
    runs (in the order of *grid*) and the queries not searchable."""
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
    parsed: dict[str, Any] = {}
    skipped: list[str] = []
    for qid, text in queries.items():
        try:
            parsed[qid] = parse_query(text, language=args.language)
        except QueryError:
            skipped.append(qid)
    runs: list[Run] = []
    for params in grid:
        the_run: Run = {qid: {} for qid in skipped}
        with searcher.session(params) as session:
            for qid, q in parsed.items():
                docs: dict[str, float] = {}
                for hit in session.rank(q, k):
                    docs.setdefault(doc_name(hit.url), hit.score)
                the_run[qid] = docs
        runs.append(the_run)
    searcher.close()
    return runs, skipped


@dataclass(slots=True)
class Fold:
    """One fold of a cross-validation: the parameters chosen on the other folds, their MAP
    there (fitted) and the figures of this fold's queries (held out)."""

    queries: list[str]
    params: Any
    fitted: float
    held_out: dict[str, float]


def _mean(per_query: Mapping[str, Mapping[str, float]], qids: Iterable[str]) -> dict[str, float]:
    qids = list(qids)
    return {
        m: sum(per_query[q][m] for q in qids) / len(qids) if qids else 0.0 for m in MEASURE_NAMES
    }


def cross_validate(
    grid: list[Any], evaluations: list[Evaluation], folds: int
) -> tuple[list[Fold], dict[str, float]]:
    """Deal the queries into *folds* (in query order, round robin), choose for each fold
    the parameters of best mean MAP on the others (the first of the grid among equals),
    and return the folds and the held-out figures over every query."""
    qids = sorted(evaluations[0].per_query, key=_qid_key)
    out: list[Fold] = []
    held: dict[str, dict[str, float]] = {}
    for f in range(folds):
        test = qids[f::folds]
        train = [q for q in qids if q not in set(test)]
        fitted = [_mean(e.per_query, train)["MAP"] for e in evaluations]
        best = max(range(len(grid)), key=lambda i: (fitted[i], -i))
        for q in test:
            held[q] = evaluations[best].per_query[q]
        out.append(Fold(test, grid[best], fitted[best], _mean(evaluations[best].per_query, test)))
    return out, _mean(held, qids)


def _changed(params: Any, names: Iterable[str]) -> str:
    return " ".join(f"{n}={getattr(params, n)}" for n in names)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.k < 1:
        raise CLIError("-k must be at least 1", EXIT_USAGE)
    if not args.run and not args.queries:
        raise CLIError("give --queries FILE (to search) or --run FILE (to score)", EXIT_USAGE)
    if args.folds and not args.sweep:
        raise CLIError("--folds needs --sweep (the parameters to choose from)", EXIT_USAGE)
    if args.sweep and (args.run or args.save_run):
        raise CLIError("--sweep ranks the queries itself: no --run or --save-run", EXIT_USAGE)
    params = ranking_params(args)
    names: list[str] = []
    grid = [params]
    if args.sweep:
        names, grid = parse_sweep(args.sweep, params)
    qrels = read_qrels(args.qrels)
    skipped: list[str] = []
    if args.run:
        runs = [read_run(args.run)]
    else:
        queries = read_queries(args.queries)
        judged = {q: t for q, t in queries.items() if q in qrels}
        if not judged:
            raise CLIError(f"no query of {args.queries} has judgments in {args.qrels}", EXIT_USAGE)
        if args.folds and not 2 <= args.folds <= len(judged):
            raise CLIError(
                f"--folds must be between 2 and the {len(judged)} judged queries", EXIT_USAGE
            )
        runs, skipped = search_run(args, judged, args.k, grid)
    if args.save_run:
        try:
            with open(args.save_run, "w", encoding="utf-8") as f:
                write_run(runs[0], f)
        except OSError as exc:
            raise CLIError(f"{args.save_run}: {exc.strerror or exc}") from None
    evaluations = [evaluate(qrels, r, args.k) for r in runs]
    if args.sweep:
        _print_sweep(args, out, names, grid, evaluations)
    else:
        _print_evaluation(args, out, evaluations[0])
    if skipped and not args.json:
        out.write(f"({len(skipped)} queries had no searchable word: {', '.join(skipped)})\n")
    return 0


def _print_evaluation(args: argparse.Namespace, out: TextIO, result: Evaluation) -> None:
    if args.json:
        data = result.as_dict()
        if not args.per_query:
            data.pop("per_query")
        json.dump(data, out, indent=2)
        out.write("\n")
        return
    if args.per_query:
        out.write(f"{'query':<10} " + " ".join(f"{m:>8}" for m in MEASURE_NAMES) + "\n")
        for qid in sorted(result.per_query, key=_qid_key):
            values = result.per_query[qid]
            out.write(f"{qid:<10} " + " ".join(f"{values[m]:>8.4f}" for m in MEASURE_NAMES) + "\n")
        out.write("\n")
    out.write(f"queries   {result.queries}\n")
    for name in MEASURE_NAMES:
        out.write(f"{name:<9} {result.mean[name]:.4f}\n")


def _print_sweep(
    args: argparse.Namespace,
    out: TextIO,
    names: list[str],
    grid: list[Any],
    evaluations: list[Evaluation],
) -> None:
    best = max(range(len(grid)), key=lambda i: (evaluations[i].mean["MAP"], -i))
    folds, held_out = cross_validate(grid, evaluations, args.folds) if args.folds else ([], {})
    if args.json:
        data: dict[str, Any] = {
            "queries": evaluations[0].queries,
            "grid": [
                {"params": {n: getattr(p, n) for n in names}, **e.mean}
                for p, e in zip(grid, evaluations, strict=True)
            ],
            "best": {"params": {n: getattr(grid[best], n) for n in names}},
        }
        data["best"].update(evaluations[best].mean)
        if args.folds:
            data["folds"] = [
                {
                    "queries": len(f.queries),
                    "params": {n: getattr(f.params, n) for n in names},
                    "fitted_MAP": f.fitted,
                    "held_out": f.held_out,
                }
                for f in folds
            ]
            data["held_out"] = held_out
        json.dump(data, out, indent=2)
        out.write("\n")
        return
    width = [max(len(n), 6) for n in names]
    header = "  ".join(f"{n:<{w}}" for n, w in zip(names, width, strict=True))
    out.write(f"{header}  " + " ".join(f"{m:>8}" for m in MEASURE_NAMES) + "\n")
    for i, (p, e) in enumerate(zip(grid, evaluations, strict=True)):
        row = "  ".join(f"{getattr(p, n)!s:<{w}}" for n, w in zip(names, width, strict=True))
        figures = " ".join(f"{e.mean[m]:>8.4f}" for m in MEASURE_NAMES)
        out.write(f"{row}  {figures}{'  *' if i == best else ''}\n")
    out.write(
        f"\nbest MAP on all {evaluations[0].queries} queries (fitted): "
        f"{_changed(grid[best], names)}: "
        + ", ".join(f"{m} {evaluations[best].mean[m]:.4f}" for m in MEASURE_NAMES)
        + "\n"
    )
    if not folds:
        return
    out.write(
        f"\ncross-validation, {len(folds)} folds (parameters of best MAP on the other folds):\n"
    )
    out.write(
        f"{'fold':<5} {'queries':>7}  {'fitted MAP':>10}  held-out: "
        + " ".join(f"{m:>8}" for m in MEASURE_NAMES)
        + "  chosen\n"
    )
    for number, f in enumerate(folds, 1):
        out.write(
            f"{number:<5} {len(f.queries):>7}  {f.fitted:>10.4f}            "
            + " ".join(f"{f.held_out[m]:>8.4f}" for m in MEASURE_NAMES)
            + f"  {_changed(f.params, names)}\n"
        )
    out.write(
        f"held out, all {evaluations[0].queries} queries: "
        + ", ".join(f"{m} {held_out[m]:.4f}" for m in MEASURE_NAMES)
        + "\n"
    )
