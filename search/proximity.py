"""Term proximity: the best candidates of a ranking re-ranked by how close together the
query's words stand in their stored text (BM25TP).

Büttcher, Clarke & Lushman ("Term proximity scoring for ad-hoc retrieval on very large
text collections", SIGIR 2006), after Rasolofo & Savoy ("Term proximity scoring for
keyword-based retrieval systems", ECIR 2003): the query words' occurrences in a document
are read in text order; each occurrence of a query word t_j whose preceding query-word
occurrence is of another word t_k, *d* words before it, adds to both words' accumulators

    acc(t_j) += w(t_k) / d²        acc(t_k) += w(t_j) / d²

and the document's score gets, for every query word,

    bonus(d) = Σ_t  min(1, w(t)) · acc(t) · (k1 + 1) / (acc(t) + K)
    K        = k1 · (1 − b + b · len(d) / avglen)

``w(t)`` is the word's idf (:func:`search.ranking.idf`), ``K`` BM25's length factor of the
document (the body's length and ``b`` in the per-field form: the stored text is the
page's main content, :meth:`search.arrays.ArrayIndex.length_factor`).  With a *window*
above 0, only pairs at most that many words apart count (Rasolofo & Savoy's limit); 0 is
Büttcher et al.'s rule, any distance.  Positions count every word of the text, stop words
included, as :class:`search.snippets.TextWords` reads them: "a of b" puts *a* and *b* 2
apart.

The index keeps no word positions, so the bonus is computed on the stored text of the
*depth* best candidates only, as Rasolofo & Savoy apply it: one database read for all of
them (the snippets' read, :meth:`search.crawldb.CrawlDB.documents`), each text's first
:data:`search.snippets.SCAN_LIMIT` characters tokenized and stemmed once by the index's
analyzer (:class:`search.snippets.TextWords`), the bonus
times the *proximity* weight added to each candidate's score, and the candidates sorted
again.  Only the query's own words count (not the words query expansion adds), and only
queries of two distinct words or more are re-ranked.  A candidate gains, so the re-ranked
ones stay above the rest of the ranking.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from search.results import Ranked
from search.snippets import TextWords


def accumulators(
    matches: Iterable[tuple[int, str]], weights: Mapping[str, float], window: int = 0
) -> dict[str, float]:
    """Each query word's ``acc(t)`` from *matches*, the ``(position, stem)`` of every
    occurrence of a query word in text order; *weights* are the words' ``w(t)``."""
    acc: dict[str, float] = {}
    previous: tuple[int, str] | None = None
    for position, stem in matches:
        if previous is not None and previous[1] != stem:
            distance = position - previous[0]
            if distance > 0 and (window <= 0 or distance <= window):
                near = 1.0 / (distance * distance)
                other = previous[1]
                acc[stem] = acc.get(stem, 0.0) + weights[other] * near
                acc[other] = acc.get(other, 0.0) + weights[stem] * near
        previous = (position, stem)
    return acc


def bonus(acc: Mapping[str, float], weights: Mapping[str, float], k: float, k1: float) -> float:
    """``Σ_t min(1, w(t)) · acc(t) · (k1 + 1) / (acc(t) + K)`` (*k* is ``K``)."""
    return sum(min(1.0, weights[stem]) * a * (k1 + 1) / (a + k) for stem, a in acc.items() if a > 0)


def document_bonus(
    text: str,
    language: str | None,
    weights: Mapping[str, float],
    k: float,
    k1: float,
    window: int = 0,
) -> float:
    """The bonus of a document of stored *text* (in *language*) for the query words of
    *weights* (stem: ``w(t)``), its length factor *k*."""
    matches = TextWords(text, set(weights), language).matches
    return bonus(accumulators(matches, weights, window), weights, k, k1)


def rerank(
    ranked: Sequence[Ranked],
    weights: Mapping[str, float],
    documents: Callable[[list[int]], Mapping[int, Any]],
    length_factor: Callable[[np.ndarray], np.ndarray],
    k1: float,
    weight: float,
    depth: int,
    window: int = 0,
) -> tuple[list[Ranked], dict[int, float]]:
    """*ranked* (best first) with its first *depth* documents' scores raised by *weight*
    times their bonus and sorted again (score descending, then document number); and
    each changed document number's addition.

    *weights* are the query's own words' ``w(t)``; *documents* reads the stored text and
    language of a list of document ids in one read (rows with ``text`` and
    ``language``); *length_factor* gives ``K`` of document numbers."""
    head = list(ranked[:depth])
    if weight <= 0 or len(weights) < 2 or not head:
        return list(ranked), {}
    rows = documents([r.docid for r in head])
    ks = length_factor(np.array([r.docnum for r in head], dtype=np.int64))
    added: dict[int, float] = {}
    for i, (r, k) in enumerate(zip(head, ks.tolist(), strict=True)):
        row = rows.get(r.docid)
        if row is None or not row.text:
            continue
        extra = weight * document_bonus(row.text, row.language, weights, k, k1, window)
        if extra > 0:
            head[i] = dataclasses.replace(r, score=r.score + extra)
            added[r.docnum] = extra
    head.sort(key=lambda r: (-r.score, r.docnum))
    return head + list(ranked[depth:]), added
