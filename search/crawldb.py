"""The read side of the crawl database: every query the crawler, the indexer and the
searcher make of the stored crawl.

:class:`CrawlDB` wraps one engine and answers in plain rows; the writes are
:class:`search.store.DocumentStore`'s.  Long scans (the resume frontier, the documents to
re-visit, the documents to index) are paged by key (``WHERE id > last ORDER BY id LIMIT n``),
one short connection per page, so that a reader that yields slowly (the spider hands its
requests to Scrapy one by one) never holds a transaction open while the store writes.

This module does not import Scrapy.
"""

from __future__ import annotations

import functools
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    Engine,
    and_,
    bindparam,
    delete,
    func,
    insert,
    not_,
    null,
    or_,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from search import postingcodec
from search.analysis import SECTIONS
from search.db import chunks
from search.duplicates import orphaned
from search.models import Crawl, Document, InLink, Link, Posting, Server, Word
from search.rows import NotDue, PageWord, PostingsPage

#: What makes a stored document belong in the index.
INDEXABLE = and_(
    Document.kind == "page",
    Document.noindex.is_(False),
    Document.status < 400,
    Document.gone_at.is_(None),
    Document.clone_of_id.is_(None),
)

#: What a conditional re-visit of a stored document needs (:meth:`CrawlDB.revisits`).
_REVISIT_COLUMNS = (
    Document.id,
    Document.url,
    Document.hops,
    Document.kind,
    Document.etag,
    Document.last_modified,
    Document.checksum,
    Document.change_interval,
)


#: Document ids a statement of :meth:`CrawlDB.linkranks` asks for at once.
LINKRANK_CHUNK = 500
#: The finish reason of a crawl stopped because a batch could not be stored (the crawl's
#: pipeline, :mod:`spidersite.pipelines`): it is resumed as a killed one is.
STORE_FAILED = "store_failed"
#: The finish reason of a crawl stopped on purpose (Ctrl-C, SIGTERM, a stop from the
#: admin): Scrapy's own name.  Resumed, as Scrapy's JOBDIR resumes it.
SHUTDOWN = "shutdown"
#: The finish reason a crawl that resumes an unfinished one (killed, or its end not
#: recorded) gives that one's row, with the time it started and ``resumed_by`` (its own
#: id) in the row's stats: the row no longer stands for a crawl that may be running.
RESUMED = "resumed"
#: The finish reason a starting crawl gives the unfinished row of a crawl found dead (its
#: lock free: :func:`search.crawllocks.close_dead_crawls`), other than the one it resumes,
#: and the admin the row of a dead crawl without a job (:mod:`search.web.jobs`): finished
#: when it was found, ``abandoned_found_by`` (the finding crawl's id, or ``"admin"``) in
#: its stats.  Killed, it is resumed as an unfinished row is.
ABANDONED = "abandoned"
#: The finish reasons of crawls the same command resumes: besides a row never finished.
RESUMABLE = (STORE_FAILED, SHUTDOWN, ABANDONED)


@functools.cache
def _documents_statement(with_text: bool) -> Any:
    """:meth:`CrawlDB.documents`' statement, made once (a query's hits are read by it:
    building it again each time cost ~1 ms a query)."""
    text = Document.text if with_text else null().label("text")
    return select(
        Document.id,
        Document.url,
        Document.title,
        Document.description,
        Document.content_type,
        Document.language,
        text,
    ).where(Document.id.in_(bindparam("ids", expanding=True)))


#: Rows of ids read at a time from the database by :meth:`CrawlDB.indexable_id_array`.
ID_CHUNK = 10_000


#: The spider's arguments that identify a crawl (``SiteSpider.crawl_args``): a crawl resumes
#: the last one whose arguments these are (``topic_threshold`` is not one).
CRAWL_IDENTITY = ("seeds", "seeds_file", "sites", "recrawl", "topic", "crawl_key")


def crawl_identity(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of *args* that identify a crawl (:data:`CRAWL_IDENTITY`)."""
    return {k: args[k] for k in CRAWL_IDENTITY if args.get(k) is not None}


class CrawlDB:
    """Reads of the stored crawl, over one engine (which the caller owns and disposes)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _pages(self, stmt: Any, key: Any, chunk: int) -> Iterator[Sequence[Any]]:
        """The rows of *stmt* in pages of *chunk*, ordered by the integer column *key*,
        which is the statement's first column."""
        last = 0
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(stmt.where(key > last).order_by(key).limit(chunk)).all()
            if not rows:
                return
            last = rows[-1][0]
            yield rows

    # -- the crawler ---------------------------------------------------------------------

    def crawl_to_resume(self, spider: str, args: dict[str, Any], recent: int = 50) -> int | None:
        """The id of the last crawl of *spider* with these *args* (among the *recent* last
        crawls) when it never finished (it was killed, or its end could not be recorded:
        its row is unfinished, or was closed by a later crawl that found it dead,
        :data:`ABANDONED`), stopped because a batch could not be stored (``store_failed``:
        the pages of that batch were fetched, and only a resume fetches them again), or
        was stopped on purpose (``shutdown``: Ctrl-C, SIGTERM); else None.  None while the
        database has no tables.  The crawl that resumes a dead one closes its row
        (:meth:`search.store.DocumentStore.start_crawl`, finish reason :data:`RESUMED`).

        Crawls are compared by the arguments that identify them (:data:`CRAWL_IDENTITY`):
        the admin adds others to the rows of the crawls it starts (its servers, runner and
        process, the topic's threshold), and records a *placeholder* row for a crawl while
        it starts, which is no crawl of the spider's and is passed over."""
        args = crawl_identity(args)
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(Crawl.id, Crawl.args, Crawl.finished_at, Crawl.finish_reason)
                    .where(Crawl.spider == spider)
                    .order_by(Crawl.id.desc())
                    .limit(recent)
                ).all()
        except SQLAlchemyError:  # no database or no tables yet: nothing to resume
            return None
        for row in rows:
            stored = row.args or {}
            if stored.get("placeholder"):  # search.web.jobs: the admin's, while it starts
                continue
            if crawl_identity(stored) == args:
                resume = row.finished_at is None or row.finish_reason in RESUMABLE
                return int(row.id) if resume else None
        return None

    def stored_urls(self) -> Iterator[str]:
        """The URL of every stored document that is not gone, read :data:`ID_CHUNK` rows
        at a time (on PostgreSQL a server-side cursor: without it psycopg holds every URL
        at once). A gone page is not among them: a re-crawl fetches it again when it is
        seeded or linked from a page it parses."""
        stmt = select(Document.url).where(Document.gone_at.is_(None))
        with self.engine.connect() as conn:
            yield from conn.execution_options(yield_per=ID_CHUNK).scalars(stmt)

    def document_etag(self, url: str) -> str | None:
        """The stored ETag of the document at *url* (a news group keeps its last article
        number there); None when it is not stored, or the database has no tables yet."""
        try:
            with self.engine.connect() as conn:
                return conn.scalar(select(Document.etag).where(Document.url == url))
        except SQLAlchemyError:
            return None

    def frontier(self, chunk: int = 5000) -> Iterator[Any]:
        """The followable links of stored pages, as rows ``(to_url, hops)`` where *hops* is
        the linking page's: the frontier of a crawl that was killed is among them."""
        stmt = (
            select(Link.id, Link.to_url, Document.hops)
            .join(Document, Document.id == Link.from_id)
            .where(Link.nofollow.is_(False), Document.nofollow.is_(False))
        )
        for rows in self._pages(stmt, Link.id, chunk):
            yield from rows

    def revisits(self, due_only: bool, now: datetime | None = None, chunk: int = 1000) -> Any:
        """The stored documents to re-visit (every one not gone, or with *due_only* those
        whose next index time has come), as rows with what a conditional request needs:
        ``id, url, hops, kind, etag, last_modified, checksum, change_interval``."""
        stmt = select(*_REVISIT_COLUMNS).where(Document.gone_at.is_(None))
        if due_only:
            now = now or datetime.now(UTC)
            stmt = stmt.where(
                or_(Document.next_index_time <= now, Document.next_index_time.is_(None))
            )
        for rows in self._pages(stmt, Document.id, chunk):
            yield from rows

    def not_due(self, urls: Sequence[str], now: datetime, chunk: int = 500) -> Iterator[NotDue]:
        """The stored documents among *urls* that are not gone and not due at *now* (a
        ``recrawl=due`` schedules the due ones itself), with what :meth:`revisits` rows
        have and their ``last_index_time`` (timezone-aware)."""
        stmt = select(*_REVISIT_COLUMNS, Document.last_index_time).where(
            Document.gone_at.is_(None), Document.next_index_time > now
        )
        for start in range(0, len(urls), chunk):
            with self.engine.connect() as conn:
                rows = conn.execute(stmt.where(Document.url.in_(urls[start : start + chunk])))
                for row in rows:
                    doc = NotDue(*row)
                    indexed = doc.last_index_time
                    if indexed is not None and indexed.tzinfo is None:  # SQLite: naive UTC
                        doc.last_index_time = indexed.replace(tzinfo=UTC)
                    yield doc

    def stored_servers(self) -> list[str]:
        """The URLs of the servers that have a stored document not gone."""
        has_documents = (
            select(Document.id)
            .where(Document.server_id == Server.id, Document.gone_at.is_(None))
            .exists()
        )
        with self.engine.connect() as conn:
            return list(conn.scalars(select(Server.url).where(has_documents).order_by(Server.url)))

    # -- the indexer ---------------------------------------------------------------------

    def _indexable(self, stmt: Any, only_unindexed: bool, before: datetime | None) -> Any:
        stmt = stmt.where(INDEXABLE)
        if only_unindexed:
            stmt = stmt.where(Document.indexed.is_(False))
        if before is not None:
            stmt = stmt.where(Document.crawled_at < before)
        return stmt

    def indexable_postings(
        self,
        chunk: int = 2000,
        only_unindexed: bool = False,
        before: datetime | None = None,
        ids: Sequence[int] | None = None,
    ) -> Iterator[PostingsPage]:
        """The documents that belong in the index with their postings, *chunk* documents
        a page, in id order (only those not indexed yet, stored *before* a time, or among
        *ids*), as arrays.

        A page's postings rows (one a document, :mod:`search.postingcodec`) are read
        without their surface forms and weights, which a rebuild does not use.  A page
        of consecutive ids is read as one range of the postings' key, a sparse one
        (re-crawled pages among many) by its ids."""
        stmt = self._indexable(
            select(Document.id, Document.url, Document.server_id), only_unindexed, before
        )
        if ids is not None:
            stmt = stmt.where(Document.id.in_(list(ids)))
        for docs in self._pages(stmt, Document.id, chunk):
            page_ids = [d.id for d in docs]
            if page_ids[-1] - page_ids[0] < 2 * len(page_ids):
                which = Posting.document_id.between(page_ids[0], page_ids[-1])
            else:
                which = Posting.document_id.in_(page_ids)
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(Posting.document_id, Posting.word_ids, Posting.counts).where(which)
                ).all()
            wanted = set(page_ids)  # the range also holds documents not in the index
            by_id = {
                row[0]: postingcodec.decode(row[1], row[2]) for row in rows if row[0] in wanted
            }
            got = [by_id[i] for i in page_ids if i in by_id]
            yield PostingsPage(
                page_ids,
                [d.url for d in docs],
                [d.server_id for d in docs],
                np.array([len(by_id[i]) if i in by_id else 0 for i in page_ids], dtype=np.int64),
                np.concatenate([p.word_ids for p in got]) if got else np.empty(0, dtype=np.int64),
                np.concatenate([p.counts for p in got])
                if got
                else np.empty((0, len(SECTIONS)), dtype=np.int64),
            )

    def postings(
        self, doc_ids: Sequence[int], surfaces: bool = True, weights: bool = True
    ) -> dict[int, postingcodec.DocumentPostings]:
        """docid -> its postings (:class:`search.postingcodec.DocumentPostings`, in word id
        order), for the documents of *doc_ids* that have any; their surface forms and
        weights too, unless told not to read them."""
        columns: list[Any] = [
            Posting.document_id,
            Posting.word_ids,
            Posting.counts,
            Posting.surfaces if surfaces else null(),
            Posting.weights if weights else null(),
        ]
        out: dict[int, postingcodec.DocumentPostings] = {}
        with self.engine.connect() as conn:
            for part in chunks(list(doc_ids)):
                for row in conn.execute(select(*columns).where(Posting.document_id.in_(part))):
                    out[row[0]] = postingcodec.decode(row[1], row[2], row[3], row[4])
        return out

    def top_words(self, doc_id: int, limit: int = 50) -> tuple[list[PageWord], int]:
        """The *limit* stems of document *doc_id* of the highest weight (then by stem),
        with their surface forms and counts, and how many stems it has."""
        posts = self.postings([doc_id]).get(doc_id)
        if posts is None or posts.surfaces is None or posts.weights is None:
            return [], 0
        stems = self.stems(sorted(set(posts.word_ids.tolist())))
        weights = posts.weights.tolist()
        order = sorted(
            range(len(posts)), key=lambda i: (-weights[i], stems.get(int(posts.word_ids[i]), ""))
        )[:limit]
        words = []
        for i in order:
            body, title, url, desc, keywords, boilerplate = posts.counts[i].tolist()
            stem = stems.get(int(posts.word_ids[i]), "")
            words.append(
                PageWord(
                    stem,
                    posts.surfaces[i],
                    body,
                    title,
                    url,
                    desc,
                    keywords,
                    boilerplate,
                    weights[i],
                )
            )
        return words, len(posts)

    def word_ids(self, stems: Sequence[str]) -> dict[str, int]:
        """stem -> word id, for the stems of *stems* the words have."""
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for part in chunks(list(stems)):
                rows = conn.execute(select(Word.stem, Word.id).where(Word.stem.in_(part)))
                out.update((stem, wid) for stem, wid in rows)
        return out

    def vocabulary(self) -> list[str]:
        """The stem of each word id (a list indexed by id; ``""`` where no word has it)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(Word.id, Word.stem)).all()
        out = [""] * (max((r[0] for r in rows), default=-1) + 1)
        for wid, stem in rows:
            out[wid] = stem
        return out

    def words_after(self, last: int) -> list[tuple[int, str]]:
        """Every word of an id above *last*: ``(id, stem)`` in id order."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(Word.id, Word.stem).where(Word.id > last).order_by(Word.id))
            return [(wid, stem) for wid, stem in rows]

    def stems(self, word_ids: Sequence[int]) -> dict[int, str]:
        """The stem of each word id of *word_ids* (distinct ids), read by the words' key
        in slices of one ``IN`` list each."""
        out: dict[int, str] = {}
        with self.engine.connect() as conn:
            for part in chunks(word_ids):
                rows = conn.execute(select(Word.id, Word.stem).where(Word.id.in_(part)))
                out.update((wid, stem) for wid, stem in rows)
        return out

    def count_indexable(self, only_unindexed: bool = False, before: datetime | None = None) -> int:
        """How many stored documents belong in the index (see :meth:`indexable_postings`)."""
        stmt = self._indexable(select(func.count()).select_from(Document), only_unindexed, before)
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    def indexable_ids(self, only_unindexed: bool = False) -> list[int]:
        """The ids of the documents that should be in the index (only those not marked
        indexed)."""
        return self.indexable_id_array(only_unindexed).tolist()

    def indexable_id_array(self, only_unindexed: bool = False) -> np.ndarray:
        """:meth:`indexable_ids` as an ``int64`` array (8 bytes an id, not a Python int),
        the rows read a chunk at a time."""
        return self._id_array(self._indexable(select(Document.id), only_unindexed, None))

    def unindexable_id_array(self) -> np.ndarray:
        """Ids of the stored documents that do not belong in the index and are not marked
        indexed (gone, moved, noindex, clones, errors, files), as an ``int64`` array: what
        the index may still hold when the removal of one was lost
        (:func:`search.reindex.remove_unindexable`)."""
        return self._id_array(
            select(Document.id).where(Document.indexed.is_not(True), not_(INDEXABLE))
        )

    def stale_mark_id_array(self) -> np.ndarray:
        """Ids of the stored documents marked indexed that do not belong in the index (a
        page gone, moved, noindex or a clone since it was indexed), as an ``int64`` array:
        marks :func:`search.reindex.check` reports and clears."""
        return self._id_array(
            select(Document.id).where(Document.indexed.is_(True), not_(INDEXABLE))
        )

    def orphaned_duplicates(self) -> list[tuple[int, int]]:
        """``(id, clone_of_id)`` of the live exact duplicates whose original is gone, has
        another content, or is a duplicate itself: what
        :meth:`search.duplicates.DuplicateMarker.promote_orphans` mends."""
        with self.engine.connect() as conn:
            return [(did, of) for did, _, of in conn.execute(orphaned())]

    def _id_array(self, stmt: Any) -> np.ndarray:
        """The ids *stmt* selects, as an ``int64`` array, read :data:`ID_CHUNK` rows at a
        time."""
        with self.engine.connect() as conn:
            rows = conn.execution_options(yield_per=ID_CHUNK).scalars(stmt)
            return np.fromiter(rows, dtype=np.int64)

    def server_settings(self) -> dict[int, dict[str, Any]]:
        """Stored server id -> its stored settings (the fields of a sites file)."""
        with self.engine.connect() as conn:
            return {
                row.id: row.settings or {}
                for row in conn.execute(select(Server.id, Server.settings))
            }

    # -- the link graph ------------------------------------------------------------------

    def links_analyzed(self, crawl_id: int | None) -> bool:
        """Whether the stored linkranks and links by target are known to be the link
        analysis of the stored pages as they are, for crawl *crawl_id* that changed no page
        (stored none, found none gone): then its own analysis may be skipped.

        Known when every other crawl has finished, one of them recorded when its link
        analysis began reading (``linkrank/read_at`` in its stats), and every crawl that
        stored or lost a page (or recorded no count of them) made its last write before
        that (``store/flushed_at_last``, else its end).  A crawl that was killed, or is
        running, is not known to have finished its writes, and an analysis by ``python -m
        search reindex`` is not recorded: then this is False, and the analysis runs again.
        The times are the writing processes' clocks: crawl processes on machines whose
        clocks differ could misjudge the order of a write and an analysis.

        False too when the links by target are gone though that analysis wrote some: a
        crash of PostgreSQL empties them (the table is ``UNLOGGED``)."""
        read_at: float | None = None
        inlinks_written: Any = None
        changed_until = 0.0
        stmt = select(Crawl.id, Crawl.finished_at, Crawl.stats)
        with self.engine.connect() as conn:
            for other, finished_at, stats in conn.execute(stmt):
                if other == crawl_id:
                    continue
                if finished_at is None:
                    return False
                stats = stats or {}
                at = stats.get("linkrank/read_at")
                if isinstance(at, int | float) and (read_at is None or at > read_at):
                    read_at = float(at)
                    inlinks_written = stats.get("linkrank/inlinks")
                counts = (stats.get("store/documents"), stats.get("store/gone"))
                if not all(isinstance(n, int) and n == 0 for n in counts):
                    # Its last write: its last batch's, else (no count of them) its end.
                    last = stats.get("store/flushed_at_last")
                    if not isinstance(last, int | float):
                        if finished_at.tzinfo is None:  # SQLite keeps the time without its zone
                            finished_at = finished_at.replace(tzinfo=UTC)
                        last = finished_at.timestamp()
                    changed_until = max(changed_until, float(last))
            if read_at is None or changed_until > read_at:
                return False
            if isinstance(inlinks_written, int) and inlinks_written > 0:
                return conn.scalar(select(InLink.to_id).limit(1)) is not None
        return True

    def graph_documents(self) -> np.ndarray:
        """The ids of the link graph's documents, every stored one not gone, as an
        ``int64`` array."""
        return self._id_array(select(Document.id).where(Document.gone_at.is_(None)))

    def link_graph(self, chunk: int = 20_000) -> Iterator[np.ndarray]:
        """The links between stored documents, in pages of ``(from_id, to_id)`` rows (an
        ``int64`` array of two columns) in the links' id order: the linking page
        followable, the link not nofollow, the target not gone; a link to an exact
        duplicate names its original.

        The documents' side is read once (each one's URL, and whether it is followable and
        gone: columns that SQLite finds after the page's text, walking its overflow pages),
        then the links alone, their targets found by URL: joining the two tables read two
        documents' rows for every link, ~30 seconds of SQLite for 3 million links of
        100,000 pages.  A URL is kept as its 64-bit ``hash`` (the same within this one
        process), sorted, beside its document's id: 16 bytes a document, where a
        dictionary of the URLs took ~170 (two documents' URLs that share a hash, about
        n² / 2⁶⁵ for n documents, would make one link count for the other)."""
        keys, targets = array("q"), array("q")
        followable = bytearray()  # by document id: 1 when its links count
        docs = select(
            Document.id,
            Document.url,
            Document.nofollow,
            Document.gone_at.is_(None),
            func.coalesce(Document.clone_of_id, Document.id),
        )
        for rows in self._pages(docs, Document.id, chunk):
            followable.extend(bytes(rows[-1][0] + 1 - len(followable)))
            for doc_id, url, nofollow, live, target in rows:
                followable[doc_id] = not nofollow
                if live:
                    keys.append(hash(url))
                    targets.append(target)
        order = np.argsort(np.frombuffer(keys, dtype=np.int64), kind="stable")
        url_keys = np.frombuffer(keys, dtype=np.int64)[order]
        url_targets = np.frombuffer(targets, dtype=np.int64)[order]
        del keys, targets, order
        follows = np.frombuffer(followable, dtype=np.bool_)  # a view: 0 or 1 a byte
        links = select(Link.id, Link.from_id, Link.to_url).where(Link.nofollow.is_(False))
        for rows in self._pages(links, Link.id, chunk):
            n = len(rows)
            from_ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=n)
            link_keys = np.fromiter((hash(r[2]) for r in rows), dtype=np.int64, count=n)
            at = np.minimum(np.searchsorted(url_keys, link_keys), max(len(url_keys) - 1, 0))
            ok = url_keys[at] == link_keys if len(url_keys) else np.zeros(n, dtype=bool)
            inside = from_ids < len(follows)
            ok &= inside
            ok[inside] &= follows[from_ids[inside]]
            yield np.column_stack((from_ids[ok], url_targets[at[ok]]))

    def rebuild_inlinks(self) -> int:
        """Rebuild the links by target (:class:`search.models.InLink`) from the stored
        links: every link whose ``to_url`` is a stored document's URL, in one statement
        that sorts them by (document, link) and appends them to an emptied table, instead
        of an index on ``links.to_url`` kept up at random places as each page is stored.
        The number of rows written.  On PostgreSQL the table is locked first, so that two
        rebuilds at once (a crawl's end and a reindex) take turns."""
        target = select(Document.id, Link.id).join(Document, Document.url == Link.to_url)
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "postgresql":
                conn.exec_driver_sql("LOCK TABLE inlinks IN EXCLUSIVE MODE")
            conn.execute(delete(InLink))
            conn.execute(
                insert(InLink).from_select(
                    ["to_id", "link_id"], target.order_by(Document.id, Link.id)
                )
            )
            # Counted (psycopg gives no row count for an INSERT … SELECT here).
            return int(conn.scalar(select(func.count()).select_from(InLink)) or 0)

    def inbound(self, doc_id: int, limit: int = 500) -> list[Any]:
        """The stored pages that link to the document *doc_id*, as of the last
        :meth:`rebuild_inlinks`, by URL: rows ``(id, url, title, anchor)``."""
        stmt = (
            select(Document.id, Document.url, Document.title, Link.anchor)
            .select_from(InLink)
            .join(Link, Link.id == InLink.link_id)
            .join(Document, Document.id == Link.from_id)
            .where(InLink.to_id == doc_id)
            .order_by(Document.url)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return list(conn.execute(stmt).all())

    def linkranks(
        self, ids: np.ndarray | None = None, conn: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The documents that have a linkrank, or those of *ids* that have one: their ids
        (``int64``) and linkranks (``float32``).  Every document's: one statement through
        the driver's own cursor, its rows straight into numpy (through SQLAlchemy's rows it
        took ~0.3 s at 100,000 documents), answered on SQLite from the index on
        ``documents.linkrank`` without the pages' rows.  Those of *ids*: by primary key,
        :data:`LINKRANK_CHUNK` at a time, on connection *conn* when given (a transaction
        that writes them), those without a linkrank left out here rather than by the
        statement.  (With ``linkrank IS NOT NULL`` in it, PostgreSQL, whose statistics
        said that no document had one, read each chunk through the index on
        ``documents.linkrank``: in the transaction writing a crawl's first linkranks, every
        chunk read every linkrank written before it, and writing 100,000 took 92 s instead
        of 7; benchmarks/README.md.)"""
        rows: list[Any] = []
        if ids is not None:
            stmt = select(Document.id, Document.linkrank).where(
                Document.id.in_(bindparam("ids", expanding=True))
            )
            with nullcontext(conn) if conn is not None else self.engine.connect() as reader:
                for lo in range(0, len(ids), LINKRANK_CHUNK):
                    chunk = ids[lo : lo + LINKRANK_CHUNK].tolist()
                    rows += [r for r in reader.execute(stmt, {"ids": chunk}) if r[1] is not None]
        else:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("SELECT id, linkrank FROM documents WHERE linkrank IS NOT NULL")
                rows = list(cursor.fetchall())
                cursor.close()
            finally:
                raw.close()
        return (
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
            np.fromiter((r[1] for r in rows), dtype=np.float32, count=len(rows)),
        )

    # -- the searcher --------------------------------------------------------------------

    def section_counts(
        self, ids: Sequence[int], stems: Sequence[str]
    ) -> dict[int, dict[str, dict[str, int]]]:
        """docid -> stem -> section -> count, from the stored postings."""
        if not ids or not stems:
            return {}
        by_id = {wid: stem for stem, wid in self.word_ids(stems).items()}
        if not by_id:
            return {}
        wanted = np.array(sorted(by_id), dtype=np.int64)
        out: dict[int, dict[str, dict[str, int]]] = {}
        for did, posts in self.postings(ids, surfaces=False, weights=False).items():
            at = np.flatnonzero(np.isin(posts.word_ids, wanted))
            for i in at.tolist():
                counts = posts.counts[i].tolist()
                stem = by_id[int(posts.word_ids[i])]
                out.setdefault(did, {})[stem] = dict(zip(SECTIONS, counts, strict=True))
        return out

    def surfaces(self, stem: str, doc_ids: Sequence[int]) -> list[tuple[str, int]]:
        """The surface forms of *stem* in the postings of documents *doc_ids* (a sample of
        the documents that hold it), most frequent first, with their counts.

        Read by document (the postings' key), never by stem: the postings have no index
        by stem, whose upkeep was most of the cost of storing a page at size (see
        migration 0008), and since migration 0014 a document's postings are one row."""
        if not doc_ids:
            return []
        wid = self.word_ids([stem]).get(stem)
        if wid is None:
            return []
        found: Counter[str] = Counter()
        for posts in self.postings(doc_ids, weights=False).values():
            i = int(np.searchsorted(posts.word_ids, wid))
            if i < len(posts) and posts.word_ids[i] == wid and posts.surfaces is not None:
                found[posts.surfaces[i]] += 1
        return sorted(found.items(), key=lambda item: (-item[1], item[0]))

    def documents(self, ids: Sequence[int], with_text: bool = False) -> dict[int, Any]:
        """docid -> row ``id, url, title, description, content_type, language, text``
        (``text`` is None unless *with_text*)."""
        if not ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(_documents_statement(with_text), {"ids": list(ids)})
            return {row.id: row for row in rows}
