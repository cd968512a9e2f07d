"""``python -m search eval``: search quality against judged queries (MAP, nDCG@10, P@10).

    python -m search eval --queries queries.tsv --qrels qrels.txt [--per-query]
                          [--save-run run.txt] [-k 1000]
    python -m search eval --qrels qrels.txt --run run.txt       # score an existing run
    python -m search eval --queries q.tsv --qrels qrels.txt --sweep k1=0.6:2.0:0.2,b=0.3:0.9:0.1
    python -m search eval --queries q.tsv --qrels qrels.txt --sweep k1=0.9/1.2 --folds 2

Every query (``qid<TAB>text``) that has judgments is ranked against the index, top *k*
(1000); documents are named by their URL path (``/doc/12.html``), as in the qrels.  The
files and the measures are :mod:`search.evaluation`'s.

``--sweep`` ranks the queries once per combination of a grid of ranking parameters
(:class:`search.ranking.Params`) and prints each combination's figures; ``--folds N`` then
cross-validates: the queries are dealt into N folds, and each fold is scored with the
combination of best MAP on the other folds (fitted), so that the held-out figure is one
no query chose its own parameters for.  One deal's figure depends on which queries fell
together; ``--repeats R`` cross-validates again over R random deals of the queries
(seeded: the same figures every time; from the figures already ranked) and prints the
held-out figures' mean and 5th–95th percentiles.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from search.commands._common import EXIT_USAGE, CLIError, open_engine, open_index
from search.commands.query import add_ranking_options, ranking_params
from search.evaluation import (
    MEASURE_NAMES,
    Evaluation,
    FormatError,
    Run,
    cross_validate,
    doc_name,
    evaluate,
    qid_key,
    read_qrels,
    read_queries,
    read_run,
    repeat_cross_validation,
    write_run,
)

NAME = "eval"
#: The most random deals ``--repeats`` makes (each is a cross-validation of figures already
#: ranked: 10,000 take seconds).
MAX_REPEATS = 10_000


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
        "--query-syntax",
        action="store_true",
        help='read each query with the search syntax ("a phrase" every hit must hold, '
        "-excluded, site:host), as query does; by default a judged query is its words",
    )
    p.add_argument(
        "-k", type=int, default=1000, metavar="K", help="documents ranked per query (default 1000)"
    )
    p.add_argument(
        "--sweep",
        metavar="SPEC",
        help="rank once per combination of parameter values and print the grid: "
        "name=start:stop:step or name=v1/v2/..., comma-separated "
        "(names: k1, b, bm25f, model, fuse, lgd_c, b_body, b_title, b_url, b_desc, b_keywords, "
        "b_boilerplate, w_body, w_title, w_url, w_desc, w_keywords, w_boilerplate, decay, "
        "decay_words, fb_docs, fb_terms, fb_weight, fb_min_words, fb_min_docs, "
        "fb_skip_held, expansion, linkrank, proximity, proximity_depth, proximity_window)",
    )
    p.add_argument(
        "--folds",
        type=int,
        default=0,
        metavar="N",
        help="with --sweep: cross-validate over N folds of the queries (choose on N-1, "
        "report on the one left out) and print fitted against held-out figures",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=0,
        metavar="R",
        help="with --folds: cross-validate again over R random deals of the queries into "
        "the folds and print the held-out figures' mean and 5th-95th percentiles "
        "(default: 0, the one deal in query order only)",
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    add_ranking_options(p)
    common(p)


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
            raise CLIError(
                f"--sweep: expected name=start:stop:step or name=v1/v2, not {item!r}", EXIT_USAGE
            )
        if any(name == n for n, _ in axes):
            raise CLIError(f"--sweep: {name} is given twice", EXIT_USAGE)
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
        raise CLIError(f"--sweep: {item!r}: expected start:stop:step numbers", EXIT_USAGE) from None
    if step <= 0 or stop < start:
        raise CLIError(f"--sweep: {item!r}: the step must be positive, stop >= start", EXIT_USAGE)
    count = math.floor((stop - start) / step + 1e-9) + 1
    if count > 1000:
        raise CLIError(f"--sweep: {item!r}: {count} values (at most 1000)", EXIT_USAGE)
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
            parsed[qid] = parse_query(text, language=args.language, syntax=args.query_syntax)
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


def _changed(params: Any, names: Iterable[str]) -> str:
    return " ".join(f"{n}={getattr(params, n)}" for n in names)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.k < 1:
        raise CLIError("-k must be at least 1", EXIT_USAGE)
    if not args.run and not args.queries:
        raise CLIError("give --queries FILE (to search) or --run FILE (to score)", EXIT_USAGE)
    if args.folds and not args.sweep:
        raise CLIError("--folds needs --sweep (the parameters to choose from)", EXIT_USAGE)
    if args.repeats and not args.folds:
        raise CLIError("--repeats needs --folds (the cross-validation to repeat)", EXIT_USAGE)
    if not 0 <= args.repeats <= MAX_REPEATS:
        raise CLIError(f"--repeats must be between 0 and {MAX_REPEATS}", EXIT_USAGE)
    if args.sweep and (args.run or args.save_run):
        raise CLIError("--sweep ranks the queries itself: no --run or --save-run", EXIT_USAGE)
    params = ranking_params(args)
    names: list[str] = []
    grid = [params]
    if args.sweep:
        names, grid = parse_sweep(args.sweep, params)
    try:
        qrels = read_qrels(args.qrels)
        run_read = read_run(args.run) if args.run else None
        queries = {} if args.run else read_queries(args.queries)
    except FormatError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    skipped: list[str] = []
    if run_read is not None:
        runs = [run_read]
    else:
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
        for qid in sorted(result.per_query, key=qid_key):
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
    repeated = (
        repeat_cross_validation(grid, evaluations, args.folds, args.repeats)
        if args.repeats
        else None
    )
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
        if repeated is not None:
            data["repeated"] = {
                "repeats": repeated.repeats,
                "mean": repeated.mean,
                "p05": repeated.low,
                "p95": repeated.high,
            }
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
    if repeated is not None:
        out.write(
            f"held out over {repeated.repeats} random deals into {args.folds} folds, mean "
            "(5th-95th percentile): "
            + ", ".join(
                f"{m} {repeated.mean[m]:.4f} ({repeated.low[m]:.4f}-{repeated.high[m]:.4f})"
                for m in MEASURE_NAMES
            )
            + "\n"
        )
