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

In the per-field form each ``w_f`` may be scaled at query time (``w_title``, ``w_body``
… of :class:`Params`, 1 by default), so that other section weights are measured without a
rebuild; the length ratio ``len_f(d) / avglen_f`` does not change with ``w_f``.

``bm25f="merged"`` is Robertson, Zaragoza & Taylor's earlier form ("Simple BM25 extension
to multiple weighted fields", 2004), one length normalisation for the whole page:
``tf'(t, d) = tf(t, d) / (1 − b + b · len(d) / avglen)`` in place of ``tf~``, with
``tf = Σ_f w_f · count_f`` and ``len(d) = Σ_f len_f(d)``.  Either way a word in the title
and the body is not counted as two independent pieces of evidence.

``qtf`` is how many times the word occurs in the query (BM25's query-term frequency: a
word said twice matters more), ``i_t`` the 0-based position of its first occurrence: with
a *decay* above 0, earlier words weigh more ("earlier words weigh more", the design
documents' rule), from 1 down to ``1 / (1 + decay · POSITION_CAP)`` at the fifth word, in
keyword queries (of at most *decay_words* distinct words; a description or a question
weighs its words alike, as the published rankings do).

Query expansion (pseudo-relevance feedback) takes the ``fb_docs`` best documents of the
first ranking as relevant and adds ``fb_terms`` of their stems to the query:

- ``rm3`` (the default): RM3, Lavrenko & Croft's relevance model interpolated with the
  query over whole documents, weighted and interpolated as Anserini does (:func:`rm3_terms`);
- ``bo1``: Amati's Bo1, the divergence-from-randomness (Bose-Einstein) weight of each stem
  of the feedback documents against its frequency in the collection (:func:`bo1_terms`);
- ``rm3+bo1``: both, from the same feedback documents, each expanded query ranked, and
  the two rankings fused by CombSUM (Fox & Shaw, TREC-2, 1994), each ranking's scores
  divided by its best score first (the maximum normalisation of Lee, SIGIR 1997), then
  scaled back by the mean of the two best scores (so that the link-graph prior weighs as
  much against it as against either): :func:`fusion_factors`.  A score is linear in the
  query weights, so the fused scores are those of one query, the two expansions' weights
  so scaled and summed (what an explanation shows);
- ``rocchio``: the mean BM25 weight of each stem over the feedback documents
  (:func:`feedback_terms`), the product's earlier method;
- ``none``: no expansion.

Queries of ``fb_min_words`` distinct words or more are expanded (by default
:data:`FEEDBACK_MIN_WORDS`), on indexes of ``fb_min_docs`` documents or more
(:data:`FEEDBACK_MIN_DOCS`), but not when the first ranking's best page holds every word
of the query (``fb_skip_held``, :func:`answered`): a keyword query means exactly its words,
and the page that holds them all is what it names.

The link-graph prior (``linkrank`` 0.5; 0 switches it off) adds to each hit's score a saturating
function of its PageRank *s* (:mod:`search.linkrank`, scaled to a mean of 1 over the
documents), Craswell, Robertson, Zaragoza & Taylor's "satu" ("Relevance weighting for
query independent evidence", SIGIR 2005):

    score'(d, q) = score(d, q) + linkrank · s(d) / (s(d) + LINKRANK_K)

bounded by ``linkrank``, so a page every page links to cannot outrank the words of the
query by more than that; a page without a linkrank gets nothing.

The weighting model (``model``) is BM25F (``bm25``, above), Amati's parameter-free DPH
(``dph``) or Clinchant and Gaussier's information-based LGD (``lgd``, of parameter
``lgd_c``) (:mod:`search.dfr`).  With ``fuse`` naming another one, the query is ranked
under both models, each with its own expansion (from its own first ranking) and the
link-graph prior, and the two rankings are fused by reciprocal rank fusion (Cormack,
Clarke & Büttcher, "Reciprocal rank fusion outperforms Condorcet and individual rank
learning methods", SIGIR 2009): ``score(d) = Σ 1 / (RRF_K + rank(d))`` over the
:data:`RRF_DEPTH` best of each (:func:`rrf`).

Term proximity (``proximity``, 0: off) re-ranks the ``proximity_depth`` best candidates of
a query of two distinct words or more by Büttcher, Clarke & Lushman's BM25TP bonus, read
from their stored text (:mod:`search.proximity`).
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

# The feedback formulas, kept importable from here.
from search.feedback import FEEDBACK_BETA as FEEDBACK_BETA
from search.feedback import FEEDBACK_MIN_SHARED as FEEDBACK_MIN_SHARED
from search.feedback import bo1_terms as bo1_terms
from search.feedback import bo1_weight as bo1_weight
from search.feedback import feedback_terms as feedback_terms
from search.feedback import rm3_terms as rm3_terms

#: Position from which query words all weigh the same.
POSITION_CAP = 4

#: Expansion methods (:attr:`Params.expansion`).
EXPANSIONS = ("rm3", "bo1", "rm3+bo1", "rocchio", "none")
#: Weighting models (:attr:`Params.model`): BM25F, Amati's DPH or Clinchant and Gaussier's
#: LGD (:mod:`search.dfr`).
MODELS = ("bm25", "dph", "lgd")
#: Rankings fused with the model's (:attr:`Params.fuse`): none, or another model's.
FUSIONS = ("none", *MODELS)
#: LGD's *c* by default (:attr:`Params.lgd_c`): the published one.
LGD_C = 1.0
#: Reciprocal rank fusion's k (Cormack, Clarke & Büttcher's 60) ...
RRF_K = 60
#: ... over each ranking's best this many documents.
RRF_DEPTH = 1000
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
#: The :class:`Params` field of each section's weight scale (same order).
SECTION_W = {section: f"w_{name[2:]}" for section, name in SECTION_B.items()}

#: Stems found in more than this share of the documents are not feedback terms: RM3's
#: 10 % (Anserini's threshold, in place of a stop list), Rocchio's 5 % (long posting lists,
#: low idf).  A query's own words are always kept.
RM3_MAX_DF_SHARE = 0.10
ROCCHIO_MAX_DF_SHARE = 0.05
#: Bo1 leaves out only the stems of more than half the documents: its weight already
#: discounts a stem by its frequency in the collection (Terrier has no such rule, but its
#: stop list), while a stem of most pages is no evidence of relevance at all (its
#: Robertson-Spärck Jones weight, log((N − n + 0.5) / (n + 0.5)), is below 0) and, on a
#: site, is most often a word of every page's URL or template: added, it made every page
#: of the site a hit of the expanded query.
BO1_MAX_DF_SHARE = 0.5
#: Expansion applies to queries of at least this many distinct words (descriptions,
#: questions: where the user's words alone miss the vocabulary of relevant pages), and not
#: to one whose first ranking's best page holds all its words (:func:`answered`).  With that
#: rule, keyword queries keep their page at any threshold and short questions gain from a
#: lower one (CISI's queries cut to three words: MAP 0.1025 against 0.1101 from 1, 30
#: queries better and 10 worse), but short queries are most queries and an expanded one is
#: ranked twice: at 100,000 pages, `/api/search`'s warm p95 over synthetic queries of one
#: to five words went from 17–23 ms to 20–24 (target 20) with every query expanded, though
#: a process's first expanded query now costs 7–15 ms (50–100 before its term look-ups
#: stopped making every segment's prefixes); benchmarks/README.md ...
FEEDBACK_MIN_WORDS = 4
#: ... on an index of at least this many documents (on a smaller one the feedback documents
#: are not a sample of the relevant pages but a large share of the index).  Ten times the
#: default feedback documents; Anserini and Terrier have no such floor, and the classic test
#: collections (MED's 1,033 abstracts, Cranfield's 1,400) are well above it.
FEEDBACK_MIN_DOCS = 100
#: The linkrank at which the prior gives half its weight: the mean page's.
LINKRANK_K = 1.0
#: Most candidates the term-proximity bonus may re-rank (their texts are read at once).
MAX_PROXIMITY_DEPTH = 10_000


@dataclass(frozen=True, slots=True)
class Params:
    """The ranking's parameters (README "Ranking"; ``--k1``, ``--b`` … of ``query``,
    ``eval`` and ``serve``; ``eval --sweep`` varies them).

    The defaults are published ones, not fitted to a collection: BM25's k1 1.2 and b 0.75
    (Robertson's, and Whoosh's; b 0.75 for every section of per-field BM25F), RM3 as
    Anserini runs it (10 documents, 10 terms, original query weight 0.5).  k1 1.2 rather
    than Anserini's 0.9: a page's tf is weighted (a title word counts 4), so it saturates
    later than a plain count.  *decay* 0.25 on queries of at most 3 distinct words: on
    CISI's natural-language questions (four words or more) anything from 0 to 0.4 measures
    the same, above it costs (benchmarks/README.md), and in a question the first words are
    as often generic as the topic, so those weigh their words alike; on a keyword query the
    first word typed is usually the topic, and the design documents' rule stays there.
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
    #: Each section's weight scale in the per-field form: the server's weight of that
    #: section (``w_f``) is multiplied by it at query time (1: the server's weight).
    w_body: float = 1.0
    w_title: float = 1.0
    w_url: float = 1.0
    w_desc: float = 1.0
    w_keywords: float = 1.0
    w_boilerplate: float = 1.0
    #: The weighting model: ``bm25`` (BM25F, above), ``dph`` or ``lgd``
    #: (:mod:`search.dfr`).
    model: str = "bm25"
    #: ``none``, or a model whose ranking (with its own expansion) is fused with
    #: *model*'s by reciprocal rank fusion.
    fuse: str = "none"
    #: LGD's *c* (its normalisation H2: ``tfn = tf · log2(1 + c · avglen / len)``).  The
    #: default is the published 1, which is below BM25F on CISI and each of its altered
    #: copies; CISI's cross-validation chooses 0.075 and 0.15 (benchmarks/README.md), a
    #: value fitted to one collection, not a default.
    lgd_c: float = LGD_C
    #: Weight of the term-proximity bonus (BM25TP, :mod:`search.proximity`; 0: off).
    proximity: float = 0.0
    #: Candidates the proximity bonus re-ranks: the best this many of the ranking.
    proximity_depth: int = 100
    #: Most words apart two query words may stand to count as a pair (0: any distance,
    #: Büttcher, Clarke & Lushman's rule; the 1 / distance² weight fades them anyway).
    proximity_window: int = 0
    #: The position decay applies to queries of at most this many distinct words (keyword
    #: queries; a description or a question of more weighs its words alike); 0: to every
    #: query.
    decay_words: int = 3
    #: Queries of fewer distinct words than this are not expanded (1: every query is).
    fb_min_words: int = FEEDBACK_MIN_WORDS
    #: Nor are queries on an index of fewer documents than this (0: whatever its size).
    fb_min_docs: int = FEEDBACK_MIN_DOCS
    #: 1: nor is a query whose first ranking's best page holds every one of its words
    #: (:func:`answered`); 0: it is expanded all the same.
    fb_skip_held: int = 1

    def __post_init__(self) -> None:
        # NaN passes every range check below (each comparison with it is false), and an
        # infinity would reach scores and JSON (Infinity, not JSON).
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{f.name} must be a finite number, not {value}")
        if self.k1 < 0:
            raise ValueError("k1 must be >= 0")
        if not 0 <= self.b <= 1:
            raise ValueError("b must be between 0 and 1")
        if self.bm25f not in BM25F_FORMS:
            raise ValueError(f"bm25f must be one of {', '.join(BM25F_FORMS)}")
        for name in SECTION_B.values():
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be at most 1 (below 0: b)")
        scaled = [name for name in SECTION_W.values() if getattr(self, name) != 1]
        for name in scaled:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if scaled and (self.bm25f != "per-field" or "bm25" not in (self.model, self.fuse)):
            raise ValueError(
                f"{', '.join(scaled)} scale BM25F's section weights in its per-field form "
                "(--bm25f per-field, --model bm25)"
            )
        if self.lgd_c <= 0:
            raise ValueError("lgd_c must be above 0")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}")
        if self.fuse not in FUSIONS or self.fuse == self.model:
            raise ValueError(f"fuse must be none or a model other than {self.model}")
        if self.decay < 0:
            raise ValueError("decay must be >= 0")
        if self.decay_words < 0:
            raise ValueError("decay_words must be >= 0 (0: every query)")
        if self.expansion not in EXPANSIONS:
            raise ValueError(f"expansion must be one of {', '.join(EXPANSIONS)}")
        if self.fb_docs < 1 or self.fb_terms < 1:
            raise ValueError("fb_docs and fb_terms must be >= 1")
        if not 0 < self.fb_weight <= 1:
            raise ValueError("fb_weight must be above 0 and at most 1")
        if self.fb_min_words < 1 or self.fb_min_docs < 0:
            raise ValueError("fb_min_words must be >= 1 and fb_min_docs >= 0")
        if self.fb_skip_held not in (0, 1):
            raise ValueError("fb_skip_held must be 0 or 1")
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

    def section_scale(self) -> tuple[float, ...] | None:
        """Each section's weight scale (:data:`SECTION_W` order); None where every one is 1
        (the servers' weights as they are)."""
        scale = tuple(float(getattr(self, name)) for name in SECTION_W.values())
        return None if all(w == 1 for w in scale) else scale

    def label(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


#: The product's ranking.
DEFAULT = Params()
#: Numeric parameters ``eval --sweep`` may vary.
NUMERIC = tuple(
    f.name for f in fields(Params) if f.name not in ("expansion", "bm25f", "model", "fuse")
)
#: Kept for callers of the module constants (the defaults of :data:`DEFAULT`).
K1 = DEFAULT.k1
B = DEFAULT.b
POSITION_DECAY = DEFAULT.decay
DECAY_WORDS = DEFAULT.decay_words


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


def expands(words: int, doc_count: int, params: Params = DEFAULT) -> bool:
    """Whether a query of *words* distinct words is expanded on an index of *doc_count*
    documents under *params* (its expansion, ``fb_min_words`` and ``fb_min_docs``)."""
    return (
        params.expansion != "none"
        and words >= params.fb_min_words
        and doc_count >= params.fb_min_docs
    )


def answered(query: Iterable[str], page: Container[str], params: Params = DEFAULT) -> bool:
    """Whether a query of stems *query* whose first ranking's best page holds the stems
    *page* goes unexpanded under *params* (``fb_skip_held``): that page holds every one
    of its words.  Pseudo-relevance feedback is for a query whose words miss the
    vocabulary of the pages it asks for; a page holding them all is what a keyword query
    that names a page asks for, and the feedback pages' other words pull the pages that
    share them above it (benchmarks/README.md: the navigational queries of four words or
    more).  Expansion applied only where it is predicted to help is Cronen-Townsend, Zhou
    and Croft's, and Amati, Carpineto and Romano's, selective query expansion (2004); this
    test is the product's own."""
    return bool(params.fb_skip_held) and all(stem in page for stem in query)


def query_weights(
    stems: Sequence[str], decay: float | None = None, decay_words: int | None = None
) -> dict[str, float]:
    """qw(t) = qtf · pw(position of the first occurrence), for the analyzed query words;
    a query of more than *decay_words* distinct words (0: no limit) is not decayed."""
    decay = POSITION_DECAY if decay is None else decay
    decay_words = DECAY_WORDS if decay_words is None else decay_words
    weights: dict[str, float] = {}
    positions: dict[str, int] = {}
    for stem in stems:
        if stem not in positions:
            positions[stem] = len(positions)
        weights[stem] = weights.get(stem, 0.0) + 1.0
    if decay_words and len(positions) > decay_words:
        decay = 0.0
    return {s: n * position_weight(positions[s], decay) for s, n in weights.items()}


def expansion_methods(expansion: str) -> tuple[str, ...]:
    """The expansion methods *expansion* (:data:`EXPANSIONS`) runs: one, or the two that
    ``rm3+bo1`` fuses."""
    return tuple(expansion.split("+"))


def fusion_factors(best: Sequence[float]) -> list[float]:
    """What each of several rankings' scores is multiplied by before they are summed, for
    the CombSUM of ``rm3+bo1`` (:attr:`Params.expansion`), given each ranking's *best*
    score: ``mean(best) / best_i``, each ranking scaled to the same best score, the mean of
    theirs.  A ranking without a hit (best 0) adds nothing and leaves the mean."""
    positive = [b for b in best if b > 0]
    if not positive:
        return [0.0] * len(best)
    mean = sum(positive) / len(positive)
    return [mean / b if b > 0 else 0.0 for b in best]


def fused_weights(
    expansions: Sequence[dict[str, float]], factors: Sequence[float]
) -> dict[str, float]:
    """The one query whose scores are those of the CombSUM of *expansions* (each query's
    weights) with *factors* (:func:`fusion_factors`): ``Σ factor_i · weight_i`` of each stem
    (a score is linear in the query weights)."""
    out: dict[str, float] = {}
    for weights, factor in zip(expansions, factors, strict=True):
        for stem, w in weights.items():
            out[stem] = out.get(stem, 0.0) + factor * w
    return out


def rrf(rankings: Sequence[Sequence[int]], doc_count: int, k: int = RRF_K) -> np.ndarray:
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) of *rankings*
    (document numbers, best first): each document's ``Σ 1 / (k + rank)`` over the
    rankings that hold it (rank from 1), one score per document number (0: in none)."""
    out = np.zeros(doc_count, dtype=np.float64)
    for ranked in rankings:
        docs = np.asarray(ranked, dtype=np.int64)
        np.add.at(out, docs, 1.0 / (k + np.arange(1, len(docs) + 1)))
    return out
