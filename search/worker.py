"""The crawl's worker process: analysis, storage and the hand-off to the indexer.

The crawler's reactor thread only downloads, extracts links and hands pages on.  Each batch
of crawled rows (a page's sections as text, its links and metadata, not analyzed; failures;
re-visits; gone pages) goes to one worker process, which

1. analyzes every page (:func:`search.analysis.analyze_document`), unless it arrives
   analyzed already (a topic crawl scores pages on the reactor, and ships the analysis);
2. stores the batch in one transaction through :class:`search.store.DocumentStore`
   (idempotent upserts; the store retries with back-off while the database is unreachable);
3. sends the stored pages, as :class:`search.index.IndexDoc`, to the indexer, its own child
   process (:class:`search.indexer.IndexerProcess`), the one writer of the Whoosh index.

Every hand-off is bounded and pushes back: the crawler keeps at most ``queue_batches``
batches in flight (:meth:`CrawlWorker.wait_for_room` waits, and with it Scrapy's scraper
slot fills and the downloader stops); the indexer's inbox holds at most
``IndexConfig.queue_batches`` batches (the worker waits, and its batches stay in flight).
One worker, in order: batches are applied as they were crawled, and SQLite takes one
writer at a time anyway.

What a call did comes back as a :class:`Report` (counters and values for the crawler's
stats).  The worker exits when the crawler dies (it watches its parent), and the indexer
follows it.  No Scrapy here: the crawler's side is :mod:`spidersite.pipelines`.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from search import db
from search.analysis import analyze_document, page_sections
from search.content import split_content
from search.index import IndexDoc
from search.indexer import Batch, IndexerProcess
from search.linkrank import update_linkrank
from search.process import freeze_startup, release_memory
from search.rows import BatchResult, DocumentRow, ErrorRow, GoneRow, RevisitRow
from search.store import WORD_CACHE_BYTES, DocumentStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """The indexer of a crawl."""

    index_dir: str
    batch_size: int = 1000  # documents per Whoosh commit
    max_terms: int | None = 20_000  # distinct stems indexed per page
    limitmb: int = 32  # megabytes of postings the Whoosh writer buffers
    queue_batches: int = 8  # batches waiting in the indexer's inbox


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    database_url: str
    analyze: bool = True
    max_words: int | None = 50_000
    retry_times: int = 10
    #: Bytes of the store's cache of stem ids (:data:`search.store.WORD_CACHE_BYTES`).
    word_cache_bytes: int = WORD_CACHE_BYTES
    index: IndexConfig | None = None
    #: Recompute the link-graph prior (:mod:`search.linkrank`) when the crawl ends.
    linkrank: bool = True


@dataclass(slots=True)
class WorkBatch:
    """Rows to store in one transaction, in the order they were crawled."""

    docs: list[DocumentRow] = field(default_factory=list)
    errors: list[ErrorRow] = field(default_factory=list)
    revisits: list[RevisitRow] = field(default_factory=list)
    gone: list[GoneRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.docs) + len(self.errors) + len(self.revisits) + len(self.gone)


@dataclass(slots=True)
class Report:
    """What the worker did: stats to add (``inc``) and to set (``values``), and the
    failure of a batch it could not store (``error``), for the crawler to log."""

    inc: Counter[str] = field(default_factory=Counter)
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


# -- in the worker process ------------------------------------------------------------


def _watch_parent() -> None:
    """Exit when the crawler dies (kill -9 included): what is in flight is lost, and a
    resumed crawl fetches it again."""
    parent = multiprocessing.parent_process()

    def watch() -> None:
        while parent is not None and parent.is_alive():
            time.sleep(0.5)
        os._exit(1)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s [%(name)s] %(levelname)s: %(message)s"
    )
    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


class Worker:
    """The worker's state: the store (its engine and caches) and the indexer handle."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        #: Retries of the batch being written (the store retries while the database is
        #: unreachable), for its report.
        self.retries = 0
        self.store = DocumentStore(
            db.connect(config.database_url),
            config.retry_times,
            self._retry,
            word_cache_bytes=config.word_cache_bytes,
        )
        self.indexer: IndexerProcess | None = None
        if config.index is not None:
            self.indexer = IndexerProcess(
                config.index.index_dir,
                config.database_url,
                config.index.batch_size,
                config.index.limitmb,
                max_pending=max(1, config.index.queue_batches),
                # Before this crawl stores anything: what earlier crawls left unindexed.
                catch_up=IndexerProcess.left_unindexed(self.store.engine),
            )
            self.indexer.start()

    def open_crawl(
        self,
        spider: str,
        args: dict[str, Any],
        servers: list[tuple[str, dict[str, Any]]],
        logs_dir: str,
    ) -> tuple[int, str, str]:
        """Start the ``crawls`` row; returns its id, the crawl's log file and the database
        URL to show (without its password)."""
        now = datetime.now(UTC)
        crawl_id = self.store.start_crawl(spider, args, now)
        path = Path(logs_dir) / f"crawl-{crawl_id}.log"
        self.store.set_log_file(str(path))
        if servers:
            self.store.upsert_servers(servers, now)
        shown = self.store.engine.url.render_as_string(hide_password=True)
        return crawl_id, str(path), shown

    def write(self, batch: WorkBatch) -> Report:
        report = Report()
        for row in batch.docs:
            self._analyze(row, report)

        self.retries = 0
        try:
            result = self.store.write_batch(batch.docs, batch.errors, batch.revisits, batch.gone)
        except Exception as exc:
            logger.exception("A batch could not be stored")
            report.inc["store/failed_batches"] += 1
            report.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return report
        finally:
            if self.retries:
                report.inc["store/retries"] += self.retries
        report.inc["store/batches"] += 1
        report.inc["store/documents"] += len(result.documents)
        report.inc["store/errors"] += len(batch.errors)
        report.inc["store/revisits"] += len(batch.revisits)
        report.inc["store/gone"] += len(batch.gone)
        for doc in result.documents:
            report.inc[f"store/{doc.row.values['kind']}s"] += 1
            if doc.clone_of is not None:
                report.inc["store/clones"] += 1
            if doc.near_duplicate_of is not None:
                report.inc["store/near_duplicates"] += 1
        report.values["store/flushed_at_last"] = time.time()
        self._index(result, report)
        # What the batches before this one left (the caller still holds this one): the
        # analysis of 100 pages and their rows are ~15 MB of small objects.
        release_memory()
        return report

    def _analyze(self, row: DocumentRow, report: Report) -> None:
        values = row.values
        if values["kind"] != "page":
            return
        if values.get("noindex"):
            row.words = None
            report.inc["analyze/skipped_noindex"] += 1
            return
        boilerplate = None
        if row.html is not None and self.config.analyze:
            # Main content and boilerplate (search.content); a topic crawl's analysis of
            # the whole page, made on the reactor for its gate, is made again on the split.
            content = split_content(
                row.html, values.get("text") or "", values.get("charset"), values.get("language")
            )
            row.html = None
            if content is not None:
                values["text"], boilerplate = content.main, content.boilerplate
                row.words = None
                report.inc["analyze/main_content"] += 1
        if row.words is None:
            if not self.config.analyze:
                return
            sections = page_sections(
                row.url,
                values.get("title"),
                values.get("text"),
                values.get("description"),
                values.get("keywords"),
                boilerplate,
            )
            row.words = analyze_document(
                sections, row.weights, values.get("language"), self.config.max_words
            )
        values["word_count"] = sum(r.counts[0] for r in row.words.values())
        report.inc["analyze/pages"] += 1
        report.inc["analyze/words"] += values["word_count"]

    def _index(self, result: BatchResult, report: Report) -> None:
        if self.indexer is None or self.config.index is None:
            return
        docs, deletes = index_batch(result, self.config.index.max_terms)
        sent, deleted = len(docs), len(deletes)
        if sent or deleted:
            try:
                # Waits while the indexer's inbox is full (the back-pressure).
                self.indexer.send(Batch(docs, deletes))
            except RuntimeError as exc:
                # Stored, not searchable: `python -m search reindex` catches up.
                logger.error("%s; the index is no longer fed", exc)
                report.values["index/error"] = self.indexer.error
                self.indexer = None
                return
            report.inc["index/sent"] += sent
            report.inc["index/deleted"] += deleted
        self._index_progress(report)

    def _index_progress(self, report: Report) -> None:
        assert self.indexer is not None
        report.values["index/documents"] = self.indexer.indexed
        if self.indexer.searchable_at:
            report.values["index/searchable_at"] = self.indexer.searchable_at

    def _retry(self, exc: Exception) -> None:
        self.retries += 1

    def disable_server(self, url: str, errors: int, reason: str) -> None:
        self.store.disable_server(url, errors, reason, datetime.now(UTC))

    def close_index(self) -> Report:
        """Let the indexer commit what it has and stop; report its final figures."""
        report = Report()
        if self.indexer is None:
            return report
        logger.info("Waiting for the indexer to make the last pages searchable")
        self.indexer.close()
        self._index_progress(report)
        if self.indexer.error:
            report.values["index/error"] = self.indexer.error
        self.indexer = None
        return report

    def update_linkrank(self) -> Report:
        """Recompute every document's linkrank over the stored links (the crawl's last
        pages are stored and indexed by now); a failure is logged, never fatal."""
        report = Report()
        if not self.config.linkrank:
            return report
        try:
            result = update_linkrank(self.store.engine)
        except Exception as exc:
            logger.exception("The link-graph prior could not be computed")
            report.values["linkrank/error"] = f"{type(exc).__name__}: {exc}"
            return report
        report.values["linkrank/documents"] = result.documents
        report.values["linkrank/links"] = result.links
        report.values["linkrank/seconds"] = round(result.seconds, 3)
        return report

    def finish_crawl(self, reason: str, stats: dict[str, Any]) -> None:
        self.store.finish_crawl(reason, stats, datetime.now(UTC))
        self.store.engine.dispose()


def index_batch(result: BatchResult, max_terms: int | None) -> tuple[list[IndexDoc], list[int]]:
    """What a stored batch changes in the index: pages to add or replace, ids to delete
    (pages gone, noindex, unanalyzed, and exact duplicates, which are indexed once)."""
    docs: list[IndexDoc] = []
    deletes: list[int] = list(result.deleted)
    for doc in result.documents:
        row = doc.row
        if row.values["kind"] != "page":
            continue
        if doc.clone_of is not None or row.words is None:
            deletes.append(doc.id)
            continue
        host = row.url.split("/")[2]
        docs.append(IndexDoc.from_records(doc.id, row.url, host, row.words.values(), max_terms))
    return docs, deletes


_worker: Worker | None = None


def _open(config: WorkerConfig, *args: Any) -> tuple[int, str, str]:
    global _worker
    _worker = Worker(config)
    opened = _worker.open_crawl(*args)
    freeze_startup()
    return opened


def _call(method: str, *args: Any) -> Any:
    assert _worker is not None, "the worker was not opened"
    return getattr(_worker, method)(*args)


# -- in the crawler --------------------------------------------------------------------


class CrawlWorker:
    """The crawler's handle on its worker process (one, spawned, calls run in order).

    ``submit`` hands a batch on and returns at once; ``wait_for_room`` is what a caller
    awaits before it, so that at most *queue_batches* batches are in flight.
    """

    def __init__(self, config: WorkerConfig, queue_batches: int = 4) -> None:
        self.config = config
        self.queue_batches = max(1, queue_batches)
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_watch_parent,
        )

    async def open(
        self,
        spider: str,
        args: dict[str, Any],
        servers: Iterable[tuple[str, dict[str, Any]]],
        logs_dir: str,
    ) -> tuple[int, str, str]:
        """Start the worker (its database, its indexer) and the ``crawls`` row."""
        future = self.executor.submit(_open, self.config, spider, args, list(servers), logs_dir)
        return await asyncio.wrap_future(future)

    def has_room(self) -> bool:
        return len(self.pending) < self.queue_batches

    async def wait_for_room(self) -> None:
        while not self.has_room():
            await asyncio.wait([self.pending[0]])

    def submit(self, method: str, *args: Any, done: Callable[[asyncio.Future[Any]], None]) -> None:
        """Run a :class:`Worker` method after every call submitted before; *done* gets its
        future, on the event loop."""
        future = asyncio.wrap_future(self.executor.submit(_call, method, *args))
        self.pending.append(future)

        def finished(f: asyncio.Future[Any]) -> None:
            self.pending.remove(f)
            done(f)

        future.add_done_callback(finished)

    async def call(self, method: str, *args: Any) -> Any:
        """Run a :class:`Worker` method after every call submitted before; its result."""
        return await asyncio.wrap_future(self.executor.submit(_call, method, *args))

    async def drain(self) -> None:
        """Wait for every batch in flight."""
        while self.pending:
            await asyncio.wait(list(self.pending))

    def shutdown(self, wait: bool = True) -> None:
        """Stop the worker after the calls submitted; with *wait* False, return at once
        (the process exits by itself, and Python joins it at exit)."""
        self.executor.shutdown(wait=wait)
