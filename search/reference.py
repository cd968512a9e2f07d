"""The ranking's reference: the formula of :mod:`search.ranking` on Whoosh's own matchers.

The product ranks on the array postings (:class:`search.searchsession.SearchSession`); this is a
second, independent implementation of the same scores, queries and expansion, built from
Whoosh's matchers and the weighting model :class:`search.indexquery.BM25`.  The tests
(``tests/test_unit_arrays.py``) and ``benchmarks/query.py`` compare the two; nothing the
product runs imports this module.

Query expansion here is the pure-Python :func:`search.ranking.rm3_terms`,
:func:`search.ranking.bo1_terms` (collection frequencies from Whoosh's term statistics) or
:func:`search.ranking.feedback_terms`, over the feedback documents' term vectors read from
the arrays' forward index (the index keeps no Whoosh term vectors).  The Whoosh searcher
must be opened with the weighting of the same parameters, ``BM25(params.b, params.k1)``;
in the per-field form of BM25F the session searches the same reader with
:class:`search.indexquery.FieldBM25`, each document's lengths per section summed from the
Whoosh values of every posting of the index (:func:`section_norms`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from whoosh.searching import Searcher

from search import ranking
from search.arrayfile import N_SECTIONS, value_sections
from search.arrays import ArrayIndex
from search.index import REINDEX, WORDS_FIELD, IndexOutdated
from search.indexquery import FieldBM25, WhooshQuery, build_query, stored, weighted_query
from search.query import ParsedQuery
from search.results import Ranked


def section_norms(
    reader: Any, section_b: tuple[float, ...], scale: tuple[float, ...] | None = None
) -> np.ndarray:
    """Each document's ``1 / (1 − b_f + b_f · len_f / avglen_f)`` per section (one row a
    document number), multiplied by the section's weight *scale* where given: its weighted
    lengths per section are the sums of its postings' weighted counts (the Whoosh values),
    kept as ``float32`` as the array file keeps them; the averages are over the live
    documents."""
    lengths = np.zeros((reader.doc_count_all(), N_SECTIONS), dtype=np.float64)
    for text in reader.lexicon(WORDS_FIELD):
        for docnum, value in reader.postings(WORDS_FIELD, text).all_items():
            lengths[docnum] += value_sections(value)
    lengths = lengths.astype(np.float32).astype(np.float64)
    avg = lengths.sum(axis=0) / max(reader.doc_count(), 1)
    avg[avg <= 0] = 1.0
    bs = np.asarray(section_b, dtype=np.float64)
    denominator = (1 - bs) + bs * lengths / avg
    # b_f 1 and an empty section: no count there to normalise.
    norms = np.where(denominator > 0, 1.0 / np.where(denominator > 0, denominator, 1.0), 0.0)
    return norms if scale is None else norms * np.asarray(scale, dtype=np.float64)


class ReferenceSession:
    """Rank, count and expand on one Whoosh searcher (opened with
    :class:`search.indexquery.BM25`), as :class:`search.searchsession.SearchSession` does."""

    def __init__(self, searcher: Any, params: ranking.Params = ranking.DEFAULT) -> None:
        self.s = searcher
        self.params = params
        section_b, scale = params.section_b(), params.section_scale()
        if section_b is not None:
            norms = section_norms(searcher.reader(), section_b, scale)
            self.s = Searcher(
                searcher.reader(), weighting=FieldBM25(params.k1, norms), closereader=False
            )
        self.n = int(searcher.doc_count_all())
        self.avglen = float(searcher.avg_field_length(WORDS_FIELD) or 1.0)
        self._df: dict[str, int] = {}
        forward = ArrayIndex.load(searcher, params.k1, params.b, section_b, scale)
        if forward is None:
            raise IndexOutdated(f"the search index has no array postings: run `{REINDEX}`")
        self._forward = forward

    def df(self, stem: str) -> int:
        n = self._df.get(stem)
        if n is None:
            n = self._df[stem] = int(self.s.doc_frequency(WORDS_FIELD, stem))
        return n

    def idf(self, stem: str) -> float:
        return ranking.idf(self.n, self.df(stem))

    def expands(self, weights: dict[str, float]) -> bool:
        return ranking.expands(len(weights), self.n, self.params)

    def rank(
        self,
        q: ParsedQuery,
        limit: int,
        expand: bool = True,
        wquery: WhooshQuery | None = None,
    ) -> list[Ranked]:
        wquery = wquery or build_query(q, self.params.decay, self.params.decay_words)
        weights = wquery.weights
        expand = expand and not q.require_all and self.expands(weights)
        if q.require_all:
            return self._search(wquery.scored, limit, wquery)
        fb_docs = self.params.fb_docs
        hits = self.top(weights, limit if not expand else max(limit, fb_docs), wquery)
        if expand and hits:
            expanded = self.expand(weights, hits[:fb_docs], wquery)
            if expanded != weights:
                hits = self.top(expanded, limit, wquery)
        return hits[:limit]

    def expand(
        self,
        weights: dict[str, float],
        feedback: list[Ranked],
        wquery: WhooshQuery | None = None,
    ) -> dict[str, float]:
        """The expansion of the session's parameters over the feedback documents, in pure
        Python; their stems found in more than the method's share of the documents left
        out (but for the query's own).  Under ``rm3+bo1``, the query of both expansions'
        weights, each scaled by its :func:`search.ranking.fusion_factors` (each expanded
        query's best score found by a Whoosh search, with *wquery*'s filter and mask)."""
        p = self.params
        texts = self._forward.texts
        if feedback:
            best = self._forward.vector(feedback[0].docnum)[0]
            if ranking.answered(weights, {texts[gid] for gid in best.tolist()}, p):
                return dict(weights)
        expansions = [
            self._expand_by(method, weights, feedback)
            for method in ranking.expansion_methods(p.expansion)
        ]
        if len(expansions) == 1:
            return expansions[0]
        tops = [self.top(w, 1, wquery) for w in expansions]
        best_scores = [top[0].score if top else 0.0 for top in tops]
        return ranking.fused_weights(expansions, ranking.fusion_factors(best_scores))

    def _expand_by(
        self, method: str, weights: dict[str, float], feedback: list[Ranked]
    ) -> dict[str, float]:
        p = self.params
        texts = self._forward.texts
        rm3 = method in ("rm3", "bo1")
        share = {"rm3": ranking.RM3_MAX_DF_SHARE, "bo1": ranking.BO1_MAX_DF_SHARE}.get(
            method, ranking.ROCCHIO_MAX_DF_SHARE
        )
        frequent = share * self.n
        vectors, totals = [], []
        for hit in feedback:
            length = self.s.doc_field_length(hit.docnum, WORDS_FIELD, 1)
            gids, tfs, _ = self._forward.vector(hit.docnum)
            totals.append(float(tfs.sum()))
            vector: dict[str, float] = {}
            for gid, tf in zip(gids.tolist(), tfs.tolist(), strict=True):
                stem = texts[gid]
                if stem not in weights and self.df(stem) > frequent:
                    continue
                vector[stem] = (
                    tf if rm3 else ranking.bm25(self.idf(stem), tf, length, self.avglen, p.b, p.k1)
                )
            vectors.append(vector)
        if method == "bo1":
            stems = {s for v in vectors for s in v}
            cf = {s: float(self.s.frequency(WORDS_FIELD, s)) for s in stems}
            return ranking.bo1_terms(vectors, cf, self.n, weights, p.fb_terms)
        if rm3:
            scores = [h.score for h in feedback]
            return ranking.rm3_terms(vectors, scores, weights, p.fb_terms, p.fb_weight, totals)
        return ranking.feedback_terms(vectors, weights, p.fb_terms)

    def top(
        self, weights: dict[str, float], limit: int, wquery: WhooshQuery | None
    ) -> list[Ranked]:
        """The best *limit* documents for a weighted OR query, in one Whoosh search (with
        *wquery*'s filter and mask, if given)."""
        present = {s: w for s, w in weights.items() if self.df(s)}
        if not present:
            return []
        return self._search(weighted_query(present), limit, wquery)

    def _search(self, query: Any, limit: int, wquery: WhooshQuery | None) -> list[Ranked]:
        filter_, mask = (None, None) if wquery is None else (wquery.filter, wquery.mask)
        if filter_ is not None and next(iter(filter_.docs(self.s)), None) is None:
            return []  # Whoosh takes a filter that matches nothing for no filter at all
        results = self.s.search(query, filter=filter_, mask=mask, limit=limit)
        return [Ranked(float(score), *stored(self.s, d), d) for score, d in results.top_n]

    def count(self, q: ParsedQuery, wquery: WhooshQuery, expand: bool = True) -> tuple[int, bool]:
        """The documents :meth:`rank` ranks for *q* (those of the expanded query when it
        is expanded), counted by Whoosh: (number, True)."""
        if wquery.filter is not None and next(iter(wquery.filter.docs(self.s)), None) is None:
            return 0, True
        query = wquery.scored
        weights = wquery.weights
        if expand and not q.require_all and self.expands(weights):
            hits = self.top(weights, self.params.fb_docs, wquery)
            expanded = self.expand(weights, hits, wquery) if hits else weights
            present = {s: w for s, w in expanded.items() if self.df(s)}
            if expanded != weights and present:
                query = weighted_query(present)
        results = self.s.search(query, filter=wquery.filter, mask=wquery.mask, limit=1)
        return len(results), True
