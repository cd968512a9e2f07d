"""Cut a server off after ``max_net_errors`` network errors (DNS, refused, reset, timeout,
and HTTP 5xx answers).

Every failed attempt counts, retries included (this middleware sits between the retry
middleware and the downloader), and so does a failed robots.txt request, and a compressed
body cut before its end (counted by the compression middleware: :func:`count_net_error`).
When a server reaches its ``max_net_errors`` (``0`` = never cut off), it is marked cut off
in the crawl's :class:`~spidersite.serverstate.ServerState` (which also holds the error
counts), its remaining requests are dropped by the server-config and concurrency
middlewares, the ``server_disabled`` signal tells the store to mark it in ``servers``, and
the crawl goes on with the other servers.  Switch off with ``NETERRORS_ENABLED = False``.

Stats: ``neterrors/count``, ``neterrors/servers_cut_off``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest, NotConfigured

from spidersite import signals
from spidersite.crawlsettings import crawl_settings
from spidersite.errors import classify_exception, is_network_error
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class NetErrorMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).neterrors_enabled:
            raise NotConfigured("NETERRORS_ENABLED is off")
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NetErrorMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        """A server answering 5xx is failing too: each such answer counts."""
        if response.status >= 500:
            count_net_error(self.crawler, request, f"HTTP {response.status}")
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if not is_network_error(exception) or isinstance(exception, IgnoreRequest):
            return None
        count_net_error(self.crawler, request, classify_exception(exception))
        return None


def count_net_error(crawler: Crawler, request: Request, what: str) -> None:
    """Count a network error of *request*'s server (*what*: its kind, or ``HTTP 503``), and
    cut the server off at its ``max_net_errors``.  For the middlewares that find a failure
    this one cannot see: one that ``process_response`` raises (a compressed body cut
    short, :mod:`spidersite.middlewares.compression`) reaches no ``process_exception``.
    Nothing with ``NETERRORS_ENABLED`` off."""
    if not crawl_settings(crawler).neterrors_enabled:
        return
    state = server_state(crawler)
    server = state.server(request.url)
    if server is None:
        return
    stats = crawler.stats
    assert stats is not None
    stats.inc_value("neterrors/count")
    state.errors[server.url] += 1
    count = state.errors[server.url]
    limit = server.max_net_errors
    if limit and count >= limit and server.url not in state.disabled:
        reason = f"{count} network errors (max_net_errors = {limit}), last: {what} on {request.url}"
        logger.warning(
            "Cutting off server %s: %s", server.url, reason, extra={"spider": crawler.spider}
        )
        stats.inc_value("neterrors/servers_cut_off")
        state.disable(server.url, reason)
        crawler.signals.send_catch_log(
            signals.server_disabled, server=server.url, errors=count, reason=reason
        )
    if server.url in state.disabled:
        # No retries for a server that is cut off; the failure keeps its own kind.
        request.meta["dont_retry"] = True
