"""FTP: files through Scrapy's FTP handler, directory listings through :mod:`ftplib`.

Registered for the ``ftp`` scheme in ``DOWNLOAD_HANDLERS`` (``spidersite/settings.py``).
Scrapy's FTP handler fetches files but cannot list a directory (scrapy/scrapy#1478); this
handler adds what a crawl of an FTP server needs, every download bounded by the request's
``download_timeout`` (the server's ``read_timeout``, :class:`~spidersite.handlers.BoundedDownload`):

- a URL ending in ``/`` is a directory: it is listed with :mod:`ftplib` in a thread of the
  reactor's pool (:mod:`spidersite.ftpclient`: ``MLSD``; where the server does not know it,
  ``LIST`` in the Unix or DOS format; where that cannot be read, ``NLST``), and answered
  as an HTML page linking to its entries (sub-folders with a ``/``), at most
  ``FTP_MAX_ENTRIES`` of them, so the spider follows them like any page's links
  (allow/deny, ``maxhops``, ``max_pages``);
- a ``GET`` of a file is Scrapy's (``RETR``); a file that turns out to be a directory
  (``550`` and ``CWD`` works) is listed instead, as ``<url>/``;
- a ``HEAD`` (the spider's request for a file it records without reading: images,
  archives, …) asks ``SIZE`` and ``MDTM`` in a thread, and downloads nothing;
- responses get a ``Content-Type`` from the file name (:mod:`mimetypes`; a name it does
  not know is ``text/plain`` when its bytes are UTF-8 text without NUL bytes, else
  ``application/octet-stream``), a ``Content-Length`` and, from ``MDTM``, a
  ``Last-Modified``;
- FTP replies become statuses as Scrapy maps them: ``550`` (no such file) 404, ``530``
  (login refused) 401, any other failed command 503.

Credentials: the request's ``ftp_user`` / ``ftp_password`` meta keys (the server-config
middleware sets them from the server's ``basic_auth``), else Scrapy's ``FTP_USER`` and
``FTP_PASSWORD`` (anonymous); ``FTP_PASSIVE_MODE`` applies to listings too.

Stats: ``ftp/files`` (files fetched or sized), ``ftp/listings`` (directories listed),
``ftp/entries_dropped`` (entries past ``FTP_MAX_ENTRIES``), ``ftp/errors`` (failed FTP
downloads: an error status or an exception; a missing ``/robots.txt`` is not one).
"""

from __future__ import annotations

import html
import logging
import mimetypes
from email.utils import format_datetime
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import quote, unquote, urlsplit

from scrapy.core.downloader.handlers.ftp import FTPDownloadHandler as ScrapyFTPHandler
from scrapy.http import HtmlResponse, Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from search.urls import DEFAULT_PORTS
from spidersite.crawlsettings import crawl_settings
from spidersite.ftpclient import (
    CODE_MAPPING,
    Entry,
    FTPReplyError,
    Login,
    list_directory,
    stat_file,
)
from spidersite.handlers import BoundedDownload, download_timeout

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def listing_html(url: str, entries: list[Entry]) -> bytes:
    """The HTML page of a directory listing: a title, and a link per entry."""
    path = unquote(urlsplit(url).path) or "/"
    title = html.escape(f"Index of {path}")
    items = []
    for entry in entries:
        href = url + quote(entry.name) + ("/" if entry.is_dir else "")
        label = html.escape(entry.name + ("/" if entry.is_dir else ""))
        size = f" ({entry.size} bytes)" if entry.size is not None else ""
        items.append(f'<li><a href="{html.escape(href)}">{label}</a>{size}</li>')
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1><ul>{''.join(items)}</ul></body></html>"
    ).encode()


def content_type(path: str, body: bytes | None = None) -> str:
    """The type of a file by its name; by its bytes when the name says nothing."""
    guessed = mimetypes.guess_type(path.rsplit("/", 1)[-1], strict=False)[0]
    if guessed:
        return guessed
    if body:
        head = body[:8192]
        if b"\x00" not in head:
            try:
                head.decode("utf-8")
                return "text/plain"
            except UnicodeDecodeError as exc:
                if exc.start >= len(head) - 3:  # a character cut at the end of the sample
                    return "text/plain"
    return "application/octet-stream"


# -- the download handler --------------------------------------------------------------


class _FTPHandler(ScrapyFTPHandler):
    CODE_MAPPING: ClassVar[dict[str, int]] = CODE_MAPPING

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.max_entries = crawl_settings(crawler).ftp_max_entries

    def _login(self, request: Request) -> Login:
        parts = urlsplit(request.url)
        timeout = download_timeout(request, self.crawler)
        return Login(
            host=parts.hostname or "",
            port=parts.port or DEFAULT_PORTS["ftp"],
            user=request.meta.get("ftp_user", self.default_user),
            password=request.meta.get("ftp_password", self.default_password),
            passive=bool(request.meta.get("ftp_passive", self.passive_mode)),
            timeout=timeout,
        )

    def _inc(self, name: str, count: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(name, count)

    async def download_request(self, request: Request) -> Response:
        try:
            response = await self._download(request)
        except Exception:
            self._inc("ftp/errors")
            raise
        if response.status >= 400 and not (
            response.status == 404 and urlsplit(request.url).path == "/robots.txt"
        ):
            self._inc("ftp/errors")
        return response

    async def _download(self, request: Request) -> Response:
        path = unquote(urlsplit(request.url).path) or "/"
        if path.endswith("/"):
            return await self._listing(request, request.url, path)
        if request.method == "HEAD":
            return await self._stat(request, path)
        response = await super().download_request(request)
        if response.status == 404:  # perhaps a directory named without its "/"
            listing = await self._listing(request, request.url + "/", path, quiet=True)
            if listing.status == 200:
                return listing
            return response
        if response.status != 200:
            return response
        self._inc("ftp/files")
        limit = request.meta.get("download_maxsize")
        if limit and len(response.body) > limit:
            from scrapy.exceptions import DownloadCancelledError

            raise DownloadCancelledError(
                f"{request.url}: {len(response.body)} bytes, more than max_size ({limit})"
            )
        headers = {
            "Content-Type": content_type(path, response.body),
            "Content-Length": str(len(response.body)),
        }
        return Response(request.url, status=200, headers=headers, body=response.body)

    async def _listing(
        self, request: Request, url: str, path: str, quiet: bool = False
    ) -> Response:
        login = self._login(request)
        try:
            entries: list[Entry] = await maybe_deferred_to_future(
                deferToThread(list_directory, login, path)
            )
        except FTPReplyError as exc:
            if quiet:
                return Response(url, status=exc.status)
            return Response(url, status=exc.status, body=str(exc).encode())
        if self.max_entries is not None and len(entries) > self.max_entries:
            self._inc("ftp/entries_dropped", len(entries) - self.max_entries)
            logger.info(
                "%s: %d entries, only the first %d are followed (FTP_MAX_ENTRIES)",
                url,
                len(entries),
                self.max_entries,
            )
            entries = entries[: self.max_entries]
        self._inc("ftp/listings")
        return HtmlResponse(
            url,
            status=200,
            headers={"Content-Type": "text/html; charset=utf-8"},
            body=listing_html(url, entries),
        )

    async def _stat(self, request: Request, path: str) -> Response:
        login = self._login(request)
        try:
            size, modified = await maybe_deferred_to_future(deferToThread(stat_file, login, path))
        except FTPReplyError as exc:
            if not str(exc).startswith(("500", "502")):  # SIZE unknown: say what we know
                return Response(request.url, status=exc.status, body=str(exc).encode())
            size, modified = None, None
        self._inc("ftp/files")
        headers = {"Content-Type": content_type(path)}
        if size is not None:
            headers["Content-Length"] = str(size)
        if modified is not None:
            headers["Last-Modified"] = format_datetime(modified, usegmt=True)
        return Response(request.url, status=200, headers=headers)


class FTPDownloadHandler(BoundedDownload, _FTPHandler):
    """The FTP handler, its whole download bounded by ``download_timeout`` (Scrapy's FTP
    handler has no timeout of its own)."""

    grace = 0.0
