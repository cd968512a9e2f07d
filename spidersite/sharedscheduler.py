"""The scheduler of a scaled-out crawl (:class:`SharedScheduler`, described in
:mod:`spidersite.scaleout`): its own module, so that only a crawl with a shared frontier
loads scrapy-redis and redis."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, NoReturn

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.scheduler import Scheduler
from twisted.internet.task import LoopingCall

from spidersite.crawlsettings import crawl_settings
from spidersite.scaleout import BUSY_REFRESH, BUSY_TTL, _describe, _one_line

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


logger = logging.getLogger(__name__)


class SharedScheduler(Scheduler):
    """scrapy-redis's scheduler, with keys per crawl, seeds pushed once, and processes
    that stop together when the shared frontier is done (see the module docstring)."""

    crawler: Crawler
    prefix: str
    idle_timeout: float
    worker: str
    seeding: bool
    busy: bool
    finished: bool
    _idle_since: float | None
    _said: str
    _refresher: LoopingCall | None
    keys: dict[str, str]
    base: str

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedScheduler:
        scheduler: SharedScheduler = super().from_crawler(crawler)
        config = crawl_settings(crawler)
        scheduler.crawler = crawler
        scheduler.prefix = config.scaleout_key_prefix
        scheduler.idle_timeout = config.scaleout_idle_timeout
        scheduler.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        scheduler.seeding = False
        scheduler.busy = False
        scheduler.finished = False
        scheduler._idle_since = None
        scheduler._said = ""
        scheduler._refresher = None
        scheduler.keys = {}
        crawler.signals.connect(scheduler.spider_idle, signal=signals.spider_idle)
        return scheduler

    # -- opening and closing -------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        crawl_key = getattr(spider, "frontier_key", None) or spider.name
        self.base = base = f"{self.prefix}:{crawl_key}"
        self.keys = {
            name: f"{base}:{name}" for name in ("requests", "dupefilter", "seeded", "busy")
        }
        self.queue_key = self.keys["requests"]
        self.df = RFPDupeFilter(
            self.server,
            key=self.keys["dupefilter"],
            debug=self.crawler.settings.getbool("DUPEFILTER_DEBUG"),
        )
        self.stats.set_value("scaleout/key", base)
        self._set_busy(True)  # from the start: the seeds may be on their way
        super().open(spider)
        self.seeding = bool(self.server.set(self.keys["seeded"], self.worker, nx=True))
        self.stats.set_value("scaleout/seeder", int(self.seeding))
        waiting = len(self.queue)
        if self.seeding:
            logger.info(
                "Shared frontier %s on Redis %s: this process pushes the seeds",
                base,
                _describe(self.server),
                extra={"spider": spider},
            )
        else:
            logger.info(
                "Shared frontier %s on Redis %s: joining the crawl (%d requests queued); "
                "another process pushed the seeds",
                base,
                _describe(self.server),
                waiting,
                extra={"spider": spider},
            )
        self._warn_about_storage()
        self._refresher = LoopingCall(self._refresh)
        self._refresher.start(BUSY_REFRESH, now=False)

    def _warn_about_storage(self) -> None:
        config = crawl_settings(self.crawler)
        if config.writes_index:
            logger.warning(
                "INDEX_ENABLED is on in a crawl with a shared frontier: every process "
                "writes its own Whoosh index; run the crawlers with -s INDEX_ENABLED=False "
                "and one `python -m search reindex --follow`"
            )
        if config.store_database_url.startswith("sqlite"):
            logger.warning(
                "The processes of a shared frontier each write to %s; give them one "
                "PostgreSQL (DATABASE_URL or STORE_DATABASE_URL)",
                config.store_database_url,
            )

    def close(self, reason: str) -> None:
        if self._refresher is not None and self._refresher.running:
            self._refresher.stop()
        self._set_busy(False)
        if self.finished and reason == "finished":
            # Every process is idle and the queue is empty: the crawl is done.  Its seen-set
            # goes, so that the same command later starts a new crawl.
            self.server.delete(*self.keys.values())
            logger.info("Crawl %s finished: its Redis keys are deleted", self.base)
        elif len(self.queue):
            logger.info(
                "%d requests stay in the shared frontier (run the same command to go on)",
                len(self.queue),
            )

    # -- requests ------------------------------------------------------------------------

    def enqueue_request(self, request: Request) -> bool:
        if request.dont_filter:
            # Not filtered, but seen: another process that finds this URL as a link
            # must not fetch it again.
            self.df.request_seen(request)
        if super().enqueue_request(request):
            self.stats.inc_value("scaleout/pushed")
            return True
        self.stats.inc_value("scaleout/filtered")
        return False

    def next_request(self) -> Request | None:
        request: Request | None = super().next_request()
        if request is not None:
            self._set_busy(True)
            self._idle_since = None
            self._said = ""
            self.stats.inc_value("scaleout/popped")
        return request

    # -- busy marks and the idle policy --------------------------------------------------

    def _now(self) -> float:
        """Redis's clock, the same for every machine of the crawl."""
        seconds, micros = self.server.time()
        return float(seconds) + micros / 1e6

    def _set_busy(self, busy: bool) -> None:
        if busy:
            self.server.zadd(self.keys["busy"], {self.worker: self._now() + BUSY_TTL})
        elif self.busy:
            self.server.zrem(self.keys["busy"], self.worker)
        self.busy = busy

    def _refresh(self) -> None:
        if self.busy:
            try:
                self._set_busy(True)
            except Exception as exc:  # a Redis hiccup: the next refresh tries again
                logger.warning("Could not refresh the busy mark in Redis: %s", _one_line(exc))

    def spider_idle(self) -> None:
        """Keep an idle process open while the crawl may still give it work."""
        self._set_busy(False)
        if len(self.queue):
            self._idle_since = None
            raise DontCloseSpider
        others = self.server.zcount(self.keys["busy"], self._now(), "+inf")
        if others:
            self._idle_since = None
            self._wait(f"Shared frontier empty; waiting for {others} busy process(es)")
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < self.idle_timeout:
            self._wait(
                f"Shared frontier empty and no process busy; closing in "
                f"{self.idle_timeout:.0f} s unless work arrives"
            )
        self.finished = True
        self.stats.set_value("scaleout/finished", 1)

    def _wait(self, message: str) -> NoReturn:
        """Stay open; log a change of the waiting state once, not at every idle check."""
        self.stats.inc_value("scaleout/idle_waits")
        if message != self._said:
            self._said = message
            logger.info("%s", message, extra={"spider": self.spider})
        raise DontCloseSpider
