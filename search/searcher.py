"""Answering a query: the index finds and ranks, the database supplies what is shown.

Ranking runs on the array postings of :mod:`search.arrays` (numpy, exhaustive); Whoosh's
matchers rank an index written without them, select the documents of ``site:``, phrase and
exclusion filters, and remain the reference the array path is tested against.

:meth:`Searcher.search` returns a :class:`ResultPage` of :class:`Hit` objects (rank, score,
url, title, description, snippet with the query words marked), the total number of hits
and the time taken.  Quoted phrases are checked against the stored text of each candidate.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine, select
from whoosh import query as wq
from whoosh import scoring

from search import ranking
from search.analysis import get_analyzer
from search.arrays import ArrayIndex
from search.index import WORDS_FIELD, Index, IndexMissing
from search.models import Document
from search.query import ParsedQuery

_SNIPPET_WORDS = 30
_SCAN_LIMIT = 40_000


@dataclass(slots=True)
class Segment:
    text: str
    match: bool


@dataclass(slots=True)
class Hit:
    rank: int
    score: float
    docid: int
    url: str
    title: str | None
    description: str | None
    content_type: str | None
    snippet: list[Segment] = field(default_factory=list)
    explanation: Explanation | None = None

    def snippet_text(self, mark: tuple[str, str] = ("[", "]")) -> str:
        return "".join(f"{mark[0]}{s.text}{mark[1]}" if s.match else s.text for s in self.snippet)

    def snippet_html(self) -> str:
        return "".join(
            f"<b>{html.escape(s.text)}</b>" if s.match else html.escape(s.text)
            for s in self.snippet
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("snippet")
        if self.explanation is None:
            data.pop("explanation")
        data["snippet"] = self.snippet_text(("", ""))
        data["snippet_html"] = self.snippet_html()
        data["matches"] = [s.text for s in self.snippet if s.match]
        return data


@dataclass(slots=True)
class ResultPage:
    query: str
    total: int
    page: int
    per_page: int
    seconds: float
    hits: list[Hit]
    #: False when ``total`` is an estimate (big indexes).
    total_exact: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "total": self.total,
            "total_exact": self.total_exact,
            "page": self.page,
            "per_page": self.per_page,
            "seconds": round(self.seconds, 4),
            "hits": [h.as_dict() for h in self.hits],
        }


class _BM25Scorer(scoring.WeightLengthScorer):
    """BM25 of one stem in the merged ``words`` field (formula: :mod:`search.ranking`)."""

    def __init__(self, searcher: Any, fieldname: str, text: bytes, b: float, k1: float) -> None:
        parent = searcher.get_parent()
        self.idf = ranking.idf(parent.doc_count_all(), parent.doc_frequency(fieldname, text))
        self.avgfl = parent.avg_field_length(fieldname) or 1.0
        self.b, self.k1 = b, k1
        self.setup(searcher, fieldname, text)

    def _score(self, weight: float, length: float) -> float:
        return ranking.bm25(self.idf, weight, length, self.avgfl, self.b, self.k1)


class BM25(scoring.WeightingModel):
    """Whoosh weighting model of :mod:`search.ranking` (block-max skipping supported)."""

    def __init__(self, b: float | None = None, k1: float | None = None) -> None:
        self.b = ranking.B if b is None else b
        self.k1 = ranking.K1 if k1 is None else k1

    def supports_block_quality(self) -> bool:
        return True

    def scorer(self, searcher: Any, fieldname: str, text: bytes, qf: int = 1) -> Any:
        if not searcher.schema[fieldname].scorable:
            return scoring.WeightScorer.for_(searcher, fieldname, text)
        return _BM25Scorer(searcher, fieldname, text, self.b, self.k1)


def term_query(stem: str, boost: float = 1.0) -> wq.Query:
    """One analyzed word, in any section (the merged ``words`` field)."""
    return wq.Term(WORDS_FIELD, stem, boost=boost)


def weighted_query(weights: dict[str, float], require_all: bool = False) -> wq.Query:
    clauses = [term_query(stem, w) for stem, w in weights.items()]
    if len(clauses) == 1:
        return clauses[0]
    return wq.And(clauses) if require_all else wq.Or(clauses)


@dataclass(slots=True)
class WhooshQuery:
    """What Whoosh runs: the scored query, a filter (must match) and a mask (must not)."""

    scored: wq.Query
    filter: wq.Query | None = None
    mask: wq.Query | None = None
    weights: dict[str, float] = field(default_factory=dict)


def _site_query(site: str) -> wq.Query:
    """``site:host``: the host and its subdomains, on any port (``site:host:port``: that
    port only)."""
    if ":" in site:
        return wq.Or([wq.Term("host", site), wq.Wildcard("host", f"*.{site}")])
    return wq.Or(
        [
            wq.Term("host", site),
            wq.Wildcard("host", f"*.{site}"),
            wq.Wildcard("host", f"{site}:*"),
            wq.Wildcard("host", f"*.{site}:*"),
        ]
    )


def build_query(q: ParsedQuery) -> WhooshQuery:
    """The Whoosh query of a parsed query (BM25F, query words weighted by qw(t)).

    Phrase words and ``site:`` restrictions become a filter and exclusions a mask, so they
    select documents without changing scores.
    """
    weights = ranking.query_weights(q.all_stems)
    scored = weighted_query(weights, q.require_all)
    required: list[wq.Query] = [term_query(s) for phrase in q.phrases for s in phrase]
    if q.sites:
        required.append(wq.Or([_site_query(s) for s in q.sites]))
    excluded = [term_query(s) for s in q.excluded]
    excluded += [wq.And([term_query(s) for s in p]) for p in q.excluded_phrases]
    return WhooshQuery(
        scored,
        wq.And(required) if required else None,
        wq.Or(excluded) if excluded else None,
        weights,
    )


@dataclass(slots=True)
class Ranked:
    """One ranked document, before the database is read."""

    score: float
    docid: int
    url: str
    docnum: int


@dataclass(slots=True)
class TermExplanation:
    stem: str
    query_weight: float
    idf: float
    tf: float
    counts: dict[str, int]
    contribution: float


@dataclass(slots=True)
class Explanation:
    """Why a document scored what it did: the terms of the formula of :mod:`search.ranking`."""

    score: float
    length: float
    avg_length: float
    k1: float
    b: float
    terms: list[TermExplanation]
    expanded: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [
            f"score {self.score:.4f} = Σ qw · idf · (k1+1)·tf' / (k1+tf'),  "
            f"tf' = tf / (1 − b + b·len/avglen);  len {self.length:.0f}, "
            f"avglen {self.avg_length:.1f}, k1 {self.k1}, b {self.b}"
        ]
        for t in self.terms:
            where = ", ".join(f"{k} {v}" for k, v in t.counts.items() if v) or "-"
            out.append(
                f"  {t.contribution:8.4f}  {t.stem:<16} qw {t.query_weight:.3f}  "
                f"idf {t.idf:.3f}  tf {t.tf:g} ({where})"
            )
        return out


#: A stem in more than this share of the documents is "frequent": its posting list is
#: long and its idf low, so query expansion does not add it (:meth:`SearchSession.expand`).
FREQUENT_SHARE = 0.05
#: Index size from which the number of hits is estimated instead of counted.
EXACT_TOTAL_MAX_DOCS = 20_000


class SearchSession:
    """One open Whoosh searcher and its array postings: rank, count, expand, explain
    (reuse it for many queries)."""

    def __init__(self, searcher: Any, use_arrays: bool = True) -> None:
        self.s = searcher
        if WORDS_FIELD not in searcher.schema:
            raise IndexOutdated(
                "the search index was built by an older version: rebuild it with "
                "python -m search reindex"
            )
        self.n = int(searcher.doc_count_all())
        self.avglen = float(searcher.avg_field_length(WORDS_FIELD) or 1.0)
        self._df: dict[str, int] = {}
        #: The array postings (:mod:`search.arrays`); None: Whoosh's matchers rank (an
        #: index written before the arrays existed, or *use_arrays* False).
        self.arrays = ArrayIndex.load(searcher, ranking.K1, ranking.B) if use_arrays else None
        #: Where query expansion reads the feedback documents' term vectors without the
        #: arrays: Whoosh's term vectors (indexes written before the array postings), else
        #: the arrays' forward index (Whoosh's matchers still rank: *use_arrays* False).
        self._whoosh_vectors = searcher.schema[WORDS_FIELD].vector is not None
        self._forward: ArrayIndex | None = self.arrays
        if self._forward is None and not self._whoosh_vectors:
            self._forward = ArrayIndex.load(searcher, ranking.K1, ranking.B)
        # The last query's filtered documents, and its scores before expansion (what
        # count() counts), kept with the query they belong to.
        self._filtered: tuple[WhooshQuery, np.ndarray | None, np.ndarray | None] | None = None
        self._first: tuple[WhooshQuery, Any, np.ndarray] | None = None

    def df(self, stem: str) -> int:
        n = self._df.get(stem)
        if n is None:
            n = self._df[stem] = int(self.s.doc_frequency(WORDS_FIELD, stem))
        return n

    def idf(self, stem: str) -> float:
        return ranking.idf(self.n, self.df(stem))

    # -- ranking ---------------------------------------------------------------------

    def rank(
        self,
        q: ParsedQuery,
        limit: int,
        expand: bool = True,
        wquery: WhooshQuery | None = None,
    ) -> list[Ranked]:
        """The best *limit* documents for *q* (with query expansion unless told not to)."""
        wquery = wquery or build_query(q)
        weights = wquery.weights
        expand = expand and not q.require_all and self.expands(weights)
        if self.arrays is not None:
            return self._rank_arrays(weights, limit, expand, wquery, q.require_all)
        if q.require_all:
            return self._search(wquery.scored, limit, wquery)
        hits = self.top(weights, limit if not expand else max(limit, ranking.FEEDBACK_DOCS), wquery)
        if expand and hits:
            expanded = self.expand(weights, hits[: ranking.FEEDBACK_DOCS])
            if expanded != weights:
                hits = self.top(expanded, limit, wquery)
        return hits[:limit]

    def expanded_weights(self, q: ParsedQuery) -> dict[str, float]:
        """The query weights after expansion (for explanations)."""
        wquery = build_query(q)
        if q.require_all or not self.expands(wquery.weights):
            return wquery.weights
        hits = self.top(wquery.weights, ranking.FEEDBACK_DOCS, wquery)
        return self.expand(wquery.weights, hits)

    def expands(self, weights: dict[str, float]) -> bool:
        """Whether a query is expanded (see :mod:`search.ranking`)."""
        return len(weights) >= ranking.FEEDBACK_MIN_WORDS and self.n >= ranking.FEEDBACK_MIN_DOCS

    def expand(self, weights: dict[str, float], feedback: list[Ranked]) -> dict[str, float]:
        """Pseudo-relevance feedback (:func:`search.ranking.feedback_terms`), over the stems
        that are not frequent (see :data:`FREQUENT_SHARE`)."""
        frequent = FREQUENT_SHARE * self.n
        if self.arrays is not None:
            return self.arrays.feedback([h.docnum for h in feedback], weights, frequent)
        vectors = []
        for hit in feedback:
            length = self.s.doc_field_length(hit.docnum, WORDS_FIELD, 1)
            vector: dict[str, float] = {}
            for stem, tf in self._doc_vector(hit.docnum):
                if stem not in weights and self.df(stem) > frequent:
                    # A frequent word says little of the topic, and its long posting list
                    # would make the expanded query slow.
                    continue
                vector[stem] = ranking.bm25(self.idf(stem), tf, length, self.avglen)
            vectors.append(vector)
        return ranking.feedback_terms(vectors, weights)

    def _doc_vector(self, docnum: int) -> list[tuple[str, float]]:
        """A document's stems and weighted term frequencies (empty when the index keeps
        neither Whoosh term vectors nor array postings)."""
        if self._whoosh_vectors:
            return list(self.s.vector_as("weight", docnum, WORDS_FIELD))
        if self._forward is None:
            return []
        gids, tfs, _ = self._forward.vector(docnum)
        texts = self._forward.texts
        return [(texts[g], tf) for g, tf in zip(gids.tolist(), tfs.tolist(), strict=True)]

    def top(self, weights: dict[str, float], limit: int, wquery: WhooshQuery) -> list[Ranked]:
        """The best *limit* documents for a weighted OR query: on the array postings, or
        in one Whoosh search (whose block-max quality skips the blocks that cannot reach
        the top *limit*) when the index has none."""
        if self.arrays is not None:
            return self._top_arrays(weights, limit, wquery)
        present = {s: w for s, w in weights.items() if self.df(s)}
        if not present:
            return []
        return self._search(weighted_query(present), limit, wquery)

    # -- the array postings (search.arrays) ----------------------------------------------

    def _rank_arrays(
        self,
        weights: dict[str, float],
        limit: int,
        expand: bool,
        wquery: WhooshQuery,
        require_all: bool = False,
    ) -> list[Ranked]:
        """:meth:`rank` on the array postings: every matching document scored."""
        arrays = self._arrays()
        scores = self._scores(weights, wquery, require_all)
        if expand:
            feedback = [d for _, d in arrays.best(scores, ranking.FEEDBACK_DOCS)]
            if feedback:
                expanded = arrays.feedback(feedback, weights, FREQUENT_SHARE * self.n)
                # A score is linear in the query weights: the expanded query's scores are
                # the first ones plus those of the weights the expansion added.
                added = {
                    s: w - weights.get(s, 0.0)
                    for s, w in expanded.items()
                    if w != weights.get(s, 0.0)
                }
                if added:
                    scores = self._scores(added, wquery, start=scores)
        return self._ranked(arrays.best(scores, limit))

    def _top_arrays(
        self, weights: dict[str, float], limit: int, wquery: WhooshQuery
    ) -> list[Ranked]:
        return self._ranked(self._arrays().best(self._scores(weights, wquery), limit))

    def _ranked(self, best: list[tuple[float, int]]) -> list[Ranked]:
        out = []
        for score, docnum in best:
            fields = self.s.stored_fields(docnum)
            out.append(Ranked(score, int(fields["docid"]), fields["url"], docnum))
        return out

    def _arrays(self) -> ArrayIndex:
        assert self.arrays is not None
        return self.arrays

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
        arrays = self._arrays()
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
        query), from Whoosh's matchers (``site:``, phrase words, exclusions)."""
        if self._filtered is None or self._filtered[0] is not wquery:

            def docs(query: wq.Query | None) -> np.ndarray | None:
                if query is None:
                    return None
                return np.fromiter(query.docs(self.s), dtype=np.int64)

            self._filtered = (wquery, docs(wquery.filter), docs(wquery.mask))
        return self._filtered[1], self._filtered[2]

    def _search(self, query: wq.Query, limit: int, wquery: WhooshQuery) -> list[Ranked]:
        results = self.s.search(query, filter=wquery.filter, mask=wquery.mask, limit=limit)
        out = []
        for score, docnum in results.top_n:
            fields = self.s.stored_fields(docnum)
            out.append(Ranked(float(score), int(fields["docid"]), fields["url"], docnum))
        return out

    def count(self, q: ParsedQuery, wquery: WhooshQuery) -> tuple[int, bool]:
        """Documents matching *q*: (number, exact?).  Estimated on big indexes when the
        array postings are missing."""
        if self.arrays is not None:
            scores = self._scores(wquery.weights, wquery, q.require_all)
            return int(np.count_nonzero(scores)), True
        results = self.s.search(wquery.scored, filter=wquery.filter, mask=wquery.mask, limit=1)
        if self.n <= EXACT_TOTAL_MAX_DOCS or wquery.filter is not None:
            return len(results), True
        return min(self.n, int(results.estimated_length())), False

    # -- explanations ------------------------------------------------------------------

    def _tf(self, stem: str, docnum: int) -> float:
        """The weighted term frequency of *stem* in document *docnum* (its posting)."""
        if not self.df(stem):
            return 0.0
        m = self.s.postings(WORDS_FIELD, stem)
        m.skip_to(docnum)
        return float(m.weight()) if m.is_active() and m.id() == docnum else 0.0

    def explain(
        self,
        docnum: int,
        weights: dict[str, float],
        counts: dict[str, dict[str, int]] | None = None,
        expanded: bool = False,
    ) -> Explanation:
        """The score of document *docnum* for query *weights*, term by term.

        *counts* gives, per stem, the counts per section (from the database) for display.
        """
        length = float(self.s.doc_field_length(docnum, WORDS_FIELD, 1))
        terms = []
        for stem, qw in weights.items():
            tf = self._tf(stem, docnum)
            if not tf:
                continue
            idf_value = self.idf(stem)
            part = qw * ranking.bm25(idf_value, tf, length, self.avglen)
            terms.append(
                TermExplanation(stem, qw, idf_value, tf, (counts or {}).get(stem, {}), part)
            )
        terms.sort(key=lambda t: -t.contribution)
        return Explanation(
            sum(t.contribution for t in terms),
            length,
            self.avglen,
            ranking.K1,
            ranking.B,
            terms,
            expanded,
        )


class IndexOutdated(IndexMissing):
    """The index has an older schema and must be rebuilt."""


def _stems_of(
    text: str, language: str | None, limit: int = _SCAN_LIMIT
) -> list[tuple[int, int, str]]:
    """(start, end, stem) of every word of *text*; stop words get an empty stem."""
    analyzer = get_analyzer(language)
    return [
        (start, end, "" if analyzer.is_stop_word(word) else analyzer.stem(word))
        for start, end, word in analyzer.spans(text, limit)
    ]


def contains_phrase(words: Sequence[tuple[int, int, str]], phrase: Sequence[str]) -> bool:
    stems = [w[2] for w in words if w[2]]
    n = len(phrase)
    return any(stems[i : i + n] == list(phrase) for i in range(len(stems) - n + 1))


def make_snippet(
    text: str,
    stems: set[str],
    language: str | None = None,
    words: list[tuple[int, int, str]] | None = None,
    size: int = _SNIPPET_WORDS,
) -> list[Segment]:
    """The window of *size* words with the most distinct query words, words marked."""
    if not text:
        return []
    words = words if words is not None else _stems_of(text, language)
    if not words:
        return [Segment(text[:200], False)]
    best_start, best_score = 0, -1
    counts: dict[str, int] = {}
    for i, (_, _, stem) in enumerate(words):
        if stem in stems:
            counts[stem] = counts.get(stem, 0) + 1
        if i >= size:
            old = words[i - size][2]
            if old in counts:
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
        score = len(counts)
        if score > best_score:
            best_score, best_start = score, max(0, i - size + 1)
    window = words[best_start : best_start + size]
    start, end = window[0][0], window[-1][1]
    segments: list[Segment] = []
    if best_start > 0:
        segments.append(Segment("… ", False))
    pos = start
    for s, e, stem in window:
        if stem in stems:
            if s > pos:
                segments.append(Segment(text[pos:s], False))
            segments.append(Segment(text[s:e], True))
            pos = e
    if end > pos:
        segments.append(Segment(text[pos:end], False))
    if best_start + size < len(words):
        segments.append(Segment(" …", False))
    return segments


class Searcher:
    """Search one index, show results from one database.

    The Whoosh reader is opened once and kept (refreshed when the index has changed), so
    a long-lived Searcher (the web application, a benchmark) does not reopen it per query.
    """

    def __init__(self, engine: Engine | None, index: Index) -> None:
        self.engine = engine
        self.index = index
        self._searcher: Any = None

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    @contextmanager
    def session(self) -> Iterator[SearchSession]:
        """A :class:`SearchSession` on the current index (the reader is kept open)."""
        if self._searcher is None:
            self._searcher = self.index.open().searcher(weighting=BM25())
        elif not self._searcher.up_to_date():
            self._searcher = self._searcher.refresh()
        yield SearchSession(self._searcher)

    def search(
        self,
        q: ParsedQuery,
        page: int = 1,
        per_page: int = 10,
        expand: bool = True,
        explain: bool = False,
    ) -> ResultPage:
        if page < 1 or per_page < 1:
            raise ValueError("page and number of results must be ≥ 1")
        started = time.perf_counter()
        wquery = build_query(q)
        offset = (page - 1) * per_page
        query_stems = set(q.stems)
        words_of: dict[int, list[tuple[int, int, str]]] = {}
        with self.session() as session:
            if (
                wquery.filter is not None
                and next(iter(wquery.filter.docs(session.s)), None) is None
            ):
                # Whoosh takes a filter that matches nothing for no filter at all.
                return ResultPage(q.text, 0, page, per_page, time.perf_counter() - started, [])
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
                    words = _stems_of(doc.text or "", doc.language)
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
                doc.text or doc.description or "", query_stems, doc.language, words_of.get(r.docid)
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
        return ResultPage(q.text, total, page, per_page, time.perf_counter() - started, hits, exact)

    def _section_counts(
        self, ids: Sequence[int], stems: Sequence[str]
    ) -> dict[int, dict[str, dict[str, int]]]:
        """docid -> stem -> section -> count, from the stored postings."""
        if self.engine is None or not ids or not stems:
            return {}
        from search.analysis import SECTIONS
        from search.models import Posting, Word

        columns = [getattr(Posting, f"{s}_count") for s in SECTIONS]
        out: dict[int, dict[str, dict[str, int]]] = {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Posting.document_id, Word.stem, *columns)
                .join(Word, Word.id == Posting.word_id)
                .where(Posting.document_id.in_(list(ids)), Word.stem.in_(list(stems)))
            )
            for row in rows:
                out.setdefault(row[0], {})[row[1]] = dict(zip(SECTIONS, row[2:], strict=True))
        return out

    def _documents(self, ids: Sequence[int], with_text: bool) -> dict[int, Any]:
        if not ids or self.engine is None:
            return {}
        cols = [
            Document.id,
            Document.url,
            Document.title,
            Document.description,
            Document.content_type,
            Document.language,
        ]
        if with_text:
            cols.append(Document.text)
        with self.engine.connect() as conn:
            rows = conn.execute(select(*cols).where(Document.id.in_(list(ids)))).all()
        return {r.id: _Row(r, with_text) for r in rows}


class _Row:
    __slots__ = ("content_type", "description", "id", "language", "text", "title", "url")

    def __init__(self, row: Any, with_text: bool) -> None:
        self.id = row.id
        self.url = row.url
        self.title = row.title
        self.description = row.description
        self.content_type = row.content_type
        self.language = row.language
        self.text = row.text if with_text else None
