"""Scale-out: several crawl processes share one frontier and one seen-URL set in Redis.

Off unless ``SCALEOUT_REDIS_URL`` is set (or the environment variable
``SPIDERSITE_REDIS_URL``)::

    scrapy crawl site -a seeds=https://example.org/ \\
        -s SCALEOUT_REDIS_URL=redis://redis.example:6379/0 -s INDEX_ENABLED=False

Then :class:`ScaleOutAddon` (listed in ``ADDONS``) switches Scrapy's scheduler to
:class:`SharedScheduler`, a thin layer over scrapy-redis's scheduler, its priority queue
(breadth-first: requests carry priority −hops) and its fingerprint set.  What the layer
adds is the glue a crawl of several processes needs:

- **Keys per crawl.**  The queue and the seen-set of a crawl live under
  ``<SCALEOUT_KEY_PREFIX>:<crawl key>:`` (``requests``, ``dupefilter``); the crawl key is
  the spider's ``frontier_key`` (``-a crawl_key=NAME``, or derived from the spider's
  arguments, so processes started with the same arguments join the same crawl).
- **Seeds pushed once.**  The first process of a crawl claims ``<…>:seeded`` (``SET NX``)
  and runs the spider's start (seeds, re-crawl, resume from the database); the others start
  with nothing and take requests from the shared queue.  Requests that bypass the
  fingerprint set (``dont_filter``: seeds, re-visits, retries) are still added to it, so
  another process that finds the same URL as a link does not fetch it again.
- **Stopping together.**  Each process marks itself busy in ``<…>:busy`` (a sorted set
  scored by an expiry time, refreshed every few seconds) from the moment it takes work
  until Scrapy finds it idle.  An idle process stays open while the shared queue has
  requests or another process is busy (its requests may add links), and closes once the
  queue has been empty and no process busy for ``SCALEOUT_IDLE_TIMEOUT`` seconds; so a
  process started before the seeds are pushed waits for them.
- **Queue kept until the crawl is done.**  Closing never empties the queue (the scrapy-redis
  ``SCHEDULER_PERSIST = False`` behaviour would let the first idle process delete the
  queue of the others).  Only the process that found the crawl finished deletes its keys,
  so running the same command again starts a new crawl; a crawl that was interrupted keeps
  them, and the same command continues it from the shared queue.

Settings: ``SCALEOUT_REDIS_URL``, ``SCALEOUT_KEY_PREFIX`` (``spidersite``),
``SCALEOUT_IDLE_TIMEOUT`` (30 s); scrapy-redis's ``REDIS_PARAMS`` and ``DUPEFILTER_DEBUG``
apply.  Stats: ``scaleout/seeder`` (1 for the process that pushed the seeds, else 0),
``scaleout/pushed``, ``scaleout/filtered`` (requests some process had already queued),
``scaleout/popped``, ``scaleout/idle_waits`` (idle checks that waited for other processes
or for the idle timeout), ``scaleout/finished`` (1 for a process that found the crawl
finished and deleted its keys), ``scaleout/key``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
import warnings
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured, ScrapyDeprecationWarning
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.scheduler import Scheduler
from twisted.internet.task import LoopingCall

from search.servers import ConfigError
from spidersite.crawlsettings import CrawlSettings, check_key, crawl_settings

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# scrapy-redis 0.9.1 passes spider= to the stats collector, which Scrapy 2.19 deprecates;
# the calls still work, and the warning is printed on every crawl.
warnings.filterwarnings(
    "ignore",
    message="Passing a 'spider' argument",
    category=ScrapyDeprecationWarning,
    module="scrapy_redis",
)

#: A busy mark lasts this long unless refreshed (a killed process stops counting then).
BUSY_TTL = 60.0
#: How often a busy process refreshes its mark.
BUSY_REFRESH = 5.0


def check_settings(config: CrawlSettings, crawl_key: str | None = None) -> None:
    """Refuse a scale-out configuration that cannot work, before the crawl starts (one
    line): a crawl key without a shared frontier, a bad crawl key, a Redis that does not
    answer.  (The settings' values are checked by :class:`CrawlSettings`.)"""
    url = config.scaleout_redis_url
    if url is None:
        if crawl_key is not None:
            raise ConfigError(
                "crawl_key: only used with a shared frontier (set SCALEOUT_REDIS_URL)"
            )
        return
    if crawl_key is not None:
        check_key("crawl_key", crawl_key)
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    except ValueError as exc:
        # The URL may hold a password: not repeated.
        raise ConfigError(f"SCALEOUT_REDIS_URL is not a Redis URL: {exc}") from None
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ConfigError(
            f"SCALEOUT_REDIS_URL: cannot reach Redis at {_describe(client)}: {_one_line(exc)}"
        ) from None
    finally:
        client.close()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _describe(client: Any) -> str:
    """host:port/db of a Redis client, without its password."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}/{kwargs.get('db', 0)}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


class ScaleOutAddon:
    """Add-on: with ``SCALEOUT_REDIS_URL`` set, crawl through :class:`SharedScheduler`."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ScaleOutAddon:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        url = CrawlSettings.from_settings(settings).scaleout_redis_url
        if url is None:
            raise NotConfigured  # silently: the crawl runs alone
        settings.set("SCHEDULER", "spidersite.scaleout.SharedScheduler", "addon")
        settings.set("REDIS_URL", url, "addon")
        # SharedScheduler never empties the queue on close (see the module docstring);
        # this says so to scrapy-redis too.
        settings.set("SCHEDULER_PERSIST", True, "addon")
        settings.set("SCHEDULER_QUEUE_CLASS", "scrapy_redis.queue.PriorityQueue", "addon")
        # scrapy-redis's scheduler builds its own fingerprint set only from this class.
        settings.set("DUPEFILTER_CLASS", "scrapy_redis.dupefilter.RFPDupeFilter", "addon")


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
