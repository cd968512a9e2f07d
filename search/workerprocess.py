"""The crawl's worker process itself: analysis, storage and the hand-off to the indexer.

The crawler's handle on it, and what the two exchange (configuration, batches, reports),
are :mod:`search.worker`, which the crawler imports; this module, with the store, the
index and the extractor, is imported only in the worker process (spawned by
:class:`search.worker.CrawlWorker`, whose calls run :func:`open_worker` and :func:`call`).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from search import db, worker
from search.analysispool import AnalyzedBatches, analyze_rows
from search.crawldb import CrawlDB
from search.doccolumns import DocColumns
from search.indexer import Batch, IndexerProcess
from search.linkrank import update_linkrank
from search.process import freeze_startup, release_memory
from search.rows import BatchResult, ErrorRow
from search.store import DocumentStore, refused, unreachable, vacuum_dead_rows
from search.urls import netloc
from search.worker import Report, WorkBatch, WorkerConfig, one_line

logger = logging.getLogger(__name__)


class Worker:
    """The worker's state: the store (its engine and caches) and the indexer handle."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        #: Retries of the batch being written (the store retries while the database is
        #: unreachable), for its report.
        self.retries = 0
        #: Batches given up since the last one stored: a failure that lasts (the database
        #: unreachable past its retries, full, read-only) is logged once, by its first.
        self.failing = 0
        self.store = DocumentStore(
            db.connect(config.database_url),
            config.retry_times,
            self._retry,
            word_cache_bytes=config.word_cache_bytes,
        )
        #: Pages this crawl stored or found gone: what a link analysis reads changed.
        self.pages_changed = 0
        #: The batches the analysis processes analyzed (None: the worker analyzes).
        channel = worker.analysis_channel
        self.analyzed = None if channel is None else AnalyzedBatches(*channel)
        self.indexer: IndexerProcess | None = None
        if config.index is not None:
            self.indexer = IndexerProcess(
                config.index.index_dir,
                config.database_url,
                config.index.batch_size,
                config.index.limitmb,
                max_merge_docs=config.index.max_merge_docs,
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
        resumes: int | None = None,
    ) -> tuple[int, str, str, list[int]]:
        """Start the ``crawls`` row, its lock held by this process until the crawl's end
        is recorded, and close the rows of dead crawls, the one it *resumes* among them
        (:meth:`search.store.DocumentStore.start_crawl`); returns its id, the crawl's log
        file, the database URL to show (without its password) and the ids of the rows
        closed as abandoned."""
        now = datetime.now(UTC)
        crawl_id = self.store.start_crawl(spider, args, now, resumes)
        path = Path(logs_dir) / f"crawl-{crawl_id}.log"
        self.store.set_log_file(str(path))
        if servers:
            self.store.upsert_servers(servers, now)
        shown = self.store.engine.url.render_as_string(hide_password=True)
        return crawl_id, str(path), shown, self.store.abandoned

    def write(self, batch: WorkBatch, seq: int | None = None) -> Report:
        """Store *batch* and hand its pages to the indexer.  With *seq*, its pages are
        batch *seq* of the analysis processes (:mod:`search.analysispool`), taken from
        them analyzed; else they are analyzed here.  Every page of the batch is analyzed
        before anything of it is stored."""
        report = Report()
        if seq is not None:
            assert self.analyzed is not None, "no analysis processes feed this worker"
            batch.docs, inc = self.analyzed.take(seq)
            report.inc.update(inc)
        else:
            analyze_rows(batch.docs, self.config.analyze, self.config.max_words, report.inc)

        self.retries = 0
        # While batches fail, the next ones are tried once: the first was retried, the
        # crawl is stopping, and a resumed crawl fetches them again.
        self.store.retry_times = 0 if self.failing else self.config.retry_times
        try:
            result = self._store(batch, report)
        except Exception as exc:
            # Nothing of the batch is stored: the crawler stops the crawl (a resumed crawl
            # fetches its pages again).
            report.error = self._given_up(exc)
            report.inc["store/failed_batches"] += 1
            return report
        finally:
            if self.retries:
                report.inc["store/retries"] += self.retries
        if self.failing:
            logger.warning(
                "The database stores batches again; %d before this one could not be stored",
                self.failing,
            )
            self.failing = 0
            if self.indexer is not None:
                self.indexer.database_failing(False)
        report.inc["store/batches"] += 1
        self.pages_changed += len(result.documents) + len(batch.gone)
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
        self.store.keep_crawl_lock()  # lost with its connection: taken again
        self._index(result, report)
        # The batch is stored and handed on: its rows and their analysis (~15 MB of small
        # objects for 100 pages) go now, not when the executor lets go of the call, and
        # with them what the batches before left.
        del result
        batch.docs.clear()
        release_memory()
        return report

    def _given_up(self, exc: Exception) -> str:
        """Why a batch could not be stored, in one line; logged for the first batch of a
        failure only (the others at DEBUG).  A database that cannot be reached, or takes no
        write, is one line; anything else has its traceback, once."""
        why = refused(exc)
        message = f"{why}: {one_line(exc)}" if why else one_line(exc)
        self.failing += 1
        if (why or unreachable(exc)) and self.indexer is not None:
            # The indexer's marks need not wait for it either.
            self.indexer.database_failing(True)
        if self.failing > 1:
            logger.debug("Batch %d of this failure not stored: %s", self.failing, message)
        elif why or unreachable(exc):
            logger.error("A batch could not be stored: %s", message)
            logger.debug("The failure of the batch", exc_info=exc)
        else:
            logger.error("A batch could not be stored: %s", message, exc_info=exc)
        return message

    def _store(self, batch: WorkBatch, report: Report) -> BatchResult:
        """Store *batch* in one transaction; if the database refuses it (not unreachable:
        a row it cannot take), each page again in a transaction of its own, so that one
        page it refuses costs that page alone.  Such a page is recorded as a failure of
        kind ``store`` (``store/failed_documents``)."""
        try:
            return self.store.write_batch(batch.docs, batch.errors, batch.revisits, batch.gone)
        except Exception as exc:
            if unreachable(exc) or refused(exc) or not batch.docs:
                raise
            logger.warning(
                "A batch could not be stored (%s); storing its pages one by one", one_line(exc)
            )
            report.inc["store/split_batches"] += 1
        result = BatchResult()
        rejected: list[ErrorRow] = []
        for doc in batch.docs:
            try:
                one = self.store.write_batch([doc])
            except Exception as exc:
                if unreachable(exc) or refused(exc):
                    raise
                logger.error("Page %s could not be stored: %s", doc.url, one_line(exc))
                report.inc["store/failed_documents"] += 1
                rejected.append(
                    ErrorRow(doc.url, doc.server, "store", one_line(exc), datetime.now(UTC))
                )
                continue
            result.documents += one.documents
            result.promoted += one.promoted
        errors = [*batch.errors, *rejected]
        if errors or batch.revisits or batch.gone:
            rest = self.store.write_batch((), errors, batch.revisits, batch.gone)
            result.deleted += rest.deleted
            result.promoted += rest.promoted
        return result

    def _index(self, result: BatchResult, report: Report) -> None:
        if self.indexer is None or self.config.index is None:
            return
        docs, deletes = index_batch(result, self.config.index.max_terms)
        sent, deleted = len(docs) + len(result.promoted), len(deletes)
        if sent or deleted:
            try:
                # Waits while the indexer's inbox is full (the back-pressure).
                self.indexer.send(Batch(docs, deletes, result.promoted))
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
        info = self.indexer.info
        if info.get("retries"):
            report.inc["index/retries"] += info["retries"]
        if info.get("unmarked"):
            # Searchable, not marked indexed: the next crawl's indexer indexes them again.
            report.values["index/unmarked"] = info["unmarked"]
            report.values["index/unmarked_error"] = info["unmarked_error"]
        if info.get("unread"):
            # Promoted duplicates not read: stored, not marked, the next crawl indexes them.
            report.values["index/unread"] = info["unread"]
            report.values["index/unread_error"] = info["unread_error"]
        self.indexer = None
        return report

    def update_linkrank(self) -> Report:
        """Recompute every document's linkrank over the stored links (the crawl's last
        pages are stored and indexed by now); a failure is logged, never fatal.

        Skipped (``linkrank/skipped``) when this crawl changed no page and the stored
        analysis is known to cover every other crawl's changes
        (:meth:`search.crawldb.CrawlDB.links_analyzed`): an unchanged re-crawl does not
        read every link again (~20 s at 100,000 pages).  ``linkrank/read_at`` records when
        a complete analysis began reading, for the crawls after it."""
        report = Report()
        if not self.config.linkrank:
            return report
        try:
            if not self.pages_changed and CrawlDB(self.store.engine).links_analyzed(
                self.store.crawl_id
            ):
                logger.info("The link analysis is skipped: no page changed since the last one")
                report.values["linkrank/skipped"] = 1
                return report
            read_at = time.time()
            result = update_linkrank(self.store.engine)
        except Exception as exc:
            if unreachable(exc) or refused(exc):
                # The database is down or takes no write: one line, as for a batch.  The
                # next crawl computes it (this one records no linkrank/read_at).
                logger.error(
                    "The link-graph prior could not be computed (%s); the next crawl computes it",
                    one_line(exc),
                )
            else:
                logger.exception("The link-graph prior could not be computed")
            report.values["linkrank/error"] = f"{type(exc).__name__}: {exc}"
            return report
        report.values["linkrank/read_at"] = read_at
        report.values["linkrank/documents"] = result.documents
        report.values["linkrank/written"] = result.written
        report.values["linkrank/links"] = result.links
        report.values["linkrank/inlinks"] = result.inlinks
        report.values["linkrank/seconds"] = round(result.seconds, 3)
        return report

    def finish_crawl(self, reason: str, stats: dict[str, Any]) -> None:
        self.store.finish_crawl(reason, stats, datetime.now(UTC))
        vacuum_dead_rows(self.store.engine)  # PostgreSQL without autovacuum only
        self.store.engine.dispose()


def index_batch(result: BatchResult, max_terms: int | None) -> tuple[DocColumns, list[int]]:
    """What a stored batch changes in the index: pages to add or replace (in columns),
    ids to delete (pages gone, noindex, unanalyzed, and exact duplicates, which are
    indexed once).

    Each row's words are dropped once the columns are made: they are stored, and the
    columns hold what the index needs of them, so the batch's analysis does not stay
    beside its documents (twice the words) while the indexer's inbox is full."""
    deletes: list[int] = list(result.deleted)
    pages = []
    for doc in result.documents:
        row = doc.row
        if row.values["kind"] != "page":
            continue
        if doc.clone_of is not None or row.words is None:
            deletes.append(doc.id)
            continue
        pages.append((doc.id, row.url, netloc(row.url), row.words, row.weights))
    columns = DocColumns.of_records(pages, max_terms)
    for doc in result.documents:
        doc.row.words = None
    return columns, deletes


_worker: Worker | None = None


def open_worker(config: WorkerConfig, *args: Any) -> tuple[int, str, str, list[int]]:
    """Open the worker of this process and its crawl (:meth:`Worker.open_crawl`)."""
    global _worker
    _worker = Worker(config)
    opened = _worker.open_crawl(*args)
    freeze_startup()
    return opened


def call(method: str, *args: Any) -> Any:
    """Run a method of this process's worker."""
    assert _worker is not None, "the worker was not opened"
    return getattr(_worker, method)(*args)
