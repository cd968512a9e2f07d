"""The item pipeline: hand every item, in order, to the crawl's worker process.

:class:`StorePipeline` turns pages, failures, re-visits and gone pages into plain rows,
gathers them into batches and hands each batch on (:meth:`search.worker.CrawlWorker.write`:
its pages to an analysis process, the rest to the worker), to be analyzed, stored and
indexed in other processes.  The reactor thread does no analysis
and no database work.  ``process_item`` returns once its item's batch is handed on; while
``STORE_QUEUE_BATCHES`` batches are in flight it waits, so that the responses stay in
Scrapy's scraper slot and the downloader stops (``SCRAPER_SLOT_MAX_ACTIVE_SIZE``) until the
worker catches up: nothing waits in a buffer of ours beyond one batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured

from search import db
from search.crawldb import STORE_FAILED
from search.crawllocks import closed_message
from search.process import freeze_startup
from search.rows import DocumentRow, ErrorRow, GoneRow, RevisitRow
from search.servers import DEFAULTS
from search.worker import (
    CrawlWorker,
    IndexConfig,
    Report,
    WorkBatch,
    WorkerConfig,
    one_line,
)
from spidersite import signals as our_signals
from spidersite import storage
from spidersite.crawlsettings import CrawlSettings, crawl_settings
from spidersite.items import ErrorItem, GoneItem, PageItem, RevisitItem
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The items that go into the worker's batches (anything else passes through).
_BATCHED = (PageItem, ErrorItem, RevisitItem, GoneItem)


def index_config(config: CrawlSettings) -> IndexConfig:
    """The indexer the worker feeds, from the ``INDEX_`` settings (used when
    :attr:`CrawlSettings.writes_index`: ``INDEX_ENABLED`` and ``STORE_ENABLED``)."""
    return IndexConfig(
        index_dir=str(config.index_dir),
        batch_size=config.index_batch_size,
        max_terms=config.index_max_terms,
        limitmb=config.index_limitmb,
        max_merge_docs=config.index_max_merge_docs,
        queue_batches=config.index_queue_batches,
    )


class StorePipeline:
    """Batched, idempotent writes into the database (SQLite by default, or PostgreSQL),
    by the worker process, which also analyzes the pages and feeds the indexer.

    Settings: ``STORE_ENABLED`` (True), ``STORE_DATABASE_URL`` (default: ``DATABASE_URL``
    from the environment, else ``sqlite:///<SPIDERSITE_DATA_DIR>/spidersite.db``),
    ``STORE_BATCH_SIZE`` (rows per transaction, 100), ``STORE_BATCH_BYTES`` (page text per
    batch, 4,000,000 characters), ``STORE_QUEUE_BATCHES`` (batches in flight to the
    worker, 4), ``STORE_FLUSH_SECONDS`` (a batch that has not filled up is handed on
    after this long, 2.0; 0 = only when full), ``STORE_RETRY_TIMES`` (retries of a batch
    while the database is unreachable, 10), ``STORE_WORD_CACHE`` (bytes of the worker's
    cache of stem ids, 8 MB); ``ANALYZE_ENABLED`` (True) and
    ``ANALYZE_MAX_WORDS`` (50000) and ``ANALYZE_PROCESSES`` (analysis processes ahead of the
    worker: the cores less two, 0 to 4; 0: the worker analyzes) for the analysis; the
    ``INDEX_`` settings of the indexer it feeds (:func:`index_config`; the index's checks
    and failures are :class:`spidersite.extensions.IndexExtension`'s).
    Failures also go, one line each, to ``<data dir>/logs/crawl-<id>.log``.
    Stats (counted by the worker, applied here): ``analyze/pages``, ``analyze/words``,
    ``analyze/skipped_noindex``, ``analyze/pool_pages`` (analyzed in analysis processes),
    ``store/documents``, ``store/pages``, ``store/files``,
    ``store/errors``, ``store/revisits``, ``store/gone``, ``store/clones``,
    ``store/near_duplicates``, ``store/batches``, ``store/retries``,
    ``store/failed_batches``, ``store/split_batches`` (refused by the database, stored
    again page by page), ``store/failed_documents`` (pages it refused alone: failures of
    kind ``store``), ``store/error`` (a batch not stored: the crawl stops, ``store_failed``),
    ``store/flushed_at_last`` (unix time of the last commit), ``store/unrecorded`` (the
    crawl's end could not be recorded in ``crawls``: exit status 1), ``resume/crawl`` (the
    crawl this one resumes, whose unfinished row the worker closes as it starts this one's),
    ``store/abandoned_crawls`` (rows of other dead crawls it closed then:
    :mod:`search.crawllocks`),
    and the indexer's ``index/*``; counted here: ``store/queue_full`` (times a full batch
    waited for room: the worker was behind), ``store/timed_flushes`` (batches handed on
    by ``STORE_FLUSH_SECONDS`` before they filled up), ``store/worker_error``.
    ``LINKRANK_ENABLED`` (True): the worker recomputes the link-graph prior and rebuilds
    the links by target once the last batch is stored and indexed (or skips it when no
    page changed since the last one); stats ``linkrank/documents``, ``linkrank/links``,
    ``linkrank/inlinks``, ``linkrank/seconds``, ``linkrank/read_at``, ``linkrank/error``,
    ``linkrank/skipped``.
    """

    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.store_enabled:
            raise NotConfigured("STORE_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.batch_size = config.store_batch_size
        self.batch_bytes = config.store_batch_bytes
        self.queue_batches = config.store_queue_batches
        self.flush_seconds = config.store_flush_seconds
        self.logs_dir = config.data_dir / "logs"
        #: A crawl that did not finish is resumed by the same command (SITE_RESUME).
        self.site_resume = config.site_resume
        self.config = WorkerConfig(
            database_url=config.store_database_url,
            analyze=config.analyze_enabled,
            max_words=config.analyze_max_words,
            analyze_processes=config.analyze_processes,
            retry_times=config.store_retry_times,
            word_cache_bytes=config.store_word_cache,
            # Scale-out nodes (INDEX_ENABLED off) leave it to `reindex --follow`.
            linkrank=config.linkrank_enabled and config.writes_index,
            index=index_config(config) if config.writes_index else None,
        )
        self.batch = WorkBatch()
        self.batch_text = 0
        self.log_file: Any = None
        # The worker process starts now, while Scrapy builds the crawl's other components.
        self.worker: CrawlWorker | None = CrawlWorker(self.config, self.queue_batches)
        self.worker.start()
        self.failed = False
        #: Batches the worker could not store, and their pages (a resumed crawl fetches
        #: them again): said once when the first fails, counted when the crawl closes.
        self.lost_batches = 0
        self.lost_pages = 0
        #: The crawl's row in ``crawls`` (None until the worker has opened it).
        self.crawl_id: int | None = None
        self.closing: asyncio.Future[None] | None = None
        #: When the first row of the batch being gathered was added (time.monotonic).
        self.batch_started = 0.0
        self.ticker: asyncio.Task[None] | None = None
        #: The worker's stop, begun when the spider closed (engine_stopped awaits it).
        self.stopping: asyncio.Future[None] | None = None
        crawler.signals.connect(self.server_disabled, signal=our_signals.server_disabled)
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StorePipeline:
        return cls(crawler)

    async def engine_stopped(self) -> None:
        """Wait for the worker's processes, told to stop when the spider closed, to have
        ended, and their executors' threads with them, before the interpreter exits.
        Python 3.11's exit handler of :mod:`concurrent.futures` writes to each running
        executor's wake-up pipe while that executor's own thread may be closing it: an
        executor left to stop by itself (``shutdown(wait=False)``) made a crawl end, now
        and then, with an ``OSError: [Errno 9] Bad file descriptor`` traceback."""
        stopping, self.stopping = self.stopping, None
        if stopping is not None:
            await stopping

    async def open_spider(self) -> None:
        spider = self.crawler.spider
        assert spider is not None
        crawl_args = getattr(spider, "crawl_args", None)
        resumed_crawl = getattr(spider, "resumed_crawl", None)
        resumes = resumed_crawl() if resumed_crawl is not None else None
        servers = [(s.url, s.as_dict()) for s in server_state(self.crawler).registry]
        logs = self.logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        assert self.worker is not None
        try:
            self.crawl_id, log_path, shown, abandoned = await self.worker.open(
                spider.name,
                crawl_args() if crawl_args is not None else {},
                servers,
                str(logs),
                resumes,
            )
        except db.DatabaseError as exc:
            logger.error("%s", exc)
            self.worker.shutdown()
            self.worker = None
            raise CloseSpider("database_unusable") from None
        except Exception as exc:  # anything else: said once, with its traceback
            logger.error(
                "The store could not be opened: %s: %s", type(exc).__name__, exc, exc_info=exc
            )
            self.worker.shutdown()
            self.worker = None
            raise CloseSpider(STORE_FAILED) from None
        self.log_file = open(log_path, "a", encoding="utf-8")  # noqa: SIM115
        logger.info("Storing into %s", shown)
        if resumes is not None:
            self.stats.set_value("resume/crawl", resumes)
        if abandoned:
            self.stats.set_value("store/abandoned_crawls", len(abandoned))
            logger.info("%s", closed_message(abandoned))
        # Start-up is over (the spider, the servers, every component): what it made is
        # kept for the crawl; the garbage collector's full collections skip it from now on.
        freeze_startup()
        if self.flush_seconds > 0:
            self.ticker = asyncio.ensure_future(self._flush_periodically())

    async def _flush_periodically(self) -> None:
        """Hand on a batch that has waited ``STORE_FLUSH_SECONDS`` without filling up (a
        slow crawl, or its last pages): searchable soon after it was fetched, and a kill
        loses at most that much of it."""
        while True:
            await asyncio.sleep(self.flush_seconds / 2)
            if (
                len(self.batch)
                and time.monotonic() - self.batch_started >= self.flush_seconds
                and self.worker is not None
                and self.worker.has_room()
            ):
                self.stats.inc_value("store/timed_flushes")
                self._submit()

    def server_disabled(self, server: str, errors: int, reason: str) -> None:
        if self.worker is not None and not self.failed:
            self.worker.submit("disable_server", server, errors, reason, done=self._done)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, _BATCHED):
            return item
        # Scrapy hands on the items of many responses at once: while the batch is full
        # and the worker behind, each waits *before* it is added, so that a batch never
        # grows past STORE_BATCH_SIZE (the worker analyzes a whole batch at once).
        while self._full():
            await self._hand_on()
        self._add(item)
        # The item that fills the batch returns once the batch is handed on: while the
        # worker is behind, the response stays in the scraper slot and the downloader waits.
        while self._full():
            await self._hand_on()
        return item

    async def _hand_on(self) -> None:
        """Wait for room in the worker, then hand the batch on if it is (still) full."""
        assert self.worker is not None
        if not self.worker.has_room():
            self.stats.inc_value("store/queue_full")
            await self.worker.wait_for_room()
        if self._full() and self.worker.has_room():
            self._submit()

    def add_error(self, url: str, server: str | None, kind: str, message: str) -> None:
        """Record a failure found outside the spider (a middleware): it is stored with the
        next batch and written to the crawl's log file."""
        self._add(ErrorItem(url, server, kind, message))
        self.crawler.stats.inc_value(f"site/errors/{kind}")
        if self._full() and self.worker is not None and self.worker.has_room():
            self._submit()

    def _add(self, item: PageItem | ErrorItem | RevisitItem | GoneItem) -> None:
        batch = self.batch
        if not len(batch):
            self.batch_started = time.monotonic()
        if isinstance(item, PageItem):
            batch.docs.append(self._row(item))
            self.batch_text += len(item.text or "") + len(item.html or b"")
        elif isinstance(item, ErrorItem):
            batch.errors.append(ErrorRow(item.url, item.server, item.kind, item.message, item.time))
            self._log_error(item)
        elif isinstance(item, RevisitItem):
            batch.revisits.append(RevisitRow(item.doc_id, item.crawled_at, item.interval))
        else:
            batch.gone.append(GoneRow(item.doc_id, item.status, item.crawled_at))

    def _full(self) -> bool:
        if self.worker is None or self.failed:
            return False
        return len(self.batch) >= self.batch_size or self.batch_text >= self.batch_bytes

    def _submit(self) -> None:
        batch, self.batch, self.batch_text = self.batch, WorkBatch(), 0
        if not len(batch) or self.worker is None or self.failed:
            return
        pages = len(batch.docs)
        try:
            self.worker.write(batch, done=lambda future: self._written(future, pages))
        except Exception as exc:  # the worker process is gone
            self._failed(exc)

    def _log_error(self, item: ErrorItem) -> None:
        """One line per failure in the crawl's log file (the design documents' crawl.log)."""
        if self.log_file is None:
            return
        message = " ".join(item.message.split())
        self.log_file.write(
            f"{item.time.isoformat(timespec='seconds')}\t{item.kind}\t{item.url}\t{message}\n"
        )
        self.log_file.flush()

    def _row(self, item: PageItem) -> DocumentRow:
        server = server_state(self.crawler).server(item.url)
        values = {
            "kind": item.kind,
            "status": item.status,
            "content_type": item.content_type,
            "charset": item.charset,
            "size": item.size,
            "hops": item.hops,
            "language": item.language,
            "title": item.title,
            "keywords": item.keywords,
            "description": item.description,
            "text": item.text,
            "word_count": item.word_count,
            "link_count": max(item.link_count, len(item.links)),
            "noindex": item.noindex,
            "nofollow": item.nofollow,
            "last_modified": item.last_modified,
            "etag": item.etag,
            "checksum": item.checksum,
            "crawled_at": item.crawled_at,
            "change_interval": item.interval,
            "topic_score": item.topic_score,
            "warc_file": item.warc[0] if item.warc else None,
            "warc_offset": item.warc[1] if item.warc else None,
        }
        return DocumentRow(
            url=item.url,
            server=item.server,
            values=values,
            words=item.words,
            links=[(link.url, link.anchor, link.nofollow) for link in item.links],
            period=item.interval or (server.period if server else DEFAULTS["period"]),
            weights=item.weights,
            html=item.html,
        )

    def _written(self, future: asyncio.Future[Report], pages: int) -> None:
        try:
            report = future.result()
        except Exception as exc:
            self._failed(exc)
            return
        self._apply(report)
        if report.error:
            # The worker still runs: what it stored before stays stored and indexed.  The
            # first failure says why; the batches in flight that fail after it (the
            # database is still down) are counted, and said once as the crawl closes.
            self.lost_batches += 1
            self.lost_pages += pages
            if self.lost_batches == 1:
                self.stats.set_value("store/error", report.error)
                self._stop(f"A batch could not be stored: {report.error}")
        self.crawler.signals.send_catch_log(our_signals.store_flushed, report=report)

    def _done(self, future: asyncio.Future[Any]) -> None:
        try:
            future.result()
        except Exception as exc:
            self._failed(exc)

    def _record_finish(self, reason: str, stats: dict[str, Any]) -> None:
        """Record the crawl's end through the crawler's own engine (the worker is gone, or
        failed with an analysis process)."""
        from search.store import finish_crawl  # the worker's module, wanted here only now

        assert self.crawl_id is not None
        engine = storage.crawl_db(self.crawler, migrate=False).engine
        finish_crawl(engine, self.crawl_id, reason, stats, datetime.now(UTC))

    def _apply(self, report: Report) -> None:
        for key, n in report.inc.items():
            self.stats.inc_value(key, n)
        for key, value in report.values.items():
            self.stats.set_value(key, value)

    def _failed(self, exc: BaseException) -> None:
        """The worker process died: what it had not committed is lost (a resumed crawl
        fetches it again), and the crawl stops, since nothing more could be stored."""
        self.stats.inc_value("store/failed_batches")
        if self.failed:
            return
        self.failed = True
        self.stats.set_value("store/worker_error", f"{type(exc).__name__}: {exc}")
        self._stop(f"The store worker failed ({type(exc).__name__}: {exc})")

    def _stop(self, why: str) -> None:
        """Stop the crawl (finish reason ``store_failed``), once: pages it fetched were
        not stored, and a resumed crawl fetches them again."""
        logger.error("%s; stopping the crawl: %s", why, self._again())
        if self.closing is not None:
            return
        engine = self.crawler.engine
        if engine is not None and engine.spider is not None:
            self.closing = asyncio.ensure_future(engine.close_spider_async(reason=STORE_FAILED))

    async def close_spider(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
            self.ticker = None
        if self.worker is None:
            return
        self._submit()
        await self.worker.drain()
        if self.lost_batches > 1:
            logger.error(
                "%d batches (%d pages) could not be stored (the first: %s); %s",
                self.lost_batches,
                self.lost_pages,
                self.stats.get_value("store/error"),
                self._again(),
            )
        if not self.failed:
            try:
                report = await self.worker.call("close_index")
            except Exception as exc:
                self._failed(exc)
            else:
                self._apply(report)
                self._say_unmarked(report)
                self.crawler.signals.send_catch_log(our_signals.store_closed, report=report)
        # A crawl that lost batches (its database failed) is resumed: the link analysis is
        # made at the end of that one, not on a database that may still be failing.
        if not self.failed and not self.lost_batches:
            try:
                self._apply(await self.worker.call("update_linkrank"))
            except Exception as exc:
                self._failed(exc)
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    def _resumes(self) -> bool:
        """Whether the same command resumes this crawl, should it not finish: unless it
        is a re-crawl (never resumed) or ``SITE_RESUME`` is off."""
        return self.site_resume and getattr(self.crawler.spider, "recrawl", None) is None

    def _again(self) -> str:
        """What running the same command again does for the pages this crawl fetched and
        could not store (:meth:`_resumes`)."""
        if self._resumes():
            return "run the same command again to resume it and fetch what was not stored"
        if not self.site_resume:
            return "SITE_RESUME is off, so the same command starts the crawl over"
        return "a re-crawl is not resumed: the same command re-crawls from the start"

    def _say_unmarked(self, report: Report) -> None:
        """Say, in one line, what the indexer made searchable and could not mark indexed
        (the database failed): nothing is lost, the next crawl indexes those pages again;
        and in another, the promoted duplicates it could not read to index them."""
        unmarked = report.values.get("index/unmarked")
        if unmarked:
            logger.warning(
                "%d pages were made searchable but could not be marked indexed in the "
                "database (%s); they stay searchable, and the next crawl into it indexes "
                "them again and marks them (as python -m search check does)",
                unmarked,
                report.values.get("index/unmarked_error"),
            )
        unread = report.values.get("index/unread")
        if unread:
            logger.warning(
                "%d pages that became originals (the page they duplicated is gone or "
                "changed) could not be read from the database to be made searchable (%s); "
                "they stay stored, and the next crawl into it indexes them (as python -m "
                "search check does)",
                unread,
                report.values.get("index/unread_error"),
            )

    def _say_unrecorded(self, exc: BaseException) -> None:
        """Say, in one line, that the crawl's end (its finish reason and stats) could not
        be recorded, why (the database failed, most often), and what follows: its row in
        ``crawls`` stays unfinished, and a crawl that was not finished is resumed by the
        same command (:meth:`search.crawldb.CrawlDB.crawl_to_resume`), unless it is a
        re-crawl or ``SITE_RESUME`` is off.  Stat ``store/unrecorded`` (why): ``scrapy
        crawl`` then exits with status 1 (:func:`spidersite.commands.crawl.exit_status`)."""
        why = one_line(exc)
        self.stats.set_value("store/unrecorded", why)
        logger.error(
            "The crawl's end could not be recorded in the database (%s); it stays "
            "unfinished there%s",
            why,
            ", and running the same command again resumes it" if self._resumes() else "",
        )

    async def finish(self, reason: str) -> None:
        """Record the crawl's stats and finish reason in ``crawls`` and stop the worker
        (called by :class:`spidersite.extensions.CrawlRecorder` on spider_closed).

        A crawl some of whose pages could not be stored (``store/error``: a batch failed;
        or the worker or an analysis process died) is recorded as ``store_failed``, so that
        the same command resumes it, whatever reason Scrapy closed it with: a batch that
        fails while the spider is already closing cannot change Scrapy's.  When the worker
        failed, the crawler records it through its own engine."""
        if self.worker is None:
            return
        if self.failed or self.stats.get_value("store/error"):
            reason = STORE_FAILED
            self.stats.set_value("finish_reason", reason)
        stats = {
            k: (v.isoformat() if isinstance(v, datetime) else v)
            for k, v in self.crawler.stats.get_stats().items()
        }
        try:
            if not self.failed:
                await self.worker.call("finish_crawl", reason, stats)
            elif self.crawl_id is not None:
                await asyncio.to_thread(self._record_finish, reason, stats)
        except Exception as exc:
            self._say_unrecorded(exc)
        finally:
            # Without waiting for the process to exit here: the crawl is recorded as
            # finished, and Scrapy's last log lines follow at once.  It is waited for on a
            # thread, and that before the engine's stop ends (engine_stopped).
            self.stopping = asyncio.ensure_future(asyncio.to_thread(self.worker.shutdown))
            self.worker = None
