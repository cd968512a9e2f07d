"""Spider middleware: drop requests more than ``maxhops`` links away from a seed.

A seed has 0 hops; a link found on a page with n hops has n + 1.  The limit is the
``maxhops`` of the link's server.  Switch off with ``MAXHOPS_ENABLED = False``.

Stats: ``maxhops/dropped``, ``maxhops/max_seen``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from spidersite.crawlsettings import crawl_settings
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class MaxHopsMiddleware(BaseSpiderMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).maxhops_enabled:
            raise NotConfigured("MAXHOPS_ENABLED is off")
        super().__init__(crawler)
        self.stats = crawler.stats
        self.state = server_state(crawler)

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        hops = request.meta.get("hops", 0)
        server = self.state.server(request.url)
        if server is not None and hops > server.maxhops:
            self.stats.inc_value("maxhops/dropped")
            forget = getattr(self.crawler.spider, "forget", None)
            if forget is not None:  # reachable again through a shorter path
                forget(request.url)
            logger.debug(
                "Dropped %s: %d hops > maxhops %d",
                request.url,
                hops,
                server.maxhops,
                extra={"spider": self.crawler.spider},
            )
            return None
        self.stats.max_value("maxhops/max_seen", hops)
        return request
