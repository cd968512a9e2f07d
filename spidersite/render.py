"""Pages written by JavaScript: the servers with ``render_js = true`` are fetched through a
headless browser (scrapy-playwright driving Debian's chromium); the others keep Scrapy's
plain HTTP handler.

Switched on per server (sites file, admin form or ``SERVER_DEFAULTS``)::

    [[server]]
    url = "https://app.example/"
    render_js = true

Three pieces, each small:

- :class:`RenderAddon` (in ``ADDONS``): when some server of the crawl has ``render_js``
  (its registry is built by the spider before the add-ons run), registers
  :class:`spidersite.handlers.PlaywrightDownloadHandler` for http and https and puts
  :class:`RenderMemoryUsage` in place of Scrapy's ``MemoryUsage`` (``memusage/max`` then
  counts the browser's processes).  A crawl without ``render_js`` never starts the
  browser, nor Playwright's driver.
- :class:`RenderMiddleware` (downloader middleware, 120: after the server configuration,
  robots.txt and the crawl delay have seen the request): sets ``meta["playwright"]`` on the
  GET requests of ``render_js`` http(s) servers (robots.txt, sitemaps and the HEAD
  requests of files stay plain), with the navigation timeout of the server's
  ``read_timeout`` and, for a server with a ``proxy`` or ``basic_auth``, a browser context
  that uses them (one per proxy, one per server with basic auth).
- :func:`abort_request`, the project's ``PLAYWRIGHT_ABORT_REQUEST``: the browser does not
  fetch images, media or fonts (the text is what is indexed).

:func:`check_settings` (called by :func:`spidersite.arguments.check_arguments`) refuses a
crawl with ``render_js`` servers whose browser is missing, in one line, before anything is
written.

Settings: ``RENDER_ENABLED`` (True), ``RENDER_WAIT_UNTIL`` (``load``), and
scrapy-playwright's ``PLAYWRIGHT_LAUNCH_OPTIONS``, ``PLAYWRIGHT_MAX_CONTEXTS``,
``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT``, ``PLAYWRIGHT_ABORT_REQUEST`` (project values in
``spidersite/settings.py``).  Stats: ``render/requests`` (sent to the browser),
``render/pages`` (rendered responses), ``render/errors`` and ``render/errors/<kind>``
(rendered requests that failed), ``render/aborted_requests`` (counted by the handler),
``render/browser_memory_max`` (by :class:`RenderMemoryUsage`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.memusage import MemoryUsage

from search.servers import ConfigError, ServerConfig
from search.sitesfile import ServerRegistry
from spidersite.crawlsettings import CrawlSettings, crawl_settings
from spidersite.errors import classify_exception
from spidersite.handlers import download_timeout
from spidersite.serverstate import server_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

#: Playwright resource types the browser does not fetch (:func:`abort_request`).
ABORTED_RESOURCE_TYPES = frozenset({"image", "media", "font"})

HANDLER = "spidersite.handlers.PlaywrightDownloadHandler"
MEMUSAGE = "scrapy.extensions.memusage.MemoryUsage"
RENDER_MEMUSAGE = "spidersite.render.RenderMemoryUsage"
#: The browser context of the servers with neither a proxy nor basic auth.
SHARED_CONTEXT = "default"


def abort_request(request: Any) -> bool:
    """``PLAYWRIGHT_ABORT_REQUEST``: whether the browser skips this request (a Playwright
    ``Request``): images, media and fonts."""
    return str(request.resource_type) in ABORTED_RESOURCE_TYPES


def renders(registry: ServerRegistry) -> bool:
    """Whether some server of the crawl is rendered (servers added later, for redirects,
    get the defaults)."""
    return bool(registry.defaults.get("render_js")) or any(s.render_js for s in registry)


def own_context(server: ServerConfig) -> bool:
    """Whether the server's pages need a browser context of their own (proxy, auth)."""
    return bool(server.proxy or server.basic_auth)


def context_of(server: ServerConfig) -> tuple[str, dict[str, Any] | None]:
    """The browser context (name, Playwright ``new_context`` arguments) of a server."""
    if not own_context(server):
        return SHARED_CONTEXT, None
    kwargs: dict[str, Any] = {}
    if server.proxy_url:
        kwargs["proxy"] = {"server": server.proxy_url}
    if server.basic_auth:
        user, password = server.basic_auth.split(":", 1)
        # Sent to this server only, for every request of its pages (scripts, XHR too).
        kwargs["http_credentials"] = {
            "username": user,
            "password": password,
            "origin": server.url.rstrip("/"),
        }
    if server.basic_auth:  # credentials are per origin: a context per server
        return f"server {server.url}", kwargs
    return f"proxy {server.proxy_url}", kwargs  # servers behind one proxy share it


def browser_path(settings: Any) -> str | None:
    """The browser PLAYWRIGHT_LAUNCH_OPTIONS names (``executable_path``), if any."""
    options = settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS") or {}
    path = options.get("executable_path")
    return str(path) if path else None


def check_settings(settings: Any, config: CrawlSettings, registry: ServerRegistry) -> None:
    """Refuse a crawl that renders pages without a browser, or with more browser contexts
    than PLAYWRIGHT_MAX_CONTEXTS allows; ConfigError in one line."""
    if not config.render_enabled or not renders(registry):
        return
    rendered = [s.url for s in registry if s.render_js] or ["every server (SERVER_DEFAULTS)"]
    path = browser_path(settings)
    if path is None:
        raise ConfigError(
            f"render_js is on for {rendered[0]} but PLAYWRIGHT_LAUNCH_OPTIONS names no "
            f"executable_path (the browser, e.g. /usr/bin/chromium)"
        )
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ConfigError(
            f"render_js is on for {rendered[0]} but the browser {path} is missing "
            f"(apt-get install chromium, or set PLAYWRIGHT_LAUNCH_OPTIONS executable_path)"
        )
    contexts = {context_of(s)[0] for s in registry if s.render_js}
    limit = settings.getint("PLAYWRIGHT_MAX_CONTEXTS") or 0
    if limit and len(contexts) > limit:
        raise ConfigError(
            f"PLAYWRIGHT_MAX_CONTEXTS: {limit} is fewer than the {len(contexts)} browser "
            f"contexts the render_js servers need (one shared, one per proxy, one per "
            f"server with basic_auth)"
        )


def _merge(settings: BaseSettings, name: str, values: dict[str, Any]) -> None:
    """Set keys of a dict setting at the priority it already has (an add-on's own priority
    is below the project's)."""
    merged = settings.getdict(name)
    merged.update(values)
    priority = settings.getpriority(name) or 0
    settings.set(name, merged, max(priority, 15))


class RenderAddon:
    """Add-on: the browser's handler and memory accounting, when some server renders."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderAddon:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        config = CrawlSettings.from_settings(settings)
        if not config.render_enabled or not renders(server_state(self.crawler).registry):
            raise NotConfigured  # silently: no browser for this crawl
        _merge(settings, "DOWNLOAD_HANDLERS", {"http": HANDLER, "https": HANDLER})
        # scrapy-playwright's MemoryUsage adds the RSS of Playwright's driver and of the
        # browser's processes to the crawl's own (memusage/max, MEMUSAGE_LIMIT_MB).
        _merge(settings, "EXTENSIONS", {MEMUSAGE: None, RENDER_MEMUSAGE: 0})
        # ... sampled every 5 s, not Scrapy's 60 (the browser's memory comes and goes).
        if settings.getpriority("MEMUSAGE_CHECK_INTERVAL_SECONDS") == 0:
            settings.set("MEMUSAGE_CHECK_INTERVAL_SECONDS", 5.0, "addon")


def _proportional_size(process: psutil.Process) -> int:
    """A process's PSS (its share of the pages it shares with others: chromium's processes
    share most of their code, which RSS would count once per process), else its RSS."""
    try:
        return int(process.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return int(process.memory_info().rss)


class RenderMemoryUsage(MemoryUsage):
    """Scrapy's ``MemoryUsage`` (``memusage/max``, ``MEMUSAGE_LIMIT_MB``,
    ``MEMUSAGE_WARNING_MB``) with the memory of Playwright's driver and of the browser's
    processes (their PSS, see :func:`_proportional_size`) added to the crawl's own peak.

    scrapy-playwright has the same idea (``ScrapyPlaywrightMemoryUsageExtension``), but
    with Playwright 1.65 it finds no process (it reads internals Playwright no longer
    has), and it fails when a process ends while it walks the tree.  This finds the driver
    among the crawl's child processes by its command line.  Stat:
    ``render/browser_memory_max`` (bytes, the largest PSS of the driver and the browser).
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        import playwright  # here: a crawl that renders nothing does not load Playwright

        self.driver = str(Path(playwright.__file__).parent / "driver")

    def browser_memory(self) -> int:
        """Bytes of memory (PSS) of Playwright's driver processes and their descendants."""
        total = 0
        for child in psutil.Process().children():
            try:
                if not any(self.driver in part for part in child.cmdline()):
                    continue
                tree = [child, *child.children(recursive=True)]
            except psutil.Error:  # it ended meanwhile
                continue
            for process in tree:
                with contextlib.suppress(psutil.Error):
                    total += _proportional_size(process)
        return total

    def get_virtual_size(self) -> int:
        browser = self.browser_memory()
        self._stats.max_value("render/browser_memory_max", browser)
        return int(super().get_virtual_size()) + browser


class RenderMiddleware:
    """Sends the GET requests of ``render_js`` servers through the browser."""

    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.render_enabled:
            raise NotConfigured("RENDER_ENABLED is off")
        self.state = server_state(crawler)
        if not renders(self.state.registry):
            raise NotConfigured  # silently: the crawl has no render_js server
        self.stats = crawler.stats
        self.wait_until = config.render_wait_until
        self.crawler = crawler
        crawler.signals.connect(self.response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        meta = request.meta
        if (
            request.method != "GET"
            or "sitemap" in meta
            or not request.url.startswith(("http://", "https://"))
            or (meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"))
        ):
            return  # files are HEAD requests; robots.txt and sitemaps are read as they are
        server = self.state.server(request.url)
        if server is None or not server.render_js or "playwright" in meta:
            return
        meta["playwright"] = True
        name, kwargs = context_of(server)
        meta["playwright_context"] = name
        if kwargs:
            meta["playwright_context_kwargs"] = kwargs
        meta["playwright_page_goto_kwargs"] = {
            "timeout": download_timeout(request, self.crawler) * 1000,  # milliseconds
            "wait_until": self.wait_until,
        }
        self.stats.inc_value("render/requests")

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if request.meta.get("playwright"):
            self.stats.inc_value("render/errors")
            self.stats.inc_value(f"render/errors/{classify_exception(exception)}")

    def response_received(self, response: Response, request: Request, spider: Any) -> None:
        if "playwright" in response.flags:
            self.stats.inc_value("render/pages")
