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

which the spider's errback records as ``redirect`` failures.

A meta refresh is a redirect too (Scrapy's ``MetaRefreshMiddleware``, replaced here by
:class:`MetaRefreshLoopMiddleware` at the same priority, 580), and its loops were lost the
same way: a page that refreshes to itself (a page that reloads itself every so often) or
two pages that refresh to each other made a request the duplicate filter dropped, and the
page was neither stored nor logged.  A page that refreshes to its own URL is now parsed as
it is; a refresh back into its chain raises :class:`~spidersite.errors.RedirectLoop`.

Switch both off with ``REDIRECTLOOP_ENABLED = False``.

Stats: ``redirectloop/detected``, ``redirectloop/invalid_location``,
``redirectloop/refresh_to_itself``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware
from scrapy.exceptions import NotConfigured

from search.urls import check_url
from spidersite.crawlsettings import crawl_settings
from spidersite.errors import BadRedirect, RedirectLoop

if TYPE_CHECKING:
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


class MetaRefreshLoopMiddleware(MetaRefreshMiddleware):
    """Scrapy's meta refresh, which parses a page refreshing to itself as it is and ends a
    refresh that leads back into its chain as a redirect loop."""

    #: Whether loops are ended (``REDIRECTLOOP_ENABLED``); off, this is Scrapy's own.
    loops = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> MetaRefreshLoopMiddleware:
        middleware = super().from_crawler(crawler)
        middleware.loops = crawl_settings(crawler).redirectloop_enabled
        return middleware

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Request | Response:
        result = super().process_response(request, response)
        if not self.loops or not isinstance(result, Request):
            return result
        target = result.url.split("#", 1)[0]
        if target == request.url.split("#", 1)[0]:
            self.crawler.stats.inc_value("redirectloop/refresh_to_itself")
            return response
        chain = [*request.meta.get("redirect_urls", []), request.url]
        if target in chain:
            self.crawler.stats.inc_value("redirectloop/detected")
            raise RedirectLoop(f"meta refresh loop: {' -> '.join([*chain, target])}")
        return result
