"""The one generic spider, ``site``: requests in, items out.

    scrapy crawl site -a seeds=https://example.org/[,URL...]
    scrapy crawl site -a seeds_file=seeds.txt -a sites=sites.toml

It crawls breadth-first from the seeds and the servers' sitemaps (:mod:`spidersite.sitemaps`),
stays on the seeds' servers and on the servers the sites file names, and yields a
:class:`~spidersite.items.PageItem` for every page or file it fetched and an
:class:`~spidersite.items.ErrorItem` for every failure.  Per-server rules
(hops, robots.txt, timeouts, proxies, net-error cut-off) are applied by the middlewares.

What it delegates: its arguments (:mod:`spidersite.arguments`), its first requests (seeds,
a resumed crawl, a re-crawl: :mod:`spidersite.startup`), building requests
(:mod:`spidersite.crawlrequests`), the links it follows (:mod:`spidersite.links`), the
answers to re-visits (:mod:`spidersite.revisits`), extraction (:mod:`spidersite.extract`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from search import faults
from search.crawldb import CRAWL_IDENTITY, crawl_identity
from search.sitesfile import ServerRegistry
from spidersite import errors
from spidersite.arguments import build_registry, check_arguments, parse_recrawl, parse_threshold
from spidersite.crawlrequests import RequestFactory
from spidersite.crawlsettings import CrawlSettings, crawl_settings
from spidersite.extract import (
    extract_article,
    extract_html,
    parse_http_date,
    plain_text,
    robots_header,
)
from spidersite.items import ErrorItem, GoneItem, PageItem
from spidersite.links import LinkFollower
from spidersite.middlewares.charset import WIDE, codec_name
from spidersite.nntp import article_url
from spidersite.revisits import check_revisit, unchanged
from spidersite.serverstate import server_state
from spidersite.sitemaps import SitemapReader
from spidersite.startup import crawl_to_resume, first_requests, resumed_crawl

logger = logging.getLogger(__name__)

#: The spider's attribute of each argument of :data:`~search.crawldb.CRAWL_IDENTITY` that
#: is not named as the argument.
_ARG_ATTRIBUTES = {"seeds": "seeds_arg"}

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)
#: News articles (spidersite.nntp answers them as message/rfc822).
ARTICLE_TYPES = ("message/rfc822", "message/news")


class SiteSpider(Spider):
    name = "site"
    #: The crawl's settings (set by from_crawler).
    config: CrawlSettings
    #: The links it follows, the URLs scheduled (set by from_crawler).
    links: LinkFollower

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
        #: "due", "all" or "reanalyze": re-visit stored documents (conditional GET; with
        #: "reanalyze", fetched whole and analyzed again), else None.
        self.recrawl = parse_recrawl(recrawl)
        #: Name of a crawl shared by several processes (``-a crawl_key``); see frontier_key.
        self.crawl_key = crawl_key or None
        #: The id of the last crawl with the same arguments when it was killed (or
        #: stopped): pick it up (:func:`spidersite.startup.resumed_crawl`).
        self.resumes: int | None = None
        self.seed_urls: list[str] = []
        #: The factory of every request of the crawl.
        self.requests = RequestFactory(self)
        #: The servers' sitemaps (None with SITEMAP_ENABLED off).
        self.sitemaps: SitemapReader | None = None
        #: When the crawl started: a ``recrawl=due`` re-visits what was due then.
        self.recrawl_time = datetime.now(UTC)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SiteSpider:
        spider: SiteSpider = super().from_crawler(crawler, *args, **kwargs)
        spider.config = crawl_settings(crawler)
        spider.links = LinkFollower(crawler, spider.config, spider.requests)
        server_state(crawler).registry, spider.seed_urls = build_registry(
            spider.config,
            spider.seeds_arg,
            spider.seeds_file,
            spider.sites,
            require_seeds=spider.recrawl is None,
        )
        if spider.recrawl is None and spider.config.site_resume:
            spider.resumes = crawl_to_resume(crawler, spider.name, spider.crawl_args())
        if spider.config.sitemap_enabled:
            spider.sitemaps = SitemapReader(spider)
        crawler.signals.connect(spider.headers_received, signal=signals.headers_received)
        return spider

    def headers_received(self, headers: Any, body_length: Any, request: Any, spider: Any) -> None:
        """Stop a file's GET once its headers are in (:meth:`RequestFactory.file_by_get`)."""
        if request.meta.get("headers_only"):
            raise StopDownload(fail=False)

    @property
    def servers(self) -> ServerRegistry:
        """The crawl's servers (owned by :mod:`spidersite.serverstate`)."""
        return server_state(self.crawler).registry

    def crawl_args(self) -> dict[str, Any]:
        """The arguments that identify this crawl (stored in ``crawls.args``): those
        :data:`search.crawldb.CRAWL_IDENTITY` names, as given."""
        given = {name: getattr(self, _ARG_ATTRIBUTES.get(name, name)) for name in CRAWL_IDENTITY}
        return crawl_identity(given)

    def resumed_crawl(self) -> int | None:
        """The id of the crawl this process resumes (its pipeline closes that one's row
        as it starts its own): :func:`spidersite.startup.resumed_crawl`."""
        return resumed_crawl(self)

    @property
    def frontier_key(self) -> str:
        """The key of this crawl's shared frontier in Redis (with ``SCALEOUT_REDIS_URL``):
        ``-a crawl_key``, else derived from the spider's arguments, so that processes
        started with the same arguments share one frontier."""
        if self.crawl_key:
            return self.crawl_key
        args = json.dumps(self.crawl_args(), sort_keys=True)
        return f"{self.name}-{hashlib.sha1(args.encode()).hexdigest()[:12]}"

    #: Checks the arguments before Scrapy starts (called by our ``crawl`` command).
    check_arguments = staticmethod(check_arguments)

    def forget(self, url: str) -> None:
        """Let *url* be scheduled again (a middleware that drops a request calls this)."""
        self.links.forget(url)

    # -- requests ------------------------------------------------------------------------

    async def start(self) -> AsyncIterator[Any]:
        self.recrawl_time = datetime.now(UTC)
        for request in first_requests(self):
            yield request

    def parse_sitemap(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if self.sitemaps is not None:
            yield from self.sitemaps.parse(response)

    def sitemap_error(self, failure: Failure) -> Iterator[ErrorItem]:
        if self.sitemaps is not None:
            yield from self.sitemaps.on_error(failure)

    # -- responses -----------------------------------------------------------------------

    def _base_item(self, response: Response, kind: str) -> PageItem:
        server = self.servers.ensure(response.url)
        content_type = response.headers.get(b"Content-Type")
        ctype = (
            content_type.decode("latin-1").split(";")[0].strip().lower() if content_type else None
        )
        etag = response.headers.get(b"ETag")
        return PageItem(
            url=self.links.canonical(response.url),
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

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        faults.point("download")
        hops = response.meta.get("hops", 0)
        outcome, done = check_revisit(self, response)
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
        wide = isinstance(response, TextResponse) and codec_name(response.encoding) in WIDE
        if not wide and b"\x00" in response.body[:8192]:  # binary bytes served as text
            server = self.servers.ensure(response.url)
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
        revisit = unchanged(self, response, item, stored)
        if revisit is not None:
            yield revisit
            return
        encoding = response.encoding if isinstance(response, TextResponse) else "utf-8"
        item.charset = encoding
        # X-Robots-Tag counts as <meta name="robots"> does, for pages of every kind.
        noindex, nofollow = robots_header(response.headers.getlist(b"X-Robots-Tag"))
        item.noindex, item.nofollow = noindex, nofollow
        if is_html:
            try:
                ex = extract_html(response.url, response.body, encoding, self.config.site_max_links)
            except Exception as exc:  # lxml raises a handful of types on hostile input
                yield ErrorItem(response.url, item.server, "parse", f"{type(exc).__name__}: {exc}")
                return
            item.title, item.keywords, item.description = ex.title, ex.keywords, ex.description
            if ex.links_invalid:
                self.crawler.stats.inc_value("site/links_invalid", ex.links_invalid)
            noindex, nofollow = noindex or ex.noindex, nofollow or ex.nofollow
            links = self.links.valid(ex.links, follow=not nofollow)
            item.text, item.links, item.link_count = ex.text, links, ex.link_total
            item.html = response.body if ex.text and not noindex else None
            if ex.link_total > len(ex.links):
                self.crawler.stats.inc_value("site/links_dropped", ex.link_total - len(ex.links))
            item.noindex, item.nofollow = noindex, nofollow
            if not item.language:
                item.language = ex.language
            followable = [] if nofollow else links
        elif is_article:
            item.charset = "utf-8"
            ex = extract_article(
                response.url, response.body, article_url, self.config.site_max_links
            )
            item.title, item.keywords, item.description = ex.title, ex.keywords, ex.description
            item.last_modified = ex.date or item.last_modified
            item.text, item.link_count = ex.text, ex.link_total
            item.links = self.links.valid(ex.links, follow=False)
            followable = []
        else:
            item.text = plain_text(
                response.text
                if isinstance(response, TextResponse)
                else response.body.decode("utf-8", "replace")
            )
            followable = []
        self.crawler.stats.inc_value("site/pages")
        yield from self.links.follow(response.url, followable, hops)
        yield item

    def _file_item(self, response: Response) -> PageItem:
        item = self._base_item(response, "file")
        length = response.headers.get(b"Content-Length")
        size: int | None = None
        if length and length.isdigit():
            size = int(length)
        elif (
            response.request is not None
            and response.request.method != "HEAD"
            and "download_stopped" not in response.flags
        ):
            size = len(response.body)
        item.size = size
        self.crawler.stats.inc_value("site/files")
        return item

    def parse_file(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        outcome, done = check_revisit(self, response)
        if outcome is not None:
            yield outcome
        if not done:
            yield self._file_item(response)

    def on_error(self, failure: Failure) -> Iterator[ErrorItem | GoneItem | Request]:
        request = failure.request  # type: ignore[attr-defined]
        if failure.check(errors.PageCapReached):
            return  # logged once per server by the server-config middleware
        refused = failure.value
        if (
            request.method == "HEAD"
            and isinstance(refused, HttpError)
            and refused.response.status in (405, 501)
        ):
            # A server that does not answer HEAD (method not allowed, not implemented):
            # the file's type and size from a GET's headers.
            self.crawler.stats.inc_value("site/files_head_refused")
            yield self.requests.file_by_get(request)
            return
        kind, message = errors.classify(failure)
        redirects = request.meta.get("redirect_urls")
        if redirects:  # log the URL that was followed, and where it led
            message = f"{message} (redirected from {redirects[0]} to {request.url})"
            stored = request.meta.get("stored")
            if stored and failure.check(errors.RedirectOutOfScope):
                # A stored page that now redirects where the crawl does not go has moved
                # away: it leaves the index, as a page that moved within the crawl does.
                self.crawler.stats.inc_value("recrawl/moved")
                yield GoneItem(redirects[0], stored["id"], 301)
            request = request.replace(url=redirects[0])
        elif request.meta.get("stored") and failure.check(errors.RobotsDenied):
            # A stored page robots.txt has come to forbid leaves the index, as Nutch
            # drops it; robots.txt that cannot be fetched allows everything, so only
            # the rules the server wrote take a page out.
            self.crawler.stats.inc_value("recrawl/forbidden")
            yield GoneItem(request.url, request.meta["stored"]["id"], None)
        server = self.servers.get(request.url)
        self.crawler.stats.inc_value(f"site/errors/{kind}")
        level = logging.DEBUG if failure.check(IgnoreRequest, HttpError) else logging.WARNING
        logger.log(level, "%s: %s (%s)", kind, request.url, message, extra={"spider": self})
        yield ErrorItem(request.url, server.url if server else None, kind, message)
