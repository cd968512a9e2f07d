"""Query expansion over the array postings (pseudo-relevance feedback): the feedback
documents' postings read by document from the arrays' forward index, and the stems added to
the query, vectorised.  The formulas are :mod:`search.ranking`'s (:func:`search.ranking.rm3_terms`,
:func:`search.ranking.bo1_terms`, :func:`search.ranking.feedback_terms`), which the tests
hold these against.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from search import ranking
from search.arrays import ArrayIndex, unique_inverse
from search.dfr import collection_freq


def _feedback_vectors(
    arrays: ArrayIndex, docnums: list[int], query: dict[str, float], frequent: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The feedback documents' postings, their stems found in more than *frequent*
    documents left out (but for the query's own): term ids, weighted tf and the length of
    their document."""
    parts = [arrays.vector(d) for d in docnums]
    gids = np.concatenate([p[0] for p in parts])
    tf = np.concatenate([p[1] for p in parts])
    length = np.repeat([p[2] for p in parts], [len(p[0]) for p in parts])
    keep = _not_frequent(arrays, _asked(arrays, query), frequent)(gids)
    return gids[keep], tf[keep], length[keep]


def _asked(arrays: ArrayIndex, query: dict[str, float]) -> np.ndarray:
    """The ids of the query's stems found in the index."""
    gids = (arrays.ids.get(s) for s in query)
    return np.array([g for g in gids if g is not None], dtype=np.int64)


def _not_frequent(
    arrays: ArrayIndex, asked: np.ndarray, frequent: float
) -> Callable[[np.ndarray], np.ndarray]:
    """Which of term ids are kept as feedback terms: those in at most *frequent*
    documents, and the query's own (*asked*)."""
    own = asked.tolist()

    def keep(gids: np.ndarray) -> np.ndarray:
        kept = arrays.df[gids] <= frequent
        for gid in own:  # a few: faster than numpy's isin
            kept |= gids == gid
        return kept

    return keep


def _add_terms(
    arrays: ArrayIndex, query: dict[str, float], gids: np.ndarray, weights: np.ndarray, scale: float
) -> dict[str, float]:
    expanded = dict(query)
    for gid, w in zip(gids.tolist(), weights.tolist(), strict=True):
        stem = arrays.texts[gid]
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded


def _heaviest(arrays: ArrayIndex, gids: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Positions of the *n* heaviest of *weights*: weight descending, then stem
    ascending (:func:`search.ranking._heaviest`)."""
    return np.lexsort((arrays.text_rank(gids), -weights))[:n]


def rocchio(
    arrays: ArrayIndex, docnums: list[int], query: dict[str, float], frequent: float, terms: int
) -> dict[str, float]:
    """:func:`search.ranking.feedback_terms` over the feedback documents *docnums*,
    vectorised, their stems found in more than *frequent* documents left out (but for
    the query's own)."""
    if not docnums or not query:
        return dict(query)
    gids, tf, length = _feedback_vectors(arrays, docnums, query, frequent)
    if not len(gids):
        return dict(query)
    weights = arrays.bm25(gids, tf, length) / len(docnums)
    unique, inverse = unique_inverse(gids)
    mean = np.bincount(inverse, weights=weights)
    seen = np.bincount(inverse)
    chosen = np.flatnonzero(seen >= min(ranking.FEEDBACK_MIN_SHARED, len(docnums)))
    if not len(chosen):
        return dict(query)
    best = chosen[_heaviest(arrays, unique[chosen], mean[chosen], terms)]
    heaviest = float(mean[best[0]])
    if heaviest <= 0:
        return dict(query)
    scale = ranking.FEEDBACK_BETA * max(query.values()) / heaviest
    return _add_terms(arrays, query, unique[best], mean[best], scale)


def rm3(
    arrays: ArrayIndex,
    docnums: list[int],
    scores: list[float],
    query: dict[str, float],
    frequent: float,
    terms: int,
    weight: float,
) -> dict[str, float]:
    """:func:`search.ranking.rm3_terms` over the feedback documents *docnums* (first
    scores *scores*), vectorised, their stems found in more than *frequent* documents
    left out (but for the query's own)."""
    if not docnums or not query or weight >= 1:
        return dict(query)
    asked = _asked(arrays, query)
    model = arrays.feedback_model(docnums, scores, frequent, asked)
    gids, p = arrays.heaviest(model, terms, _not_frequent(arrays, asked, frequent))
    total = float(p.sum())
    if total <= 0:
        return dict(query)
    scale = (1 - weight) / weight * sum(query.values()) / total
    return _add_terms(arrays, query, gids, p, scale)


def bo1(
    arrays: ArrayIndex, docnums: list[int], query: dict[str, float], frequent: float, terms: int
) -> dict[str, float]:
    """:func:`search.ranking.bo1_terms` over the feedback documents *docnums*,
    vectorised, their stems found in more than *frequent* documents left out (but for the
    query's own)."""
    if not docnums or not query:
        return dict(query)
    gids, tf, _ = _feedback_vectors(arrays, docnums, query, frequent)
    if not len(gids):
        return dict(query)
    unique, inverse = unique_inverse(gids)
    tfx = np.bincount(inverse, weights=tf)
    seen = np.bincount(inverse)
    chosen = np.flatnonzero((seen >= min(ranking.FEEDBACK_MIN_SHARED, len(docnums))) & (tfx > 0))
    if not len(chosen):
        return dict(query)
    cf = collection_freq(arrays, unique[chosen])
    chosen, cf = chosen[cf > 0], cf[cf > 0]
    if not len(chosen):
        return dict(query)
    weights = ranking.bo1_weight(tfx[chosen], cf, arrays.n)
    best = _heaviest(arrays, unique[chosen], weights, terms)
    heaviest = float(weights[best[0]])
    if heaviest <= 0:
        return dict(query)
    scale = max(query.values()) / heaviest
    return _add_terms(arrays, query, unique[chosen][best], weights[best], scale)
