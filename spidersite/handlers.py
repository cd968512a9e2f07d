"""Download handlers whose every download ends: the watchdog.

Scrapy bounds an HTTP download by the request's ``download_timeout`` (the server's
``read_timeout``), but its FTP handler has no timeout at all: an ``ftp://`` seed on a port
where a server accepts the connection and never sends the FTP greeting (an HTTP server
waits for a request) keeps the crawl open for ever.  These handlers are Scrapy's, with
the whole download (connection, greeting, commands, reads) bounded:

- :class:`spidersite.ftp.FTPDownloadHandler` (Scrapy's FTP handler with directory
  listings) fails a download still running after ``download_timeout`` seconds, always
  (it is that protocol's only timeout); so does
  :class:`spidersite.nntp.NNTPDownloadHandler` (news), whose client waits at most the
  timeout per command;
- :class:`HTTPDownloadHandler` fails an http(s) download still running
  ``WATCHDOG_GRACE`` seconds (default 10) after its ``download_timeout``, a safety net
  under Scrapy's own timeout, which normally fires first.  ``WATCHDOG_ENABLED = False``
  takes the net away (FTP and news keep their bound).

The FTP listings and the news handler run blocking clients (``ftplib``, ``nntplib``) in
threads, which cancelling the download does not stop, and whose socket timeout a server
that trickles a byte now and then never reaches; a :class:`SocketGuard` shuts their
sockets down at the same bound, so the thread ends too (the crawl's process waits for its
threads when it stops).

:class:`PlaywrightDownloadHandler` is scrapy-playwright's handler (pages of ``render_js``
servers fetched by a headless browser, the others by Scrapy's HTTP/1.1 handler) with the
same watchdog as :class:`HTTPDownloadHandler`; it closes every browser page it opened once
the download ends, however it ends (the watchdog's cancellation included), and counts the
browser requests it aborted.  It lives in :mod:`spidersite.playwrighthandler`, loaded (with
Playwright and scrapy-playwright, half a second of start-up) only when a crawl renders;
``spidersite.handlers.PlaywrightDownloadHandler`` names it too.

A failed download raises Scrapy's ``DownloadTimeoutError``: the spider logs it as a
``timeout`` in ``crawl_errors`` and the crawl goes on.  All are registered in
``DOWNLOAD_HANDLERS`` (``spidersite/settings.py``), but :class:`PlaywrightDownloadHandler`,
which :mod:`spidersite.render` puts in place of :class:`HTTPDownloadHandler` for http(s)
when some server of the crawl has ``render_js``.

Stats: ``watchdog/timeouts`` and ``watchdog/timeouts/<scheme>``: downloads the handlers
ended; ``render/aborted_requests``: browser requests (images, media, fonts by default)
that ``PLAYWRIGHT_ABORT_REQUEST`` aborted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import DownloadTimeoutError
from scrapy.utils.asyncio import call_later
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.defer import CancelledError

from spidersite.crawlsettings import crawl_settings

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


def download_timeout(request: Request, crawler: Crawler) -> float:
    """The seconds *request* may take: its ``download_timeout`` (the server's
    ``read_timeout``), else ``DOWNLOAD_TIMEOUT``."""
    return float(
        request.meta.get("download_timeout") or crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
    )


class BoundedDownload:
    """Mix-in for a download handler: the whole download ends after the request's
    ``download_timeout`` plus :attr:`grace` seconds (no bound when :attr:`grace` is None)."""

    grace: float | None = 0.0
    crawler: Crawler

    async def download_request(self, request: Request) -> Response:
        timeout = download_timeout(request, self.crawler)
        if self.grace is None or not timeout:
            return await super().download_request(request)  # type: ignore[misc]
        limit = timeout + self.grace
        download = deferred_from_coro(super().download_request(request))  # type: ignore[misc]
        expired: list[bool] = []

        def expire() -> None:
            expired.append(True)
            download.cancel()

        timer = call_later(limit, expire)
        try:
            response: Response = await maybe_deferred_to_future(download)
        except (CancelledError, asyncio.CancelledError):
            # Twisted's when the download is a Deferred, asyncio's when it runs as a task.
            if not expired:
                raise
            self._count(request)
            raise DownloadTimeoutError(
                f"Getting {request.url} took longer than {limit:g} seconds "
                f"(no answer, or an answer too slow, within the server's read_timeout)"
            ) from None
        finally:
            timer.cancel()
        return response

    def _count(self, request: Request) -> None:
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("watchdog/timeouts")
            stats.inc_value(f"watchdog/timeouts/{request.url.split(':', 1)[0].lower()}")
        logger.debug("watchdog: %s stopped past its timeout", request.url)


class HTTPDownloadHandler(BoundedDownload, HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler, with the watchdog ``WATCHDOG_GRACE`` s past the timeout."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        config = crawl_settings(crawler)
        self.grace = config.watchdog_grace if config.watchdog_enabled else None


class SocketGuard:
    """Shut down the sockets it watches once *seconds* have passed (from ``with``): a
    thread blocked reading one of them then reads the end of the stream and stops.

    A watched item is a socket, or a callable returning the socket at that time (or
    None), for a client that opens its socket and reads from it in one call."""

    def __init__(self, seconds: float) -> None:
        self._watched: list[socket.socket | Callable[[], Any]] = []
        self._lock = threading.Lock()
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> SocketGuard:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, item: socket.socket | Callable[[], Any]) -> None:
        with self._lock:
            self._watched.append(item)
            expired = self.expired
        if expired:
            _shut(item)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            watched = list(self._watched)
        for item in watched:
            _shut(item)


def _shut(item: socket.socket | Callable[[], Any]) -> None:
    sock = item if isinstance(item, socket.socket) else item()
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def __getattr__(name: str) -> Any:
    """``PlaywrightDownloadHandler``, imported on first use (see the module's docstring)."""
    if name == "PlaywrightDownloadHandler":
        from spidersite.playwrighthandler import PlaywrightDownloadHandler

        return PlaywrightDownloadHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
