"""Component tests of the middlewares, as Scrapy tests its own: each built with
``get_crawler``, fed requests and responses, and asserted on its stats and outputs."""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime
from typing import Any

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import ProtegoRobotParser
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError

from search.sitesfile import ServerRegistry
from spidersite import errors, signals
from spidersite.middlewares.concurrency import ServerConcurrencyMiddleware
from spidersite.middlewares.conditional import ConditionalGetMiddleware
from spidersite.middlewares.crawldelay import CrawlDelayMiddleware
from spidersite.middlewares.hops import MaxHopsMiddleware
from spidersite.middlewares.neterrors import NetErrorMiddleware
from spidersite.middlewares.redirectloop import RedirectLoopMiddleware
from spidersite.middlewares.robots import RobotsMiddleware
from spidersite.middlewares.servers import ServerConfigMiddleware
from spidersite.serverstate import server_state

A = "http://a.example/"


def crawler_with(servers: dict[str, dict[str, Any]] | None = None, **settings: Any) -> Any:
    crawler = get_crawler(settings_dict=settings)
    crawler.stats.open_spider()
    registry = ServerRegistry()
    for url, fields in (servers or {A: {}}).items():
        registry.add({"url": url, **fields})
    server_state(crawler).registry = registry
    return crawler


def stat(crawler: Any, name: str) -> Any:
    return crawler.stats.get_value(name)


# -- conditional GET ----------------------------------------------------------------------


def test_conditional_headers_except_on_recrawl_reanalyze_but_for_news_groups() -> None:
    """A re-visit is conditional; one of ``recrawl=reanalyze`` asks for the whole page (to
    analyze it again), except a news group's: its ETag is where its listing of newer
    articles starts, not a version of content."""
    crawler = crawler_with()
    mw = ConditionalGetMiddleware.from_crawler(crawler)
    stored = {"id": 1, "etag": '"v1"', "last_modified": datetime(2025, 1, 1, tzinfo=UTC)}

    def sent(url: str, **marks: Any) -> dict[bytes, bytes]:
        request = Request(url, meta={"stored": {**stored, **marks}})
        mw.process_request(request)
        return {k: v[0] for k, v in request.headers.items() if k.startswith(b"If-")}

    conditional = {
        b"If-None-Match": b'"v1"',
        b"If-Modified-Since": b"Wed, 01 Jan 2025 00:00:00 GMT",
    }
    assert sent(A + "page") == conditional
    assert sent(A + "page", reanalyze=True) == {}
    group = "nntp://news.example/local.test"
    assert sent(group, reanalyze=True) == conditional
    assert stat(crawler, "conditional/requests") == 2


# -- servers ------------------------------------------------------------------------------


def test_server_config_applies_the_server_and_drops_cut_off_servers() -> None:
    crawler = crawler_with({A: {"read_timeout": 7, "proxy": "proxy.example:3128"}})
    mw = ServerConfigMiddleware.from_crawler(crawler)
    request = Request(A + "page")
    mw.process_request(request)
    assert request.meta["download_timeout"] == 7
    assert request.meta["download_slot"] == A
    assert request.meta["proxy"] == "http://proxy.example:3128"
    assert stat(crawler, "servers/requests") == 1 and stat(crawler, "servers/proxied") == 1
    mw.process_request(Request("http://other.example/"))  # not a server of the crawl
    assert stat(crawler, "servers/requests") == 1
    server_state(crawler).disable(A, "too many errors")
    with pytest.raises(errors.ServerCutOff, match="too many errors"):
        mw.process_request(Request(A + "next"))
    assert stat(crawler, "servers/cut_off_dropped") == 1


def test_server_config_page_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[tuple[str, str]] = []
    monkeypatch.setattr(
        "spidersite.middlewares.servers.record_error",
        lambda crawler, url, server, kind, message: logged.append((url, kind)),
    )
    crawler = crawler_with({A: {"max_pages": 2}})
    mw = ServerConfigMiddleware.from_crawler(crawler)
    for i in range(2):
        mw.process_request(Request(f"{A}{i}"))
    for i in range(2, 5):
        with pytest.raises(errors.PageCapReached):
            mw.process_request(Request(f"{A}{i}"))
    assert logged == [(f"{A}2", "page_cap")]  # one line per server
    assert stat(crawler, "servers/page_cap_dropped") == 3


def test_net_errors_cut_a_server_off_in_the_shared_state() -> None:
    crawler = crawler_with({A: {"max_net_errors": 2}})
    sent: list[dict[str, Any]] = []

    def received(**kwargs: Any) -> None:
        sent.append(kwargs)

    crawler.signals.connect(received, signal=signals.server_disabled)  # a weak reference
    mw = NetErrorMiddleware.from_crawler(crawler)
    first = Request(A + "1")
    assert mw.process_exception(first, ConnectionRefusedError()) is None
    assert "dont_retry" not in first.meta
    second = Request(A + "2")
    mw.process_response(second, Response(A + "2", status=503))
    state = server_state(crawler)
    assert state.errors[A] == 2
    assert "HTTP 503" in state.disabled[A]
    assert second.meta["dont_retry"] is True
    assert [s["server"] for s in sent] == [A]
    assert stat(crawler, "neterrors/count") == 2
    assert stat(crawler, "neterrors/servers_cut_off") == 1
    # An IgnoreRequest is no network error; a 404 is no server failure.
    mw.process_exception(Request(A + "3"), IgnoreRequest())
    mw.process_response(Request(A + "4"), Response(A + "4", status=404))
    assert stat(crawler, "neterrors/count") == 2


def test_a_rendered_page_failing_on_the_network_counts_as_a_net_error() -> None:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeoutError

    crawler = crawler_with({A: {"max_net_errors": 2}})
    mw = NetErrorMiddleware.from_crawler(crawler)
    refused = PlaywrightError(f"Page.goto: net::ERR_CONNECTION_REFUSED at {A}1")
    mw.process_exception(Request(A + "1"), refused)
    # A page the browser reached but could not render is not the server's failure ...
    mw.process_exception(Request(A + "2"), PlaywrightError("Target crashed"))
    assert server_state(crawler).errors[A] == 1
    # ... a navigation past the server's timeout is.
    mw.process_exception(Request(A + "3"), PlaywrightTimeoutError("Timeout 30000ms exceeded"))
    assert server_state(crawler).errors[A] == 2
    assert A in server_state(crawler).disabled
    assert stat(crawler, "neterrors/count") == 2


def test_concurrency_drops_a_request_whose_server_was_cut_off_while_it_waited() -> None:
    crawler = crawler_with({A: {"concurrency": 1}})
    mw = ServerConcurrencyMiddleware.from_crawler(crawler)

    async def run() -> None:
        first = Request(A + "1")
        await mw.process_request(first)
        waiting = asyncio.ensure_future(mw.process_request(Request(A + "2")))
        await asyncio.sleep(0)
        server_state(crawler).disable(A, "gone")
        mw.process_response(first, Response(A + "1"))
        with pytest.raises(errors.ServerCutOff):
            await waiting

    asyncio.run(run())
    assert stat(crawler, "concurrency/waited") == 1
    assert stat(crawler, "servers/cut_off_dropped") == 1


def test_max_hops_drops_and_forgets() -> None:
    crawler = crawler_with({A: {"maxhops": 1}})

    class Spider:
        forgotten: list[str] = []

        def forget(self, url: str) -> None:
            self.forgotten.append(url)

    crawler.spider = Spider()
    mw = MaxHopsMiddleware.from_crawler(crawler)
    near, far = Request(A + "near", meta={"hops": 1}), Request(A + "far", meta={"hops": 2})
    assert mw.get_processed_request(near, None) is near
    assert mw.get_processed_request(far, None) is None
    assert Spider.forgotten == [A + "far"]
    assert stat(crawler, "maxhops/dropped") == 1 and stat(crawler, "maxhops/max_seen") == 1


def test_crawl_delay_remembers_what_robots_txt_asks() -> None:
    crawler = crawler_with(ROBOTSTXT_USER_AGENT="spidersite", CRAWLDELAY_MAX=5.0)
    mw = CrawlDelayMiddleware.from_crawler(crawler)
    parser = ProtegoRobotParser(b"User-agent: *\nCrawl-delay: 30\n", None)
    mw.robots_parsed(parser, Request(A + "page"))
    assert mw.robots_delays == {A: 5.0}  # capped at CRAWLDELAY_MAX
    assert stat(crawler, "crawldelay/robots_delay") == 1


# -- failures by type ---------------------------------------------------------------------


def redirect(url: str, location: str, **meta: Any) -> tuple[Request, Response]:
    request = Request(url, meta=meta)
    return request, Response(url, status=302, headers={"Location": location}, request=request)


def test_redirect_loop_max_redirections_and_bad_locations() -> None:
    crawler = crawler_with(REDIRECT_MAX_TIMES=3)
    mw = RedirectLoopMiddleware.from_crawler(crawler)
    request, response = redirect(A + "b", "/a", redirect_urls=[A + "a"])
    with pytest.raises(errors.RedirectLoop, match=r"redirect loop: .*a -> .*b -> .*a"):
        mw.process_response(request, response)
    request, response = redirect(A + "4", "/5", redirect_times=3)
    with pytest.raises(errors.RedirectLoop, match=r"max redirections \(3\)"):
        mw.process_response(request, response)
    assert stat(crawler, "redirectloop/detected") == 2
    for location in ("http://127.0.0.1:99999/", "http://[::1/", "http://a..b/"):
        request, response = redirect(A, location)
        with pytest.raises(errors.BadRedirect, match="invalid URL"):
            mw.process_response(request, response)
    assert stat(crawler, "redirectloop/invalid_location") == 3
    # What Scrapy would not follow passes through.
    request, response = redirect(A + "b", "/a", redirect_urls=[A + "a"], dont_redirect=True)
    assert mw.process_response(request, response) is response
    request, response = redirect(A, "/next")
    assert mw.process_response(request, response) is response


def test_failures_are_classified_by_type() -> None:
    assert errors.classify_exception(errors.RobotsDenied("x")) == "robots"
    assert errors.classify_exception(errors.RobotsTxtFailed("x")) == "robots_txt"
    assert errors.classify_exception(errors.RedirectLoop("x")) == "redirect"
    assert errors.classify_exception(errors.BadRedirect("x")) == "redirect"
    # The message no longer decides: an IgnoreRequest that mentions robots.txt is "ignored".
    assert errors.classify_exception(IgnoreRequest("Forbidden by robots.txt")) == "ignored"


def test_playwright_failures_are_classified_by_type() -> None:
    """A rendered page's navigation past its timeout is a "timeout", and a network error of
    the server's; another Playwright error is a "render" failure, not the server's."""
    from playwright.async_api import Error, TimeoutError

    assert errors.classify_exception(TimeoutError("Timeout 30000ms exceeded")) == "timeout"
    assert errors.is_network_error(TimeoutError("Timeout 30000ms exceeded"))
    refused = Error("page.goto: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:1/")
    assert errors.classify_exception(refused) == "render"
    assert errors.is_network_error(refused)
    crashed = Error("Target crashed")
    assert errors.classify_exception(crashed) == "render"
    assert not errors.is_network_error(crashed)


def robots_request() -> Request:
    return Request(A + "robots.txt", meta={"dont_obey_robotstxt": True}, callback=NO_CALLBACK)


@pytest.fixture
def robots(monkeypatch: pytest.MonkeyPatch) -> tuple[RobotsMiddleware, list[tuple[str, str]]]:
    logged: list[tuple[str, str]] = []
    monkeypatch.setattr(
        "spidersite.middlewares.robots.record_error",
        lambda crawler, url, server, kind, message: logged.append((kind, message)),
    )
    crawler = crawler_with(ROBOTSTXT_OBEY=True, ROBOTSTXT_USER_AGENT="spidersite")
    return RobotsMiddleware.from_crawler(crawler), logged


def test_robots_denied_is_raised(robots: tuple[RobotsMiddleware, list[Any]]) -> None:
    mw, _ = robots
    parser = ProtegoRobotParser(b"User-agent: *\nDisallow: /private/\n", None)
    mw.process_request_2(parser, Request(A + "public"))
    with pytest.raises(errors.RobotsDenied):
        mw.process_request_2(parser, Request(A + "private/x"))
    assert stat(mw.crawler, "robotstxt/forbidden") == 1


def test_robots_txt_failures_are_recorded(robots: tuple[RobotsMiddleware, list[Any]]) -> None:
    mw, logged = robots
    # A failed fetch becomes an IgnoreRequest: Scrapy then allows all, with no traceback.
    with pytest.raises(errors.RobotsTxtFailed):
        mw.process_exception(robots_request(), ConnectionRefusedError())
    request = robots_request()
    answer = mw.process_response(request, Response(request.url, status=503, body=b"<html>"))
    assert answer.body == b""
    assert [kind for kind, _ in logged] == ["robots_txt", "robots_txt"]
    assert logged[0][1].startswith("refused: ")
    assert stat(mw.crawler, "robotstxt/failed") == 2
    # Other requests, and a 404 robots.txt, are not failures.
    assert mw.process_exception(Request(A), ConnectionRefusedError()) is None
    ok = Response(request.url, status=404, body=b"nope")
    assert mw.process_response(robots_request(), ok) is ok
    assert stat(mw.crawler, "robotstxt/failed") == 2


def test_a_huge_robots_txt_is_read_up_to_500_kib(robots: tuple[RobotsMiddleware, Any]) -> None:
    mw, logged = robots
    line = b"Disallow: /private/" + b"x" * 80 + b"\n"
    body = b"User-agent: *\n" + line * 20_000  # 2 MB
    answer = mw.process_response(robots_request(), Response(A + "robots.txt", body=body))
    assert len(answer.body) <= 500 * 1024 < len(answer.body) + len(line)
    assert answer.body.endswith(b"\n") and body.startswith(answer.body)
    assert stat(mw.crawler, "robotstxt/truncated") == 1 and logged == []
    small = Response(A + "robots.txt", body=b"User-agent: *\nDisallow: /x\n")
    assert mw.process_response(robots_request(), small) is small


def test_robots_middleware_uses_only_public_hooks_of_scrapys() -> None:
    """A Scrapy upgrade that renames or reshapes what we build on fails here, not silently."""
    private = [
        name
        for name in vars(RobotsMiddleware)
        if name.startswith("_") and not name.startswith("__") and hasattr(RobotsTxtMiddleware, name)
    ]
    assert private == []
    hook = inspect.signature(RobotsTxtMiddleware.process_request_2)
    assert list(hook.parameters) == ["self", "rp", "request"]
    assert RobotsTxtMiddleware.DOWNLOAD_PRIORITY == 1000  # robots.txt requests go first
    # Each waiter's Deferred is chained to the one Scrapy keeps per host in _parsers.
    assert "self._parsers[netloc]" in inspect.getsource(RobotsTxtMiddleware.robot_parser)
    assert not hasattr(RobotsTxtMiddleware, "process_exception")
    assert not hasattr(RobotsTxtMiddleware, "process_response")


def test_every_kind_of_failure_is_listed_once() -> None:
    from search.models import CrawlError

    by_type = {kind for _, kind in errors._KINDS}
    # Found without an exception type of their own: by the classifier (render: Playwright's
    # errors, looked up only once Playwright is loaded), the spider's parse, and the
    # server-config middleware's page cap; and the worker's pages the database refused.
    other = {"tls", "ignored", "other", "render", "parse", "page_cap", "store"}
    assert by_type | other == set(CrawlError.KINDS)
    assert len(set(CrawlError.KINDS)) == len(CrawlError.KINDS)


# -- compressed bodies ----------------------------------------------------------------------


def compressed(encoding: str, body: bytes, method: str = "GET") -> tuple[Request, Response]:
    request = Request(A + "page.html", method=method)
    headers = {"Content-Type": "text/html", "Content-Encoding": encoding}
    return request, Response(request.url, body=body, headers=headers, request=request)


def compression_chain(crawler: Any) -> list[Any]:
    """The middlewares that decompress a crawl's bodies (those of spidersite/settings.py
    named for compression), in the order their process_response runs."""
    from scrapy.utils.misc import load_object

    from spidersite import settings

    orders = {**settings.DOWNLOADER_MIDDLEWARES_BASE, **settings.DOWNLOADER_MIDDLEWARES}
    chosen = sorted(
        ((order, path) for path, order in orders.items() if order is not None),
        reverse=True,
    )
    chain = []
    for _, path in chosen:
        if "ompress" in path.rsplit(".", 1)[-1]:
            try:
                chain.append(load_object(path).from_crawler(crawler))
            except NotConfigured:  # as Scrapy leaves it out
                continue
    return chain


def decompress(crawler: Any, request: Request, response: Response) -> Response:
    """*response* through the crawl's decompression, as the downloader hands it on."""
    for mw in compression_chain(crawler):
        response = mw.process_response(request, response)
    return response


PAGE_BYTES = b"<html><head><title>Truncated page</title></head><body>" + b"words " * 400


def _streams() -> dict[str, bytes]:
    import gzip
    import zlib

    import brotli

    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found, no-redef, unused-ignore]

    return {
        "gzip": gzip.compress(PAGE_BYTES),
        "x-gzip": gzip.compress(PAGE_BYTES),
        "deflate": zlib.compress(PAGE_BYTES),
        "raw-deflate": zlib.compress(PAGE_BYTES)[2:-4],
        "br": brotli.compress(PAGE_BYTES),
        "zstd": zstd.compress(PAGE_BYTES),
    }


ENCODINGS = ["gzip", "x-gzip", "deflate", "raw-deflate", "br", "zstd"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_compressed_body_cut_before_its_end_is_a_failure(encoding: str) -> None:
    """Scrapy's decompression keeps what it could read of a cut stream; the cut is a
    failure of kind reset, not a page."""
    crawler = crawler_with()
    stream = _streams()[encoding]
    header = "deflate" if encoding == "raw-deflate" else encoding
    request, whole = compressed(header, stream)
    assert decompress(crawler, request, whole).body == PAGE_BYTES
    request, cut = compressed(header, stream[: len(stream) // 2])
    with pytest.raises(errors.TruncatedBody) as raised:
        decompress(crawler, request, cut)
    assert errors.classify_exception(raised.value) == "reset"
    assert stat(crawler, "compression/truncated") == 1
    # A network error of its server, as a connection reset is (max_net_errors).
    assert server_state(crawler).errors[A] == 1 and stat(crawler, "neterrors/count") == 1
    # Scrapy's stats of what it decompressed: the whole page, not the cut one.
    assert stat(crawler, "httpcompression/response_count") == 1
    assert stat(crawler, "httpcompression/response_bytes") == len(PAGE_BYTES)


def count_inflated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each of zlib's decompressors gives out, from now on (a list that grows)."""
    import zlib

    inflated: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.inner = real(*args, **kwargs)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self.inner.decompress(data, max_length)
            inflated.append(len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    return inflated


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_body_is_decompressed_once(
    encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that the stream ends is the decompression itself: the page's bytes come
    out of zlib once (a check before Scrapy's decompression inflated every page twice)."""
    stream = _streams()[encoding]
    header = "deflate" if encoding == "raw-deflate" else encoding
    crawler = crawler_with()
    chain = compression_chain(crawler)
    inflated = count_inflated(monkeypatch)
    request, response = compressed(header, stream)
    for mw in chain:
        response = mw.process_response(request, response)
    assert response.body == PAGE_BYTES
    assert sum(inflated) == len(PAGE_BYTES)


def test_a_truncated_compressed_body_cuts_its_server_off_at_max_net_errors() -> None:
    import gzip

    stream = gzip.compress(PAGE_BYTES)
    crawler = crawler_with({A: {"max_net_errors": 2}})
    for _ in range(2):
        request, cut = compressed("gzip", stream[:60])
        with pytest.raises(errors.TruncatedBody):
            decompress(crawler, request, cut)
    assert "last: reset on " + A in server_state(crawler).disabled[A]
    assert request.meta["dont_retry"] is True
    # Not counted with the cut-off switched off.
    crawler = crawler_with({A: {"max_net_errors": 2}}, NETERRORS_ENABLED=False)
    request, cut = compressed("gzip", stream[:60])
    with pytest.raises(errors.TruncatedBody):
        decompress(crawler, request, cut)
    assert server_state(crawler).errors[A] == 0


def test_compressed_body_check_leaves_other_responses_alone() -> None:
    import gzip

    crawler = crawler_with()
    cut = gzip.compress(PAGE_BYTES)[:60]
    request, head = compressed("gzip", b"", method="HEAD")
    assert decompress(crawler, request, head) is head
    request, unknown = compressed("zz-unknown", cut)
    assert decompress(crawler, request, unknown).body == cut
    request = Request(A + "plain.html")
    plain = Response(request.url, body=cut, headers={"Content-Type": "text/html"})
    assert decompress(crawler, request, plain) is plain
    # Two members, the second complete: gunzip reads both.
    request, members = compressed("gzip", gzip.compress(b"<p>a</p>") + gzip.compress(b"b"))
    assert decompress(crawler, request, members).body == b"<p>a</p>b"
    # Bytes after the last member that are no member are ignored, as gunzip does.
    request, padded = compressed("gzip", gzip.compress(b"<p>a</p>") + b"\0\0\0\0")
    assert decompress(crawler, request, padded).body == b"<p>a</p>"
    # Two codings, each decompressed (and each checked) in turn.
    import brotli

    request, both = compressed("gzip, br", brotli.compress(gzip.compress(PAGE_BYTES)))
    assert decompress(crawler, request, both).body == PAGE_BYTES
    request, both = compressed("gzip, br", brotli.compress(gzip.compress(PAGE_BYTES)[:60]))
    with pytest.raises(errors.TruncatedBody):
        decompress(crawler, request, both)


def test_a_body_that_is_not_of_its_coding_is_scrapys_to_judge() -> None:
    """Bytes that are not a stream of the declared coding at all (nor a cut one): what
    Scrapy's decompression does with them (gunzip keeps what it read before a bad checksum)."""
    import gzip
    import struct

    crawler = crawler_with()
    stream = bytearray(gzip.compress(PAGE_BYTES))
    stream[-8:-4] = struct.pack("<I", 12345)  # a wrong CRC32
    request, bad_crc = compressed("gzip", bytes(stream))
    assert decompress(crawler, request, bad_crc).body == PAGE_BYTES
    request, garbage = compressed("gzip", b"this is not gzip at all")
    with pytest.raises(OSError):
        decompress(crawler, request, garbage)


def test_a_decompression_bomb_is_refused_as_scrapy_refuses_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DOWNLOAD_MAXSIZE (the request's download_maxsize: a server's max_size) bounds the
    decompressed body, and decompression stops there; DOWNLOAD_WARNSIZE warns of it."""
    import gzip

    crawler = crawler_with(DOWNLOAD_MAXSIZE=1_000_000, DOWNLOAD_WARNSIZE=100_000)
    chain = compression_chain(crawler)
    bomb = gzip.compress(b"\0" * 50_000_000)  # 50 MB in ~50 kB
    inflated = count_inflated(monkeypatch)
    request, response = compressed("gzip", bomb)
    with pytest.raises(IgnoreRequest, match="exceeded DOWNLOAD_MAXSIZE") as refused:
        for mw in chain:
            response = mw.process_response(request, response)
    assert errors.classify_exception(refused.value) == "too_large"
    assert sum(inflated) < 2_000_000  # stopped at the limit, not inflated to the end
    request, response = compressed("gzip", bomb)
    request.meta["download_maxsize"] = 60_000_000  # a server's max_size
    with caplog.at_level("WARNING"):
        for mw in chain:
            response = mw.process_response(request, response)
    assert len(response.body) == 50_000_000
    assert "larger than the download warning size" in caplog.text


def test_compressed_body_check_is_off_with_compression() -> None:
    assert compression_chain(crawler_with(COMPRESSION_ENABLED=False)) == []


def test_retry_after_of_429_and_503_becomes_the_servers_delay() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from spidersite.middlewares.crawldelay import RetryAfterMiddleware, retry_after_seconds

    now = datetime(2026, 12, 7, tzinfo=UTC)
    assert retry_after_seconds(b"7") == 7.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30)).encode(), now) == 30
    assert retry_after_seconds(b"soon") is None and retry_after_seconds(None) is None
    crawler = crawler_with(CRAWLDELAY_MAX=20.0)
    mw = RetryAfterMiddleware.from_crawler(crawler)
    state = server_state(crawler)
    ok = Response(A + "x", status=200, headers={"Retry-After": "5"})
    assert mw.process_response(Request(A + "x"), ok) is ok
    assert state.retry_after == {}
    mw.process_response(
        Request(A + "x"), Response(A + "x", status=503, headers={"Retry-After": "3"})
    )
    mw.process_response(
        Request(A + "y"), Response(A + "y", status=429, headers={"Retry-After": "2"})
    )
    assert state.retry_after == {A: 3.0}  # the longest asked
    mw.process_response(
        Request(A + "z"), Response(A + "z", status=429, headers={"Retry-After": "99"})
    )
    assert state.retry_after == {A: 20.0}  # capped at CRAWLDELAY_MAX
    assert stat(crawler, "crawldelay/retry_after") == 2
