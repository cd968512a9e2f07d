"""scrapy-playwright's download handler with the watchdog of :mod:`spidersite.handlers`
(``spidersite.handlers.PlaywrightDownloadHandler`` names it too): its own module, so that
Playwright and scrapy-playwright are loaded only by a crawl that renders pages
(:mod:`spidersite.render` registers it when some server has ``render_js``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from playwright.async_api import Error as PlaywrightError
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

from spidersite.crawlsettings import crawl_settings
from spidersite.handlers import BoundedDownload

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

class PlaywrightDownloadHandler(BoundedDownload, ScrapyPlaywrightDownloadHandler):
    """scrapy-playwright's handler with the watchdog, pages always closed, aborts counted.

    A request with ``meta["playwright"]`` is rendered by the browser; any other goes to
    Scrapy's HTTP/1.1 handler (scrapy-playwright's base class), as with
    :class:`spidersite.handlers.HTTPDownloadHandler`.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        config = crawl_settings(crawler)
        self.grace = config.watchdog_grace if config.watchdog_enabled else None
        aborts: Any = getattr(self, "abort_request", None)
        if aborts is not None:
            stats = crawler.stats

            async def counted(request: Any) -> bool:
                verdict = aborts(request)
                if asyncio.iscoroutine(verdict):
                    verdict = await verdict
                if verdict and stats is not None:
                    stats.inc_value("render/aborted_requests")
                return bool(verdict)

            self.abort_request = counted

    async def download_request(self, request: Request) -> Response:
        if not request.meta.get("playwright"):
            return await super().download_request(request)
        # scrapy-playwright leaves a page open when its download is cancelled (by the
        # watchdog, or at shutdown): it hands every page over in the request's meta, and
        # this closes it, whatever happened.
        request.meta["playwright_include_page"] = True
        try:
            return await super().download_request(request)
        finally:
            page = request.meta.pop("playwright_page", None)
            if page is not None:
                if not page.is_closed():
                    with contextlib.suppress(PlaywrightError):
                        await page.close()
                # scrapy-playwright counts only the pages it closes itself, not those it
                # hands over: count these under its name, to compare with page_count.
                if page.is_closed() and self.crawler.stats is not None:
                    self.crawler.stats.inc_value("playwright/page_count/closed")
