"""Sitemaps (sitemaps.org): the pages a server lists seed the crawl, and their ``<lastmod>``
makes a stored page due on a re-crawl.

The site spider owns one :class:`SitemapReader` (``SITEMAP_ENABLED``, on by default).  For
each server of the crawl (the seeds' servers, the sites file's, and on a re-crawl the servers
of stored documents) whose ``sitemaps`` field is

- ``true`` (the default): the ``Sitemap:`` lines of its robots.txt, as the robots middleware
  fetched and parsed it (Protego, through Scrapy's ``robots_parsed`` signal: robots.txt is
  not fetched twice), and ``<server>/sitemap.xml``;
- a list of the server's sitemap URLs: those, instead;
- ``false``: none.

Parsing is Scrapy's (:class:`scrapy.utils.sitemap.Sitemap`, as its ``SitemapSpider`` does):
sitemap indexes are followed to their sitemaps, gzip sitemaps are decompressed
(:func:`scrapy.utils.gz.gunzip`, bounded), ``<lastmod>`` is read.  Each URL of a sitemap is
handled like a link of a page with the sitemap's hops (0 for a server's own sitemaps and
the sitemaps of its indexes): canonical, ``hops + 1``, only on the crawl's servers, through
the server's allow/deny patterns, then ``maxhops`` and robots.txt as every request.  A URL
that cannot be fetched is counted in ``site/links_invalid``; off the crawl's servers in
``site/offsite``; denied by a pattern in ``site/denied_by_pattern``.  A sitemap listed in
robots.txt or an index is read only when it is on a server of the crawl.

On ``recrawl=due``, a stored page listed with a ``<lastmod>`` newer than its last index time
is re-visited (conditional request) even when its interval has not passed.

Bounds (never fatal; logged, and recorded in the crawl log except a missing
``/sitemap.xml``): ``SITEMAP_MAX_BYTES`` per sitemap, downloaded or decompressed;
``SITEMAP_MAX_URLS`` entries per sitemap (the rest is skipped); ``SITEMAP_MAX_SITEMAPS``
sitemaps per server and crawl; a body that is not a sitemap, or XML broken part-way (what
was read before the break is used).

Stats: ``sitemap/sitemaps`` (read), ``sitemap/robots`` (listed in robots.txt),
``sitemap/urls`` (page URLs listed), ``sitemap/requests`` (new pages requested),
``sitemap/due`` (stored pages made due by their lastmod), ``sitemap/missing`` (no
``/sitemap.xml``), ``sitemap/errors`` (sitemaps that failed or were cut), and what the
errors were: ``sitemap/truncated``, ``sitemap/too_large``, ``sitemap/malformed``,
``sitemap/capped`` (over SITEMAP_MAX_SITEMAPS), ``sitemap/offsite`` (sitemaps off the
crawl's servers).
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import lxml.etree
from scrapy import Request, signals
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from scrapy.utils.gz import gunzip, gzip_magic_number
from scrapy.utils.sitemap import Sitemap

from search.fingerprints import Fingerprints
from spidersite import errors, storage
from spidersite.crawllog import record_error
from spidersite.items import ErrorItem, LinkRecord

if TYPE_CHECKING:
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from search.servers import ServerConfig
    from spidersite.spiders.site import SiteSpider

logger = logging.getLogger(__name__)

#: ``meta["sitemap"]`` of a server's implied ``/sitemap.xml`` (missing is not an error).
IMPLIED = "implied"


class SitemapProblem(Exception):
    """A sitemap that cannot be read (its kind in the crawl log, and why)."""

    def __init__(self, kind: str, stat: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.stat = stat


def _status(failure: Failure) -> int | None:
    """The HTTP status of a failure that is an HTTP error answer."""
    if failure.check(HttpError):
        return int(failure.value.response.status)  # type: ignore[union-attr]
    return None


def parse_lastmod(value: Any) -> datetime | None:
    """A ``<lastmod>`` (W3C datetime: ``2025-01-02``, ``2025-01-02T10:00:00+01:00``,
    ``…Z``) as an aware datetime (UTC when it has no zone), None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


#: The servers whose sitemaps are read.
SITEMAP_SCHEMES = ("http://", "https://")


class SitemapReader:
    """The sitemaps of one crawl: which to read, reading them, and what they seed."""

    def __init__(self, spider: SiteSpider) -> None:
        crawler = spider.crawler
        self.spider = spider
        self.config = spider.config
        #: Servers whose sitemaps this crawl reads (robots.txt lines of the others are not).
        self.started: set[str] = set()
        #: Sitemap URLs requested, and sitemaps requested per server.
        self.requested: set[str] = set()
        self.per_server: Counter[str] = Counter()
        #: Stored documents already made due by a lastmod (listed in several sitemaps), by
        #: id, 8 bytes each (a sitemap may make every page of a large site due).
        self.due = Fingerprints()
        crawler.signals.connect(self.robots_parsed, signal=signals.robots_parsed)

    @property
    def stats(self) -> Any:
        return self.spider.crawler.stats  # set when the crawl starts, after the spider

    # -- which sitemaps --------------------------------------------------------------------

    def plan(self, servers: Iterable[ServerConfig]) -> list[Request]:
        """Mark the sitemaps of *servers* as read by this crawl; the requests of those
        known now (the robots.txt lines come when robots.txt is parsed, after these)."""
        todo: list[tuple[str, str]] = []
        for server in servers:
            if server.url in self.started or server.sitemaps is False:
                continue
            if not server.url.startswith(SITEMAP_SCHEMES):
                continue  # sitemaps are a web protocol: FTP and news servers have none
            self.started.add(server.url)
            if server.sitemaps is True:
                todo.append((server.url + "sitemap.xml", IMPLIED))
            else:
                todo.extend((url, "configured") for url in server.sitemaps)
        requests = (self.request(url, 0, source) for url, source in todo)
        return [request for request in requests if request is not None]

    def request(
        self, url: str, hops: int, source: str, referer: str | None = None
    ) -> Request | None:
        """The request of a sitemap, or None (seen, not fetchable, off the crawl, capped)."""
        try:
            url = self.spider.links.canonical(url)
        except ValueError as exc:
            self.stats.inc_value("site/links_invalid")
            logger.info("Sitemap URL skipped: %s", exc, extra={"spider": self.spider})
            return None
        if url in self.requested:
            return None
        self.requested.add(url)
        server = self.spider.servers.get(url)
        if server is None:
            self.stats.inc_value("sitemap/offsite")
            logger.info(
                "Sitemap %s skipped: not on a server of this crawl",
                url,
                extra={"spider": self.spider},
            )
            return None
        self.per_server[server.url] += 1
        if self.per_server[server.url] > self.config.sitemap_max_sitemaps:
            self.stats.inc_value("sitemap/capped")
            if self.per_server[server.url] == self.config.sitemap_max_sitemaps + 1:
                record_error(
                    self.spider.crawler,
                    url,
                    server.url,
                    "parse",
                    f"sitemap: SITEMAP_MAX_SITEMAPS ({self.config.sitemap_max_sitemaps}) "
                    f"reached for {server.url}: its other sitemaps are not read",
                )
            return None
        return self.spider.requests.sitemap(url, hops, source, referer)

    def robots_parsed(self, robotparser: Any, request: Request) -> None:
        """robots.txt of a server parsed by the robots middleware: read its Sitemap lines."""
        server = self.spider.servers.get(request.url)
        if server is None or server.url not in self.started or server.sitemaps is not True:
            return
        listed = getattr(getattr(robotparser, "rp", None), "sitemaps", None)
        if listed is None:  # a ROBOTSTXT_PARSER other than Protego
            return
        base = server.url + "robots.txt"
        for raw in listed:
            self.stats.inc_value("sitemap/robots")
            sitemap = self.request(urljoin(base, raw), 0, "robots", base)
            if sitemap is not None:
                self.spider.crawler.engine.crawl(sitemap)

    # -- reading one ---------------------------------------------------------------------

    def parse(self, response: Response) -> Iterator[Any]:
        """The requests of a sitemap's entries; an ErrorItem when it cannot be read."""
        hops = response.meta.get("hops", 0)
        implied = response.meta.get("sitemap") == IMPLIED
        try:
            sitemap = self._sitemap(response, implied)
        except SitemapProblem as problem:
            yield from self._failed(response, problem)
            return
        if sitemap is None:
            return
        entries, cut = self._entries(sitemap)
        self.stats.inc_value("sitemap/sitemaps")
        if cut is not None:
            yield from self._failed(response, cut)
        if sitemap.type == "sitemapindex":
            for entry in entries:
                request = self.request(entry["loc"], hops, "index", response.url)
                if request is not None:
                    yield request
            return
        yield from self._pages(response, entries, hops)

    def _sitemap(self, response: Response, implied: bool) -> Sitemap | None:
        body = response.body
        limit = self.config.sitemap_max_bytes
        if gzip_magic_number(response):
            try:
                body = gunzip(body, max_size=limit)
            except _DecompressionMaxSizeExceeded:
                raise SitemapProblem(
                    "too_large", "too_large", f"over SITEMAP_MAX_BYTES ({limit}) decompressed"
                ) from None
            except (OSError, EOFError, struct.error) as exc:
                raise SitemapProblem("parse", "malformed", f"bad gzip data: {exc}") from None
        try:
            sitemap = Sitemap(body)
        except (lxml.etree.LxmlError, StopIteration):
            sitemap = None
        if sitemap is None or sitemap.type not in ("urlset", "sitemapindex"):
            if implied:  # a soft 404: the server has no sitemap.xml
                self.stats.inc_value("sitemap/missing")
                return None
            found = f"<{sitemap.type}>" if sitemap is not None else "no XML"
            raise SitemapProblem(
                "parse", "malformed", f"not a sitemap ({found}, not <urlset> or <sitemapindex>)"
            )
        return sitemap

    def _entries(self, sitemap: Sitemap) -> tuple[list[dict[str, Any]], SitemapProblem | None]:
        """The entries with a ``<loc>`` (at most SITEMAP_MAX_URLS), and what cut them."""
        entries: list[dict[str, Any]] = []
        limit = self.config.sitemap_max_urls
        try:
            for entry in sitemap:
                if len(entries) >= limit:
                    return entries, SitemapProblem(
                        "parse",
                        "truncated",
                        f"more than SITEMAP_MAX_URLS ({limit}) entries: the rest is skipped",
                    )
                if entry.get("loc"):
                    entries.append(entry)
        except lxml.etree.LxmlError as exc:
            return entries, SitemapProblem(
                "parse", "malformed", f"broken XML after {len(entries)} entries: {exc}"
            )
        return entries, None

    def _pages(
        self, response: Response, entries: list[dict[str, Any]], hops: int
    ) -> Iterator[Request]:
        spider = self.spider
        self.stats.inc_value("sitemap/urls", len(entries))
        listed = [(LinkRecord(e["loc"]), e.get("lastmod")) for e in entries]
        lastmod_of = {id(link): lastmod for link, lastmod in listed}
        # The links links.valid keeps are the same objects, their URLs made canonical.
        links = spider.links.valid([link for link, _ in listed], follow=True)
        stored: dict[str, datetime] = {}
        if spider.recrawl == "due":
            for link in links:
                lastmod = parse_lastmod(lastmod_of[id(link)])
                if lastmod is not None and spider.links.is_seen(link.url):
                    stored[link.url] = lastmod
        new = 0
        for request in spider.links.follow(response.url, links, hops):
            new += 1
            yield request
        self.stats.inc_value("sitemap/requests", new)
        if stored:
            yield from self._due(stored)

    def _due(self, lastmods: dict[str, datetime]) -> Iterator[Request]:
        """Re-visits of the stored pages whose lastmod is newer than their last index time
        (those due anyway are re-visited by the spider's ``recrawl=due``)."""
        spider = self.spider
        crawldb = storage.crawl_db(spider.crawler)
        for row in crawldb.not_due(list(lastmods), spider.recrawl_time):
            indexed = row.last_index_time
            if self.due.has_fingerprint(row.id) or (
                indexed is not None and lastmods[row.url] <= indexed
            ):
                continue
            if not spider.servers.ensure(row.url).allows(row.url):
                continue
            self.due.add_fingerprint(row.id)
            self.stats.inc_value("sitemap/due")
            yield spider.requests.revisit(row)

    def _failed(self, response: Response, problem: SitemapProblem) -> Iterator[Any]:
        self.stats.inc_value("sitemap/errors")
        self.stats.inc_value(f"sitemap/{problem.stat}")
        yield self._error(response.url, problem.kind, f"sitemap: {problem}")

    def on_error(self, failure: Failure) -> Iterator[ErrorItem]:
        """A sitemap that could not be fetched: logged and recorded (a missing implied
        ``/sitemap.xml`` only counted)."""
        request = failure.request  # type: ignore[attr-defined]
        kind, message = errors.classify(failure)
        if request.meta.get("sitemap") == IMPLIED and _status(failure) in (404, 410):
            self.stats.inc_value("sitemap/missing")
            return
        self.stats.inc_value("sitemap/errors")
        if kind == "too_large":
            self.stats.inc_value("sitemap/too_large")
        yield self._error(request.url, kind, f"sitemap: {message}")

    def _error(self, url: str, kind: str, message: str) -> ErrorItem:
        server = self.spider.servers.get(url)
        logger.warning("%s: %s (%s)", kind, url, message, extra={"spider": self.spider})
        return ErrorItem(url, server.url if server else None, kind, message)
