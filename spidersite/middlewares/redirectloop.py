"""Stop redirect loops at the first repeat, and put them in the crawl log.

Scrapy's RedirectMiddleware stops after ``REDIRECT_MAX_TIMES`` hops with a plain
``IgnoreRequest``, and a short loop (A → B → A) ends earlier and silently: the repeated
request is dropped by the duplicate filter, and the page is neither stored nor logged.  This
middleware sits just before the redirect middleware on the way back (priority 610 > 600)
and, for a redirect Scrapy would follow, raises

- :class:`~spidersite.errors.RedirectLoop` when the target is already in the chain, or when
  the chain would pass ``REDIRECT_MAX_TIMES``;
- :class:`~spidersite.errors.BadRedirect` when the ``Location`` is not a URL that can be
  fetched (a port out of range, a broken IPv6 literal, no host, control characters…);

which the spider's errback records as ``redirect`` failures.  Switch off with
``REDIRECTLOOP_ENABLED = False``.

Stats: ``redirectloop/detected``, ``redirectloop/invalid_location``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urljoin

from scrapy.exceptions import NotConfigured

from search.urls import check_url
from spidersite.crawlsettings import crawl_settings
from spidersite.errors import BadRedirect, RedirectLoop

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

REDIRECT_STATUSES = (301, 302, 303, 307, 308)


class RedirectLoopMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).redirectloop_enabled:
            raise NotConfigured("REDIRECTLOOP_ENABLED is off")
        self.stats = crawler.stats
        self.max_times = crawler.settings.getint("REDIRECT_MAX_TIMES")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectLoopMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status not in REDIRECT_STATUSES:
            return response
        meta = request.meta
        if (
            meta.get("dont_redirect")
            or meta.get("handle_httpstatus_all")
            or response.status in meta.get("handle_httpstatus_list", ())
        ):
            return response  # Scrapy does not follow it either
        location = response.headers.get(b"Location")
        if not location:
            return response
        try:
            target = urljoin(request.url, location.decode("latin-1")).split("#", 1)[0]
            check_url(target)
        except ValueError as exc:
            self.stats.inc_value("redirectloop/invalid_location")
            raise BadRedirect(f"redirect to an invalid URL: {exc}") from None
        chain = [*meta.get("redirect_urls", []), request.url]
        if target in chain:
            self.stats.inc_value("redirectloop/detected")
            raise RedirectLoop(f"redirect loop: {' -> '.join([*chain, target])}")
        if self.max_times and meta.get("redirect_times", 0) + 1 > self.max_times:
            self.stats.inc_value("redirectloop/detected")
            raise RedirectLoop(
                f"max redirections ({self.max_times}) reached: {' -> '.join([*chain, target])}"
            )
        return response
