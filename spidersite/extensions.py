"""Extensions: components that act on the crawl's signals, not on its items.

- :class:`IndexExtension` owns the crawl's Whoosh index: its settings, the check that it
  can be opened, and the report of its failures.  The pages reach the indexer from the
  store's worker process (:mod:`search.worker`), never through the reactor thread.
- :class:`CrawlRecorder` writes the crawl's final stats and finish reason into ``crawls``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured

from search.index import Index
from search.worker import Report
from spidersite import signals as our_signals
from spidersite import storage
from spidersite.crawlsettings import crawl_settings
from spidersite.pipelines import StorePipeline, index_config

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class IndexExtension:
    """Make stored pages searchable: the store's worker feeds each stored batch to the
    indexer process, the one writer of the Whoosh index.

    Settings: ``INDEX_ENABLED`` (True; off on crawl nodes of a scaled-out setup, where
    ``python -m search reindex --follow`` indexes), ``INDEX_DIR`` (default
    ``<SPIDERSITE_DATA_DIR>/index``), ``INDEX_BATCH_SIZE`` (documents per Whoosh commit,
    1000), ``INDEX_MAX_TERMS`` (distinct stems indexed per page, highest weights first,
    20000), ``INDEX_LIMITMB`` (megabytes of postings the Whoosh writer buffers, 4),
    ``INDEX_MAX_MERGE_DOCS`` (segments of more documents are not merged again, 16384;
    0: no cap), ``INDEX_QUEUE_BATCHES`` (stored batches waiting for the indexer, 8).
    Stats (counted by the worker): ``index/sent``, ``index/deleted``, ``index/documents``,
    ``index/searchable_at``, ``index/error``.
    """

    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.index_enabled:
            raise NotConfigured("INDEX_ENABLED is off")
        if not config.store_enabled:
            raise NotConfigured(
                "INDEX_ENABLED needs STORE_ENABLED: the index is fed from stored documents"
            )
        self.config = index_config(config)
        self.error: str | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.store_flushed, signal=our_signals.store_flushed)
        crawler.signals.connect(self.store_closed, signal=our_signals.store_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IndexExtension:
        return cls(crawler)

    def spider_opened(self) -> None:
        index = Index(self.config.index_dir)
        try:
            index.open(create=True)
        except Exception as exc:
            logger.error("Cannot open the search index at %s: %s", self.config.index_dir, exc)
            raise CloseSpider("index_unusable") from None

    def store_flushed(self, report: Report) -> None:
        self._report(report)

    def store_closed(self, report: Report) -> None:
        self._report(report)

    def _report(self, report: Report) -> None:
        error = report.values.get("index/error")
        if error and error != self.error:
            self.error = error
            logger.error(
                "The indexer failed: %s; run `python -m search reindex` to make the "
                "stored pages searchable",
                error,
            )


class CrawlRecorder:
    """Write the crawl's final stats and finish reason into ``crawls`` (on spider_closed,
    after Scrapy's own stats are final), then stop the store's worker and dispose of the
    crawl's engine (the spider's reads)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlRecorder:
        return cls(crawler)

    async def spider_closed(self, reason: str) -> None:
        store = self.crawler.get_item_pipeline(StorePipeline)
        if store is not None:
            await store.finish(reason)
        storage.close_crawl_db(self.crawler)
