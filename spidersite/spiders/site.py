"""The one generic spider, ``site``.

    scrapy crawl site -a seeds=https://example.org/[,URL...]
    scrapy crawl site -a seeds_file=seeds.txt -a sites=sites.toml

It crawls breadth-first from the seeds and the servers' sitemaps (:mod:`spidersite.sitemaps`),
stays on the seeds' servers and on the servers the sites file names, and yields a
:class:`~spidersite.items.PageItem` for every page or file it fetched and an
:class:`~spidersite.items.ErrorItem` for every failure.  Per-server rules
(hops, robots.txt, timeouts, proxies, net-error cut-off) are applied by the middlewares.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure
from w3lib.url import canonicalize_url

from search import faults
from search.db import DatabaseError
from search.fingerprints import FingerprintSet
from search.schedule import next_interval
from search.servers import ServerConfig
from search.sitesfile import ServerRegistry
from search.urls import check_url
from spidersite import errors, storage
from spidersite.arguments import build_registry, check_arguments, parse_recrawl, parse_threshold
from spidersite.crawlsettings import CrawlSettings, crawl_settings
from spidersite.extract import extract_article, extract_html, is_file_url, parse_http_date
from spidersite.items import ErrorItem, GoneItem, LinkRecord, PageItem, RevisitItem
from spidersite.nntp import article_url
from spidersite.serverstate import server_state
from spidersite.sitemaps import SitemapReader

logger = logging.getLogger(__name__)

#: What a cached canonical URL costs beside its characters: two str objects and a dict slot.
_CACHE_ENTRY_BYTES = 200

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)
#: News articles (spidersite.nntp answers them as message/rfc822).
ARTICLE_TYPES = ("message/rfc822", "message/news")


class SiteSpider(Spider):
    name = "site"
    #: The crawl's settings (set by from_crawler).
    config: CrawlSettings

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        sites: str | None = None,
        topic: str | None = None,
        topic_threshold: str | float | None = None,
        recrawl: str | None = None,
        crawl_key: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.seeds_arg = seeds
        self.seeds_file = seeds_file
        self.sites = sites
        #: Topic of a focused crawl (read by the topic middleware), and its threshold.
        self.topic = topic or None
        self.topic_threshold = parse_threshold(topic_threshold)
        #: "due" or "all": re-visit stored documents (conditional GET), else None.
        self.recrawl = parse_recrawl(recrawl)
        #: Name of a crawl shared by several processes (``-a crawl_key``); see frontier_key.
        self.crawl_key = crawl_key or None
        #: True when the last crawl with the same arguments was killed: pick it up.
        self.resuming = False
        self.seed_urls: list[str] = []
        #: URL as found -> canonical URL; emptied when it passes SITE_CANONICAL_CACHE bytes.
        self._canonical: dict[str, str] = {}
        self._canonical_bytes = 0
        #: Every URL scheduled (canonical), as 8-byte fingerprints.
        self._seen = FingerprintSet()
        #: The servers' sitemaps (None with SITEMAP_ENABLED off).
        self.sitemaps: SitemapReader | None = None
        #: When the crawl started: a ``recrawl=due`` re-visits what was due then.
        self.recrawl_time = datetime.now(UTC)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SiteSpider:
        spider: SiteSpider = super().from_crawler(crawler, *args, **kwargs)
        spider.config = crawl_settings(crawler)
        server_state(crawler).registry, spider.seed_urls = build_registry(
            spider.config,
            spider.seeds_arg,
            spider.seeds_file,
            spider.sites,
            require_seeds=spider.recrawl is None,
        )
        spider.resuming = (
            spider.recrawl is None
            and spider.config.site_resume
            and spider._previous_crawl_unfinished()
        )
        if spider.config.sitemap_enabled:
            spider.sitemaps = SitemapReader(spider)
        return spider

    @property
    def servers(self) -> ServerRegistry:
        """The crawl's servers (owned by :mod:`spidersite.serverstate`)."""
        return server_state(self.crawler).registry

    def crawl_args(self) -> dict[str, Any]:
        """The arguments that identify this crawl (stored in ``crawls.args``)."""
        args = {
            "seeds": self.seeds_arg,
            "seeds_file": self.seeds_file,
            "sites": self.sites,
            "recrawl": self.recrawl,
            "topic": self.topic,
            "crawl_key": self.crawl_key,
        }
        return {k: v for k, v in args.items() if v is not None}

    @property
    def frontier_key(self) -> str:
        """The key of this crawl's shared frontier in Redis (with ``SCALEOUT_REDIS_URL``):
        ``-a crawl_key``, else derived from the spider's arguments, so that processes
        started with the same arguments share one frontier."""
        if self.crawl_key:
            return self.crawl_key
        args = json.dumps(self.crawl_args(), sort_keys=True)
        return f"{self.name}-{hashlib.sha1(args.encode()).hexdigest()[:12]}"

    def _previous_crawl_unfinished(self) -> bool:
        """Whether the last crawl with the same arguments never finished (it was killed)."""
        try:
            crawldb = storage.crawl_db(self.crawler, migrate=False)
        except DatabaseError:  # the store reports it when it opens
            return False
        return crawldb.crawl_unfinished(self.name, self.crawl_args())

    #: Checks the arguments before Scrapy starts (called by our ``crawl`` command).
    check_arguments = staticmethod(check_arguments)

    # -- requests ------------------------------------------------------------------------

    def forget(self, url: str) -> None:
        """Let *url* be scheduled again when a later page links to it (a middleware that
        drops a request calls this: the URL was marked seen when the request was made)."""
        self._seen.discard(url)

    def canonical(self, url: str) -> str:
        """Canonical form of an absolute URL, cached (canonicalisation is costly);
        ValueError for a URL that cannot be fetched (:func:`search.urls.check_url`)."""
        canon = self._canonical.get(url)
        if canon is None:
            check_url(url, self.config.urllength_limit)
            canon = canonicalize_url(url)
            size = _CACHE_ENTRY_BYTES + len(url) + len(canon)
            if self._canonical_bytes + size > self.config.site_canonical_cache:
                self._canonical.clear()  # a cache: what is dropped is computed again
                self._canonical_bytes = 0
            self._canonical[url] = canon
            self._canonical_bytes += size
        return canon

    def make_request(
        self,
        url: str,
        hops: int,
        referer: str | None = None,
        *,
        file: bool | None = None,
        stored: dict[str, Any] | None = None,
        dont_filter: bool = False,
    ) -> Request:
        """The request for *url*, *hops* links from a seed: a HEAD request parsed as a file
        when *file* (default: when the URL looks like a file's), else a GET parsed as a
        page; with *stored* (a re-visit), conditional and answered 304, 404 or 410 too."""
        if file is None:
            file = is_file_url(url)
        meta: dict[str, Any] = {"hops": hops}
        if stored is not None:
            meta["stored"] = stored
            meta["handle_httpstatus_list"] = [304, 404, 410]
        return Request(
            url,
            method="HEAD" if file else "GET",
            callback=self.parse_file if file else self.parse,
            errback=self.on_error,
            meta=meta,
            priority=-hops,
            headers={"Referer": referer} if referer else None,
            dont_filter=dont_filter or stored is not None,
        )

    async def start(self) -> AsyncIterator[Any]:
        # With a shared frontier (spidersite.scaleout), one process of the crawl pushes the
        # seeds (and the re-visits, and the frontier of a crawl resumed from the database);
        # the others take their requests from the shared queue.
        seeding = getattr(self.crawler.engine.scheduler, "seeding", True)
        self.recrawl_time = datetime.now(UTC)
        if self.recrawl or (self.resuming and seeding):
            self._load_stored_urls()
        if not seeding:
            return
        # Before the first request: robots.txt's Sitemap lines are read for these servers.
        sitemaps = self._sitemap_plan()
        if self.resuming:
            for request in self._resume_requests():
                yield request
        for url in self.seed_urls:
            canon = self.canonical(url)
            if canon in self._seen:
                continue
            self._seen.add(canon)
            # Seeds are fetched as pages even when they look like files.
            yield self.make_request(canon, 0, file=False, dont_filter=True)
        for request in sitemaps:
            yield request
        if self.recrawl:
            for request in self._stored_requests():
                yield request

    def _sitemap_plan(self) -> list[Request]:
        """The sitemaps to read first: those of the crawl's servers (and, on a re-crawl,
        of the servers of stored documents)."""
        if self.sitemaps is None:
            return []
        servers = list(self.servers)
        if self.recrawl:
            servers += [
                self.server_of(url) for url in storage.crawl_db(self.crawler).stored_servers()
            ]
        return self.sitemaps.plan(servers)

    def is_seen(self, url: str) -> bool:
        """Whether the canonical *url* was scheduled (or, on a re-crawl, is stored)."""
        return url in self._seen

    def sitemap_request(
        self, url: str, hops: int, source: str, referer: str | None = None
    ) -> Request:
        """The request of a sitemap (read by :mod:`spidersite.sitemaps`), *hops* from a
        seed; *source* says where it was found (``meta["sitemap"]``)."""
        limit = self.config.sitemap_max_bytes
        return Request(
            url,
            callback=self.parse_sitemap,
            errback=self.sitemap_error,
            meta={
                "hops": hops,
                "sitemap": source,
                "download_maxsize": limit,
                "download_warnsize": limit,
            },
            priority=-hops,
            headers={"Referer": referer} if referer else None,
            dont_filter=True,  # the reader requests each sitemap once
        )

    def parse_sitemap(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if self.sitemaps is not None:
            yield from self.sitemaps.parse(response)

    def sitemap_error(self, failure: Failure) -> Iterator[ErrorItem]:
        if self.sitemaps is not None:
            yield from self.sitemaps.on_error(failure)

    def _load_stored_urls(self) -> None:
        """Every stored URL counts as seen: found as a link, it is not fetched again
        (a due one is re-visited from the database instead)."""
        self._seen.update(storage.crawl_db(self.crawler).stored_urls())

    def _resume_requests(self) -> Iterator[Request]:
        """Pick up a crawl that was killed: the links of stored pages that were never
        stored themselves are the frontier it had (the database knows what is done)."""
        count = 0
        for row in storage.crawl_db(self.crawler).frontier():
            url = row.to_url
            if url in self._seen:
                continue
            self._seen.add(url)
            server = self.servers.get(url)
            if server is None or not server.allows(url):
                continue
            if row.hops + 1 > server.maxhops:
                continue
            count += 1
            yield self.make_request(url, row.hops + 1)
        self.crawler.stats.set_value("resume/requests", count)
        logger.info(
            "Resuming an unfinished crawl: %d URLs left to fetch", count, extra={"spider": self}
        )

    def _stored_requests(self) -> Iterator[Request]:
        """Conditional requests for the stored documents to re-visit."""
        count = 0
        rows = storage.crawl_db(self.crawler).revisits(
            due_only=self.recrawl == "due", now=self.recrawl_time
        )
        for row in rows:
            server = self.server_of(row.url)
            if not server.allows(row.url):
                continue
            count += 1
            yield self.revisit_request(row)
        self.crawler.stats.set_value("recrawl/scheduled", count)
        logger.info(
            "Re-crawl (%s): %d stored documents to re-visit",
            self.recrawl,
            count,
            extra={"spider": self},
        )

    def revisit_request(self, row: Any) -> Request:
        """The conditional request of a stored document (a :meth:`CrawlDB.revisits` row)."""
        stored = {
            "id": row.id,
            "etag": row.etag,
            "last_modified": row.last_modified,
            "checksum": row.checksum,
            "change_interval": row.change_interval,
        }
        return self.make_request(row.url, row.hops, file=row.kind == "file", stored=stored)

    def valid_links(self, links: list[LinkRecord], follow: bool) -> list[LinkRecord]:
        """The links of a page whose URLs can be fetched, in canonical form when they are
        followed; the others are dropped and counted (``site/links_invalid``)."""
        kept = []
        for link in links:
            try:
                if follow and not link.nofollow:
                    link.url = self.canonical(link.url)
                else:
                    check_url(link.url, self.config.urllength_limit)
            except ValueError:
                self.crawler.stats.inc_value("site/links_invalid")
                continue
            kept.append(link)
        return kept

    def follow(self, response: Response, links: list[LinkRecord], hops: int) -> Iterator[Request]:
        """New requests for the followable (canonical) links of a page, each URL once."""
        stats = self.crawler.stats
        seen = self._seen
        for link in links:
            if link.nofollow:
                continue
            url = link.url
            if url in seen:
                continue
            seen.add(url)
            server = self.servers.get(url)
            if server is None:
                stats.inc_value("site/offsite")
                continue
            if not server.allows(url):
                stats.inc_value("site/denied_by_pattern")
                continue
            yield self.make_request(url, hops + 1, response.url)

    # -- responses -----------------------------------------------------------------------

    def server_of(self, url: str) -> ServerConfig:
        return self.servers.get(url) or self.servers.ensure(url)

    def _base_item(self, response: Response, kind: str) -> PageItem:
        server = self.server_of(response.url)
        content_type = response.headers.get(b"Content-Type")
        ctype = (
            content_type.decode("latin-1").split(";")[0].strip().lower() if content_type else None
        )
        etag = response.headers.get(b"ETag")
        return PageItem(
            url=self.canonical(response.url),
            server=server.url,
            status=response.status,
            kind=kind,
            content_type=ctype,
            hops=response.meta.get("hops", 0),
            last_modified=parse_http_date(response.headers.get(b"Last-Modified")),
            etag=etag.decode("latin-1")[:255] if etag else None,
            weights=server.weights,
            language=server.language,
            interval=server.period,
            warc=response.meta.get("warc"),
        )

    def _revisit(self, response: Response, stored: dict[str, Any], changed: bool) -> int:
        server = self.server_of(response.url)
        return next_interval(
            stored.get("change_interval"),
            changed,
            server.period,
            server.min_period,
            server.max_period,
        )

    def _revisit_outcome(self, response: Response, stored: dict[str, Any]) -> Any:
        """The item for a re-visit that needs no parsing (304, gone, moved), else None."""
        stats = self.crawler.stats
        original = stored_url = response.request.url if response.request else response.url
        if response.status == 304:
            stats.inc_value("recrawl/not_modified")
            return RevisitItem(
                stored_url, stored["id"], 200, self._revisit(response, stored, changed=False)
            )
        if response.status in (404, 410):
            stats.inc_value("recrawl/gone")
            return GoneItem(original, stored["id"], response.status)
        redirects = response.meta.get("redirect_urls") or []
        if redirects and self.canonical(response.url) != self.canonical(redirects[0]):
            stats.inc_value("recrawl/moved")
            return GoneItem(redirects[0], stored["id"], 301, moved_to=self.canonical(response.url))
        return None

    def _check_revisit(self, response: Response) -> tuple[Any, bool]:
        """For a re-visit: (the item to yield first, or None; whether nothing is left to
        parse).  A page that moved yields its GoneItem and is then parsed as new."""
        stored = response.meta.get("stored")
        if not stored:
            return None, False
        outcome = self._revisit_outcome(response, stored)
        if outcome is None:
            return None, False
        moved = isinstance(outcome, GoneItem) and outcome.moved_to is not None
        return outcome, not moved

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        faults.point("download")
        hops = response.meta.get("hops", 0)
        outcome, done = self._check_revisit(response)
        if outcome is not None:
            yield outcome
        if done:
            return
        # A page that moved is parsed as a new page of its own URL.
        stored = response.meta.get("stored") if outcome is None else None
        ctype = (response.headers.get(b"Content-Type") or b"").decode("latin-1").lower()
        is_html = any(t in ctype for t in HTML_TYPES) or (
            not ctype
            and isinstance(response, TextResponse)
            and b"<html" in response.body[:2048].lower()
        )
        is_text = any(t in ctype for t in TEXT_TYPES)
        is_article = ctype.startswith(ARTICLE_TYPES)
        if not (is_html or is_text or is_article):
            yield self._file_item(response)
            return
        if b"\x00" in response.body[:8192]:  # binary bytes served as text
            server = self.server_of(response.url)
            self.crawler.stats.inc_value("site/errors/parse")
            yield ErrorItem(
                response.url,
                server.url,
                "parse",
                f"binary content served as {ctype.split(';')[0] or 'text'}",
            )
            return
        item = self._base_item(response, "page")
        item.size = len(response.body)
        item.checksum = hashlib.sha1(response.body).hexdigest()
        if stored:
            changed = item.checksum != stored.get("checksum")
            interval = self._revisit(response, stored, changed)
            if not changed:  # for servers that ignore conditional requests
                self.crawler.stats.inc_value("recrawl/unchanged")
                yield RevisitItem(item.url, stored["id"], response.status, interval)
                return
            self.crawler.stats.inc_value("recrawl/changed")
            item.interval = interval
        elif self.recrawl:
            self.crawler.stats.inc_value("recrawl/new")
        encoding = response.encoding if isinstance(response, TextResponse) else "utf-8"
        item.charset = encoding
        if is_html:
            try:
                ex = extract_html(response.url, response.body, encoding, self.config.site_max_links)
            except Exception as exc:  # lxml raises a handful of types on hostile input
                yield ErrorItem(response.url, item.server, "parse", f"{type(exc).__name__}: {exc}")
                return
            item.title, item.keywords, item.description = ex.title, ex.keywords, ex.description
            if ex.links_invalid:
                self.crawler.stats.inc_value("site/links_invalid", ex.links_invalid)
            links = self.valid_links(ex.links, follow=not ex.nofollow)
            item.text, item.links, item.link_count = ex.text, links, ex.link_total
            item.html = response.body if ex.text and not ex.noindex else None
            if ex.link_total > len(ex.links):
                self.crawler.stats.inc_value("site/links_dropped", ex.link_total - len(ex.links))
            item.noindex, item.nofollow = ex.noindex, ex.nofollow
            if not item.language:
                item.language = ex.language
            followable = [] if ex.nofollow else links
        elif is_article:
            item.charset = "utf-8"
            ex = extract_article(
                response.url, response.body, article_url, self.config.site_max_links
            )
            item.title, item.keywords, item.description = ex.title, ex.keywords, ex.description
            item.last_modified = ex.date or item.last_modified
            item.text, item.link_count = ex.text, ex.link_total
            item.links = self.valid_links(ex.links, follow=False)
            followable = []
        else:
            item.text = (
                response.text
                if isinstance(response, TextResponse)
                else response.body.decode("utf-8", "replace")
            )
            followable = []
        self.crawler.stats.inc_value("site/pages")
        yield from self.follow(response, followable, hops)
        yield item

    def _file_item(self, response: Response) -> PageItem:
        item = self._base_item(response, "file")
        length = response.headers.get(b"Content-Length")
        size: int | None = None
        if length and length.isdigit():
            size = int(length)
        elif response.request is not None and response.request.method != "HEAD":
            size = len(response.body)
        item.size = size
        self.crawler.stats.inc_value("site/files")
        return item

    def parse_file(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        outcome, done = self._check_revisit(response)
        if outcome is not None:
            yield outcome
        if not done:
            yield self._file_item(response)

    def on_error(self, failure: Failure) -> Iterator[ErrorItem]:
        request = failure.request  # type: ignore[attr-defined]
        if failure.check(errors.PageCapReached):
            return  # logged once per server by the server-config middleware
        kind, message = errors.classify(failure)
        redirects = request.meta.get("redirect_urls")
        if redirects:  # log the URL that was followed, and where it led
            message = f"{message} (redirected from {redirects[0]} to {request.url})"
            request = request.replace(url=redirects[0])
        server = self.servers.get(request.url)
        self.crawler.stats.inc_value(f"site/errors/{kind}")
        level = logging.DEBUG if failure.check(IgnoreRequest, HttpError) else logging.WARNING
        logger.log(level, "%s: %s (%s)", kind, request.url, message, extra={"spider": self})
        yield ErrorItem(request.url, server.url if server else None, kind, message)
