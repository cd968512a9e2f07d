"""Conditional GET for re-visits of stored pages.

A re-crawl (``-a recrawl=due|all|reanalyze``) schedules stored documents with their stored
ETag and Last-Modified in ``request.meta["stored"]``.  This middleware turns them into
``If-None-Match`` and ``If-Modified-Since`` headers, so an unchanged page answers
``304 Not Modified`` without a body.  A Last-Modified in the future, or one that was not a
date, is not sent.  Switch off with ``CONDITIONAL_ENABLED = False`` (re-visits then download
every body, and unchanged pages are still recognised by their checksum).

The re-visits of ``recrawl=reanalyze`` (``stored["reanalyze"]``) are sent without them:
every page is to be analyzed again, so its body is needed even when it did not change.
A news group's is the exception: its ETag is the last article number an earlier crawl
listed (:mod:`spidersite.nntp`), the place where the listing of newer articles starts, not
a version of content to analyze (the listing is not indexed).

Stats: ``conditional/requests``, ``conditional/not_modified``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from spidersite.crawlsettings import crawl_settings
from spidersite.nntp import SCHEMES as NEWS_SCHEMES

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: The URL prefixes of news groups and articles (:mod:`spidersite.nntp`).
_NEWS_PREFIXES = tuple(f"{scheme}:" for scheme in NEWS_SCHEMES)


class ConditionalGetMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).conditional_enabled:
            raise NotConfigured("CONDITIONAL_ENABLED is off")
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ConditionalGetMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        stored = request.meta.get("stored")
        if not stored:
            return
        if stored.get("reanalyze") and not request.url.startswith(_NEWS_PREFIXES):
            return  # recrawl=reanalyze: the whole page, to analyze again
        sent = False
        if stored.get("etag") and b"If-None-Match" not in request.headers:
            request.headers[b"If-None-Match"] = stored["etag"]
            sent = True
        modified = stored.get("last_modified")
        if isinstance(modified, datetime) and b"If-Modified-Since" not in request.headers:
            if modified.tzinfo is None:
                modified = modified.replace(tzinfo=UTC)
            if modified <= datetime.now(UTC):
                request.headers[b"If-Modified-Since"] = format_datetime(
                    modified.astimezone(UTC), usegmt=True
                )
                sent = True
        if sent:
            self.stats.inc_value("conditional/requests")

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status == 304 and request.meta.get("stored"):
            self.stats.inc_value("conditional/not_modified")
        return response
