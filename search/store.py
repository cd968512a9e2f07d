"""Batched, idempotent writes of crawled documents into the database.

One :meth:`DocumentStore.write_batch` call is one transaction: documents are upserted by
URL, their postings and links replaced, the stem dictionary extended, failures appended.
Re-writing the same page gives the same rows (idempotent upserts).

This module takes plain data (the rows of :mod:`search.rows`), not Scrapy items, so the
crawler and any other producer can use it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, bindparam, delete, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from search import faults, postingcodec
from search.analysis import PackedWords
from search.budgets import WORD_CACHE_BYTES
from search.crawldb import ABANDONED, INDEXABLE
from search.crawllocks import CrawlLocks, close_dead_crawls
from search.db import DEADLOCK_ATTEMPTS, chunks, deadlocked, driver_error
from search.duplicates import DuplicateMarker, fingerprint_columns
from search.models import Crawl, CrawlError, Document, Link, Posting, Server, Word
from search.rows import BatchResult, DocumentRow, ErrorRow, GoneRow, RevisitRow, StoredDocument

logger = logging.getLogger(__name__)

#: A document's postings row (:mod:`search.postingcodec`).
_POSTING_COLUMNS = ("document_id", "word_ids", "surfaces", "counts", "weights")

_T = TypeVar("_T")

#: What a cached stem id costs beside the stem's letters: the str, the int, a dict slot.
_WORD_ENTRY_BYTES = 122

#: The tables a crawl grows, analyzed by the store where PostgreSQL's autovacuum is off.
ANALYZED_TABLES = ("documents", "words", "postings", "links")
#: When the store analyzes them: once the documents it stored since the last ``ANALYZE``
#: reach 50 + 10 % of those the table then held (autovacuum's own defaults,
#: ``autovacuum_analyze_threshold`` and ``autovacuum_analyze_scale_factor``).
ANALYZE_THRESHOLD = 50
ANALYZE_SCALE = 0.1
#: The tables whose rows a crawl or a rebuild replaces or updates (the old versions stay
#: as dead rows until a ``VACUUM``), vacuumed where autovacuum is off ...
VACUUMED_TABLES = ("documents", "postings", "links", "inlinks", "words")
#: ... once their dead rows exceed 50 + 20 % of their live ones (autovacuum's own
#: defaults, ``autovacuum_vacuum_threshold`` and ``autovacuum_vacuum_scale_factor``).
VACUUM_THRESHOLD = 50
VACUUM_SCALE = 0.2


def autovacuum_on(conn: Any) -> bool:
    """Whether the PostgreSQL server of *conn* runs autovacuum (``SHOW autovacuum``)."""
    return bool(conn.exec_driver_sql("SHOW autovacuum").scalar() == "on")


def vacuum_dead_rows(engine: Engine) -> list[str]:
    """Where PostgreSQL's autovacuum is off, ``VACUUM (ANALYZE)`` each of
    :data:`VACUUMED_TABLES` whose dead rows exceed what autovacuum would let pass
    (:data:`VACUUM_THRESHOLD`, :data:`VACUUM_SCALE`); the tables vacuumed.  Called at the
    end of a crawl and of ``python -m search reindex``; the store applies the same rule
    during a crawl (:meth:`DocumentStore._keep_tables`): each page's ``documents`` row is
    updated several times over a crawl (marked indexed, given its linkrank, re-visited),
    a changed page's postings and links are replaced, and a rebuild rewrites the links by
    target; without it the old versions stay on disk (589,812 for 100,000 live documents
    after a crawl, a rebuild and a re-crawl; benchmarks/README.md).  Does nothing on SQLite
    or where autovacuum is on; a failure is logged, never raised."""
    if engine.dialect.name != "postgresql":
        return []
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if autovacuum_on(conn):
                return []
            return _vacuum_or_analyze(conn, ())
    except DBAPIError as exc:
        logger.warning("The store could not vacuum its tables: %s", exc)
        return []


def _vacuum_or_analyze(conn: Any, analyze: Sequence[str]) -> list[str]:
    """On *conn* (autocommit): ``VACUUM (ANALYZE)`` each of :data:`VACUUMED_TABLES` whose
    dead rows exceed autovacuum's threshold, ``ANALYZE`` each other table of *analyze*;
    the tables vacuumed.  A table another session is vacuuming or analyzing is skipped
    (``SKIP_LOCKED``: two crawls on one database do not wait on each other)."""
    rows = conn.execute(
        text(
            "SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables "
            "WHERE schemaname = current_schema() AND relname = ANY(:names)"
        ),
        {"names": list(VACUUMED_TABLES)},
    ).all()
    vacuumed: list[str] = []
    for name, dead, live in sorted(rows):
        if dead > VACUUM_THRESHOLD + VACUUM_SCALE * live:
            started = time.monotonic()
            conn.exec_driver_sql(f'VACUUM (ANALYZE, SKIP_LOCKED) "{name}"')
            vacuumed.append(name)
            logger.info(
                "VACUUM of %s: %d dead rows beside %d (autovacuum is off), %.1f s",
                name,
                dead,
                live,
                time.monotonic() - started,
            )
    analyzed = [t for t in analyze if t not in vacuumed]
    if analyzed:
        conn.exec_driver_sql("ANALYZE (SKIP_LOCKED) " + ", ".join(analyzed))
        logger.info("ANALYZE of %s (autovacuum is off)", ", ".join(analyzed))
    return vacuumed


def finish_crawl(
    engine: Engine, crawl_id: int, reason: str, stats: dict[str, Any], finished_at: datetime
) -> None:
    """Record the end of crawl *crawl_id*: its finish reason, stats and time (by the
    crawl's worker; by the crawler itself when the worker is gone)."""
    with engine.begin() as conn:
        conn.execute(
            update(Crawl)
            .where(Crawl.id == crawl_id)
            .values(finish_reason=reason, stats=stats, finished_at=finished_at)
        )


#: What a database says when it can take no write at all (SQLite's messages; PostgreSQL's
#: SQLSTATEs ``disk_full`` and ``read_only_sql_transaction``), and what :func:`refused`
#: says for it.
_DISK_FULL = ("database or disk is full", "no space left on device")
_READ_ONLY = ("attempt to write a readonly database",)
_SQLSTATES = {"53100": "the database's disk is full", "25006": "the database is read-only"}


def refused(exc: BaseException) -> str | None:
    """Why the database takes no write at all, when *exc* says so: its disk is full, or
    it is read-only (a file or a file system made read-only, a PostgreSQL standby).  No
    retry can pass, nor storing a batch's pages one by one: the batch fails at once.  None
    for anything else."""
    orig = driver_error(exc)
    state = getattr(orig, "sqlstate", None)
    if state in _SQLSTATES:
        return _SQLSTATES[str(state)]
    message = str(orig).lower()
    if any(m in message for m in _DISK_FULL):
        return "the database's disk is full"
    if any(m in message for m in _READ_ONLY):
        return "the database is read-only"
    return None


def unreachable(exc: BaseException) -> bool:
    """Whether *exc* says the database could not be reached, or not yet (what
    :class:`DocumentStore` retries): a connection lost or refused, a server restarting, a
    SQLite file locked by another writer past its busy timeout (a lock is let go).  Not a
    database that takes no write at all (:func:`refused`: a full disk, a read-only one),
    nor one that refused what was written (a constraint, an encoding)."""
    return isinstance(exc, (OperationalError, InterfaceError)) and refused(exc) is None


class DocumentStore:
    """Writes batches of documents; keeps small caches of server and stem ids.

    With *retry_times*, :meth:`write_batch` and :meth:`mark_indexed` are retried with
    back-off (0.5 s, doubling up to 30 s) while the database is unreachable (a restarted
    PostgreSQL), so that nothing is lost; *on_retry* is called before each retry.  While
    the event *give_up* (a ``threading`` or ``multiprocessing`` one) is set, the database
    is known to fail: a write is tried once, not retried, and a retry's wait ends when it
    is set (the write is then tried once more, at once).
    """

    def __init__(
        self,
        engine: Engine,
        retry_times: int = 0,
        on_retry: Callable[[Exception], None] | None = None,
        word_cache_bytes: int = WORD_CACHE_BYTES,
        give_up: Any = None,
    ) -> None:
        self.engine = engine
        self.retry_times = retry_times
        self.on_retry = on_retry
        self.give_up = give_up
        self.dialect = engine.dialect.name
        self._insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        self.server_ids: dict[str, int] = {}
        #: Stem -> id of the words table, emptied when it passes *word_cache_bytes*.
        self.word_ids: dict[str, int] = {}
        self.word_cache_bytes = word_cache_bytes
        self._word_bytes = 0
        self.crawl_id: int | None = None
        #: The crawls' locks (:mod:`search.crawllocks`), from the first crawl started.
        self.crawl_locks: CrawlLocks | None = None
        #: The rows of dead crawls this crawl closed as it started (:meth:`close_dead_crawls`).
        self.abandoned: list[int] = []
        self.duplicates = DuplicateMarker()
        #: Whether PostgreSQL's autovacuum keeps the tables' statistics (None: not asked
        #: yet); where it does not, :meth:`_keep_tables` does.
        self.autovacuum: bool | None = None if self.dialect == "postgresql" else True
        self._stored_since_analyze = 0
        self._analyze_after: float = ANALYZE_THRESHOLD

    # -- crawls and servers ------------------------------------------------------------

    def start_crawl(
        self,
        spider: str,
        args: dict[str, Any],
        started_at: datetime,
        resumes: int | None = None,
    ) -> int:
        """Start a row in ``crawls``, and hold its lock until its end is recorded
        (:mod:`search.crawllocks`: taken before the row can be seen); returns its id.
        Then close the rows of dead crawls (:meth:`close_dead_crawls`)."""
        if self.crawl_locks is None:
            self.crawl_locks = CrawlLocks.of(self.engine)
        with self.engine.begin() as conn:
            crawl_id = conn.execute(
                insert(Crawl).returning(Crawl.id),
                {"spider": spider, "args": args, "started_at": started_at, "stats": {}},
            ).scalar_one()
            self.crawl_locks.hold(crawl_id)
        self.crawl_id = crawl_id
        self.abandoned = self.close_dead_crawls(started_at, resumes)
        return crawl_id

    def close_dead_crawls(self, found_at: datetime, resumes: int | None = None) -> list[int]:
        """Close the row of every dead crawl but this one's, this crawl their finder
        (:func:`search.crawllocks.close_dead_crawls`), the one it *resumes* with finish
        reason :data:`search.crawldb.RESUMED`.  Returns the ids of the rows closed as
        abandoned; a database failure is logged in one line, and closes none."""
        assert self.crawl_id is not None and self.crawl_locks is not None
        return close_dead_crawls(
            self.crawl_locks, found_at, self.crawl_id, Crawl.id != self.crawl_id, resumes
        )

    def keep_crawl_lock(self) -> None:
        """Take this crawl's lock again if it was lost with its connection (PostgreSQL
        restarted, the connection cut), and reopen its row if another crawl closed it as
        abandoned meanwhile (:meth:`search.crawllocks.CrawlLocks.keep`).  Never raises."""
        if self.crawl_locks is None or self.crawl_id is None or not self.crawl_locks.keep():
            return
        try:
            with self.engine.begin() as conn:
                reopened = conn.execute(
                    update(Crawl)
                    .where(Crawl.id == self.crawl_id, Crawl.finish_reason == ABANDONED)
                    .values(finish_reason=None, finished_at=None, stats={})
                ).rowcount
        except DBAPIError:
            return
        if reopened:
            logger.warning(
                "Crawl %d was taken for a dead one while its lock was lost; its row is open again",
                self.crawl_id,
            )

    def set_log_file(self, path: str) -> None:
        if self.crawl_id is None:
            return
        with self.engine.begin() as conn:
            conn.execute(update(Crawl).where(Crawl.id == self.crawl_id).values(log_file=path))

    def finish_crawl(self, reason: str, stats: dict[str, Any], finished_at: datetime) -> None:
        """Record the end of this crawl, then let go of its lock."""
        if self.crawl_id is not None:
            finish_crawl(self.engine, self.crawl_id, reason, stats, finished_at)
        if self.crawl_locks is not None:
            self.crawl_locks.release(finished=True)

    def upsert_servers(self, servers: Iterable[tuple[str, dict[str, Any]]], now: datetime) -> None:
        rows = [
            {
                "url": url,
                "settings": settings,
                "updated_at": now,
                "net_errors": 0,
                "disabled": False,
            }
            for url, settings in servers
        ]
        if not rows:
            return
        with self.engine.begin() as conn:
            stmt = self._insert(Server)
            stmt = stmt.on_conflict_do_update(
                index_elements=["url"],
                set_={
                    "settings": stmt.excluded.settings,
                    "updated_at": stmt.excluded.updated_at,
                    "net_errors": 0,
                    "disabled": False,
                    "disabled_at": None,
                    "disabled_reason": None,
                },
            )
            conn.execute(stmt, rows)
            self._load_server_ids(conn, [str(r["url"]) for r in rows])

    def _load_server_ids(self, conn: Any, urls: Sequence[str]) -> None:
        for part in chunks(list(urls)):
            for sid, url in conn.execute(select(Server.id, Server.url).where(Server.url.in_(part))):
                self.server_ids[url] = sid

    def disable_server(self, url: str, errors: int, reason: str, now: datetime) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(Server)
                .where(Server.url == url)
                .values(disabled=True, disabled_at=now, disabled_reason=reason, net_errors=errors)
            )

    def server_id(self, conn: Any, url: str | None) -> int | None:
        if url is None:
            return None
        sid = self.server_ids.get(url)
        if sid is None:
            stmt = self._insert(Server).on_conflict_do_nothing(index_elements=["url"])
            conn.execute(stmt, {"url": url, "settings": {}, "net_errors": 0, "disabled": False})
            self._load_server_ids(conn, [url])
            sid = self.server_ids.get(url)
        return sid

    # -- documents ---------------------------------------------------------------------

    def _word_ids(self, conn: Any, stems: set[str]) -> None:
        """Make sure every stem of *stems* is in the words table and in :attr:`word_ids`."""
        missing = [s for s in stems if s not in self.word_ids]
        if not missing:
            return
        size = sum(_WORD_ENTRY_BYTES + len(s) for s in missing)
        if self._word_bytes + size > self.word_cache_bytes:
            # A cache: it starts again empty, with this batch's stems (all needed below).
            self.word_ids = {}
            missing = list(stems)
            size = sum(_WORD_ENTRY_BYTES + len(s) for s in missing)
            self._word_bytes = 0
        self._word_bytes += size
        missing.sort()  # a stable order avoids deadlocks between concurrent writers
        stmt = self._insert(Word).on_conflict_do_nothing(index_elements=["stem"])
        for part in chunks(missing, 2000):
            conn.execute(stmt, [{"stem": s} for s in part])
        # Keyed by the batch's own stem strings (the analyzer's, which its stem cache holds
        # too), not by the copies the database reads back: a cached stem costs its id and
        # its slot, its letters being there anyway.
        own = {s: s for s in missing}
        for part in chunks(missing):
            for wid, stem in conn.execute(select(Word.id, Word.stem).where(Word.stem.in_(part))):
                self.word_ids[own.get(stem, stem)] = wid

    def _forget_ids(self) -> None:
        """Empty the caches of server and stem ids and the near-duplicate fingerprints
        (they fill again from the database)."""
        self.server_ids = {}
        self.word_ids = {}
        self._word_bytes = 0
        self.duplicates.forget()

    def retrying(self, write: Callable[[], _T]) -> _T:
        """Run *write* (one transaction, or work that may be done again whole), retrying
        while the database is unreachable, and again when the database rolled it back to
        break a deadlock (with another writer of the same rows: a rebuild's reader writing
        linkranks)."""
        delay = 0.5
        attempt = deadlocks = 0
        while True:
            try:
                return write()
            except Exception as exc:
                # The transaction rolled back: ids it inserted and cached do not exist.
                self._forget_ids()
                if isinstance(exc, DBAPIError) and deadlocked(exc):
                    deadlocks += 1
                    if deadlocks < DEADLOCK_ATTEMPTS:
                        logger.info("Deadlocked with another writer; writing again")
                        time.sleep(0.05 * deadlocks)
                        continue
                if not unreachable(exc) or attempt >= self.retry_times or self._giving_up():
                    raise
                attempt += 1
                if self.on_retry is not None:
                    self.on_retry(exc)
                logger.warning(
                    "Database unavailable (%s); retrying in %.1f s",
                    str(exc).splitlines()[0][:200],
                    delay,
                )
                if self.give_up is None:
                    time.sleep(delay)
                else:
                    self.give_up.wait(delay)
                delay = min(delay * 2, 30.0)

    def _giving_up(self) -> bool:
        """Whether the database is known to fail (*give_up* is set): no retry."""
        return self.give_up is not None and self.give_up.is_set()

    def write_batch(
        self,
        docs: Sequence[DocumentRow],
        errors: Sequence[ErrorRow] = (),
        revisits: Sequence[RevisitRow] = (),
        gone: Sequence[GoneRow] = (),
    ) -> BatchResult:
        """Store one batch in one transaction: documents (upserted by URL, their postings
        and links replaced), failures, re-visits that found a page unchanged (only its
        index times move), and pages gone (404/410) or moved (they leave the index)."""
        result = self.retrying(lambda: self._write_batch(docs, errors, revisits, gone))
        self._keep_tables(len(docs))
        return result

    def _keep_tables(self, stored: int) -> None:
        """Where PostgreSQL's autovacuum is off, keep the tables a crawl grows as
        autovacuum would: ``ANALYZE`` them (:data:`ANALYZED_TABLES`) once the documents
        stored since the last time reach 50 + 10 % of those the table then held
        (:data:`ANALYZE_THRESHOLD`, :data:`ANALYZE_SCALE`), and ``VACUUM (ANALYZE)``
        instead each table whose dead rows then exceed 50 + 20 % of its live ones
        (:func:`vacuum_dead_rows`' rule).

        PostgreSQL chooses its plans from these statistics.  Without any, it takes an
        ``IN`` list of a batch's 100 ids to match half of a table, and replacing a batch's
        postings became a scan of every posting: on the scale-out benchmark's fresh
        database the crawl slowed to a fifth of its speed (benchmarks/README.md).  The
        vacuum lets a row's later versions (marked indexed, its linkrank) reuse the space
        of its earlier ones during the crawl, instead of each adding to the table."""
        if self.autovacuum or not stored:
            return
        # The batch is committed: a failure here costs the upkeep, not the batch.
        try:
            if self.autovacuum is None:
                with self.engine.connect() as conn:
                    self.autovacuum = autovacuum_on(conn)
                if self.autovacuum:
                    return
            self._stored_since_analyze += stored
            if self._stored_since_analyze < self._analyze_after:
                return
            self._stored_since_analyze = 0  # tried again after as many more, if it fails
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                _vacuum_or_analyze(conn, ANALYZED_TABLES)
                held = conn.exec_driver_sql(
                    "SELECT reltuples FROM pg_class WHERE relname = 'documents'"
                ).scalar()
        except DBAPIError as exc:
            logger.warning("The store could not keep the tables' statistics: %s", exc)
            return
        self._analyze_after = ANALYZE_THRESHOLD + ANALYZE_SCALE * max(0.0, float(held or 0))

    def _write_batch(
        self,
        docs: Sequence[DocumentRow],
        errors: Sequence[ErrorRow],
        revisits: Sequence[RevisitRow],
        gone: Sequence[GoneRow],
    ) -> BatchResult:
        # The last version of a URL in the batch wins (one upsert per row and statement).
        unique: dict[str, DocumentRow] = {}
        for doc in docs:
            unique[doc.url] = doc
        rows = list(unique.values())
        stems: set[str] = set()
        for row in rows:
            if row.words:
                stems.update(row.words)
        if self.dialect == "postgresql" and any(s not in self.word_ids for s in stems):
            # The batch's new stems are committed in a short transaction of their own. In
            # the batch's, each would stay locked until the batch's postings and links are
            # written, and another crawl process storing the same new stem waits that long
            # (the scale-out benchmark's sampled waits: benchmarks/README.md).  A stem whose
            # batch then fails stays in the table, unused, as a stem whose pages are gone.
            with self.engine.begin() as conn:
                self._word_ids(conn, stems)
        result = BatchResult()
        with self.engine.begin() as conn:
            if rows:
                result.documents = self._write_documents(conn, rows, stems)
            if revisits:
                conn.execute(
                    update(Document)
                    .where(Document.id == bindparam("doc_id"))
                    .values(
                        last_index_time=bindparam("time"),
                        next_index_time=bindparam("next_time"),
                        change_interval=bindparam("interval"),
                        crawled_at=bindparam("time"),
                    ),
                    [
                        {
                            "doc_id": r.doc_id,
                            "time": r.time,
                            "interval": r.interval,
                            "next_time": r.time + timedelta(seconds=r.interval),
                        }
                        for r in revisits
                    ],
                )
            for g in gone:
                marks: dict[str, Any] = {"gone_at": g.time, "indexed": False, "crawled_at": g.time}
                if g.status is not None:
                    marks["status"] = g.status
                conn.execute(update(Document).where(Document.id == g.doc_id).values(**marks))
                result.deleted.append(g.doc_id)
            self.duplicates.discard([g.doc_id for g in gone])
            changed = [d.id for d in result.documents] + [g.doc_id for g in gone]
            if changed:
                result.promoted = self.duplicates.promote_orphans(conn, changed)
            if errors:
                conn.execute(
                    insert(CrawlError),
                    [
                        {
                            "crawl_id": self.crawl_id,
                            "server_id": self.server_id(conn, e.server),
                            "url": e.url,
                            "time": e.time,
                            "kind": e.kind,
                            "message": e.message,
                        }
                        for e in errors
                    ],
                )
            faults.point("store_commit")  # written, not committed
        return result

    def _write_documents(
        self, conn: Any, rows: list[DocumentRow], stems: set[str]
    ) -> list[StoredDocument]:
        # The stored fingerprints are read before this batch's own are written with it.
        self.duplicates.load(conn)
        prints = self.duplicates.fingerprints(rows)
        values = []
        for row in rows:
            v = dict(row.values)
            v["url"] = row.url
            if row.url in prints:
                v.update(fingerprint_columns(prints[row.url]))
            v["server_id"] = self.server_id(conn, row.server)
            crawled = v.get("crawled_at")
            if crawled is not None:
                v.setdefault("last_index_time", crawled)
                v.setdefault("next_index_time", crawled + timedelta(seconds=row.period))
            v["indexed"] = False
            v["gone_at"] = None
            v["clone_of_id"] = None
            values.append(v)
        columns = set().union(*(v.keys() for v in values))
        for v in values:  # executemany needs the same keys in every row
            for c in columns:
                v.setdefault(c, None)
        stmt = self._insert(Document)
        stmt = stmt.on_conflict_do_update(
            index_elements=["url"],
            set_={c: stmt.excluded[c] for c in columns if c != "url"},
        )
        conn.execute(stmt, values)

        ids: dict[str, int] = {}
        urls = [r.url for r in rows]
        for part in chunks(urls):
            for did, url in conn.execute(
                select(Document.id, Document.url).where(Document.url.in_(part))
            ):
                ids[url] = did
        doc_ids = list(ids.values())

        # Replace postings and links of every document in the batch.
        for part in chunks(doc_ids):
            conn.execute(delete(Posting).where(Posting.document_id.in_(part)))
            conn.execute(delete(Link).where(Link.from_id.in_(part)))

        self._word_ids(conn, stems)

        self._write_postings(conn, rows, ids)
        links: list[tuple[Any, ...]] = []
        for row in rows:
            did = ids[row.url]
            seen: set[str] = set()
            for to_url, anchor, nofollow in row.links:
                if to_url not in seen:
                    seen.add(to_url)
                    links.append((did, to_url, anchor or None, nofollow))
        if links:
            self._bulk_insert(conn, "links", ("from_id", "to_url", "anchor", "nofollow"), links)
        clones = self.duplicates.mark_clones(conn, rows, ids)
        near = self.duplicates.mark_near_duplicates(conn, ids, clones, prints)
        return [
            StoredDocument(ids[r.url], r, clones.get(ids[r.url]), near.get(ids[r.url]))
            for r in rows
        ]

    def _write_postings(self, conn: Any, rows: list[DocumentRow], ids: dict[str, int]) -> None:
        """Insert the postings of *rows* (stored as *ids*; their old ones deleted), made
        as they are sent, a page at a time."""
        self._bulk_insert(conn, "postings", _POSTING_COLUMNS, self._postings(rows, ids))

    def _postings(self, rows: list[DocumentRow], ids: dict[str, int]) -> Iterator[tuple[Any, ...]]:
        """The postings rows of *rows* (stored as *ids*), one a page that has words."""
        word_ids = self.word_ids
        for row in rows:
            words = row.words
            if not words:
                continue
            if isinstance(words, PackedWords):
                # The columns as they came (no record objects).
                packed = postingcodec.encode(
                    [word_ids[s] for s in words.stems],
                    words.surfaces,
                    words.counts,
                    words.weights,
                )
            else:
                records = words.values()
                packed = postingcodec.encode(
                    [word_ids[stem] for stem in words],
                    [r.surface for r in records],
                    [c for r in records for c in r.counts],
                    [r.weight for r in records],
                )
            yield (ids[row.url], packed.word_ids, packed.surfaces, packed.counts, packed.weights)

    def _bulk_insert(
        self, conn: Any, table: str, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]
    ) -> None:
        """Insert many rows, read from *rows* as they come, with the least overhead: COPY
        on PostgreSQL, the driver's executemany of tuples on SQLite (the ORM's per-row work
        is most of the cost), both in the transaction of *conn*."""
        names = ", ".join(columns)
        cursor = conn.connection.driver_connection.cursor()
        try:
            if self.dialect == "postgresql":
                with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                marks = ", ".join("?" for _ in columns)
                cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
        finally:
            cursor.close()

    def mark_indexed(self, doc_ids: Sequence[int]) -> None:
        self.retrying(lambda: self._mark_indexed(doc_ids))

    def _mark_indexed(self, doc_ids: Sequence[int]) -> None:
        # Only the rows not marked yet: a rebuild of an index whose documents were all
        # marked writes none (on PostgreSQL, an UPDATE that changes nothing still makes a
        # new version of the row, in the table and in each of its indexes).  And only
        # those that still belong in the index: a re-crawl may have marked a page gone
        # (or noindex, or a clone) since the writer read it; its copy in the index is then
        # extra, which `check` (and the next crawl's indexer) remove.
        with self.engine.begin() as conn:
            for part in chunks(doc_ids):
                conn.execute(
                    update(Document)
                    .where(Document.id.in_(part), Document.indexed.is_not(True), INDEXABLE)
                    .values(indexed=True)
                )
