"""Apply each server's configuration to its requests.

Enabled by default in ``spidersite.settings`` (``SERVERS_ENABLED``).  For every request to a
configured server it sets, unless the request already has them:

- ``download_timeout`` from ``read_timeout``;
- ``proxy`` from ``proxy`` (then Scrapy's ``HttpProxyMiddleware`` does the rest);
- an ``Authorization: Basic`` header from ``basic_auth`` (only for that server's URLs);
  for an ``ftp://`` server, ``ftp_user`` and ``ftp_password`` (the FTP login) instead, for
  a ``news://`` or ``nntp://`` server ``nntp_user`` and ``nntp_password``;
- ``dont_obey_robotstxt`` when ``userobots = false``;
- ``download_slot`` = the server, so delay and concurrency are per server (not per host);
- ``download_maxsize`` from ``max_size`` (a bigger response is cut off: ``too_large``).

At most ``max_pages`` requests per server and crawl (0 = no cap) pass (robots.txt, sitemaps
and re-visits are not counted); the first one over the cap is logged as a ``page_cap``
failure and the rest are dropped quietly (a calendar trap or an endless URL space ends
there).

Requests to a server cut off by ``max_net_errors`` are dropped here.

A redirect (HTTP 3xx, or a meta refresh) is followed only where a link would be: to a
server of the crawl whose ``allow``/``deny`` patterns let the URL through.  Its request
comes back through here before robots.txt (100) is asked; one that leads elsewhere fails
with :class:`~spidersite.errors.RedirectOutOfScope`, logged as a ``redirect`` failure of
the URL that was redirected.  (robots.txt and sitemaps may redirect anywhere, as they may
be listed anywhere: what they lead to is checked link by link.)

Stats: ``servers/requests``, ``servers/proxied``, ``servers/authenticated``,
``servers/cut_off_dropped``, ``servers/page_cap_dropped``,
``servers/redirect_offsite``, ``servers/redirect_denied``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from w3lib.http import basic_auth_header

from search.urls import origin
from spidersite.crawllog import record_error
from spidersite.crawlsettings import crawl_settings
from spidersite.errors import PageCapReached, RedirectOutOfScope, ServerCutOff
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from search.servers import ServerConfig

logger = logging.getLogger(__name__)


class ServerConfigMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawl_settings(crawler).servers_enabled:
            raise NotConfigured("SERVERS_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.state = server_state(crawler)
        #: server URL -> requests let through in this crawl (for ``max_pages``).
        self.counts: dict[str, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ServerConfigMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        server = self.state.server(request.url)
        if "redirect_urls" in request.meta:
            self._check_redirect(request, server)
        if server is None:
            return
        reason = self.state.disabled.get(server.url)
        if reason is not None and not request.url.endswith("/robots.txt"):
            self.stats.inc_value("servers/cut_off_dropped")
            raise ServerCutOff(f"server {server.url} cut off: {reason}")
        is_robots = request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt")
        # robots.txt, sitemaps and re-visits are not pages the cap counts.
        counted = not is_robots and "sitemap" not in request.meta and "stored" not in request.meta
        if server.max_pages and counted:
            count = self.counts.get(server.url, 0)
            if count >= server.max_pages:
                self.stats.inc_value("servers/page_cap_dropped")
                if count == server.max_pages:  # one line in the crawl log per server
                    self.counts[server.url] = count + 1
                    record_error(
                        self.crawler,
                        request.url,
                        server.url,
                        "page_cap",
                        f"max_pages = {server.max_pages} reached; the server's "
                        f"remaining URLs are dropped",
                    )
                raise PageCapReached(f"server {server.url}: max_pages reached")
            self.counts[server.url] = count + 1
        self.stats.inc_value("servers/requests")
        meta = request.meta
        meta.setdefault("download_maxsize", server.max_size)
        meta.setdefault("server", server.url)
        meta.setdefault("download_slot", server.url)
        meta.setdefault("download_timeout", server.read_timeout)
        if server.proxy_url and "proxy" not in meta:
            meta["proxy"] = server.proxy_url
            self.stats.inc_value("servers/proxied")
        if (
            server.basic_auth
            and b"Authorization" not in request.headers
            and origin(request.url) == server.url
        ):
            user, password = server.basic_auth.split(":", 1)
            scheme = server.url.split(":", 1)[0]
            if scheme in ("ftp", "news", "nntp"):
                prefix = "ftp" if scheme == "ftp" else "nntp"
                meta.setdefault(f"{prefix}_user", user)
                meta.setdefault(f"{prefix}_password", password)
            else:
                request.headers[b"Authorization"] = basic_auth_header(user, password)
            self.stats.inc_value("servers/authenticated")
        if not server.userobots:
            meta["dont_obey_robotstxt"] = True

    def _check_redirect(self, request: Request, server: ServerConfig | None) -> None:
        """Refuse a redirect's request to a URL no link of the crawl could lead to."""
        meta = request.meta
        first = meta["redirect_urls"][0]
        if "sitemap" in meta or (
            meta.get("dont_obey_robotstxt") and urlsplit(first).path == "/robots.txt"
        ):
            return
        if server is None:
            self.stats.inc_value("servers/redirect_offsite")
            raise RedirectOutOfScope(f"redirect to {request.url}, not on a server of the crawl")
        if not server.allows(request.url):
            self.stats.inc_value("servers/redirect_denied")
            raise RedirectOutOfScope(
                f"redirect to {request.url}, which the allow/deny patterns of {server.url} keep out"
            )
