"""Act on robots.txt ``Crawl-delay`` and on each server's ``crawl_delay`` and ``concurrency``.

Scrapy parses ``Crawl-delay`` but does not apply it.  This middleware listens to the
``robots_parsed`` signal, remembers the delay robots.txt asks of our user agent, and sets
the download slot of that server to ``max(crawl_delay, Crawl-delay)`` seconds between
requests, without jitter (a Crawl-delay is a minimum), and to the server's concurrency.
Robots delays longer than ``CRAWLDELAY_MAX`` (default 60 s) are capped there.

Runs after Scrapy's RobotsTxtMiddleware (priority 100), which fetches robots.txt first.
Switch off with ``CRAWLDELAY_ENABLED = False``.

A server that answers 429 (too many requests) or 503 (unavailable) with ``Retry-After``
(seconds, or an HTTP date) asks to be left alone that long: :class:`RetryAfterMiddleware`
(priority 555, so that it sees the answer before Scrapy's RetryMiddleware, 550, turns it
into a retry) records it, and from then on the server's delay is at least that, capped at
``CRAWLDELAY_MAX`` (Scrapy retries such answers at once, whatever they ask).

Stats: ``crawldelay/robots_delay`` (servers whose robots.txt asked for a delay),
``crawldelay/slots_configured``, ``crawldelay/retry_after`` (answers whose Retry-After
lengthened a server's delay).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.exceptions import NotConfigured

from search.urls import origin
from spidersite.crawlsettings import crawl_settings
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class _ServerDelays:
    """What both middlewares read: the crawl's servers, ``CRAWLDELAY_MAX``."""

    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.crawldelay_enabled:
            raise NotConfigured("CRAWLDELAY_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.state = server_state(crawler)
        self.max_delay = config.crawldelay_max

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)


class CrawlDelayMiddleware(_ServerDelays):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.user_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        #: server URL -> delay asked by its robots.txt
        self.robots_delays: dict[str, float] = {}
        #: download slot -> (delay, concurrency) last applied
        self.applied: dict[str, tuple[float, int]] = {}
        crawler.signals.connect(self.robots_parsed, signal=signals.robots_parsed)

    def robots_parsed(self, robotparser: Any, request: Request) -> None:
        try:
            delay = robotparser.crawl_delay(self.user_agent)
        except Exception:  # a parser without crawl-delay support
            delay = None
        if delay:
            delay = min(float(delay), self.max_delay)
            self.robots_delays[origin(request.url)] = delay
            self.stats.inc_value("crawldelay/robots_delay")
            logger.info(
                "robots.txt of %s asks for a crawl delay of %.1f s",
                origin(request.url),
                delay,
                extra={"spider": self.crawler.spider},
            )

    def process_request(self, request: Request) -> None:
        server = self.state.server(request.url)
        if server is None:
            return
        delay = max(server.crawl_delay, self.state.retry_after.get(server.url, 0.0))
        if server.userobots:
            delay = max(delay, self.robots_delays.get(server.url, 0.0))
        concurrency = server.concurrency
        if not delay and concurrency == self._default_concurrency():
            return
        downloader = self.crawler.engine.downloader
        key = downloader.get_slot_key(request)
        if self.applied.get(key) == (delay, concurrency):
            return
        self.applied[key] = (delay, concurrency)
        # New slots take these values; an existing slot is updated in place.
        downloader.per_slot_settings[key] = {
            "delay": delay,
            "concurrency": concurrency,
            "jitter": 0.0,
        }
        slot = downloader.slots.get(key)
        if slot is not None:
            slot.delay = delay
            slot.concurrency = concurrency
            if delay:
                slot.jitter = 0.0
        self.stats.inc_value("crawldelay/slots_configured")

    def _default_concurrency(self) -> int:
        return self.crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")


def retry_after_seconds(value: bytes | None, now: datetime | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number of seconds, or an HTTP
    date); None when it is missing or neither."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class RetryAfterMiddleware(_ServerDelays):
    """Record the ``Retry-After`` of a server's 429 and 503 answers as its delay."""

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status not in (429, 503):
            return response
        header = response.headers.get(b"Retry-After")
        seconds = retry_after_seconds(header)
        server = self.state.server(request.url)
        if seconds is None or server is None:
            return response
        delay = min(seconds, self.max_delay)
        if delay > self.state.retry_after.get(server.url, 0.0):
            self.state.retry_after[server.url] = delay
            self.stats.inc_value("crawldelay/retry_after")
            logger.info(
                "%s answered %d with Retry-After: %s; %.1f s between its requests from now on",
                server.url,
                response.status,
                (header or b"").decode("latin-1"),
                delay,
                extra={"spider": self.crawler.spider},
            )
        return response
