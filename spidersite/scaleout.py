"""Scale-out: several crawl processes share one frontier and one seen-URL set in Redis.

Off unless ``SCALEOUT_REDIS_URL`` is set (or the environment variable
``SPIDERSITE_REDIS_URL``)::

    scrapy crawl site -a seeds=https://example.org/ \\
        -s SCALEOUT_REDIS_URL=redis://redis.example:6379/0 -s INDEX_ENABLED=False

Then :class:`ScaleOutAddon` (listed in ``ADDONS``) switches Scrapy's scheduler to
:class:`SharedScheduler` (in :mod:`spidersite.sharedscheduler`, so that a crawl that runs
alone does not load scrapy-redis and redis; ``spidersite.scaleout.SharedScheduler`` names
it too), a thin layer over scrapy-redis's scheduler, its priority queue
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

import warnings
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured, ScrapyDeprecationWarning

from search.servers import ConfigError
from spidersite.crawlsettings import CrawlSettings, check_key

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

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


def __getattr__(name: str) -> Any:
    """``SharedScheduler``, imported on first use (see the module's docstring)."""
    if name == "SharedScheduler":
        from spidersite.sharedscheduler import SharedScheduler

        return SharedScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
