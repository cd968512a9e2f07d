"""Probabilistic models on the array postings beside BM25F: divergence from randomness
(DPH) and the information-based LGD, and the collection statistics they and Bo1 read
(each term's frequency in the collection, each page's length).

DPH is Amati's parameter-free DFR model ("Frequentist and Bayesian approach to information
retrieval", ECIR 2006; Terrier's default weighting model), a hypergeometric model of a
term's frequency in a document against its frequency in the collection, with Popper's
normalisation:

    score(d, q) = Σ_t qw(t) · (1 − f)² / (tf + 1)
                        · (tf · log2(tf · avglen / len · N / F_t) + ½ · log2(2π · tf · (1 − f)))
    f           = tf / len

``tf`` is the term's weighted count in the page (the sections' counts times their
weights, as BM25F's merged form counts it), ``len`` the page's weighted length (the sum of
its sections' weighted lengths), ``avglen`` their mean over the pages, ``F_t`` the term's
weighted count summed over the pages and ``N`` the number of pages.  No parameter: no k1,
no b.  A posting whose score comes out below :data:`DPH_FLOOR` (a term less frequent in
the page than in the collection, in a long page) scores that floor, so that every page
that holds a query word stays a hit, as with BM25.

LGD is Clinchant and Gaussier's log-logistic information-based model ("Information-based
models for ad hoc IR", SIGIR 2010; Terrier's ``LGD``, Lucene's ``IBSimilarity`` with
``DistributionLL``): a term scores the information ``−log2 P(X ≥ tfn)`` of its
normalised frequency under a log-logistic distribution, ``P(X ≥ x) = λ_t / (λ_t + x)``,
after DFR's second normalisation (H2), of one parameter *c*:

    score(d, q) = Σ_t qw(t) · log2((λ_t + tfn) / λ_t)
    tfn         = tf · log2(1 + c · avglen / len)
    λ_t         = n_t / N

``tf``, ``len`` and ``avglen`` as for DPH, ``n_t`` the number of pages that hold the term
(the index's document frequency, as BM25F's idf reads it).  The default *c*
(:data:`search.ranking.LGD_C`) is the published 1; CISI and its altered copies choose
0.03 to 0.2 (benchmarks/README.md).  The score is above 0 wherever the term is in the page; floored
at :data:`DPH_FLOOR` as DPH's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from search.arrays import leaf_postings, sum_parts

#: The least a posting scores under DPH (the formula may go below 0), and under LGD.
DPH_FLOOR = 1e-6


def dph(tf: Any, length: Any, avg_length: float, doc_count: int, collection_freq: Any) -> Any:
    """DPH's score of postings of weighted counts *tf* in pages of weighted lengths
    *length* (numbers or numpy arrays; the query weight not included), floored at
    :data:`DPH_FLOOR`."""
    tf = np.asarray(tf, dtype=np.float64)
    length = np.maximum(np.asarray(length, dtype=np.float64), tf)
    cf = np.maximum(np.asarray(collection_freq, dtype=np.float64), tf)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(length > 0, tf / length, 1.0)
        norm = (1 - f) ** 2 / (tf + 1)
        gain = tf * np.log2(tf * avg_length / length * doc_count / cf) + 0.5 * np.log2(
            2 * math.pi * tf * (1 - f)
        )
        score = np.where(f < 1, norm * gain, 0.0)
    return np.maximum(np.nan_to_num(score, nan=0.0, neginf=0.0), DPH_FLOOR)


def lgd(tf: Any, length: Any, avg_length: float, doc_count: int, doc_freq: Any, c: float) -> Any:
    """LGD's score of postings of weighted counts *tf* in pages of weighted lengths
    *length* (numbers or numpy arrays; the query weight not included), for terms held by
    *doc_freq* of the *doc_count* pages, with H2's parameter *c*; floored at
    :data:`DPH_FLOOR`."""
    tf = np.asarray(tf, dtype=np.float64)
    length = np.maximum(np.asarray(length, dtype=np.float64), tf)
    share = np.maximum(np.asarray(doc_freq, dtype=np.float64), 1.0) / max(doc_count, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tfn = tf * np.log2(1.0 + c * avg_length / length)
        score = np.log2((share + tfn) / share)
    return np.maximum(np.nan_to_num(score, nan=0.0, posinf=0.0, neginf=0.0), DPH_FLOOR)


def collection_freq(arrays: Any, gids: np.ndarray) -> np.ndarray:
    """Each of terms *gids*' weighted tf summed over its postings in every segment (as
    the index's term statistics count it: a deleted page's until its segment is merged).
    Each term's postings are summed once a generation: the sums are kept with its id
    (:meth:`search.termspace.TermSpace.keep_totals`, 8 bytes a term, counted in the
    index's bytes), as Lucene keeps ``totalTermFreq`` in its term dictionary."""
    out = arrays.terms.totals(gids)
    missing = np.flatnonzero(np.isnan(out))
    if len(missing):
        counted = np.zeros(len(missing), dtype=np.float64)
        for _, leaf, present, los, his in leaf_postings(arrays, gids[missing]):
            tfs = leaf.arrays.tfs
            counted[present] += [
                float(tfs[lo:hi].sum(dtype=np.float64)) for lo, hi in zip(los, his, strict=True)
            ]
        out[missing] = counted
        arrays.terms.keep_totals(gids[missing], counted)
    return out


def page_lengths(arrays: Any) -> tuple[list[np.ndarray], float]:
    """Each segment's pages' weighted lengths (the sums of their sections'), and their
    mean over the live pages; computed once per index generation (kept in the arrays'
    ``per_doc``)."""
    cached = arrays.per_doc.get("dfr_lengths")
    if cached is not None:
        return cached
    lengths, total, live = [], 0.0, 0
    for leaf in arrays.leaves:
        doc_lengths = leaf.arrays.section_lengths.astype(np.float64).sum(axis=1)
        alive = np.ones(len(doc_lengths), dtype=bool)
        alive[leaf.deleted[leaf.deleted < len(doc_lengths)]] = False
        total += float(doc_lengths[alive].sum())
        live += int(alive.sum())
        lengths.append(doc_lengths)
    result = (lengths, total / live if live and total > 0 else 1.0)
    arrays.per_doc["dfr_lengths"] = result
    return result


def term_stats(arrays: Any, model: str, gids: np.ndarray) -> np.ndarray:
    """What *model* reads of each of terms *gids* besides its postings: its count summed
    over the pages, ``F_t`` (DPH: :func:`collection_freq`), or the number of pages that
    hold it, ``n_t`` (LGD)."""
    return arrays.df[gids] if model == "lgd" else collection_freq(arrays, gids)


def weight(
    model: str, tf: Any, length: Any, avg_length: float, doc_count: int, stat: Any, c: float
) -> Any:
    """The score of postings under *model* (:func:`dph`, or :func:`lgd` of parameter *c*),
    *stat* their terms' :func:`term_stats`."""
    if model == "lgd":
        return lgd(tf, length, avg_length, doc_count, stat, c)
    return dph(tf, length, avg_length, doc_count, stat)


def accumulate(
    arrays: Any,
    weights: dict[str, float],
    require_all: bool = False,
    start: np.ndarray | None = None,
    model: str = "dph",
    c: float = 1.0,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:meth:`search.arrays.ArrayIndex.accumulate` with DPH (or with *model* ``lgd``, LGD
    of parameter *c*) in place of BM25F: each document's score for the weighted query (0:
    no match), added to a copy of *start* if given, and with *require_all* how many of the
    query's terms each document holds."""
    known = [(g, qw) for s, qw in weights.items() if (g := arrays.terms.get(s)) is not None]
    gids = np.array([g for g, _ in known], dtype=np.int64)
    qws = np.array([qw for _, qw in known], dtype=np.float64)
    stat = term_stats(arrays, model, gids)
    lengths, avg = page_lengths(arrays)
    all_docs, all_parts = [], []
    for i, leaf, present, los, his in leaf_postings(arrays, gids):
        a = leaf.arrays
        docs = np.concatenate([a.docs[lo:hi] for lo, hi in zip(los, his, strict=True)])
        tf = np.concatenate([a.tfs[lo:hi] for lo, hi in zip(los, his, strict=True)])
        sizes = np.subtract(his, los)
        stats = np.repeat(stat[present], sizes)
        scored = weight(model, tf, lengths[i][docs], avg, arrays.n, stats, c)
        part = np.repeat(qws[present], sizes) * scored
        all_docs.append(docs + leaf.base if leaf.base else docs)
        all_parts.append(part)
    return sum_parts(arrays, all_docs, all_parts, start, require_all)


def page_length(arrays: Any, docnum: int) -> float:
    """Document *docnum*'s weighted length (the sum of its sections')."""
    lengths, _ = page_lengths(arrays)
    for i in reversed(range(len(arrays.leaves))):
        leaf = arrays.leaves[i]
        if docnum >= leaf.base:
            local = docnum - leaf.base
            return float(lengths[i][local]) if local < len(lengths[i]) else 0.0
    return 0.0
