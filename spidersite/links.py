"""The links a crawl follows (the design documents' HREFs): URLs in canonical form, the URLs
scheduled, and the filters a link passes before it becomes a request.

The site spider owns one :class:`LinkFollower`.  A link of a page (or a URL of a sitemap,
:mod:`spidersite.sitemaps`) is followed when its URL can be fetched
(:func:`search.urls.check_url`, else counted in ``site/links_invalid``), it was not
scheduled before (a fixed-size fingerprint set, :class:`search.fingerprints.FingerprintSet`),
it is on a server of the crawl (else ``site/offsite``) and that server's allow/deny patterns
let it through (else ``site/denied_by_pattern``); ``maxhops`` and robots.txt are the
middlewares' to apply.  A middleware that drops a request makes its URL schedulable again
(:meth:`LinkFollower.forget`).

The canonical form is w3lib's (:func:`w3lib.url.canonicalize_url`: query arguments sorted,
fragment dropped, percent-encoding normalised) without a port the scheme has by default
(``http://host:80/`` is ``http://host/``, as :func:`search.urls.origin` has it).

Canonicalisation is costly (~25 µs a URL with its check), so it is skipped for a URL that
is already the canonical form of one the crawl scheduled (found in the fingerprint set:
on a large site most links point to pages already scheduled), and the canonical forms of
the others are cached, within ``SITE_CANONICAL_CACHE`` bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from scrapy import Request
from w3lib.url import canonicalize_url

from search.fingerprints import FingerprintSet
from search.urls import check_url, without_default_port
from spidersite.crawlrequests import RequestFactory
from spidersite.crawlsettings import CrawlSettings
from spidersite.items import LinkRecord
from spidersite.serverstate import server_state

#: What a cached canonical URL costs beside its characters: its str objects and a dict slot.
_CACHE_ENTRY_BYTES = 200


class LinkFollower:
    """The URLs of one crawl: their canonical forms, those scheduled, the links followed."""

    def __init__(self, crawler: Any, config: CrawlSettings, requests: RequestFactory) -> None:
        self.crawler = crawler
        self.config = config
        self.requests = requests
        #: URL as found -> canonical URL; emptied when it passes SITE_CANONICAL_CACHE bytes.
        self._canonical: dict[str, str] = {}
        self._canonical_bytes = 0
        #: Every URL scheduled (canonical), as 8-byte fingerprints.
        self._seen = FingerprintSet()

    def canonical(self, url: str) -> str:
        """Canonical form of an absolute URL, cached; ValueError for a URL that cannot be
        fetched (:func:`search.urls.check_url`)."""
        canon = self._canonical.get(url)
        if canon is None:
            if url in self._seen:
                # The canonical form of a URL scheduled: canonical already, and checked
                # (canonicalize_url gives back what it is given in canonical form).
                return url
            check_url(url, self.config.urllength_limit)
            # w3lib keeps a port its scheme has by default (``:80``); origin() does not.
            canon = without_default_port(canonicalize_url(url))
            size = _CACHE_ENTRY_BYTES + len(url)
            if canon == url:
                canon = url  # one string for both: most links are written canonically
            else:
                size += len(canon)
            if self._canonical_bytes + size > self.config.site_canonical_cache:
                self._canonical.clear()  # a cache: what is dropped is computed again
                self._canonical_bytes = 0
            self._canonical[url] = canon
            self._canonical_bytes += size
        return canon

    # -- the URLs scheduled ----------------------------------------------------------------

    def is_seen(self, url: str) -> bool:
        """Whether the canonical *url* was scheduled (or, on a re-crawl, is stored)."""
        return url in self._seen

    def first_time(self, url: str) -> bool:
        """Mark the canonical *url* scheduled; whether it was not before."""
        if url in self._seen:
            return False
        self._seen.add(url)
        return True

    def mark_seen(self, urls: Iterable[str]) -> None:
        """Count the canonical *urls* as scheduled (the stored URLs of a crawl)."""
        self._seen.update(urls)

    def forget(self, url: str) -> None:
        """Let *url* be scheduled again when a later page links to it (a middleware that
        drops a request calls this: the URL was marked seen when the request was made)."""
        self._seen.discard(url)

    # -- links -----------------------------------------------------------------------------

    def valid(self, links: list[LinkRecord], follow: bool) -> list[LinkRecord]:
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

    def follow(self, referer: str, links: list[LinkRecord], hops: int) -> Iterator[Request]:
        """New requests for the followable (canonical) links of the page *referer*, which
        is *hops* from a seed, each URL once."""
        stats = self.crawler.stats
        servers = server_state(self.crawler).registry
        for link in links:
            if link.nofollow:
                continue
            url = link.url
            if not self.first_time(url):
                continue
            server = servers.get(url)
            if server is None:
                stats.inc_value("site/offsite")
                continue
            if not server.allows(url):
                stats.inc_value("site/denied_by_pattern")
                continue
            yield self.requests.page(url, hops + 1, referer)
