"""robots.txt, as Scrapy's RobotsTxtMiddleware does it, with failures in the crawl log.

Replaces ``scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware`` (same priority,
same settings: ``ROBOTSTXT_OBEY``, ``ROBOTSTXT_USER_AGENT``, ``ROBOTSTXT_PARSER``) and
changes only what happens when robots.txt itself fails:

- a robots.txt that cannot be fetched (refused, timeout, reset…) is logged in one line
  (Scrapy logs a traceback) and recorded in ``crawl_errors`` as ``robots_txt``; the server
  is then crawled as if it had no robots.txt, as Scrapy does;
- a robots.txt answering 5xx is recorded as ``robots_txt`` too, and also allows everything
  (a 404 is the normal "no robots.txt" and is not a failure).

Stats: Scrapy's ``robotstxt/*``, plus ``robotstxt/failed``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from search.servers import origin
from spidersite.crawllog import record_error
from spidersite.errors import classify_exception

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class RobotsMiddleware(RobotsTxtMiddleware):
    async def robot_parser(self, request: Request) -> Any:
        url = urlparse_cached(request)
        netloc = url.netloc
        if netloc not in self._parsers:
            self._parsers[netloc] = Deferred()
            robotsurl = f"{url.scheme}://{url.netloc}/robots.txt"
            robotsreq = Request(
                robotsurl,
                priority=self.DOWNLOAD_PRIORITY,
                meta={"dont_obey_robotstxt": True},
                callback=NO_CALLBACK,
            )
            try:
                resp = await self.crawler.engine.download_async(robotsreq)
                await self._parse_robots(resp, netloc, request)
            except Exception as exc:
                if not isinstance(exc, IgnoreRequest):
                    self._stats.inc_value("robotstxt/failed")
                    record_error(
                        self.crawler,
                        robotsurl,
                        origin(robotsurl),
                        "robots_txt",
                        f"{classify_exception(exc)}: {str(exc) or type(exc).__name__}",
                    )
                self._robots_error(exc, netloc)
            self._stats.inc_value("robotstxt/request_count")
        parser = self._parsers[netloc]
        if isinstance(parser, Deferred):
            return await maybe_deferred_to_future(parser)
        return parser

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        if response.status >= 500:
            self._stats.inc_value("robotstxt/failed")
            record_error(
                self.crawler,
                response.url,
                origin(response.url),
                "robots_txt",
                f"HTTP {response.status}: crawled as if there were no robots.txt",
            )
            response = response.replace(body=b"")
        await super()._parse_robots(response, netloc, request)
