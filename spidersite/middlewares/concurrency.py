"""Per-server concurrency, enforced just before the download.

Each server's ``concurrency`` caps its requests in flight.  Scrapy's download slots are
meant to do this, but in Scrapy 2.19 a burst of requests enqueued together all leave the
slot's queue before any of them counts as transferring (the transfers start in scheduled
coroutines), so a slot with concurrency 1 still opens one connection per request.  This
middleware holds a per-server semaphore from just before the download (priority 950, the
last ``process_request``) until the response or the failure comes back (the first
``process_response`` / ``process_exception``).  robots.txt requests are not counted: other
requests of the same server wait for them.

A request that waited for a permit is checked again for the ``max_net_errors`` cut-off when
it gets one, so that a server cut off meanwhile sends no more requests.

Switch off with ``CONCURRENCY_ENABLED = False``.  Stats: ``concurrency/waited``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from spidersite.crawlsettings import crawl_settings
from spidersite.errors import ServerCutOff
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

_PERMIT = "_server_permit"


class ServerConcurrencyMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).concurrency_enabled:
            raise NotConfigured("CONCURRENCY_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.state = server_state(crawler)
        self.semaphores: dict[str, asyncio.Semaphore] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ServerConcurrencyMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        server = self.state.server(request.url)
        if server is None or (
            request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt")
        ):
            return
        semaphore = self.semaphores.get(server.url)
        if semaphore is None:
            semaphore = self.semaphores[server.url] = asyncio.Semaphore(server.concurrency)
        if semaphore.locked():
            self.stats.inc_value("concurrency/waited")
        await semaphore.acquire()
        reason = self.state.disabled.get(server.url)
        if reason is not None:
            semaphore.release()
            self.stats.inc_value("servers/cut_off_dropped")
            raise ServerCutOff(f"server {server.url} cut off: {reason}")
        request.meta[_PERMIT] = server.url

    def _release(self, request: Request) -> None:
        server = request.meta.pop(_PERMIT, None)
        if server is not None:
            self.semaphores[server].release()

    def process_response(self, request: Request, response: Response) -> Response:
        self._release(request)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        self._release(request)
        return None
