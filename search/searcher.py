"""Answering a query: the index finds and ranks, the database supplies what is shown.

Ranking runs on the array postings of :mod:`search.arrays` (numpy, exhaustive: every
matching document is scored and the number of hits is exact); Whoosh's matchers only
select the documents of ``site:``, phrase and exclusion filters
(:func:`search.indexquery.build_query`).
An index without array postings, or of another format, is refused with
:class:`search.index.IndexOutdated` ("run ``python -m search reindex``").  The same formula
on Whoosh's own matchers is kept as the tests' reference, :mod:`search.reference`.

:meth:`Searcher.search` returns a :class:`search.results.ResultPage` of hits with snippets
(:mod:`search.snippets`); quoted phrases are checked against the stored text of each
candidate.

With the ranking's ``linkrank`` weight above 0, each hit's score gets the link-graph prior
(:func:`search.ranking.link_prior`) added after the ranking by words (and after query
expansion, whose feedback documents are chosen by their words alone).  The linkranks are
read from the database once per index generation, and again when older than
:data:`LINKRANK_MAX_AGE`, into one ``float32`` per document number: no database read per
query or per hit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import Engine

from search import ranking, spelling
from search.arrays import ArrayIndex
from search.crawldb import CrawlDB
from search.index import REINDEX, Index, IndexOutdated
from search.indexquery import WhooshQuery, build_query, matching_docs, open_searcher, stored
from search.query import ParsedQuery, check_window
from search.results import Explanation, Hit, Ranked, ResultPage, TermExplanation
from search.snippets import contains_phrase, make_snippet, word_stems

#: Seconds a process keeps the linkranks it read (``update_linkrank`` after a crawl, or a
#: ``reindex``, is seen within this time by a long-lived searcher such as the web's).
LINKRANK_MAX_AGE = 60.0


class SearchSession:
    """One open Whoosh searcher and its array postings: rank, count, expand, explain
    (reuse it for many queries)."""

    def __init__(
        self,
        searcher: Any,
        params: ranking.Params = ranking.DEFAULT,
        linkranks: Any = None,
    ) -> None:
        self.s = searcher
        #: The ranking's parameters (:class:`search.ranking.Params`).
        self.params = params
        arrays = ArrayIndex.load(searcher, params.k1, params.b)
        if arrays is None:
            raise IndexOutdated(
                f"the search index has segments without array postings: run `{REINDEX}` "
                f"to rebuild it from the database"
            )
        #: The array postings (:mod:`search.arrays`) the ranking runs on.
        self.arrays = arrays
        self.n = arrays.n
        self.avglen = arrays.avglen
        #: Each document number's linkrank (``float32``), or None: no link-graph prior.
        #: *linkranks* is that array, or a function of the arrays that returns it.
        self.linkranks: np.ndarray | None = (
            linkranks(arrays, searcher) if callable(linkranks) else linkranks
        )
        # The last query's filtered documents, and its scores before expansion (what
        # count() counts), kept with the query they belong to.
        self._filtered: tuple[WhooshQuery, np.ndarray | None, np.ndarray | None] | None = None
        self._first: tuple[WhooshQuery, Any, np.ndarray] | None = None

    def df(self, stem: str) -> int:
        gid = self.arrays.ids.get(stem)
        return 0 if gid is None else int(self.arrays.df[gid])

    def idf(self, stem: str) -> float:
        return ranking.idf(self.n, self.df(stem))

    # -- ranking ---------------------------------------------------------------------

    def query(self, q: ParsedQuery) -> WhooshQuery:
        """*q* for this session (its query weights with the session's *decay*)."""
        return build_query(q, self.params.decay)

    def rank(
        self,
        q: ParsedQuery,
        limit: int,
        expand: bool = True,
        wquery: WhooshQuery | None = None,
    ) -> list[Ranked]:
        """The best *limit* documents for *q* (with query expansion unless told not to):
        every matching document scored."""
        wquery = wquery or self.query(q)
        weights = wquery.weights
        expand = expand and not q.require_all and self.expands(weights)
        scores = self._scores(weights, wquery, q.require_all)
        if expand:
            feedback = self.arrays.best(scores, self.params.fb_docs)
            if feedback:
                expanded = self._expand(weights, feedback)
                # A score is linear in the query weights: the expanded query's scores are
                # the first ones plus those of the weights the expansion added.
                added = {
                    s: w - weights.get(s, 0.0)
                    for s, w in expanded.items()
                    if w != weights.get(s, 0.0)
                }
                if added:
                    scores = self._scores(added, wquery, start=scores)
        return self._ranked(self.arrays.best(self._with_prior(scores), limit))

    def _with_prior(self, scores: np.ndarray) -> np.ndarray:
        """*scores* with the link-graph prior added to every hit's (a new array)."""
        weight = self.params.linkrank
        if weight <= 0 or self.linkranks is None:
            return scores
        hits = np.flatnonzero(scores > 0)
        if not len(hits):
            return scores
        out = scores.astype(np.float64)  # a copy
        out[hits] += ranking.link_prior(self.linkranks[hits], weight)
        return out

    def prior(self, docnum: int) -> float:
        """The link-graph prior added to document *docnum*'s score (0 when off)."""
        if self.params.linkrank <= 0 or self.linkranks is None:
            return 0.0
        return float(ranking.link_prior(self.linkranks[docnum], self.params.linkrank))

    def expanded_weights(self, q: ParsedQuery) -> dict[str, float]:
        """The query weights after expansion (for explanations)."""
        wquery = self.query(q)
        if q.require_all or not self.expands(wquery.weights):
            return wquery.weights
        hits = self.top(wquery.weights, self.params.fb_docs, wquery)
        return self.expand(wquery.weights, hits)

    def expands(self, weights: dict[str, float]) -> bool:
        """Whether a query is expanded (see :mod:`search.ranking`)."""
        return self.params.expansion != "none" and ranking.expands(len(weights), self.n)

    def expand(self, weights: dict[str, float], feedback: list[Ranked]) -> dict[str, float]:
        """Pseudo-relevance feedback from the documents *feedback* (the best of the first
        ranking): the method of the session's parameters (:mod:`search.ranking`)."""
        return self._expand(weights, [(h.score, h.docnum) for h in feedback])

    def _expand(
        self, weights: dict[str, float], feedback: list[tuple[float, int]]
    ) -> dict[str, float]:
        p = self.params
        docnums = [d for _, d in feedback]
        if p.expansion == "rm3":
            frequent = ranking.RM3_MAX_DF_SHARE * self.n
            scores = [score for score, _ in feedback]
            return self.arrays.rm3(docnums, scores, weights, frequent, p.fb_terms, p.fb_weight)
        if p.expansion == "rocchio":
            frequent = ranking.ROCCHIO_MAX_DF_SHARE * self.n
            return self.arrays.rocchio(docnums, weights, frequent, p.fb_terms)
        return dict(weights)

    def top(self, weights: dict[str, float], limit: int, wquery: WhooshQuery) -> list[Ranked]:
        """The best *limit* documents for a weighted OR query."""
        return self._ranked(self.arrays.best(self._scores(weights, wquery), limit))

    def _ranked(self, best: list[tuple[float, int]]) -> list[Ranked]:
        return [Ranked(score, *stored(self.s, docnum), docnum) for score, docnum in best]

    def _scores(
        self,
        weights: dict[str, float],
        wquery: WhooshQuery,
        require_all: bool = False,
        start: np.ndarray | None = None,
    ) -> np.ndarray:
        """Every document's score (0: not a hit), added to *start* if given, filter and
        mask applied.  The scores of the query as typed are kept for :meth:`count`."""
        key = (tuple(weights.items()), require_all)
        first = self._first
        if start is None and first is not None and first[0] is wquery and first[1] == key:
            return first[2]
        arrays = self.arrays
        scores, matched = arrays.accumulate(weights, require_all, start)
        if matched is not None:
            present = sum(1 for s in weights if s in arrays.ids)
            if present < len(weights):
                scores[:] = 0.0
            else:
                scores[matched < present] = 0.0
        allowed, masked = self._filter_docs(wquery)
        if allowed is not None:
            keep = np.zeros(len(scores), dtype=bool)
            keep[allowed] = True
            scores[~keep] = 0.0
        if masked is not None:
            scores[masked] = 0.0
        if weights is wquery.weights and start is None:
            self._first = (wquery, key, scores)
        return scores

    def _filter_docs(self, wquery: WhooshQuery) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The documents the filter allows and those the mask removes (None: no such
        query).  Phrase words and exclusions are read from the array postings, one posting
        list at a time (Whoosh's matchers nest one level per word: a long phrase overflows
        Python's stack); ``site:`` alone asks Whoosh, a flat union of host queries."""
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
            masked: np.ndarray | None = None
            if q.excluded or q.excluded_phrases:
                masked = arrays.containing_any(q.excluded)
                for phrase in q.excluded_phrases:
                    masked |= arrays.containing_all(phrase)
            self._filtered = (
                wquery,
                None if allowed is None else np.flatnonzero(allowed),
                None if masked is None else np.flatnonzero(masked),
            )
        return self._filtered[1], self._filtered[2]

    def count(self, q: ParsedQuery, wquery: WhooshQuery) -> tuple[int, bool]:
        """Documents matching *q*: (number, exact?) — always exact on the array postings."""
        scores = self._scores(wquery.weights, wquery, q.require_all)
        return int(np.count_nonzero(scores)), True

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
        """
        gids, tfs, length = self.arrays.vector(docnum)
        tf_of = dict(zip(gids.tolist(), tfs.tolist(), strict=True))
        p = self.params
        terms = []
        for stem, qw in weights.items():
            gid = self.arrays.ids.get(stem)
            tf = tf_of.get(gid, 0.0) if gid is not None else 0.0
            if not tf:
                continue
            idf_value = self.idf(stem)
            part = qw * ranking.bm25(idf_value, tf, length, self.avglen, p.b, p.k1)
            terms.append(
                TermExplanation(stem, qw, idf_value, tf, (counts or {}).get(stem, {}), part)
            )
        terms.sort(key=lambda t: -t.contribution)
        prior = self.prior(docnum)
        return Explanation(
            sum(t.contribution for t in terms) + prior,
            length,
            self.avglen,
            p.k1,
            p.b,
            terms,
            expanded,
            prior,
        )


class Searcher:
    """Search one index, show results from one database.

    The Whoosh reader is opened once and kept (refreshed when the index has changed), so
    a long-lived Searcher (the web application, a benchmark) does not reopen it per query.
    """

    def __init__(
        self, engine: Engine | None, index: Index, params: ranking.Params = ranking.DEFAULT
    ) -> None:
        self.engine = engine
        #: The ranking's parameters (:class:`search.ranking.Params`).
        self.params = params
        #: The database's reads (titles, texts, section counts); None: hits without them.
        self.db = CrawlDB(engine) if engine is not None else None
        self.index = index
        self._searcher: Any = None

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    @contextmanager
    def session(self, params: ranking.Params | None = None) -> Iterator[SearchSession]:
        """A :class:`SearchSession` on the current index (the reader is kept open), with
        the Searcher's ranking parameters or *params*."""
        if self._searcher is None:
            self._searcher = open_searcher(self.index)
        elif not self._searcher.up_to_date():
            self._searcher = self._searcher.refresh()
        params = params or self.params
        linkranks = self._linkranks if params.linkrank > 0 and self.db is not None else None
        yield SearchSession(self._searcher, params, linkranks)

    def _linkranks(self, arrays: ArrayIndex, searcher: Any) -> np.ndarray:
        """Each document number's linkrank (0 without one), read from the database at
        most once per index generation and :data:`LINKRANK_MAX_AGE`."""
        cached = arrays.per_doc.get("linkrank")
        now = time.monotonic()
        if cached is not None and now - cached[0] < LINKRANK_MAX_AGE:
            return cached[1]
        assert self.db is not None
        ids, ranks = self.db.linkranks()
        docids = arrays.docids(searcher)
        values = np.zeros(arrays.n, dtype=np.float32)
        if ids:
            by_id = np.zeros(max(ids) + 1, dtype=np.float32)
            by_id[np.array(ids, dtype=np.int64)] = ranks
            known = (docids >= 0) & (docids < len(by_id))
            values[known] = by_id[docids[known]]
        arrays.per_doc["linkrank"] = (now, values)
        return values

    def search(
        self,
        q: ParsedQuery,
        page: int = 1,
        per_page: int = 10,
        expand: bool = True,
        explain: bool = False,
    ) -> ResultPage:
        check_window(page, per_page)
        started = time.perf_counter()
        wquery = build_query(q, self.params.decay)
        offset = (page - 1) * per_page
        query_stems = set(q.stems)
        words_of: dict[int, list[tuple[int, int, str]]] = {}
        with self.session() as session:
            if q.phrases:
                # Phrases are checked on the stored text: rank, then filter candidates.
                ranked = session.rank(
                    q, max(200, 10 * (offset + per_page)), expand=expand, wquery=wquery
                )
                docs = self._documents([r.docid for r in ranked], with_text=True)
                kept = []
                for r in ranked:
                    doc = docs.get(r.docid)
                    if doc is None:
                        continue
                    words = word_stems(doc.text or "", doc.language)
                    if all(contains_phrase(words, p) for p in q.phrases):
                        kept.append(r)
                        words_of[r.docid] = words
                total, exact = len(kept), True
                chosen = kept[offset : offset + per_page]
            else:
                ranked = session.rank(q, offset + per_page, expand=expand, wquery=wquery)
                chosen = ranked[offset:]
                total, exact = session.count(q, wquery)
                total = max(total, len(ranked))
                docs = self._documents([r.docid for r in chosen], with_text=True)
            suggestion = spelling.suggest(
                session, q, self._surfaces, few_hits=total <= spelling.MAX_HITS
            )
            explanations: dict[int, Explanation] = {}
            if explain and chosen:
                weights = session.expanded_weights(q) if expand else wquery.weights
                counts = self._section_counts([r.docid for r in chosen], list(weights))
                for r in chosen:
                    explanations[r.docid] = session.explain(
                        r.docnum, weights, counts.get(r.docid), expanded=weights != wquery.weights
                    )
        hits = []
        for rank, r in enumerate(chosen, offset + 1):
            doc = docs.get(r.docid)
            if doc is None:  # in the index but no longer in the database
                continue
            snippet = make_snippet(
                doc.text or "",
                query_stems,
                doc.language,
                words_of.get(r.docid),
                description=doc.description,
            )
            hits.append(
                Hit(
                    rank,
                    r.score,
                    r.docid,
                    doc.url,
                    doc.title,
                    doc.description,
                    doc.content_type,
                    snippet,
                    explanations.get(r.docid),
                )
            )
        return ResultPage(
            q.text, total, page, per_page, time.perf_counter() - started, hits, exact, suggestion
        )

    def _documents(self, ids: Sequence[int], with_text: bool) -> dict[int, Any]:
        return self.db.documents(ids, with_text) if self.db is not None and ids else {}

    def _surfaces(self, stem: str) -> list[tuple[str, int]]:
        return self.db.surfaces(stem) if self.db is not None else []

    def _section_counts(
        self, ids: Sequence[int], stems: Sequence[str]
    ) -> dict[int, dict[str, dict[str, int]]]:
        return self.db.section_counts(ids, stems) if self.db is not None else {}
