"""Pseudo-relevance feedback, as pure functions over the feedback documents' term vectors:
RM3 (:func:`rm3_terms`), Bo1 (:func:`bo1_terms`) and Rocchio (:func:`feedback_terms`).

:mod:`search.expansion` computes the same on the array postings, vectorised; these are the
formulas, which the tests work out by hand and hold the vectorised ones against.  The
methods, and when a query is expanded, are described in :mod:`search.ranking`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Rocchio: the added terms' weight (relative to the heaviest query word) ...
FEEDBACK_BETA = 0.5
#: ... and a Rocchio or Bo1 feedback term must occur in this many feedback documents
#: (Terrier's ``expansion.mindocuments``).
FEEDBACK_MIN_SHARED = 2


def _heaviest(weights: Mapping[str, float], n: int) -> list[tuple[str, float]]:
    """The *n* heaviest items, weight descending, then stem ascending (deterministic)."""
    return sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def feedback_terms(
    doc_vectors: Iterable[Mapping[str, float]],
    query: Mapping[str, float],
    terms: int = 20,
    beta: float = FEEDBACK_BETA,
) -> dict[str, float]:
    """Rocchio's expansion: *query* plus the heaviest stems of the feedback documents.

    *doc_vectors* are the feedback documents' ``{stem: BM25 weight}`` (idf included).  Each
    stem is weighed by its mean over them (it must occur in :data:`FEEDBACK_MIN_SHARED` of
    them); the *terms* heaviest are added with weight ``beta · max qw · weight / heaviest
    weight``.  A stem already in the query gets the feedback weight added to its own.
    """
    vectors = list(doc_vectors)
    if not vectors or not query or terms <= 0 or beta <= 0:
        return dict(query)
    mean: dict[str, float] = {}
    seen: dict[str, int] = {}
    for vector in vectors:
        for stem, w in vector.items():
            mean[stem] = mean.get(stem, 0.0) + w / len(vectors)
            seen[stem] = seen.get(stem, 0) + 1
    # A word of one feedback document only (a name, a number) says nothing of the topic.
    least = min(FEEDBACK_MIN_SHARED, len(vectors))
    best = _heaviest({s: w for s, w in mean.items() if seen[s] >= least}, terms)
    if not best or best[0][1] <= 0:
        return dict(query)
    scale = beta * max(query.values()) / best[0][1]
    expanded = dict(query)
    for stem, w in best:
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded


def bo1_weight(tfx: Any, collection_freq: Any, doc_count: int) -> Any:
    """Amati's Bo1 weight of a stem found *tfx* times in the feedback documents and
    *collection_freq* times in the *doc_count* documents (numbers or numpy arrays):
    ``tfx · log2((1 + Pn) / Pn) + log2(1 + Pn)``, ``Pn = collection_freq / doc_count``."""
    pn = np.asarray(collection_freq, dtype=np.float64) / max(doc_count, 1)
    return tfx * np.log2((1 + pn) / pn) + np.log2(1 + pn)


def bo1_terms(
    doc_vectors: Sequence[Mapping[str, float]],
    collection_freq: Mapping[str, float],
    doc_count: int,
    query: Mapping[str, float],
    terms: int = 10,
) -> dict[str, float]:
    """Bo1: *query* plus the stems of the feedback documents most informative by Amati's
    Bose-Einstein model ("Probability models for information retrieval based on divergence
    from randomness", 2003; Terrier's default expansion).

    *doc_vectors* are the feedback documents' ``{stem: tf}``, *collection_freq* each
    stem's tf summed over the *doc_count* documents.  A stem found in
    :data:`FEEDBACK_MIN_SHARED` of them weighs :func:`bo1_weight` of its tf summed over
    them; the *terms* heaviest are added as Terrier adds them, the query's weights divided
    by their largest plus ``w / heaviest w``, here scaled by that largest (the same
    ranking): ``qw(t) + max qw · w(t) / max w``.
    """
    if not doc_vectors or not query or terms <= 0:
        return dict(query)
    tfx: dict[str, float] = {}
    seen: dict[str, int] = {}
    for vector in doc_vectors:
        for stem, tf in vector.items():
            tfx[stem] = tfx.get(stem, 0.0) + tf
            seen[stem] = seen.get(stem, 0) + 1
    least = min(FEEDBACK_MIN_SHARED, len(doc_vectors))
    weights = {
        s: float(bo1_weight(x, collection_freq[s], doc_count))
        for s, x in tfx.items()
        if seen[s] >= least and x > 0 and collection_freq.get(s, 0) > 0
    }
    best = _heaviest(weights, terms)
    if not best or best[0][1] <= 0:
        return dict(query)
    scale = max(query.values()) / best[0][1]
    expanded = dict(query)
    for stem, w in best:
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded


def rm3_terms(
    doc_vectors: Sequence[Mapping[str, float]],
    doc_scores: Sequence[float],
    query: Mapping[str, float],
    terms: int = 10,
    weight: float = 0.5,
    doc_lengths: Sequence[float] | None = None,
) -> dict[str, float]:
    """RM3: *query* interpolated with the relevance model of the feedback documents.

    *doc_vectors* are the feedback documents' ``{stem: tf}`` (the stems that may be
    feedback terms), *doc_scores* their scores in the first ranking, *doc_lengths* the sum
    of each one's tfs over all its stems (by default, over its vector's).  Lavrenko &
    Croft's relevance model (RM1, "Relevance-based language models", SIGIR 2001) over
    each document's whole model, interpolated with the query ("RM3", Abdul-Jaleel et al.,
    "UMass at TREC 2004"), as Anserini weighs the documents and interpolates:

        P(t|d)  = tf(t, d) / |d|
        P(t|R)  ∝ Σ_d P(t|d) · score(d)          the *terms* heaviest, summing to 1
        q'(t)   = weight · qw(t) / Σ qw  +  (1 − weight) · P(t|R)

    (Anserini first cuts each document to its *terms* heaviest stems, which on short
    documents, most of whose stems occur once, is a choice among ties by spelling.)
    A score is linear in the query weights, so ``q'`` is returned scaled by
    ``Σ qw / weight``: the query's own words keep their weights, ``qw(t) + (1 − weight) /
    weight · Σ qw · P(t|R)`` (the same ranking, and the first scores can be reused).
    """
    if not doc_vectors or not query or terms <= 0 or weight >= 1:
        return dict(query)
    if doc_lengths is None:
        doc_lengths = [sum(vector.values()) for vector in doc_vectors]
    model: dict[str, float] = {}
    for vector, score, length in zip(doc_vectors, doc_scores, doc_lengths, strict=True):
        if length <= 0:
            continue
        for stem, tf in vector.items():
            model[stem] = model.get(stem, 0.0) + tf * (score / length)
    best = _heaviest(model, terms)
    total = sum(w for _, w in best)
    if total <= 0:
        return dict(query)
    scale = (1 - weight) / weight * sum(query.values()) / total
    expanded = dict(query)
    for stem, w in best:
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded
