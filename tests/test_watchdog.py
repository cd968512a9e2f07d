"""A crawl always ends: servers that accept and stay silent, send a wrong greeting, answer
an ftp:// seed with HTTP or trickle one byte a second (to a file, a folder or a news group)
are each given up on after the server's read_timeout, logged as `timeout`, and the crawl
finishes."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy import Request
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from spidersite.handlers import BoundedDownload, SocketGuard
from tests.conftest import Site


class Misbehaving(socketserver.ThreadingTCPServer):
    """A TCP server on 127.0.0.1 that accepts and then never gives a proper answer."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(socketserver.BaseRequestHandler):
    server: Misbehaving

    def handle(self) -> None:
        conn: socket.socket = self.request
        stop = self.server.stop
        try:
            if self.server.mode == "greeting":  # not an FTP server: no "220" line
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            while not stop.wait(1.0):
                if self.server.mode == "trickle":  # one byte a second, no line ever ends
                    conn.sendall(b"2")
        except OSError:
            pass  # the crawler gave up and closed the connection


@pytest.fixture
def misbehaving() -> Iterator[dict[str, Misbehaving]]:
    servers = {mode: Misbehaving(mode) for mode in ("silent", "greeting", "trickle")}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop.set()
            server.shutdown()
            server.server_close()


def test_every_stuck_download_ends_as_a_timeout(
    site: Site, crawl: Any, misbehaving: dict[str, Misbehaving]
) -> None:
    site.page("/", "Home", "a page that answers")
    seeds = {
        "ftp silent": f"ftp://127.0.0.1:{misbehaving['silent'].port}/pub/file.txt",
        "ftp wrong greeting": f"ftp://127.0.0.1:{misbehaving['greeting'].port}/pub/file.txt",
        "ftp to an HTTP server": f"ftp://127.0.0.1:{site.port}/pub/file.txt",
        "ftp trickle": f"ftp://127.0.0.1:{misbehaving['trickle'].port}/pub/file.txt",
        # Listings and news run blocking clients in threads: their sockets are shut too.
        "ftp listing silent": f"ftp://127.0.0.1:{misbehaving['silent'].port}/pub/",
        "ftp listing trickle": f"ftp://127.0.0.1:{misbehaving['trickle'].port}/pub/",
        "news silent": f"nntp://127.0.0.1:{misbehaving['silent'].port}/local.test",
        "news trickle": f"nntp://127.0.0.1:{misbehaving['trickle'].port}/local.test",
        "http silent": f"http://127.0.0.1:{misbehaving['silent'].port}/",
        "http trickle": f"http://127.0.0.1:{misbehaving['trickle'].port}/",
    }
    # A news server whose greeting is not NNTP's fails at once: an error row, no traceback.
    news_greeting = f"nntp://127.0.0.1:{misbehaving['greeting'].port}/local.test"
    result = crawl(
        "-a",
        "seeds=" + ",".join([site.url, *seeds.values(), news_greeting]),
        settings={"SERVER_DEFAULTS": '{"read_timeout": 1.5}', "RETRY_TIMES": 1},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.log
    errors = result.error_kinds()
    for what, url in seeds.items():
        assert (url, "timeout") in errors, (what, sorted(errors))
    assert [e.url for e in result.errors()].count(news_greeting) == 1, sorted(errors)
    assert result.urls() == {site.url}
    stats = result.stats
    assert stats["watchdog/timeouts/ftp"] >= 4  # Scrapy's FTP handler has no timeout
    assert stats["finish_reason"] == "finished"


# -- the mechanism, in a component test -----------------------------------------------------


class _Slow(BaseDownloadHandler):
    seconds = 0.0

    async def download_request(self, request: Request) -> Response:
        await asyncio.sleep(self.seconds)
        return Response(request.url, body=b"done")


class Bounded(BoundedDownload, _Slow):
    grace = 0.1


def test_the_watchdog_fails_a_download_past_its_timeout_and_counts_it() -> None:
    crawler = get_crawler(settings_dict={})
    crawler.stats.open_spider()
    handler = Bounded(crawler)

    async def download(seconds: float) -> Any:
        handler.seconds = seconds
        try:
            return await handler.download_request(
                Request("ftp://a.example/f", meta={"download_timeout": 0.1})
            )
        except DownloadTimeoutError as exc:
            return exc

    assert isinstance(asyncio.run(download(0.0)), Response)
    failed = asyncio.run(download(3600))
    assert isinstance(failed, DownloadTimeoutError)
    assert "took longer than 0.2 seconds" in str(failed)
    assert crawler.stats.get_value("watchdog/timeouts") == 1
    assert crawler.stats.get_value("watchdog/timeouts/ftp") == 1


def test_a_socket_guard_ends_a_blocked_read() -> None:
    a, b = socket.socketpair()
    a.settimeout(60)  # a guard that failed would raise TimeoutError, not hang the suite
    with a, b, SocketGuard(0.1) as guard:
        guard.watch(a)
        assert a.recv(1) == b""  # the guard shut the socket down: the end of the stream
        assert guard.expired
