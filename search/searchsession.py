"""Ranking on one open index: the query's scores on the array postings, its filters,
query expansion, the link-graph prior, the hit count and the explanation of a score.

A :class:`SearchSession` wraps one open Whoosh searcher and its array postings
(:mod:`search.arrays`, numpy, exhaustive: every matching document is scored and the number
of hits is exact); Whoosh's matchers only select the documents of ``site:`` filters
(:func:`search.indexquery.matching_docs`).  An index without array postings, or of another
format, is refused with :class:`search.index.IndexOutdated` ("run ``python -m search
reindex``").  The same formula on Whoosh's own matchers is kept as the tests' reference,
:mod:`search.reference`.  With a ``proximity`` weight and a reader of the stored texts
(the searcher's), the best candidates are re-ranked by term proximity
(:mod:`search.proximity`).

:class:`search.searcher.Searcher` opens the sessions and turns their ranking into result
pages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from search import dfr, expansion, proximity, ranking
from search.arrays import ArrayIndex, Memo, best_of, index_folder
from search.index import REINDEX, IndexOutdated, reading
from search.indexquery import WhooshQuery, build_query, matching_docs, stored
from search.query import ParsedQuery
from search.results import Explanation, Ranked, TermExplanation


class SearchSession:
    """One open Whoosh searcher and its array postings: rank, count, expand, explain
    (reuse it for many queries)."""

    def __init__(
        self,
        searcher: Any,
        params: ranking.Params = ranking.DEFAULT,
        linkranks: Any = None,
        documents: Callable[[list[int]], Mapping[int, Any]] | None = None,
        holding: Callable[[list[int], list[list[str]]], set[int]] | None = None,
    ) -> None:
        self.s = searcher
        #: The ranking's parameters (:class:`search.ranking.Params`).
        self.params = params
        with reading(index_folder(searcher) or "(in memory)"):  # a segment's array files
            arrays = ArrayIndex.load(
                searcher, params.k1, params.b, params.section_b(), params.section_scale()
            )
        if arrays is None:
            raise IndexOutdated(
                f"the search index has segments without array postings: run `{REINDEX}` "
                f"to rebuild it from the database"
            )
        #: The array postings (:mod:`search.arrays`) the ranking runs on.
        self.arrays = arrays
        self.n = arrays.n
        self.avglen = arrays.avglen
        #: Each document number's linkrank (``float32``; indexed by document numbers: an
        #: array, or :class:`search.linkrank.LinkRanks`), or None: no link-graph prior.
        #: *linkranks* is that, or a function of the arrays that returns it.
        self.linkranks: Any = linkranks(arrays, searcher) if callable(linkranks) else linkranks
        #: Reads the stored text of documents by id (:mod:`search.proximity`; None: no
        #: term-proximity bonus), and the bonus the last ranking added, by document number.
        self.documents = documents
        self.proximity_bonus: dict[int, float] = {}
        #: Which of the documents of some ids have a stored text that holds one of some
        #: phrases (the searcher's check of excluded phrases), or None: a document that
        #: holds every word of an excluded phrase is left out.
        self.holding = holding
        # The last query's filtered documents, its scores before expansion, and the
        # scores its ranking took its best from (what count() counts, with whether every
        # page holding an excluded phrase's words was checked), kept with the query they
        # belong to.
        self._filtered: (
            tuple[WhooshQuery, np.ndarray | None, np.ndarray | None, np.ndarray | None] | None
        ) = None
        self._first: tuple[WhooshQuery, Any, np.ndarray] | None = None
        self._ranking: tuple[WhooshQuery, tuple[bool, int], np.ndarray, bool] | None = None
        # Whether the stored text of a document number holds an excluded phrase, by
        # query: each document checked once whatever the passes and models.
        self._held: tuple[WhooshQuery, dict[int, bool]] | None = None

    def df(self, stem: str) -> int:
        gid = self.arrays.ids.get(stem)
        return 0 if gid is None else int(self.arrays.df[gid])

    def frequencies(self, stems: Sequence[str]) -> list[int]:
        """The document frequency of each of *stems* (:meth:`df`, many at a time)."""
        return self.arrays.terms.frequencies(stems).tolist()

    def terms_within(self, stem: str, maxdist: int) -> set[str]:
        """The stems of the index within *maxdist* edits of *stem* that share its first
        letter (:meth:`search.termspace.TermSpace.within`), *stem* left out."""
        return self.arrays.terms.within(stem, maxdist)

    def idf(self, stem: str) -> float:
        return ranking.idf(self.n, self.df(stem))

    def holders(self, stem: str, limit: int) -> list[int]:
        """The ids of at most *limit* documents that hold *stem* (the first by document
        number: a sample, for its surface forms)."""
        if stem not in self.arrays.ids:
            return []
        docnums = np.flatnonzero(self.arrays.containing_any([stem]))[:limit]
        return [stored(self.s, int(docnum))[0] for docnum in docnums]

    # -- ranking ---------------------------------------------------------------------

    def query(self, q: ParsedQuery) -> WhooshQuery:
        """*q* for this session (its query weights with the session's *decay*)."""
        return build_query(q, self.params.decay, self.params.decay_words)

    def rank(
        self,
        q: ParsedQuery,
        limit: int,
        expand: bool = True,
        wquery: WhooshQuery | None = None,
        check: int = 0,
    ) -> list[Ranked]:
        """The best *limit* documents for *q* (with query expansion unless told not to):
        every matching document scored.  Of the hits that hold every word of an excluded
        phrase, the best *check* are left out if their text holds it (:attr:`holding`),
        the others are left out."""
        wquery = wquery or self.query(q)
        weights = wquery.weights
        p = self.params
        near = p.proximity > 0 and self.documents is not None and len(weights) > 1
        depth = max(limit, p.proximity_depth if near else 0)
        scores = self._ranking_scores(q, wquery, expand, check)
        if p.fuse != "none":
            best = self.arrays.best(scores, depth)
        else:
            best = self._best_with_prior(scores, depth)
        ranked, self.proximity_bonus = self._ranked(best), {}
        if near:
            assert self.documents is not None
            ranked, self.proximity_bonus = proximity.rerank(
                ranked,
                {s: self.idf(s) for s in weights},
                self.documents,
                self.arrays.length_factor,
                p.k1,
                p.proximity,
                p.proximity_depth,
                p.proximity_window,
            )
        return ranked[:limit]

    def _ranking_scores(
        self, q: ParsedQuery, wquery: WhooshQuery, expand: bool, check: int
    ) -> np.ndarray:
        """The scores :meth:`rank` takes the best from (0: not a hit): those of the
        session's model after expansion, or their fusion with the other model's (each
        document's reciprocal rank fusion of its two rankings: 0 outside both)."""
        expand = expand and not q.require_all and self.expands(wquery.weights)
        last = self._ranking
        if last is not None and last[0] is wquery and last[1] == (expand, check):
            return last[2]
        p = self.params
        scores, exact = self._model_scores(p.model, q, wquery, expand, check)
        if p.fuse != "none":
            other, other_exact = self._model_scores(p.fuse, q, wquery, expand, check)
            rankings = [self._best_with_prior(x, ranking.RRF_DEPTH) for x in (scores, other)]
            scores = ranking.rrf([[d for _, d in r] for r in rankings], self.n)
            exact = exact and other_exact
        self._ranking = (wquery, (expand, check), scores, exact)
        return scores

    def _model_scores(
        self, model: str, q: ParsedQuery, wquery: WhooshQuery, expand: bool, check: int
    ) -> tuple[np.ndarray, bool]:
        """Every document's score for *q* under weighting *model*, after the expansion of
        the session's method from that model's own first ranking, the pages that hold an
        excluded phrase left out (:meth:`_without_phrases`, with whether each was checked).
        The feedback documents are chosen among the pages that do not hold every word
        of an excluded phrase."""
        weights = wquery.weights
        # The first pass's scored postings, which the second re-weighs (bm25 only).
        memo: Memo | None = {} if expand and model == "bm25" else None
        scores = self._scores(weights, wquery, q.require_all, model=model, memo=memo)
        if expand:
            feedback = self._feedback(scores, wquery)
            if feedback:
                scores = self._expanded_scores(weights, feedback, scores, wquery, model, memo)
        return self._without_phrases(scores, wquery, check)

    def _expanded_scores(
        self,
        weights: dict[str, float],
        feedback: list[tuple[float, int]],
        first: np.ndarray,
        wquery: WhooshQuery,
        model: str,
        memo: Memo | None,
    ) -> np.ndarray:
        """Every document's score under *model* for the query *weights* expanded from the
        *feedback* documents of its *first* scores; under ``rm3+bo1`` the CombSUM of both
        expanded rankings (:func:`search.ranking.fusion_factors`)."""
        rankings = []
        for expanded in self._expansions(weights, feedback):
            # A score is linear in the query weights: the expanded query's scores are the
            # first ones plus those of the weights the expansion added.
            added = {
                s: w - weights.get(s, 0.0) for s, w in expanded.items() if w != weights.get(s, 0.0)
            }
            if added:
                rankings.append(self._scores(added, wquery, start=first, model=model, memo=memo))
            else:
                rankings.append(first)
        if len(rankings) == 1:
            return rankings[0]
        factors = ranking.fusion_factors([float(x.max()) for x in rankings])
        fused = rankings[0] * factors[0]  # a new array: *first* is kept as it is
        for scores, factor in zip(rankings[1:], factors[1:], strict=True):
            fused += factor * scores
        return fused

    def _feedback(self, scores: np.ndarray, wquery: WhooshQuery) -> list[tuple[float, int]]:
        """The feedback documents of a first ranking *scores*: its best, among those that
        do not hold every word of an excluded phrase (their texts are not read for it)."""
        suspects = self._filter_docs(wquery)[2]
        if suspects is not None and len(suspects):
            scores = scores.copy()
            scores[suspects] = 0.0
        return self.arrays.best(scores, self.params.fb_docs)

    def _without_phrases(
        self, scores: np.ndarray, wquery: WhooshQuery, check: int
    ) -> tuple[np.ndarray, bool]:
        """*scores* with the pages that hold an excluded phrase at 0, and whether each hit
        that holds every word of one was checked: the best *check* of those by their
        score are looked for in their stored texts (:attr:`holding`), the others are left
        out as if they held it."""
        suspects = self._filter_docs(wquery)[2]
        if suspects is None:
            return scores, True
        hits = suspects[scores[suspects] > 0]
        if not len(hits):
            return scores, True
        scores = scores.copy()
        if self.holding is None or check <= 0:
            scores[hits] = 0.0
            return scores, self.holding is None
        checked = np.array([d for _, d in best_of(hits, scores[hits], check)], dtype=np.int64)
        held = self._holding_phrase(checked, wquery)
        scores[checked[held]] = 0.0
        unchecked = np.setdiff1d(hits, checked)
        scores[unchecked] = 0.0
        return scores, not len(unchecked)

    def _holding_phrase(self, docnums: np.ndarray, wquery: WhooshQuery) -> np.ndarray:
        """Whether the stored text of each of *docnums* holds an excluded phrase of the
        query (a boolean each; a document checked once a query)."""
        if self._held is None or self._held[0] is not wquery:
            self._held = (wquery, {})
        known = self._held[1]
        todo = [int(d) for d in docnums if int(d) not in known]
        if todo:
            assert self.holding is not None
            ids = self._docids(todo)
            phrases = [p for p in wquery.parsed.excluded_phrases if len(p) > 1]
            holding = self.holding(ids, phrases)
            known.update((d, i in holding) for d, i in zip(todo, ids, strict=True))
        return np.array([known[int(d)] for d in docnums], dtype=bool)

    def _docids(self, docnums: Sequence[int]) -> list[int]:
        """The database ids of documents *docnums*."""
        ids = self.arrays.docids_cached(self.s)
        return [int(ids[d]) if ids[d] >= 0 else stored(self.s, d)[0] for d in docnums]

    def _best_with_prior(self, scores: np.ndarray, limit: int) -> list[tuple[float, int]]:
        """The best *limit* (score, document number) pairs of *scores* with the link-graph
        prior added to the score of every hit that can be among them with it."""
        weight = self.params.linkrank
        if weight <= 0 or self.linkranks is None:
            return self.arrays.best(scores, limit)
        hits = np.flatnonzero(scores > 0)
        if not len(hits):
            return []
        values = scores[hits]
        if len(hits) > limit > 0:
            # A prior is below *weight*: a hit scoring less than the limit-th best score
            # minus *weight* stays below the best *limit* (each scores that much or more),
            # prior or not, so its linkrank is not needed, and it is no candidate.
            kth = np.partition(values, len(hits) - limit)[len(hits) - limit]
            keep = values + weight >= kth
            hits, values = hits[keep], values[keep]
        values = values + ranking.link_prior(self.linkranks[hits], weight)
        return best_of(hits, values, limit)

    def prior(self, docnum: int) -> float:
        """The link-graph prior added to document *docnum*'s score (0 when off)."""
        if self.params.linkrank <= 0 or self.linkranks is None:
            return 0.0
        return float(ranking.link_prior(self.linkranks[docnum], self.params.linkrank))

    def expanded_weights(self, q: ParsedQuery) -> dict[str, float]:
        """The query weights after expansion (for explanations; under ``rm3+bo1`` the one
        query whose scores are the fused ones)."""
        wquery = self.query(q)
        if q.require_all or not self.expands(wquery.weights):
            return wquery.weights
        feedback = self._feedback(self._scores(wquery.weights, wquery), wquery)
        return self._expand(wquery.weights, feedback, wquery) if feedback else wquery.weights

    def expands(self, weights: dict[str, float]) -> bool:
        """Whether a query is expanded (see :mod:`search.ranking`)."""
        return ranking.expands(len(weights), self.n, self.params)

    def expand(
        self,
        weights: dict[str, float],
        feedback: list[Ranked],
        wquery: WhooshQuery | None = None,
    ) -> dict[str, float]:
        """Pseudo-relevance feedback from the documents *feedback* (the best of the first
        ranking): the method of the session's parameters (:mod:`search.ranking`).  Under
        ``rm3+bo1``, the one query whose scores are the two expanded rankings' CombSUM,
        each ranking's best score among the pages *wquery*'s filter and exclusions leave
        (every page without it)."""
        return self._expand(weights, [(h.score, h.docnum) for h in feedback], wquery)

    def _expand(
        self,
        weights: dict[str, float],
        feedback: list[tuple[float, int]],
        wquery: WhooshQuery | None = None,
    ) -> dict[str, float]:
        expansions = self._expansions(weights, feedback)
        if len(expansions) == 1:
            return expansions[0]
        best = [float(self._scores(w, wquery).max()) for w in expansions]
        return ranking.fused_weights(expansions, ranking.fusion_factors(best))

    def _expansions(
        self, weights: dict[str, float], feedback: list[tuple[float, int]]
    ) -> list[dict[str, float]]:
        """The query *weights* expanded from *feedback* by each method of the session's
        expansion (:func:`search.ranking.expansion_methods`): one query, or two to be
        fused; the query as it is when its best page holds every word
        (:func:`search.ranking.answered`)."""
        docnums = [d for _, d in feedback]
        if docnums and ranking.answered(weights, self.arrays.page_stems(docnums[0]), self.params):
            return [dict(weights)]
        methods = ranking.expansion_methods(self.params.expansion)
        return [self._expand_by(method, weights, feedback) for method in methods]

    def _expand_by(
        self, method: str, weights: dict[str, float], feedback: list[tuple[float, int]]
    ) -> dict[str, float]:
        p = self.params
        docnums = [d for _, d in feedback]
        if method == "rm3":
            frequent = ranking.RM3_MAX_DF_SHARE * self.n
            scores = [score for score, _ in feedback]
            return expansion.rm3(
                self.arrays, docnums, scores, weights, frequent, p.fb_terms, p.fb_weight
            )
        if method == "bo1":
            frequent = ranking.BO1_MAX_DF_SHARE * self.n
            return expansion.bo1(self.arrays, docnums, weights, frequent, p.fb_terms)
        if method == "rocchio":
            frequent = ranking.ROCCHIO_MAX_DF_SHARE * self.n
            return expansion.rocchio(self.arrays, docnums, weights, frequent, p.fb_terms)
        return dict(weights)

    def top(self, weights: dict[str, float], limit: int, wquery: WhooshQuery) -> list[Ranked]:
        """The best *limit* documents for a weighted OR query."""
        return self._ranked(self.arrays.best(self._scores(weights, wquery), limit))

    def _ranked(self, best: list[tuple[float, int]]) -> list[Ranked]:
        """The hits *best* with their database ids, from the array files (their URLs read
        from Whoosh's stored fields only if asked: each read unpickles a document's)."""
        ids = self.arrays.docids_cached(self.s)
        out = []
        for score, docnum in best:
            docid = int(ids[docnum])
            if docid < 0:  # a file without the id: the stored fields
                docid, url = stored(self.s, docnum)
                out.append(Ranked(score, docid, url, docnum))
            else:
                out.append(Ranked(score, docid, None, docnum, self.s.stored_fields))
        return out

    def _scores(
        self,
        weights: dict[str, float],
        wquery: WhooshQuery | None,
        require_all: bool = False,
        start: np.ndarray | None = None,
        model: str | None = None,
        memo: Memo | None = None,
    ) -> np.ndarray:
        """Every document's score under weighting *model* (the session's by default; 0:
        not a hit), added to *start* if given, the filter and mask of *wquery* applied
        (none without it).  The scores of the
        query as typed are kept for :meth:`count`; *memo* keeps the scored postings between
        a query's passes (:meth:`ArrayIndex.accumulate`)."""
        model = model or self.params.model
        key = (tuple(weights.items()), require_all, model)
        first = self._first
        if start is None and first is not None and first[0] is wquery and first[1] == key:
            return first[2]
        arrays = self.arrays
        if model in ("dph", "lgd"):
            scores, matched = dfr.accumulate(
                arrays, weights, require_all, start, model, self.params.lgd_c
            )
        else:
            scores, matched = arrays.accumulate(weights, require_all, start, memo)
        if matched is not None:
            present = sum(1 for s in weights if s in arrays.ids)
            if present < len(weights):
                scores[:] = 0.0
            else:
                scores[matched < present] = 0.0
        allowed, masked, _ = (None, None, None) if wquery is None else self._filter_docs(wquery)
        if allowed is not None:
            keep = np.zeros(len(scores), dtype=bool)
            keep[allowed] = True
            scores[~keep] = 0.0
        if masked is not None:
            scores[masked] = 0.0
        if wquery is not None and weights is wquery.weights and start is None:
            self._first = (wquery, key, scores)
        return scores

    def _filter_docs(
        self, wquery: WhooshQuery
    ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """The documents the filter allows, those the mask removes (an excluded word), and
        those that hold every word of an excluded phrase, which the ranking checks
        (:meth:`_without_phrases`) (None: no such query).  Phrase words and exclusions are
        read from the array postings, one posting list at a time (Whoosh's matchers nest
        one level per word: a long phrase overflows Python's stack); ``site:`` alone asks
        Whoosh, a flat union of host queries."""
        if self._filtered is None or self._filtered[0] is not wquery:
            q = wquery.parsed
            arrays = self.arrays
            allowed: np.ndarray | None = None
            phrase_words = {s for phrase in q.phrases for s in phrase}
            if phrase_words:
                allowed = arrays.containing_all(phrase_words)
            if wquery.sites:
                on_site = np.zeros(self.n, dtype=bool)
                for site in wquery.sites:
                    on_site[np.fromiter(matching_docs(self.s, site), dtype=np.int64)] = True
                allowed = on_site if allowed is None else allowed & on_site
            # An excluded phrase of one word (the others stop words) is that word.
            words = q.excluded + [p[0] for p in q.excluded_phrases if len(p) == 1]
            masked = arrays.containing_any(words) if words else None
            suspects: np.ndarray | None = None
            for phrase in q.excluded_phrases:
                if len(phrase) > 1:
                    holds = arrays.containing_all(phrase)
                    suspects = holds if suspects is None else suspects | holds
            self._filtered = (
                wquery,
                None if allowed is None else np.flatnonzero(allowed),
                None if masked is None else np.flatnonzero(masked),
                None if suspects is None else np.flatnonzero(suspects),
            )
        return self._filtered[1], self._filtered[2], self._filtered[3]

    def count(
        self, q: ParsedQuery, wquery: WhooshQuery, expand: bool = True, check: int = 0
    ) -> tuple[int, bool]:
        """The documents :meth:`rank` ranks for *q* (those of the expanded query when it
        is expanded), from the scores of its last ranking of *wquery* (or scored now):
        (number, exact?).  Exact on the array postings, unless hits that hold every
        word of an excluded phrase were left out unchecked (past *check*)."""
        scores = self._ranking_scores(q, wquery, expand, check)
        assert self._ranking is not None
        return int(np.count_nonzero(scores > 0)), self._ranking[3]

    def count_as_typed(
        self, q: ParsedQuery, wquery: WhooshQuery, expand: bool = True, check: int = 0
    ) -> int:
        """The documents of :meth:`count` that the query as typed finds, before its
        expansion added any (what a spelling suggestion judges): the hits of its last
        ranking that its first pass scored, without a search of its own.  Expansion only
        adds weight, so those are the first pass's hits (less the pages of an excluded
        phrase left out of both)."""
        scores = self._ranking_scores(q, wquery, expand, check)
        first = self._first
        if first is None or first[0] is not wquery:  # not expanded (or scored elsewhere)
            return int(np.count_nonzero(scores > 0))
        return int(np.count_nonzero((scores > 0) & (first[2] > 0)))

    # -- explanations ------------------------------------------------------------------

    def explain(
        self,
        docnum: int,
        weights: dict[str, float],
        counts: dict[str, dict[str, int]] | None = None,
        expanded: bool = False,
    ) -> Explanation:
        """The score of document *docnum* for query *weights*, term by term, from its
        postings (the arrays' forward index).

        *counts* gives, per stem, the counts per section (from the database) for display.
        In the per-field form, each term's tf is ``tf~``, its weighted counts per section
        each length-normalised by its section (the score is then ``qw · idf · (k1 + 1) ·
        tf~ / (k1 + tf~)``).
        """
        gids, tfs, length = self.arrays.vector(docnum)
        tf_of = dict(zip(gids.tolist(), tfs.tolist(), strict=True))
        p = self.params
        terms = []
        for stem, qw in weights.items():
            gid = self.arrays.ids.get(stem)
            tf = tf_of.get(gid, 0.0) if gid is not None else 0.0
            if not tf or gid is None:
                continue
            idf_value = self.idf(stem)
            if p.model in ("dph", "lgd"):
                stat = dfr.term_stats(self.arrays, p.model, np.array([gid], dtype=np.int64))[0]
                _, avg = dfr.page_lengths(self.arrays)
                page = dfr.page_length(self.arrays, docnum)
                part = qw * float(dfr.weight(p.model, tf, page, avg, self.n, stat, p.lgd_c))
            elif self.arrays.section_b is not None:
                tf = self.arrays.field_tf(docnum, gid)[0] if gid is not None else 0.0
                part = qw * ranking.bm25(idf_value, tf, 1.0, 1.0, 0.0, p.k1)
            else:
                part = qw * ranking.bm25(idf_value, tf, length, self.avglen, p.b, p.k1)
            terms.append(
                TermExplanation(stem, qw, idf_value, tf, (counts or {}).get(stem, {}), part)
            )
        terms.sort(key=lambda t: -t.contribution)
        prior = self.prior(docnum)
        near = self.proximity_bonus.get(docnum, 0.0)
        avglen = self.avglen
        if p.model in ("dph", "lgd"):
            length, avglen = dfr.page_length(self.arrays, docnum), dfr.page_lengths(self.arrays)[1]
        return Explanation(
            sum(t.contribution for t in terms) + prior + near,
            length,
            avglen,
            p.k1,
            p.b,
            terms,
            expanded,
            prior,
            p.bm25f,
            near,
            p.model,
            p.lgd_c if p.model == "lgd" else 0.0,
        )
