"""robots.txt, as Scrapy's RobotsTxtMiddleware does it, with failures typed and in the crawl log.

Replaces ``scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware`` (same priority,
same settings: ``ROBOTSTXT_OBEY``, ``ROBOTSTXT_USER_AGENT``, ``ROBOTSTXT_PARSER``) through
its public surface only (its ``process_request_2`` hook and the downloader-middleware
methods of the robots.txt request, which passes through this middleware like any other):

- a URL robots.txt forbids fails with :class:`~spidersite.errors.RobotsDenied` (kind
  ``robots``) instead of a plain ``IgnoreRequest``;
- a robots.txt that cannot be fetched (refused, timeout, reset…) is logged in one line
  (Scrapy logs a traceback) and recorded in ``crawl_errors`` as ``robots_txt``; the server
  is then crawled as if it had no robots.txt, as Scrapy does;
- a robots.txt answering 5xx is recorded as ``robots_txt`` too, and also allows everything
  (a 404 is the normal "no robots.txt" and is not a failure);
- robots.txt is read up to its first :data:`ROBOTSTXT_MAX_BYTES` (500 KiB, the least RFC 9309
  lets a crawler read; Google reads as much), cut at the end of a line: the parser takes
  10 to 20 times the file's size in memory, kept for the whole crawl, and a server's
  ``max_size`` allows 32 MB (stat ``robotstxt/truncated``);
- every request that arrives while its server's robots.txt is being fetched waits for it
  and is checked against it.  Scrapy 2.19's middleware awaits the one Deferred it keeps
  per server from each such request: the first waiter's await takes the parsed rules, and
  every later waiter gets None, which allows everything (on a re-crawl, whose re-visits
  are all queued at once, most of a server's disallowed pages were fetched).  Here each
  waiter awaits a Deferred of its own, fired with the rules.

Stats: Scrapy's ``robotstxt/*`` (``robotstxt/exception_count/*`` excepted: a failed
robots.txt is counted in ``robotstxt/failed``), ``robotstxt/truncated``.

The waiters' Deferreds rely on Scrapy's ``RobotsTxtMiddleware._parsers`` (host -> parser,
or the Deferred of its download); ``tests/test_unit_middlewares.py`` checks that it is
still there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from search.urls import origin
from spidersite.crawllog import record_error
from spidersite.errors import RobotsDenied, RobotsTxtFailed, classify_exception

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: Bytes of a robots.txt that are parsed (RFC 9309, section 2.5: at least 500 KiB).
ROBOTSTXT_MAX_BYTES = 500 * 1024


def is_robots_request(request: Request) -> bool:
    """Whether *request* is the robots.txt request RobotsTxtMiddleware makes."""
    return (
        request.callback is NO_CALLBACK
        and bool(request.meta.get("dont_obey_robotstxt"))
        and urlparse_cached(request).path == "/robots.txt"
    )


class RobotsMiddleware(RobotsTxtMiddleware):
    async def robot_parser(self, request: Request) -> Any:
        pending = self._parsers.get(urlparse_cached(request).netloc)
        if not isinstance(pending, Deferred):
            return await super().robot_parser(request)
        waiter: Deferred[Any] = Deferred()

        def relay(result: Any) -> Any:
            waiter.callback(result)
            return result  # for the next waiter's relay

        pending.addBoth(relay)
        return await maybe_deferred_to_future(waiter)

    def process_request_2(self, rp: Any, request: Request) -> None:
        try:
            super().process_request_2(rp, request)
        except RobotsDenied:
            raise
        except IgnoreRequest as exc:
            raise RobotsDenied(str(exc) or "Forbidden by robots.txt") from None

    def process_response(self, request: Request, response: Response) -> Response:
        if not is_robots_request(request):
            return response
        if response.status >= 500:
            self._failed(request, f"HTTP {response.status}: crawled as if there were no robots.txt")
            return response.replace(body=b"")
        if len(response.body) > ROBOTSTXT_MAX_BYTES:
            self.crawler.stats.inc_value("robotstxt/truncated")
            body = response.body[:ROBOTSTXT_MAX_BYTES]
            return response.replace(body=body[: body.rfind(b"\n") + 1])
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, IgnoreRequest) or not is_robots_request(request):
            return None
        message = f"{classify_exception(exception)}: {str(exception) or type(exception).__name__}"
        self._failed(request, message)
        # An IgnoreRequest: RobotsTxtMiddleware then allows everything, without a traceback.
        raise RobotsTxtFailed(message) from exception

    def _failed(self, request: Request, message: str) -> None:
        self.crawler.stats.inc_value("robotstxt/failed")
        record_error(self.crawler, request.url, origin(request.url), "robots_txt", message)
