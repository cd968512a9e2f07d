"""Item pipelines: Analyze -> Store -> Index.

- :class:`AnalyzePipeline` turns a page's sections into weighted word records.
- :class:`StorePipeline` writes documents, words, postings, links and failures to the
  database in batches, one transaction per batch, off the reactor thread.
- :class:`IndexPipeline` feeds every stored batch to the indexer process, which makes it
  searchable in Whoosh.

Each is enabled in ``ITEM_PIPELINES`` and switched off by its ``*_ENABLED`` setting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured

from search import db
from search.analysis import analyze_document
from search.index import Index, IndexDoc
from search.indexer import Batch, IndexerProcess
from search.store import (
    BatchResult,
    DocumentRow,
    DocumentStore,
    ErrorRow,
    GoneRow,
    RevisitRow,
    StoredDocument,
)
from spidersite import signals as our_signals
from spidersite import storage
from spidersite.items import ErrorItem, GoneItem, PageItem, RevisitItem
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Sent by the store after each committed batch; args: ``documents`` (list of StoredDocument).
store_flushed = object()


class AnalyzePipeline:
    """Tokenize, stem and weigh every word of a page by the section it stood in.

    Settings: ``ANALYZE_ENABLED`` (default True), ``ANALYZE_MAX_WORDS`` (words read from a
    page's body, default 50000; the design documents' per-page word cap).
    Stats: ``analyze/pages``, ``analyze/words``, ``analyze/skipped_noindex``.
    """

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ANALYZE_ENABLED", True):
            raise NotConfigured("ANALYZE_ENABLED is off")
        self.stats = crawler.stats
        self.max_words = crawler.settings.getint("ANALYZE_MAX_WORDS", 50_000) or None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AnalyzePipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or item.kind != "page":
            return item
        if item.noindex:
            self.stats.inc_value("analyze/skipped_noindex")
            return item
        item.words = analyze_document(
            {
                "body": item.text or "",
                "title": item.title or "",
                "url": item.url,
                "desc": item.description or "",
                "keywords": item.keywords or "",
            },
            item.weights,
            item.language,
            self.max_words,
        )
        item.word_count = sum(r.counts[0] for r in item.words.values())
        self.stats.inc_value("analyze/pages")
        self.stats.inc_value("analyze/words", item.word_count)
        return item


class StorePipeline:
    """Batched, idempotent writes into the database (SQLite by default, or PostgreSQL).

    Settings: ``STORE_ENABLED`` (True), ``STORE_DATABASE_URL`` (default: ``DATABASE_URL``
    from the environment, else ``sqlite:///<SPIDERSITE_DATA_DIR>/spidersite.db``),
    ``STORE_BATCH_SIZE`` (documents per transaction, 100), ``STORE_RETRY_TIMES`` (retries
    of a batch while the database is unreachable, 10).
    Failures also go, one line each, to ``<data dir>/logs/crawl-<id>.log``.
    Stats: ``store/documents``, ``store/pages``, ``store/files``, ``store/errors``,
    ``store/revisits``, ``store/gone``, ``store/clones``, ``store/near_duplicates``,
    ``store/batches``, ``store/retries``, ``store/failed_batches``,
    ``store/flushed_at_last`` (unix time of the last commit).
    """

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("STORE_ENABLED", True):
            raise NotConfigured("STORE_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.batch_size = max(1, settings.getint("STORE_BATCH_SIZE", 100))
        self.max_pending = 2
        self.retry_times = settings.getint("STORE_RETRY_TIMES", 10)
        self.docs: list[DocumentRow] = []
        self.errors: list[ErrorRow] = []
        self.revisits: list[RevisitRow] = []
        self.gone: list[GoneRow] = []
        self.log_file: Any = None
        self.pending: list[asyncio.Future[BatchResult]] = []
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")
        self.store: DocumentStore | None = None
        crawler.signals.connect(self.server_disabled, signal=our_signals.server_disabled)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StorePipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        try:
            engine = storage.crawl_db(self.crawler).engine
        except db.DatabaseError as exc:
            logger.error("%s", exc)
            raise CloseSpider("database_unusable") from None
        self.store = DocumentStore(engine, self.retry_times, self._retrying)
        spider = self.crawler.spider
        assert spider is not None
        now = datetime.now(UTC)
        crawl_args = getattr(spider, "crawl_args", None)
        args = crawl_args() if crawl_args is not None else {}
        crawl_id = self.store.start_crawl(spider.name, args, now)
        logs = Path(storage.data_dir(self.crawler.settings)) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / f"crawl-{crawl_id}.log"
        self.log_file = path.open("a", encoding="utf-8")
        self.store.set_log_file(str(path))
        registry = server_state(self.crawler).registry
        self.store.upsert_servers(((s.url, s.as_dict()) for s in registry), now)
        logger.info("Storing into %s", engine.url.render_as_string(hide_password=True))

    def server_disabled(self, server: str, errors: int, reason: str) -> None:
        if self.store is not None:
            self.executor.submit(
                self.store.disable_server, server, errors, reason, datetime.now(UTC)
            )

    async def process_item(self, item: Any) -> Any:
        if isinstance(item, PageItem):
            self.docs.append(self._row(item))
        elif isinstance(item, ErrorItem):
            self.errors.append(ErrorRow(item.url, item.server, item.kind, item.message, item.time))
            self._log_error(item)
        elif isinstance(item, RevisitItem):
            self.revisits.append(RevisitRow(item.doc_id, item.crawled_at, item.interval))
        elif isinstance(item, GoneItem):
            self.gone.append(GoneRow(item.doc_id, item.status, item.crawled_at))
        else:
            return item
        if self._buffered() >= self.batch_size:
            await self._flush()
        return item

    def add_error(self, url: str, server: str | None, kind: str, message: str) -> None:
        """Record a failure found outside the spider (a middleware): it is stored with the
        next batch and written to the crawl's log file."""
        item = ErrorItem(url, server, kind, message)
        self.errors.append(ErrorRow(item.url, item.server, item.kind, item.message, item.time))
        self._log_error(item)
        self.crawler.stats.inc_value(f"site/errors/{kind}")

    def _buffered(self) -> int:
        return len(self.docs) + len(self.errors) + len(self.revisits) + len(self.gone)

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
            period=item.interval or (server.period if server else 7 * 86400),
            weights=item.weights,
        )

    async def _flush(self) -> None:
        if not self._buffered() or self.store is None:
            return
        batch = (self.docs, self.errors, self.revisits, self.gone)
        self.docs, self.errors, self.revisits, self.gone = [], [], [], []
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, self.store.write_batch, *batch)
        future.add_done_callback(self._written)
        self.pending.append(future)
        self.stats.inc_value("store/errors", len(batch[1]))
        self.stats.inc_value("store/revisits", len(batch[2]))
        self.stats.inc_value("store/gone", len(batch[3]))
        # Back-pressure: at most max_pending batches in flight.
        while len(self.pending) > self.max_pending:
            await asyncio.wait([self.pending[0]])

    def _retrying(self, exc: Exception) -> None:
        self.stats.inc_value("store/retries")

    def _written(self, future: asyncio.Future[BatchResult]) -> None:
        self.pending.remove(future)
        try:
            result = future.result()
        except Exception:
            logger.exception("A batch could not be stored")
            self.stats.inc_value("store/failed_batches")
            return
        self.stats.inc_value("store/batches")
        self.stats.inc_value("store/documents", len(result.documents))
        for doc in result.documents:
            self.stats.inc_value(f"store/{doc.row.values['kind']}s")
            if doc.clone_of is not None:
                self.stats.inc_value("store/clones")
            if doc.near_duplicate_of is not None:
                self.stats.inc_value("store/near_duplicates")
        self.stats.set_value("store/flushed_at_last", time.time())
        self.crawler.signals.send_catch_log(
            store_flushed, documents=result.documents, deleted=result.deleted
        )

    async def close_spider(self) -> None:
        await self._flush()
        while self.pending:
            await asyncio.wait(list(self.pending))
        self.crawler.signals.send_catch_log(store_closed)
        self.executor.shutdown(wait=True)
        if self.log_file is not None:
            self.log_file.close()

    def finish(self, reason: str) -> None:
        """Record the crawl's stats (called by the index pipeline or on spider_closed)."""
        if self.store is None:
            return
        stats = {
            k: (v.isoformat() if isinstance(v, datetime) else v)
            for k, v in self.crawler.stats.get_stats().items()
        }
        self.store.finish_crawl(reason, stats, datetime.now(UTC))


#: Sent by the store once its last batch is committed (before the spider is closed).
store_closed = object()


class CrawlRecorder:
    """Extension: write the crawl's final stats and finish reason into ``crawls``."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlRecorder:
        return cls(crawler)

    def spider_closed(self, reason: str) -> None:
        store = self.crawler.get_item_pipeline(StorePipeline)
        if store is not None:
            store.finish(reason)
        storage.close_crawl_db(self.crawler)


class IndexPipeline:
    """Make stored pages searchable: feed each stored batch to the indexer process.

    Settings: ``INDEX_ENABLED`` (True; off on crawl nodes of a scaled-out setup, where
    ``python -m search reindex --follow`` indexes), ``INDEX_DIR`` (default
    ``<SPIDERSITE_DATA_DIR>/index``), ``INDEX_BATCH_SIZE`` (documents per Whoosh commit,
    1000), ``INDEX_MAX_TERMS`` (distinct stems indexed per page, highest weights first,
    20000), ``INDEX_LIMITMB`` (Whoosh writer memory, 256).
    Stats: ``index/sent``, ``index/deleted``, ``index/documents``, ``index/searchable_at``.
    """

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("INDEX_ENABLED", True):
            raise NotConfigured("INDEX_ENABLED is off")
        if not settings.getbool("STORE_ENABLED", True):
            raise NotConfigured(
                "INDEX_ENABLED needs STORE_ENABLED: the index is fed from stored documents"
            )
        self.crawler = crawler
        self.stats = crawler.stats
        self.index_dir = storage.index_dir(settings)
        self.batch_size = max(1, settings.getint("INDEX_BATCH_SIZE", 1000))
        self.max_terms = settings.getint("INDEX_MAX_TERMS", 20_000) or None
        self.limitmb = settings.getint("INDEX_LIMITMB", 256)
        self.worker: IndexerProcess | None = None
        crawler.signals.connect(self.stored, signal=store_flushed)
        crawler.signals.connect(self.store_closed, signal=store_closed)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexPipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        index = Index(self.index_dir)
        try:
            index.open(create=True)
        except Exception as exc:
            logger.error("Cannot open the search index at %s: %s", self.index_dir, exc)
            raise CloseSpider("index_unusable") from None
        self.worker = IndexerProcess(
            self.index_dir,
            storage.database_url(self.crawler.settings),
            self.batch_size,
            self.limitmb,
        )
        self.worker.start()

    def process_item(self, item: Any) -> Any:
        return item

    def stored(self, documents: list[StoredDocument], deleted: list[int] = ()) -> None:  # type: ignore[assignment]
        if self.worker is None:
            return
        docs: list[IndexDoc] = []
        deletes: list[int] = list(deleted)
        for doc in documents:
            row = doc.row
            if row.values["kind"] != "page":
                continue
            if doc.clone_of is not None:  # an exact duplicate is not indexed twice
                deletes.append(doc.id)
                continue
            if row.words is None:  # noindex: make sure it is not searchable
                deletes.append(doc.id)
                continue
            host = row.url.split("/")[2]
            docs.append(
                IndexDoc.from_records(
                    doc.id, row.url, host, row.words.values(), _weights(row), self.max_terms
                )
            )
        if docs or deletes:
            self.worker.send(Batch(docs, deletes))
            self.stats.inc_value("index/sent", len(docs))
            self.stats.inc_value("index/deleted", len(deletes))

    def store_closed(self) -> None:
        if self.worker is None:
            return
        logger.info("Waiting for the indexer to make the last pages searchable")
        self.worker.close()
        if self.worker.error:
            logger.error(
                "The indexer failed: %s; run `python -m search reindex` to rebuild "
                "the index from the database",
                self.worker.error,
            )
            self.stats.set_value("index/error", self.worker.error)
        self.stats.set_value("index/documents", self.worker.indexed)
        self.stats.set_value("index/searchable_at", self.worker.searchable_at)
        self.worker = None

    def spider_closed(self) -> None:
        # Normally the store's store_closed signal has closed the worker already.
        if self.worker is not None:
            self.store_closed()


def _weights(row: DocumentRow) -> dict[str, float]:
    from search.analysis import DEFAULT_WEIGHTS

    return row.weights or DEFAULT_WEIGHTS
