"""News (NNTP): the download handler of the ``news`` and ``nntp`` schemes.

Registered in ``DOWNLOAD_HANDLERS`` (``spidersite/settings.py``).  Two kinds of URL:

- a **group**, ``news://host/comp.lang.python`` or ``nntp://host:port/comp.lang.python``:
  ``GROUP``, then ``OVER`` (``XOVER`` on an older server) of its newest articles, at most
  ``NNTP_MAX_ARTICLES`` and at most the server's ``max_pages``, and only those newer than
  the last article number seen by an earlier crawl.  The answer is an HTML page (marked
  ``noindex``: it is recorded, not searchable) that links to each article, so the spider
  follows them like any page's links; its ``ETag`` is the group's last article number,
  stored with the group's document, which is how the next crawl knows where it stopped.
  On a re-visit (``-a recrawl``) the stored ETag comes back as ``If-None-Match`` and a
  group without a newer article answers ``304 Not Modified``;
- an **article**, ``news://host/<message-id>`` (the message-id without its angle
  brackets, percent-encoded, RFC 5538): ``ARTICLE``, answered as ``message/rfc822``, which
  the spider reads with :func:`spidersite.extract.extract_article`.

Every command runs with the standard library's NNTP client (``nntplib``; the
``standard-nntplib`` distribution on Python 3.13 and later) in a thread of the reactor's
pool, never on the crawler's thread, over connections kept open between requests (one per
request in flight, closed when the crawl ends), each command bounded by the server's
``read_timeout`` and the whole download by the watchdog
(:class:`~spidersite.handlers.BoundedDownload`).  The server's ``basic_auth`` logs in with
``AUTHINFO USER``/``PASS`` (the server-config middleware sets the ``nntp_user`` and
``nntp_password`` meta keys).  Replies become statuses: no such group or article (411,
423, 430) 404, authentication needed or refused (480, 481, 502) 401, any other 503.
``/robots.txt`` is answered 404 without a connection (news servers have none).

Stats: ``nntp/groups`` (groups listed), ``nntp/articles`` (articles fetched),
``nntp/not_modified`` (groups without a newer article on a re-visit), ``nntp/errors``
(failed downloads: an error status or an exception).
"""

from __future__ import annotations

import contextlib
import html
import logging
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.http import HtmlResponse, Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread
from w3lib.url import canonicalize_url

from search.urls import DEFAULT_PORTS, without_default_port
from spidersite import storage
from spidersite.crawlsettings import crawl_settings
from spidersite.handlers import BoundedDownload, SocketGuard, download_timeout
from spidersite.serverstate import server_state

with warnings.catch_warnings():
    # Python 3.11 and 3.12 still have nntplib (deprecated); standard-nntplib is the same
    # module, for 3.13 and later.
    warnings.simplefilter("ignore", DeprecationWarning)
    import nntplib

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The schemes of news URLs.
SCHEMES = ("news", "nntp")

#: NNTP reply code -> HTTP status of the response.
CODE_MAPPING = {
    "411": 404,  # no such group
    "423": 404,  # no such article number
    "430": 404,  # no such article
    "480": 401,  # authentication required
    "481": 401,  # authentication failed
    "502": 401,  # access denied
    "default": 503,
}

#: An ETag of a group: its last article number.
_ETAG_RE = re.compile(r'^(?:W/)?"?(\d+)"?$')
#: Characters left as they are in the message-id of an article URL (RFC 5538).
_MESSAGE_ID_SAFE = "@!$&'()*+,;=.-_~:"


def article_url(base: str, message_id: str) -> str:
    """The URL of the article *message_id* (with or without its ``<>``) on the server of
    *base* (``scheme://host[:port]/…``), in canonical form."""
    parts = urlsplit(base)
    mid = message_id.strip().removeprefix("<").removesuffix(">")
    url = f"{parts.scheme}://{parts.netloc}/{quote(mid, safe=_MESSAGE_ID_SAFE)}"
    return without_default_port(canonicalize_url(url))


def parse_etag(value: bytes | str | None) -> int | None:
    """The last article number an ETag of a group holds; None for anything else."""
    if not value:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    m = _ETAG_RE.match(value.strip())
    return int(m.group(1)) if m else None


class NNTPReplyError(Exception):
    """A command the server refused: its reply, and the status it maps to."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.status = CODE_MAPPING.get(reply[:3], CODE_MAPPING["default"])


@dataclass(frozen=True, slots=True)
class Login:
    host: str
    port: int
    user: str | None
    password: str | None
    timeout: float

    def open(self, guard: SocketGuard) -> nntplib.NNTP:
        return _GuardedNNTP(
            guard,
            self.host,
            self.port,
            user=self.user,
            password=self.password,
            readermode=True,
            usenetrc=False,
            timeout=self.timeout,
        )


class _GuardedNNTP(nntplib.NNTP):
    """nntplib's client, its socket watched by a :class:`SocketGuard` from the start (the
    constructor connects, reads the greeting and logs in)."""

    def __init__(self, guard: SocketGuard, *args: Any, **kwargs: Any) -> None:
        self._guard = guard
        super().__init__(*args, **kwargs)

    def _create_socket(self, timeout: Any) -> Any:
        sock = super()._create_socket(timeout)  # type: ignore[misc]
        self._guard.watch(sock)
        return sock


class Connections:
    """Open NNTP connections per server and login, each used by one thread at a time."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int, str | None], list[nntplib.NNTP]] = {}
        self._lock = threading.Lock()

    def run(self, login: Login, work: Callable[[nntplib.NNTP], Any]) -> Any:
        """*work(connection)* on an idle connection, else a new one (an idle connection
        the server has closed is replaced, once), all within the login's timeout.  A
        refused command raises :class:`NNTPReplyError`."""
        with SocketGuard(login.timeout) as guard:
            try:
                return self._run(login, work, guard)
            except (OSError, EOFError, nntplib.NNTPDataError):
                if guard.expired:
                    raise TimeoutError(
                        f"{login.host}:{login.port} took longer than {login.timeout:g} "
                        f"seconds (the server's read_timeout)"
                    ) from None
                raise

    def _run(self, login: Login, work: Callable[[nntplib.NNTP], Any], guard: SocketGuard) -> Any:
        key = (login.host, login.port, login.user)
        with self._lock:
            idle = self._idle.get(key)
            conn = idle.pop() if idle else None
        if conn is not None:
            guard.watch(conn.sock)
            try:
                return self._work(key, conn, work)
            except (OSError, EOFError):
                if guard.expired:
                    raise
                # closed while idle: once more, on a new connection
            except NNTPReplyError as exc:
                if not str(exc).startswith("400"):  # 400: the server ends the session
                    raise
        try:
            conn = login.open(guard)
        except nntplib.NNTPError as exc:
            raise _refused(exc) from None
        return self._work(key, conn, work)

    def _work(
        self, key: tuple[str, int, str | None], conn: nntplib.NNTP, work: Callable[..., Any]
    ) -> Any:
        try:
            result = work(conn)
        except _REFUSED as exc:
            if str(exc).startswith("400"):
                _close(conn)
            else:
                self._release(key, conn)  # the command was refused, the connection is fine
            raise NNTPReplyError(str(exc.response)) from None
        except BaseException:
            _close(conn)
            raise
        self._release(key, conn)
        return result

    def _release(self, key: tuple[str, int, str | None], conn: nntplib.NNTP) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                _close(conn)


#: nntplib's errors for a command the server refused (the others: a broken protocol).
_REFUSED = (nntplib.NNTPReplyError, nntplib.NNTPTemporaryError, nntplib.NNTPPermanentError)


def _refused(exc: nntplib.NNTPError) -> Exception:
    """An :class:`NNTPReplyError` for a refused command, else *exc* itself."""
    return NNTPReplyError(str(exc.response)) if isinstance(exc, _REFUSED) else exc


def _close(conn: nntplib.NNTP) -> None:
    try:
        conn.quit()
    except (OSError, EOFError, nntplib.NNTPError):
        with contextlib.suppress(OSError):
            conn.sock.close()


@dataclass(slots=True)
class GroupListing:
    name: str
    first: int
    last: int
    #: (article number, message-id, subject) of the articles listed, oldest first.
    articles: list[tuple[int, str, str]]


def read_group(
    conn: nntplib.NNTP, group: str, after: int | None, limit: int | None
) -> GroupListing:
    """The newest articles of *group* after number *after*, at most *limit* of them."""
    _resp, count, first, last, name = conn.group(group)
    start = max(first, (after or 0) + 1)
    if limit is not None:
        start = max(start, last - limit + 1)
    articles = []
    if count and start <= last:
        _resp, overviews = conn.over((start, last))
        for number, fields in overviews:
            mid = fields.get("message-id", "").strip()
            if not mid:
                continue
            subject = nntplib.decode_header(fields.get("subject", "")).strip()
            articles.append((number, mid, subject))
        articles.sort()
        if limit is not None:
            articles = articles[-limit:]
    return GroupListing(name, first, last, articles)


def group_html(url: str, listing: GroupListing, host: str) -> bytes:
    """The page of a group listing: a link per article (subject as anchor), noindex."""
    name = html.escape(listing.name)
    items = "".join(
        f'<li><a href="{html.escape(article_url(url, mid))}">'
        f"{html.escape(subject) or html.escape(mid)}</a></li>"
        for _number, mid, subject in listing.articles
    )
    numbers = (
        f"articles {listing.articles[0][0]}–{listing.articles[-1][0]}"
        if listing.articles
        else "no new article"
    )
    description = html.escape(
        f"{listing.name} on {host}: {numbers} (the group has {listing.first}–{listing.last})"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{name}</title>'
        f'<meta name="robots" content="noindex"><meta name="description" content="{description}">'
        f"</head><body><h1>{name}</h1><ul>{items}</ul></body></html>"
    ).encode()


class _NNTPHandler(BaseDownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.max_articles = crawl_settings(crawler).nntp_max_articles
        self.connections = Connections()

    def _inc(self, name: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(name)

    def _login(self, request: Request) -> Login:
        parts = urlsplit(request.url)
        timeout = download_timeout(request, self.crawler)
        return Login(
            host=parts.hostname or "",
            port=parts.port or DEFAULT_PORTS[parts.scheme.lower()],
            user=request.meta.get("nntp_user"),
            password=request.meta.get("nntp_password"),
            timeout=timeout,
        )

    async def download_request(self, request: Request) -> Response:
        path = unquote(urlsplit(request.url).path).strip("/")
        if path == "robots.txt":
            return Response(request.url, status=404)
        try:
            if "@" in path:
                response = await self._article(request, path)
            else:
                response = await self._group(request, path)
        except NNTPReplyError as exc:
            self._inc("nntp/errors")
            return Response(request.url, status=exc.status, body=str(exc).encode())
        except Exception:
            self._inc("nntp/errors")
            raise
        return response

    async def _article(self, request: Request, message_id: str) -> Response:
        def work(conn: nntplib.NNTP) -> list[bytes]:
            _resp, info = conn.article(f"<{message_id}>")
            return list(info.lines)

        lines: list[bytes] = await maybe_deferred_to_future(
            deferToThread(self.connections.run, self._login(request), work)
        )
        self._inc("nntp/articles")
        body = b"\r\n".join(lines) + b"\r\n"
        headers = {"Content-Type": "message/rfc822"}
        return Response(request.url, status=200, headers=headers, body=body)

    async def _group(self, request: Request, group: str) -> Response:
        conditional = parse_etag(request.headers.get(b"If-None-Match"))
        limit = self.max_articles
        server = server_state(self.crawler).server(request.url)
        if server is not None and server.max_pages:
            limit = min(limit, server.max_pages) if limit is not None else server.max_pages

        def work(conn: nntplib.NNTP) -> GroupListing:
            after = conditional if conditional is not None else self._last_seen(request.url)
            return read_group(conn, group, after, limit)

        listing: GroupListing = await maybe_deferred_to_future(
            deferToThread(self.connections.run, self._login(request), work)
        )
        etag = f'"{listing.last}"'
        if conditional is not None and not listing.articles:
            self._inc("nntp/not_modified")
            return Response(request.url, status=304, headers={"ETag": etag})
        self._inc("nntp/groups")
        parts = urlsplit(request.url)
        return HtmlResponse(
            request.url,
            status=200,
            headers={"Content-Type": "text/html; charset=utf-8", "ETag": etag},
            body=group_html(request.url, listing, parts.hostname or ""),
        )

    def _last_seen(self, url: str) -> int | None:
        """The last article number an earlier crawl listed for the group at *url* (its
        stored ETag); None when it was never stored (or the store is off)."""
        if not crawl_settings(self.crawler).store_enabled:
            return None
        try:
            etag = storage.crawl_db(self.crawler, migrate=False).document_etag(url)
        except Exception as exc:  # the database is the store's to report
            logger.debug("%s: no last article number (%s)", url, exc)
            return None
        return parse_etag(etag)

    async def close(self) -> None:
        # QUIT on each kept connection waits for the server: not on the reactor thread.
        await maybe_deferred_to_future(deferToThread(self.connections.close))


class NNTPDownloadHandler(BoundedDownload, _NNTPHandler):
    """The news handler, its whole download bounded by ``download_timeout``."""

    grace = 0.0
