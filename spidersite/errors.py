"""Names for the ways a fetch can fail, shared by the spider's errback and the middlewares.

The kinds (the ``kind`` column of ``crawl_errors``) are :attr:`search.models.CrawlError.KINDS`;
failures are classified by their exception's type, never by its message.
"""

from __future__ import annotations

import sys

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet import error as twisted_errors
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed, ResponseNeverReceived


class ServerCutOff(IgnoreRequest):
    """The request's server had too many network errors (``max_net_errors``)."""


class RobotsDenied(IgnoreRequest):
    """robots.txt forbids the URL (raised by the robots middleware)."""


class RobotsTxtFailed(IgnoreRequest):
    """robots.txt itself could not be fetched (the server is crawled as if it had none)."""


class RedirectLoop(IgnoreRequest):
    """A redirect leads back into its own chain, or the chain passes REDIRECT_MAX_TIMES."""


class BadRedirect(IgnoreRequest):
    """A redirect's Location is not a URL that can be fetched."""


class RedirectOutOfScope(IgnoreRequest):
    """A redirect (HTTP 3xx or a meta refresh) leads off the crawl's servers, or to a URL
    its server's ``allow``/``deny`` patterns keep out."""


class TruncatedBody(ResponseDataLossError):
    """A compressed body stops before the end of its stream (a response cut short whose
    ``Content-Length`` matched what was sent); raised by the compression middleware."""


class DecompressedTooLarge(IgnoreRequest):
    """A compressed body that decompresses past ``DOWNLOAD_MAXSIZE`` (the request's
    ``download_maxsize``: its server's ``max_size``), a decompression bomb or a page too
    big; refused by the decompression middleware before it is all decompressed."""


class PageCapReached(IgnoreRequest):
    """The request's server reached its ``max_pages`` for this crawl."""


#: Exceptions that count as network errors for ``max_net_errors``.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    DownloadFailedError,
    ResponseDataLossError,
    twisted_errors.DNSLookupError,
    twisted_errors.ConnectionRefusedError,
    twisted_errors.ConnectError,
    twisted_errors.TimeoutError,
    twisted_errors.ConnectionLost,
    twisted_errors.ConnectionDone,
    ResponseFailed,
    ResponseNeverReceived,
    TimeoutError,
    ConnectionError,
)

_KINDS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((ServerCutOff,), "cut_off"),
    ((PageCapReached,), "page_cap"),
    ((RobotsDenied,), "robots"),
    ((RobotsTxtFailed,), "robots_txt"),
    ((RedirectLoop, BadRedirect, RedirectOutOfScope), "redirect"),
    ((HttpError,), "http"),
    ((CannotResolveHostError, twisted_errors.DNSLookupError), "dns"),
    (
        (
            DownloadConnectionRefusedError,
            twisted_errors.ConnectionRefusedError,
            ConnectionRefusedError,
        ),
        "refused",
    ),
    (
        (DownloadTimeoutError, twisted_errors.TimeoutError, TimeoutError),
        "timeout",
    ),
    ((DownloadCancelledError, DecompressedTooLarge), "too_large"),
    (
        (
            ResponseDataLossError,
            twisted_errors.ConnectionLost,
            twisted_errors.ConnectionDone,
            ResponseFailed,
            ResponseNeverReceived,
            ConnectionResetError,
            DownloadFailedError,
        ),
        "reset",
    ),
    ((twisted_errors.ConnectError, ConnectionError), "refused"),
)


def _playwright_errors() -> tuple[type[BaseException], type[BaseException]] | None:
    """Playwright's ``Error`` and ``TimeoutError``, when Playwright is loaded (a crawl with
    ``render_js`` servers); None otherwise: then no failure can be Playwright's, and a crawl
    without rendering never imports it (~10 MB)."""
    if "playwright.async_api" not in sys.modules:
        return None
    from playwright.async_api import Error, TimeoutError

    return Error, TimeoutError


def is_network_error(exc: BaseException) -> bool:
    """Whether *exc* is a failure of the server or the network (counted toward the
    server's ``max_net_errors``): one of :data:`NETWORK_ERRORS`, or a rendered page's
    navigation that failed on the network (Chromium's ``net::ERR_…``) or timed out.  A
    page the browser reached but could not render is not the server's failure."""
    if isinstance(exc, NETWORK_ERRORS):
        return True
    playwright = _playwright_errors()
    if playwright is None:
        return False
    error, timeout = playwright
    return isinstance(exc, timeout) or (isinstance(exc, error) and "net::ERR_" in str(exc))


def classify_exception(exc: BaseException) -> str:
    name = type(exc).__name__.lower()
    if "ssl" in name or "tls" in name or "certificate" in name:
        return "tls"
    playwright = _playwright_errors()
    if playwright is not None and isinstance(exc, playwright[1]):
        return "timeout"  # a navigation past the server's read_timeout
    for types, kind in _KINDS:
        if isinstance(exc, types):
            if kind == "reset" and "ssl" in str(exc).lower():
                return "tls"
            return kind
    if playwright is not None and isinstance(exc, playwright[0]):
        # A page of a render_js server the browser could not load or render (its
        # navigation failed: net::ERR_…, the page crashed, the browser went away).
        return "render"
    if isinstance(exc, IgnoreRequest):
        return "ignored"
    return "other"


def classify(failure: Failure) -> tuple[str, str]:
    """(kind, message) of a failed request."""
    exc = failure.value
    assert exc is not None
    kind = classify_exception(exc)
    if isinstance(exc, HttpError) and exc.response is not None:
        return kind, f"HTTP {exc.response.status}"
    message = str(exc) or type(exc).__name__
    return kind, message[:2000]
