"""Scoring, as pure functions.

A page is one weighted bag of stems: each section's words count as many times as the
server's weight for that section (title 4, URL 2, description 2, keywords 2, body 1 by
default), and so does the page's length.  This is BM25F in its original form (Robertson,
Zaragoza & Taylor, "Simple BM25 extension to multiple weighted fields", 2004): the fields
are merged *before* the term-frequency saturation and the length normalisation, so that a
word in the title and the body is not counted as two independent pieces of evidence, and a
long title does not escape length normalisation.

    score(d, q)  = Σ_t  qw(t) · idf(t) · (k1 + 1) · tf'(t, d) / (k1 + tf'(t, d))
    tf'(t, d)    = tf(t, d) / (1 − b + b · len(d) / avglen)
    tf(t, d)     = Σ_f  w_f · count_f(t, d)            (section weights w_f)
    len(d)       = Σ_f  w_f · len_f(d)                 avglen: its mean over the index
    idf(t)       = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))
    qw(t)        = qtf(t) · pw(i_t)                    k1 = 2.0, b = 0.75
    pw(i)        = 1 / (1 + POSITION_DECAY · min(i, POSITION_CAP))

``qtf`` is how many times the word occurs in the query (BM25's query-term frequency: a
word said twice matters more), ``i_t`` the 0-based position of its first occurrence.  The
first word weighs 1, the second 0.8, the third 0.67, the fourth 0.57 and every later one
0.5: short queries are ordered by what the user typed first, and the tail of a long query
(a sentence or a paragraph) still counts.

Query expansion (pseudo-relevance feedback, Rocchio's method over BM25 weights): the
:data:`FEEDBACK_DOCS` best documents of the first ranking are taken as relevant; each of
their stems is weighed by its mean BM25 weight over them, and the :data:`FEEDBACK_TERMS`
heaviest are added to the query with query weight
``FEEDBACK_BETA · max qw · weight / heaviest weight`` (a term must occur in at least
:data:`FEEDBACK_MIN_SHARED` of those documents).  The query is then ranked again.
Only queries of :data:`FEEDBACK_MIN_WORDS` distinct words or more are expanded (keyword
queries mean exactly their words), on indexes of :data:`FEEDBACK_MIN_DOCS` or more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

#: How fast the weight of later query words decreases.
POSITION_DECAY = 0.25
#: Position from which query words all weigh the same (1 / (1 + 0.25 × 4) = 0.5).
POSITION_CAP = 4

#: BM25 parameters.  k1 is larger than the usual 1.2 because the weighted tf of merged
#: fields is larger than a plain count (a title word counts 4): saturation must come later
#: (Zaragoza et al., TREC 2004, tuned BM25F to k1 ≈ 1.7–2.0).
K1 = 2.0
B = 0.75

#: Pseudo-relevance feedback: documents taken as relevant, terms added, their weight.
FEEDBACK_DOCS = 10
FEEDBACK_TERMS = 20
FEEDBACK_BETA = 0.5
#: A feedback term must occur in this many feedback documents.
FEEDBACK_MIN_SHARED = 2
#: Expansion applies to queries of at least this many distinct words (descriptions,
#: questions: where the user's words alone miss the vocabulary of relevant pages) ...
FEEDBACK_MIN_WORDS = 4
#: ... on an index of at least this many documents (on a small one, the feedback documents
#: are not a sample of the relevant pages but most of the index).
FEEDBACK_MIN_DOCS = 1000


def position_weight(position: int, decay: float | None = None, cap: int | None = None) -> float:
    """Weight of the query word at 0-based *position*."""
    decay = POSITION_DECAY if decay is None else decay
    cap = POSITION_CAP if cap is None else cap
    if position < 0:
        raise ValueError("position must be >= 0")
    return 1.0 / (1.0 + decay * min(position, cap))


def idf(doc_count: int, doc_freq: int) -> float:
    """BM25's idf (Lucene's, always positive): log(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


def norm_tf(tf: float, length: float, avg_length: float, b: float | None = None) -> float:
    """tf' = tf / (1 − b + b · length / avglen) (an average length ≤ 0 counts as 1)."""
    b = B if b is None else b
    if avg_length <= 0:
        avg_length = 1.0
    return tf / ((1 - b) + b * length / avg_length)


def bm25(
    idf_value: float,
    tf: float,
    field_length: float,
    avg_length: float,
    b: float | None = None,
    k1: float | None = None,
) -> float:
    """One term's BM25 contribution (before its query weight)."""
    k1 = K1 if k1 is None else k1
    norm = norm_tf(tf, field_length, avg_length, b)
    return idf_value * ((k1 + 1) * norm) / (k1 + norm)


def expands(words: int, doc_count: int) -> bool:
    """Whether a query of *words* distinct words is expanded on an index of *doc_count*
    documents (:data:`FEEDBACK_MIN_WORDS`, :data:`FEEDBACK_MIN_DOCS`)."""
    return words >= FEEDBACK_MIN_WORDS and doc_count >= FEEDBACK_MIN_DOCS


def query_weights(stems: Sequence[str]) -> dict[str, float]:
    """qw(t) = qtf · pw(position of the first occurrence), for the analyzed query words."""
    weights: dict[str, float] = {}
    positions: dict[str, int] = {}
    for stem in stems:
        if stem not in positions:
            positions[stem] = len(positions)
        weights[stem] = weights.get(stem, 0.0) + 1.0
    return {s: n * position_weight(positions[s]) for s, n in weights.items()}


def feedback_terms(
    doc_vectors: Iterable[Mapping[str, float]],
    query: Mapping[str, float],
    terms: int | None = None,
    beta: float | None = None,
) -> dict[str, float]:
    """The expanded query: *query* plus the heaviest stems of the feedback documents.

    *doc_vectors* are the feedback documents' ``{stem: BM25 weight}`` (idf included).
    A stem already in the query gets the feedback weight added to its own.
    """
    terms = FEEDBACK_TERMS if terms is None else terms
    beta = FEEDBACK_BETA if beta is None else beta
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
    best = sorted(
        ((s, w) for s, w in mean.items() if seen[s] >= least), key=lambda kv: (-kv[1], kv[0])
    )[:terms]
    if not best or best[0][1] <= 0:
        return dict(query)
    scale = beta * max(query.values()) / best[0][1]
    expanded = dict(query)
    for stem, w in best:
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded
