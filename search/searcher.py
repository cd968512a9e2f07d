"""Answering a query: the index finds and ranks, the database supplies what is shown.

Ranking runs on the array postings, in a :class:`search.searchsession.SearchSession` on
the current index (the Whoosh reader is kept open between queries).

:meth:`Searcher.search` returns a :class:`search.results.ResultPage` of hits with snippets
(:mod:`search.snippets`); quoted phrases, and excluded ones, are checked against the stored
text of each candidate (at most :data:`PHRASE_CANDIDATES` or :data:`PHRASE_DEPTH` × the
last result asked for).  The total is the number of pages ranked (those of the expanded
query when it is expanded).

With the ranking's ``linkrank`` weight above 0, each hit's score gets the link-graph prior
(:func:`search.ranking.link_prior`) added after the ranking by words (and after query
expansion, whose feedback documents are chosen by their words alone).  The linkranks are
read from the database once per index generation, and again when older than
:data:`LINKRANK_MAX_AGE`, into one ``float32`` per document number: no database read per
query or per hit.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from sqlalchemy import Engine

from search import ranking, spelling
from search.arrays import ArrayIndex
from search.crawldb import CrawlDB
from search.index import Index
from search.indexquery import build_query, open_searcher
from search.linkrank import LinkRanks
from search.query import ParsedQuery, QueryError, check_window
from search.results import Explanation, Hit, ResultPage
from search.searchsession import SearchSession
from search.segmentreaders import SegmentReaders
from search.snippets import Words, contains_phrase, make_snippet, word_stems

__all__ = ["LINKRANK_MAX_AGE", "Searcher", "SearcherPool"]

#: Seconds a process keeps the linkranks it read (``update_linkrank`` after a crawl, or a
#: ``reindex``, is seen within this time by a long-lived searcher such as the web's).
LINKRANK_MAX_AGE = 60.0
#: A query with a quoted phrase checks the phrase in the stored text of its best
#: ``max(PHRASE_CANDIDATES, PHRASE_DEPTH × the last result asked for)`` candidates; when
#: there are that many, its count of hits is of those (``total_exact`` false).  As many of
#: the hits that hold every word of an excluded phrase are checked for it; the others are
#: left out (``total_exact`` false).
PHRASE_CANDIDATES = 200
PHRASE_DEPTH = 10


def _close(open_searchers: list[Any]) -> None:
    while open_searchers:
        open_searchers.pop().close()


class Searcher:
    """Search one index, show results from one database.

    The Whoosh reader is opened once and kept (opened anew when the index has changed), so
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
        # The open Whoosh searcher, if any, last; before it, those replaced while a
        # session still used them.  Each holds its segments' files open
        # (:func:`search.indexquery.open_searcher`): closed by close(), or when this
        # Searcher is dropped.
        self._open: list[Any] = []
        # The segments' files, opened once for the generations (:meth:`_current`).
        self._readers = SegmentReaders()
        # The linkranks last read, with when (:meth:`_linkranks`).
        self._last_linkranks: tuple[float, LinkRanks] | None = None
        # Sessions open on this Searcher (nested ones included).
        self._sessions = 0
        weakref.finalize(self, _close, self._open)

    @property
    def _searcher(self) -> Any:
        return self._open[-1] if self._open else None

    def close(self) -> None:
        _close(self._open)

    def _current(self) -> Any:
        """The open Whoosh searcher, opened anew when the index has changed since, on
        the files of the segments that did not change (:mod:`search.segmentreaders`):
        a commit costs the segments it wrote.

        Not Whoosh's ``refresh()``: it keeps the reader of every segment whose id did not
        change, and such a reader keeps the deleted documents of its segment as they were
        when it opened, so the pages a re-crawl replaced or removed stayed found (and
        whoosh-reloaded's also keeps the segments a merge removed).  The searcher it
        replaces is closed at once, or when the last session using it ends."""
        searcher = self._searcher
        if searcher is not None and searcher.up_to_date():
            return searcher
        fresh = open_searcher(self.index, self._readers)
        if searcher is not None and not self._sessions:
            _close(self._open)
        self._open.append(fresh)
        return fresh

    @contextmanager
    def session(
        self,
        params: ranking.Params | None = None,
        read: dict[int, Any] | None = None,
        words: dict[int, Words] | None = None,
    ) -> Iterator[SearchSession]:
        """A :class:`SearchSession` on the current index (the reader is kept open), with
        the Searcher's ranking parameters or *params*; the stored texts its ranking reads
        (term proximity, excluded phrases) are kept in *read*, by id, when given, and
        their words (:func:`search.snippets.word_stems`) in *words*."""
        searcher = self._current()
        params = params or self.params
        linkranks = self._linkranks if params.linkrank > 0 and self.db is not None else None
        texts = holding = None
        if params.proximity > 0 and self.db is not None:
            texts = partial(self._documents, with_text=True, read=read)
        if self.db is not None:
            holding = partial(self._holding, read=read, words=words)
        self._sessions += 1
        try:
            yield SearchSession(searcher, params, linkranks, texts, holding)
        finally:
            self._sessions -= 1
            if not self._sessions:
                while len(self._open) > 1:  # replaced under a session that has ended
                    self._open.pop(0).close()

    def warm(self) -> None:
        """Do now what the first query would: open the index, read its array postings and
        the linkranks, prepare the database's read of the hits (a long-lived process calls
        this before it answers, so that its first query costs what the others do)."""
        with self.session() as session:
            if isinstance(session.linkranks, LinkRanks):
                session.linkranks.read_all()
        self._documents([0], with_text=True)

    def _linkranks(self, arrays: ArrayIndex, searcher: Any) -> LinkRanks:
        """Each document number's linkrank (0 without one), read from the database as
        the queries need them (:class:`search.linkrank.LinkRanks`), anew once per
        :data:`LINKRANK_MAX_AGE`: all of them at once when those before were (a warmed,
        long-lived process).  A new index generation (a commit) takes those of the
        generation before by id, as old as they are, and reads the others."""
        cached = arrays.per_doc.get("linkrank")
        now = time.monotonic()
        if cached is not None and now - cached[0] < LINKRANK_MAX_AGE:
            return cached[1]
        assert self.engine is not None
        ranks = LinkRanks(self.engine, arrays.docids_cached(searcher))
        before = cached or self._last_linkranks
        read_at = now
        if before is not None and now - before[0] < LINKRANK_MAX_AGE:
            ranks.take(before[1])
            read_at = before[0]
        elif before is not None and before[1].complete:
            ranks.read_all()
        arrays.per_doc["linkrank"] = self._last_linkranks = (read_at, ranks)
        return ranks

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
        wquery = build_query(q, self.params.decay, self.params.decay_words)
        offset = (page - 1) * per_page
        query_stems = set(q.stems)
        # The stored texts read for this search, by id: each read once, whether by the
        # ranking (term proximity, excluded phrases), the phrase check or the hits'
        # snippets; and the words of those a phrase was looked for in.
        read: dict[int, Any] = {}
        words_of: dict[int, Words] = {}
        # How many candidates a phrase, included or excluded, is looked for in.
        check = max(PHRASE_CANDIDATES, PHRASE_DEPTH * (offset + per_page))
        with self.session(read=read, words=words_of) as session:
            if q.phrases:
                # Phrases are checked on the stored text: rank, then filter candidates.
                ranked = session.rank(q, check, expand=expand, wquery=wquery, check=check)
                docs = self._documents([r.docid for r in ranked], with_text=True, read=read)
                kept = []
                for r in ranked:
                    doc = docs.get(r.docid)
                    if doc is None:
                        continue
                    if all(self._holds(doc, words_of, p) for p in q.phrases):
                        kept.append(r)
                # Exact when every candidate was checked; else a count of the best ones.
                total = len(kept)
                exact = len(ranked) < check and session.count(q, wquery, expand, check)[1]
                chosen = kept[offset : offset + per_page]
                # Expansion adds no hit here: every page that holds the phrases' words
                # is already one.
                typed = total
            else:
                ranked = session.rank(
                    q, offset + per_page, expand=expand, wquery=wquery, check=check
                )
                chosen = ranked[offset:]
                # What was ranked: the expanded query's hits when it was expanded.
                total, exact = session.count(q, wquery, expand, check)
                # A rare misspelling's few hits are judged before the expansion adds any.
                typed = session.count_as_typed(q, wquery, expand, check)
                docs = self._documents([r.docid for r in chosen], with_text=True, read=read)
            suggestion = spelling.suggest(
                session,
                q,
                partial(self._surfaces, session),
                few_hits=typed <= spelling.MAX_HITS,
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
                words_of.get(r.docid) if q.phrases else None,
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

    def _documents(
        self, ids: Sequence[int], with_text: bool, read: dict[int, Any] | None = None
    ) -> dict[int, Any]:
        """The rows of documents *ids* (with their text); with *read* (rows with their
        text, by id), only those not in it are read, and it keeps them."""
        if self.db is None or not ids:
            return {}
        if read is None:
            return self.db.documents(ids, with_text)
        missing = [i for i in ids if i not in read]
        if missing:
            read.update(self.db.documents(missing, with_text=True))
        return {i: read[i] for i in ids if i in read}

    def _holding(
        self,
        ids: Sequence[int],
        phrases: Sequence[Sequence[str]],
        read: dict[int, Any] | None,
        words: dict[int, Words] | None,
    ) -> set[int]:
        """The ids of documents *ids* whose stored text holds one of *phrases* (in its
        first :data:`search.snippets.PHRASE_WORDS` words, as an included phrase)."""
        docs = self._documents(ids, with_text=True, read=read)
        cache = {} if words is None else words
        return {i for i, doc in docs.items() if any(self._holds(doc, cache, p) for p in phrases)}

    @classmethod
    def _holds(cls, doc: Any, cache: dict[int, Words], phrase: Sequence[str]) -> bool:
        """Whether document row *doc* holds *phrase*, in its stored text or its title (a
        page's heading, which often repeats the title, is boilerplate, not stored)."""
        if contains_phrase(cls._words(doc, cache), phrase):
            return True
        title = getattr(doc, "title", None)
        return isinstance(title, str) and contains_phrase(word_stems(title, doc.language), phrase)

    @staticmethod
    def _words(doc: Any, cache: dict[int, Words]) -> Words:
        """The words of document row *doc*'s text (:func:`search.snippets.word_stems`),
        kept in *cache* by its id."""
        words = cache.get(doc.id)
        if words is None:
            words = cache[doc.id] = word_stems(doc.text or "", doc.language)
        return words

    def _surfaces(self, session: SearchSession, stem: str) -> list[tuple[str, int]]:
        """*stem*'s surface forms, counted in a sample of the documents that hold it."""
        if self.db is None:
            return []
        return self.db.surfaces(stem, session.holders(stem, spelling.SURFACE_SAMPLE))

    def _section_counts(
        self, ids: Sequence[int], stems: Sequence[str]
    ) -> dict[int, dict[str, dict[str, int]]]:
        return self.db.section_counts(ids, stems) if self.db is not None else {}


class SearcherPool:
    """Searchers of one index kept open between uses, for a process that answers many
    queries from several threads (the web application): each use takes a free one (a new
    one when none is free, so there are at most as many as queries at once) and gives it
    back, open.  A Whoosh reader is used by one thread at a time; the array postings and
    linkranks they rank on are read once per process and shared.  Each ranks with
    *params* (``serve``'s ranking options)."""

    def __init__(
        self, engine: Engine | None, index: Index, params: ranking.Params = ranking.DEFAULT
    ) -> None:
        self.engine = engine
        self.index = index
        #: The ranking's parameters of every searcher of the pool.
        self.params = params
        self._free: list[Searcher] = []
        self._lock = threading.Lock()

    @contextmanager
    def searcher(self) -> Iterator[Searcher]:
        with self._lock:
            searcher = self._free.pop() if self._free else None
        if searcher is None:
            searcher = Searcher(self.engine, self.index, self.params)
        try:
            yield searcher
        except QueryError:
            self._give_back(searcher)
            raise
        except BaseException:
            searcher.close()  # an index replaced or broken under it: the next use reopens
            raise
        self._give_back(searcher)

    def _give_back(self, searcher: Searcher) -> None:
        with self._lock:
            self._free.append(searcher)

    def warm(self) -> None:
        """A searcher opened and warmed (:meth:`Searcher.warm`), ready for the first query."""
        with self.searcher() as searcher:
            searcher.warm()

    def close(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for searcher in free:
            searcher.close()
