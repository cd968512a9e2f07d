"""Scoring, as pure functions, and the parameters of the ranking (:class:`Params`).

A page is six sections of stems (title, URL, description, keywords, body, boilerplate),
each weighed by the server's weight for that section (title 4, URL 2, description 2,
keywords 2, body 1, boilerplate 0.2 by default).  The ranking is BM25F in Robertson &
Zaragoza's per-field form ("The Probabilistic Relevance Framework: BM25 and Beyond", 2009):
each section's weighted count is length-normalised by that section's length against its
average, the sections are summed, and the sum saturates once (``bm25f="per-field"``):

    score(d, q)  = Σ_t  qw(t) · idf(t) · (k1 + 1) · tf~(t, d) / (k1 + tf~(t, d))
    tf~(t, d)    = Σ_f  w_f · count_f(t, d) / (1 − b_f + b_f · len_f(d) / avglen_f)
    len_f(d)     = w_f · (words of section f of d)       avglen_f: its mean over the pages
    idf(t)       = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))
    qw(t)        = qtf(t) · pw(i_t)
    pw(i)        = 1 / (1 + decay · min(i, POSITION_CAP))

``bm25f="merged"`` is Robertson, Zaragoza & Taylor's earlier form ("Simple BM25 extension
to multiple weighted fields", 2004), one length normalisation for the whole page:
``tf'(t, d) = tf(t, d) / (1 − b + b · len(d) / avglen)`` in place of ``tf~``, with
``tf = Σ_f w_f · count_f`` and ``len(d) = Σ_f len_f(d)``.  Either way a word in the title
and the body is not counted as two independent pieces of evidence.

``qtf`` is how many times the word occurs in the query (BM25's query-term frequency: a
word said twice matters more), ``i_t`` the 0-based position of its first occurrence: with
a *decay* above 0, earlier words weigh more ("earlier words weigh more", the design
documents' rule), from 1 down to ``1 / (1 + decay · POSITION_CAP)`` at the fifth word.

Query expansion (pseudo-relevance feedback) takes the ``fb_docs`` best documents of the
first ranking as relevant and adds ``fb_terms`` of their stems to the query:

- ``rm3`` (the default): RM3, Lavrenko & Croft's relevance model interpolated with the
  query, as Anserini computes it (:func:`rm3_terms`);
- ``bo1``: Amati's Bo1, the divergence-from-randomness (Bose-Einstein) weight of each stem
  of the feedback documents against its frequency in the collection (:func:`bo1_terms`);
- ``rocchio``: the mean BM25 weight of each stem over the feedback documents
  (:func:`feedback_terms`), the product's earlier method;
- ``none``: no expansion.

Only queries of :data:`FEEDBACK_MIN_WORDS` distinct words or more are expanded (keyword
queries mean exactly their words), on indexes of :data:`FEEDBACK_MIN_DOCS` or more.

The link-graph prior (``linkrank`` 0.5; 0 switches it off) adds to each hit's score a saturating
function of its PageRank *s* (:mod:`search.linkrank`, scaled to a mean of 1 over the
documents), Craswell, Robertson, Zaragoza & Taylor's "satu" ("Relevance weighting for
query independent evidence", SIGIR 2005):

    score'(d, q) = score(d, q) + linkrank · s(d) / (s(d) + LINKRANK_K)

bounded by ``linkrank``, so a page every page links to cannot outrank the words of the
query by more than that; a page without a linkrank gets nothing.

Term proximity (``proximity``, 0: off) re-ranks the ``proximity_depth`` best candidates of
a query of two distinct words or more by Büttcher, Clarke & Lushman's BM25TP bonus, read
from their stored text (:mod:`search.proximity`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

#: Position from which query words all weigh the same.
POSITION_CAP = 4

#: Expansion methods (:attr:`Params.expansion`).
EXPANSIONS = ("rm3", "bo1", "rocchio", "none")
#: BM25F forms (:attr:`Params.bm25f`): Robertson & Zaragoza's, with a length
#: normalisation per section, or the sections merged before it.
BM25F_FORMS = ("per-field", "merged")
#: The sections of a page, in the order of the index's counts per section
#: (:data:`search.analysis.SECTIONS`), and the :class:`Params` field of each one's b.
SECTION_B = {
    "body": "b_body",
    "title": "b_title",
    "url": "b_url",
    "desc": "b_desc",
    "keywords": "b_keywords",
    "boilerplate": "b_boilerplate",
}

#: Rocchio: the added terms' weight (relative to the heaviest query word) ...
FEEDBACK_BETA = 0.5
#: ... and a Rocchio or Bo1 feedback term must occur in this many feedback documents
#: (Terrier's ``expansion.mindocuments``).
FEEDBACK_MIN_SHARED = 2
#: Stems found in more than this share of the documents are not feedback terms: RM3's and
#: Bo1's 10 % (Anserini's threshold, in place of a stop list), Rocchio's 5 % (long posting
#: lists, low idf).  A query's own words are always kept.
RM3_MAX_DF_SHARE = 0.10
ROCCHIO_MAX_DF_SHARE = 0.05
#: Expansion applies to queries of at least this many distinct words (descriptions,
#: questions: where the user's words alone miss the vocabulary of relevant pages) ...
FEEDBACK_MIN_WORDS = 4
#: ... on an index of at least this many documents (on a small one, the feedback documents
#: are not a sample of the relevant pages but most of the index).
FEEDBACK_MIN_DOCS = 1000
#: The linkrank at which the prior gives half its weight: the mean page's.
LINKRANK_K = 1.0
#: Most candidates the term-proximity bonus may re-rank (their texts are read at once).
MAX_PROXIMITY_DEPTH = 10_000


@dataclass(frozen=True, slots=True)
class Params:
    """The ranking's parameters (README "Ranking"; ``--k1``, ``--b`` … of ``query`` and
    ``eval``; ``eval --sweep`` varies them).

    The defaults are published ones, not fitted to a collection: BM25's k1 1.2 and b 0.75
    (Robertson's, and Whoosh's; b 0.75 for every section of per-field BM25F), RM3 as
    Anserini runs it (10 documents, 10 terms, original query weight 0.5).  k1 1.2 rather
    than Anserini's 0.9: a page's tf is weighted (a title word counts 4), so it saturates
    later than a plain count.  *decay* 0.25: on CISI's
    natural-language questions anything from 0 to 0.3 measures the same, above it costs
    (benchmarks/README.md); within that range the design documents' rule decides, and
    0.25 keeps it visible on short keyword queries (the first word typed is the topic).
    *linkrank* 0.5 is what cross-validation on the navigational queries of the PostgreSQL
    documentation chooses, confirmed on those of the Python documentation
    (benchmarks/README.md).
    """

    k1: float = 1.2
    b: float = 0.75
    #: How fast the weight of later query words decreases (0: every word weighs the same).
    decay: float = 0.25
    expansion: str = "rm3"
    fb_docs: int = 10
    fb_terms: int = 10
    #: RM3's weight of the query as typed against the relevance model (Anserini's
    #: originalQueryWeight).
    fb_weight: float = 0.5
    #: Weight of the link-graph prior (0: off), the most it adds to a score.
    linkrank: float = 0.5
    #: ``per-field``: each section's counts length-normalised by its own length and
    #: average before they are summed and saturated once; ``merged``: one length.
    bm25f: str = "per-field"
    #: Each section's b in the per-field form (below 0: *b*).
    b_body: float = -1.0
    b_title: float = -1.0
    b_url: float = -1.0
    b_desc: float = -1.0
    b_keywords: float = -1.0
    b_boilerplate: float = -1.0
    #: Weight of the term-proximity bonus (BM25TP, :mod:`search.proximity`; 0: off).
    proximity: float = 0.0
    #: Candidates the proximity bonus re-ranks: the best this many of the ranking.
    proximity_depth: int = 100
    #: Most words apart two query words may stand to count as a pair (0: any distance,
    #: Büttcher, Clarke & Lushman's rule; the 1 / distance² weight fades them anyway).
    proximity_window: int = 0

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ValueError("k1 must be >= 0")
        if not 0 <= self.b <= 1:
            raise ValueError("b must be between 0 and 1")
        if self.bm25f not in BM25F_FORMS:
            raise ValueError(f"bm25f must be one of {', '.join(BM25F_FORMS)}")
        for name in SECTION_B.values():
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be at most 1 (below 0: b)")
        if self.decay < 0:
            raise ValueError("decay must be >= 0")
        if self.expansion not in EXPANSIONS:
            raise ValueError(f"expansion must be one of {', '.join(EXPANSIONS)}")
        if self.fb_docs < 1 or self.fb_terms < 1:
            raise ValueError("fb_docs and fb_terms must be >= 1")
        if not 0 < self.fb_weight <= 1:
            raise ValueError("fb_weight must be above 0 and at most 1")
        if self.linkrank < 0:
            raise ValueError("linkrank must be >= 0")
        if self.proximity < 0:
            raise ValueError("proximity must be >= 0")
        if not 1 <= self.proximity_depth <= MAX_PROXIMITY_DEPTH:
            raise ValueError(f"proximity_depth must be between 1 and {MAX_PROXIMITY_DEPTH}")
        if self.proximity_window < 0:
            raise ValueError("proximity_window must be >= 0 (0: any distance)")

    def with_values(self, **values: Any) -> Params:
        """These parameters with some changed (names as the fields, values converted)."""
        kinds = {f.name: type(getattr(self, f.name)) for f in fields(self)}
        unknown = set(values) - set(kinds)
        if unknown:
            raise ValueError(
                f"unknown ranking parameter {', '.join(sorted(unknown))} "
                f"(known: {', '.join(kinds)})"
            )
        return replace(self, **{k: kinds[k](v) for k, v in values.items()})

    def section_b(self) -> tuple[float, ...] | None:
        """Each section's b in the per-field form (:data:`SECTION_B` order); None in the
        merged form."""
        if self.bm25f == "merged":
            return None
        return tuple(
            getattr(self, name) if getattr(self, name) >= 0 else self.b
            for name in SECTION_B.values()
        )

    def label(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


#: The product's ranking.
DEFAULT = Params()
#: Numeric parameters ``eval --sweep`` may vary.
NUMERIC = tuple(f.name for f in fields(Params) if f.name not in ("expansion", "bm25f"))
#: Kept for callers of the module constants (the defaults of :data:`DEFAULT`).
K1 = DEFAULT.k1
B = DEFAULT.b
POSITION_DECAY = DEFAULT.decay


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


def link_prior(linkrank: Any, weight: float, k: float = LINKRANK_K) -> Any:
    """The link-graph prior of pages of *linkrank* (a number or a numpy array; negative
    and NaN count as 0): ``weight · s / (s + k)``."""
    s = np.nan_to_num(np.asarray(linkrank, dtype=np.float64), nan=0.0).clip(min=0.0)
    return weight * s / (s + k)


def expands(words: int, doc_count: int) -> bool:
    """Whether a query of *words* distinct words is expanded on an index of *doc_count*
    documents (:data:`FEEDBACK_MIN_WORDS`, :data:`FEEDBACK_MIN_DOCS`)."""
    return words >= FEEDBACK_MIN_WORDS and doc_count >= FEEDBACK_MIN_DOCS


def query_weights(stems: Sequence[str], decay: float | None = None) -> dict[str, float]:
    """qw(t) = qtf · pw(position of the first occurrence), for the analyzed query words."""
    weights: dict[str, float] = {}
    positions: dict[str, int] = {}
    for stem in stems:
        if stem not in positions:
            positions[stem] = len(positions)
        weights[stem] = weights.get(stem, 0.0) + 1.0
    return {s: n * position_weight(positions[s], decay) for s, n in weights.items()}


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
) -> dict[str, float]:
    """RM3: *query* interpolated with the relevance model of the feedback documents.

    *doc_vectors* are the feedback documents' ``{stem: tf}``, *doc_scores* their scores in
    the first ranking.  As Anserini's RM3 computes it (Lavrenko & Croft's RM1, then
    interpolated — "RM3", Abdul-Jaleel et al., UMass at TREC 2004):

        P(t|d)  = tf(t, d) / Σ tf over d's *terms* heaviest stems (the others: 0)
        P(t|R)  ∝ Σ_d P(t|d) · score(d)          the *terms* heaviest, summing to 1
        q'(t)   = weight · qw(t) / Σ qw  +  (1 − weight) · P(t|R)

    A score is linear in the query weights, so ``q'`` is returned scaled by
    ``Σ qw / weight``: the query's own words keep their weights, ``qw(t) + (1 − weight) /
    weight · Σ qw · P(t|R)`` (the same ranking, and the first scores can be reused).
    """
    if not doc_vectors or not query or terms <= 0 or weight >= 1:
        return dict(query)
    model: dict[str, float] = {}
    for vector, score in zip(doc_vectors, doc_scores, strict=True):
        top = _heaviest(vector, terms)
        norm = sum(w for _, w in top)
        if norm <= 0:
            continue
        for stem, w in top:
            model[stem] = model.get(stem, 0.0) + w / norm * score
    best = _heaviest(model, terms)
    total = sum(w for _, w in best)
    if total <= 0:
        return dict(query)
    scale = (1 - weight) / weight * sum(query.values()) / total
    expanded = dict(query)
    for stem, w in best:
        expanded[stem] = expanded.get(stem, 0.0) + scale * w
    return expanded
