"""The site spider's requests: one factory for every request it makes.

:class:`RequestFactory` builds the request of a page or a file (seeds, followed links,
URLs of a resumed crawl, re-visits of stored documents) and of a sitemap.  A page is a GET
parsed by the spider's ``parse``; a file (a URL that looks like a file's,
:func:`spidersite.extract.is_file_url`) a HEAD parsed by ``parse_file``; a re-visit carries
the stored document in ``meta["stored"]`` and is conditional (the conditional middleware
reads it) and answered 304, 404 or 410 too; on ``recrawl=reanalyze`` it is marked
``stored["reanalyze"]``: fetched whole, and analyzed again even unchanged
(:mod:`spidersite.revisits`).  Priority is ``-hops`` (breadth-first).

Callbacks and errbacks are the spider's own methods, so the requests survive the
serialisation of ``JOBDIR`` and of the shared frontier (:mod:`spidersite.scaleout`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from spidersite.extract import is_file_url

if TYPE_CHECKING:
    from spidersite.spiders.site import SiteSpider


class RequestFactory:
    """The requests of one :class:`~spidersite.spiders.site.SiteSpider`."""

    def __init__(self, spider: SiteSpider) -> None:
        self.spider = spider

    def page(
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
        spider = self.spider
        if file is None:
            file = is_file_url(url)
        meta: dict[str, Any] = {"hops": hops}
        if stored is not None:
            meta["stored"] = stored
            meta["handle_httpstatus_list"] = [304, 404, 410]
        return Request(
            url,
            method="HEAD" if file else "GET",
            callback=spider.parse_file if file else spider.parse,
            errback=spider.on_error,
            meta=meta,
            priority=-hops,
            headers={"Referer": referer} if referer else None,
            dont_filter=dont_filter or stored is not None,
        )

    @staticmethod
    def file_by_get(head: Request) -> Request:
        """The GET that stands for a file's HEAD its server refused (405, 501): the same
        request, whose download the spider stops once the headers are in
        (``meta["headers_only"]``: the type and size are all a file's record needs)."""
        return head.replace(
            method="GET", meta={**head.meta, "headers_only": True}, dont_filter=True
        )

    def revisit(self, row: Any) -> Request:
        """The conditional request of a stored document (a :meth:`CrawlDB.revisits` row);
        on ``recrawl=reanalyze``, a request for the whole document, to analyze again."""
        stored = {
            "id": row.id,
            "etag": row.etag,
            "last_modified": row.last_modified,
            "checksum": row.checksum,
            "change_interval": row.change_interval,
        }
        if self.spider.recrawl == "reanalyze":
            stored["reanalyze"] = True
        return self.page(row.url, row.hops, file=row.kind == "file", stored=stored)

    def sitemap(self, url: str, hops: int, source: str, referer: str | None = None) -> Request:
        """The request of a sitemap (read by :mod:`spidersite.sitemaps`), *hops* from a
        seed; *source* says where it was found (``meta["sitemap"]``)."""
        spider = self.spider
        limit = spider.config.sitemap_max_bytes
        return Request(
            url,
            callback=spider.parse_sitemap,
            errback=spider.sitemap_error,
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
