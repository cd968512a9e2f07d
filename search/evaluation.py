"""Search quality against judged queries: TREC run and qrels files, and the measures
(MAP, nDCG@10, P@10) with trec_eval's conventions, and cross-validation of ranking
parameters.  ``python -m search eval`` (:mod:`search.commands.eval`) is its command line.

The measures are computed by ir-measures (on pytrec_eval, i.e. trec_eval's own code):
ties in score are broken by document name, descending; MAP is the mean of AP over the top
*k*; a judged query that retrieves nothing counts as 0 (trec_eval ``-c``); queries without
judgments are not scored.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

#: A run: query id -> document name -> score.
Run = dict[str, dict[str, float]]
#: Judgments: query id -> document name -> relevance grade.
Qrels = dict[str, dict[str, int]]

MEASURE_NAMES = ("MAP", "nDCG@10", "P@10")


class FormatError(ValueError):
    """A queries, qrels or run file that cannot be read; the message names the file and
    the line."""


# -- files ----------------------------------------------------------------------------


def _lines(path: str) -> Iterable[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip() and not line.startswith("#"):
                    yield number, line.rstrip("\n")
    except OSError as exc:
        raise FormatError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a UTF-8 text file") from None


def read_queries(path: str) -> dict[str, str]:
    """``qid<TAB>text`` lines -> {qid: text}."""
    queries: dict[str, str] = {}
    for number, line in _lines(path):
        qid, sep, text = line.partition("\t")
        if not sep or not qid.strip():
            raise FormatError(f"{path}:{number}: expected qid<TAB>query text")
        queries[qid.strip()] = text.strip()
    return queries


def read_qrels(path: str) -> Qrels:
    """TREC qrels (``qid iter docname grade``) -> {qid: {docname: grade}}."""
    qrels: Qrels = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise FormatError(f"{path}:{number}: expected 'qid 0 docname grade'")
        try:
            grade = int(parts[3])
        except ValueError:
            raise FormatError(f"{path}:{number}: grade {parts[3]!r} is not an integer") from None
        qrels.setdefault(parts[0], {})[parts[2]] = grade
    return qrels


def read_run(path: str) -> Run:
    """A TREC run file (``qid Q0 docname rank score tag``) -> {qid: {docname: score}}."""
    run: Run = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise FormatError(f"{path}:{number}: expected 'qid Q0 docname rank score tag'")
        try:
            score = float(parts[4])
        except ValueError:
            raise FormatError(f"{path}:{number}: score {parts[4]!r} is not a number") from None
        run.setdefault(parts[0], {})[parts[2]] = score
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, then document name descending."""
    return sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def write_run(run: Run, out: TextIO, tag: str = "spidersite") -> None:
    for qid in sorted(run, key=qid_key):
        for rank, (doc, score) in enumerate(ranked(run[qid]), 1):
            out.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")


def qid_key(qid: str) -> tuple[int, str]:
    """Numeric query ids in numeric order, then the others."""
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
    grid: list[Any],
    evaluations: list[Evaluation],
    folds: int,
    order: Sequence[str] | None = None,
) -> tuple[list[Fold], dict[str, float]]:
    """Deal the queries into *folds* (in query order, round robin; or in *order*, a
    permutation of their ids), choose for each fold the parameters of best mean MAP on the
    others (the first of the grid among equals), and return the folds and the held-out
    figures over every query."""
    qids = list(order) if order is not None else sorted(evaluations[0].per_query, key=qid_key)
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


@dataclass(slots=True)
class Repeated:
    """Repeated cross-validation (:func:`repeat_cross_validation`): the held-out figures
    of each random deal of the queries, and their mean and 5th and 95th percentiles."""

    repeats: int
    held_out: list[dict[str, float]]
    mean: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]


def repeat_cross_validation(
    grid: list[Any], evaluations: list[Evaluation], folds: int, repeats: int, seed: int = 1
) -> Repeated:
    """:func:`cross_validate` over *repeats* deals of the queries in a random order (of a
    random generator seeded with *seed*: the same figures each time): one deal's held-out
    figure depends on which queries fell together (CISI's 76 queries in two folds: 0.007 to
    0.026 MAP between the 5th and 95th percentiles of the deals, as grids go), their mean
    much less.  From the figures already ranked: no query is ranked again."""
    qids = sorted(evaluations[0].per_query, key=qid_key)
    rng = random.Random(seed)
    held: list[dict[str, float]] = []
    for _ in range(repeats):
        order = qids[:]
        rng.shuffle(order)
        held.append(cross_validate(grid, evaluations, folds, order)[1])

    def percentile(measure: str, share: float) -> float:
        values = sorted(h[measure] for h in held)
        return values[min(len(values) - 1, round(share * (len(values) - 1)))]

    return Repeated(
        repeats,
        held,
        {m: sum(h[m] for h in held) / len(held) for m in MEASURE_NAMES},
        {m: percentile(m, 0.05) for m in MEASURE_NAMES},
        {m: percentile(m, 0.95) for m in MEASURE_NAMES},
    )
