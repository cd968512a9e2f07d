"""Stop redirect loops at the first repeat, and put them in the crawl log.

Scrapy's RedirectMiddleware stops after ``REDIRECT_MAX_TIMES`` hops, but a short loop
(A → B → A) ends earlier and silently: the repeated request is dropped by the duplicate
filter, and the page is neither stored nor logged.  This middleware sits just before the
redirect middleware on the way back (priority 610 > 600) and turns a redirect to a URL
already in the chain into an ``IgnoreRequest("redirect loop: …")``, which the spider's
errback records as a ``redirect`` failure.  Switch off with ``REDIRECTLOOP_ENABLED = False``.

Stats: ``redirectloop/detected``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urljoin

from scrapy.exceptions import IgnoreRequest, NotConfigured

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class RedirectLoopMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("REDIRECTLOOP_ENABLED", True):
            raise NotConfigured("REDIRECTLOOP_ENABLED is off")
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectLoopMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status not in (301, 302, 303, 307, 308):
            return response
        location = response.headers.get(b"Location")
        if not location:
            return response
        target = urljoin(request.url, location.decode("latin-1")).split("#", 1)[0]
        chain = [*request.meta.get("redirect_urls", []), request.url]
        if target in chain:
            self.stats.inc_value("redirectloop/detected")
            raise IgnoreRequest(f"redirect loop: {' -> '.join([*chain, target])}")
        return response
