"""Answering a query: Whoosh finds and ranks, the database supplies what is shown.

:meth:`Searcher.search` returns a :class:`ResultPage` of :class:`Hit` objects (rank, score,
url, title, description, snippet with the query words marked), the total number of hits
and the time taken.  Quoted phrases are checked against the stored text of each candidate.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine, select
from whoosh import query as wq
from whoosh import scoring

from search.analysis import get_analyzer
from search.index import TEXT_FIELDS, Index
from search.models import Document
from search.query import ParsedQuery
from search.ranking import position_weight

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "total": self.total,
            "page": self.page,
            "per_page": self.per_page,
            "seconds": round(self.seconds, 4),
            "hits": [h.as_dict() for h in self.hits],
        }


def term_query(stem: str, boost: float = 1.0) -> wq.Query:
    """One analyzed word, in any section."""
    return wq.Or([wq.Term(f, stem) for f in TEXT_FIELDS], boost=boost)


@dataclass(slots=True)
class WhooshQuery:
    """What Whoosh runs: the scored query, a filter (must match) and a mask (must not)."""

    scored: wq.Query
    filter: wq.Query | None = None
    mask: wq.Query | None = None


def build_query(q: ParsedQuery) -> WhooshQuery:
    """The Whoosh query of a parsed query (scoring: BM25F × position weights).

    Phrase words and ``site:`` restrictions become a filter and exclusions a mask, so they
    select documents without changing scores.
    """
    clauses = [term_query(t.stem, position_weight(t.position)) for t in q.terms]
    scored: wq.Query = wq.And(clauses) if q.require_all else wq.Or(clauses)
    required: list[wq.Query] = [term_query(s) for phrase in q.phrases for s in phrase]
    if q.sites:
        required.append(
            wq.Or([wq.Or([wq.Term("host", s), wq.Wildcard("host", f"*.{s}")]) for s in q.sites])
        )
    excluded = [term_query(s) for s in q.excluded]
    excluded += [wq.And([term_query(s) for s in p]) for p in q.excluded_phrases]
    return WhooshQuery(
        scored,
        wq.And(required) if required else None,
        wq.Or(excluded) if excluded else None,
    )


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
    """Search one index, show results from one database."""

    def __init__(self, engine: Engine, index: Index) -> None:
        self.engine = engine
        self.index = index

    def search(self, q: ParsedQuery, page: int = 1, per_page: int = 10) -> ResultPage:
        if page < 1 or per_page < 1:
            raise ValueError("page and number of results must be ≥ 1")
        started = time.perf_counter()
        ix = self.index.open()
        wquery = build_query(q)
        offset = (page - 1) * per_page
        query_stems = set(q.stems)
        with ix.searcher(weighting=scoring.BM25F()) as s:
            if q.phrases:
                # Phrases are checked on the stored text: rank, then filter candidates.
                results = s.search(
                    wquery.scored,
                    filter=wquery.filter,
                    mask=wquery.mask,
                    limit=max(200, 10 * (offset + per_page)),
                )
                candidates = [(hit.score, int(hit["docid"])) for hit in results]
                docs = self._documents([d for _, d in candidates], with_text=True)
                kept = []
                words_of: dict[int, list[tuple[int, int, str]]] = {}
                for score, docid in candidates:
                    doc = docs.get(docid)
                    if doc is None:
                        continue
                    words = _stems_of(doc.text or "", doc.language)
                    if all(contains_phrase(words, p) for p in q.phrases):
                        kept.append((score, docid))
                        words_of[docid] = words
                total = len(kept)
                chosen = kept[offset : offset + per_page]
            else:
                results = s.search(
                    wquery.scored, filter=wquery.filter, mask=wquery.mask, limit=offset + per_page
                )
                total = len(results)
                chosen = [(hit.score, int(hit["docid"])) for hit in results[offset:]]
                docs = self._documents([d for _, d in chosen], with_text=True)
                words_of = {}
        hits = []
        for rank, (score, docid) in enumerate(chosen, offset + 1):
            doc = docs.get(docid)
            if doc is None:  # in the index but no longer in the database
                continue
            snippet = make_snippet(
                doc.text or doc.description or "", query_stems, doc.language, words_of.get(docid)
            )
            hits.append(
                Hit(
                    rank,
                    float(score),
                    docid,
                    doc.url,
                    doc.title,
                    doc.description,
                    doc.content_type,
                    snippet,
                )
            )
        return ResultPage(q.text, total, page, per_page, time.perf_counter() - started, hits)

    def _documents(self, ids: Sequence[int], with_text: bool) -> dict[int, Any]:
        if not ids:
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
