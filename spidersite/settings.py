"""Scrapy settings of spidersite.

Every value that differs from Scrapy's default carries a comment.  The project's own
settings have their defaults in :class:`spidersite.crawlsettings.CrawlSettings` (the README
documents each).
Override any of them with ``scrapy crawl site -s NAME=VALUE``.
"""

from scrapy.settings.default_settings import (
    DOWNLOADER_MIDDLEWARES_BASE as _SCRAPY_DOWNLOADER_MIDDLEWARES,
)
from scrapy.settings.default_settings import EXTENSIONS_BASE as _SCRAPY_EXTENSIONS

BOT_NAME = "spidersite"
SPIDER_MODULES = ["spidersite.spiders"]
NEWSPIDER_MODULE = "spidersite.spiders"
# Our `crawl` command validates spider arguments before Scrapy starts (one-line errors).
COMMANDS_MODULE = "spidersite.commands"

# Identify the crawler honestly; robots.txt rules for "spidersite" apply to it.
USER_AGENT = "spidersite/0.1 (+https://github.com/spidersite/spidersite)"
ROBOTSTXT_USER_AGENT = "spidersite"
# robots.txt is obeyed (per server it can be switched off with `userobots = false`).
ROBOTSTXT_OBEY = True

# Breadth-first order: requests carry priority -hops, and the queues are FIFO.
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

# Many servers in parallel, a few connections per server (per-server `concurrency`).
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 8
# Items of one response are few (one page, maybe an error, and the requests of its links).
# Scrapy starts this many asyncio tasks for *each* response's output, and a response waiting
# in the scraper slot keeps them: with the default 100, the ~450 responses the slot holds
# while the store is behind (SCRAPER_SLOT_MAX_ACTIVE_SIZE) kept 45,000 tasks (~1.2 kB each,
# ~55 MB of the crawler's memory).
CONCURRENT_ITEMS = 4
# Bytes of responses (their bodies, at least 1 kB each) the scraper slot holds before the
# downloader waits: 1 MB, not Scrapy's 5 MB.  The slot fills whenever the worker is behind
# (the pipeline waits, StorePipeline), and each response waiting there keeps its page's
# text, links and requests besides its body: ~64 kB of the crawler's memory for a 10 kB
# page; 5 MB of such pages kept ~520 of them, and the crawler was 25 MB bigger than with
# 1 MB (benchmarks/README.md, "The crawler's memory").  The worker has
# STORE_QUEUE_BATCHES batches queued meanwhile; a bigger slot does not feed it faster.
SCRAPER_SLOT_MAX_ACTIVE_SIZE = 1_000_000
# A page bigger than this is cut off (and counted as an error): 32 MiB, not 1 GiB.
DOWNLOAD_MAXSIZE = 32 * 1024 * 1024
DOWNLOAD_WARNSIZE = 8 * 1024 * 1024
# Per-server `read_timeout` sets each request's timeout; this is the fallback.
DOWNLOAD_TIMEOUT = 30
# Two retries of network errors, as Scrapy does; each attempt counts toward max_net_errors.
RETRY_TIMES = 2
# Cookies are not needed to read public pages and cost memory on big crawls.
COOKIES_ENABLED = False
# Scrapy's downloader middlewares less the cookies one: Scrapy imports every middleware it
# lists to ask it whether it is on, and that one imports tldextract, requests and urllib3
# (~3 MB of the crawler's memory) at its first line.  With COOKIES_ENABLED on, the add-on
# spidersite.librarysettings.CookiesAddon puts it back in its place (700).
DOWNLOADER_MIDDLEWARES_BASE = {
    path: order
    for path, order in _SCRAPY_DOWNLOADER_MIDDLEWARES.items()
    if path != "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"
}
# The telnet console is a remote shell; a crawler does not need it.
TELNETCONSOLE_ENABLED = False
# Scrapy 2.19's remote control is an HTTP server on localhost that runs the Python code sent
# to it (with a bearer token from a file in the user's profile); no remote code server.
REMOTE_CONTROL_ENABLED = False
# Scrapy's depth limit is replaced by per-server `maxhops`.
DEPTH_LIMIT = 0
# Scrapy re-reads each callback's source for every response to warn about a generator
# that returns a value (5.5 % of the reactor thread in a profile of the corpus crawl);
# the spider's callbacks are ours and tested.
WARN_ON_GENERATOR_RETURN_VALUE = False
# The statistics are kept in the `crawls` table; log them at INFO as well.
LOG_LEVEL = "INFO"

DOWNLOAD_HANDLERS = {
    # Scrapy's handlers with the whole download bounded (spidersite.handlers, the watchdog):
    # http(s) WATCHDOG_GRACE seconds after the request's download_timeout, under Scrapy's
    # own timeout; FTP (spidersite.ftp: Scrapy's FTP handler plus directory listings) by
    # the download_timeout itself (Scrapy's FTP handler has no timeout at all).
    "http": "spidersite.handlers.HTTPDownloadHandler",
    "https": "spidersite.handlers.HTTPDownloadHandler",
    "ftp": "spidersite.ftp.FTPDownloadHandler",
    # News groups and articles (nntplib in threads, bounded like FTP).
    "news": "spidersite.nntp.NNTPDownloadHandler",
    "nntp": "spidersite.nntp.NNTPDownloadHandler",
    # Off: a crawl fetches only http, https, ftp, news and nntp. No seed or link can reach
    # these today (search.urls.check_url refuses other schemes); defence in depth, so
    # that none ever reads the machine's files (file:), a cloud bucket with the host's
    # credentials (s3:), or turns a data: link into a page.
    "file": None,
    "s3": None,
    "data": None,
}

DOWNLOADER_MIDDLEWARES = {
    # robots.txt with its failures in the crawl log, in place of Scrapy's (same priority).
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "spidersite.middlewares.robots.RobotsMiddleware": 100,
    # 50: before robots.txt (100), so `userobots = false` and the per-server slot apply
    # to the robots.txt request too.
    "spidersite.middlewares.servers.ServerConfigMiddleware": 50,
    # 110: after RobotsTxtMiddleware (100) has fetched and parsed robots.txt.
    "spidersite.middlewares.crawldelay.CrawlDelayMiddleware": 110,
    # 555: sees a 429 or 503 before RetryMiddleware (550) turns it into a retry; its
    # Retry-After becomes the server's delay (applied by CrawlDelayMiddleware).
    "spidersite.middlewares.crawldelay.RetryAfterMiddleware": 555,
    # 120: after the server configuration (50: its read_timeout, proxy and auth), robots.txt
    # (100) and the crawl delay (110): sends render_js servers' pages through the browser.
    "spidersite.render.RenderMiddleware": 120,
    # 560: between RetryMiddleware (550) and the downloader, to count every attempt.
    "spidersite.middlewares.neterrors.NetErrorMiddleware": 560,
    # 950: the last process_request and the first process_response: holds a per-server
    # permit exactly while a request is being downloaded (per-server `concurrency`).
    "spidersite.middlewares.concurrency.ServerConcurrencyMiddleware": 950,
    # 610: sees 3xx answers just before RedirectMiddleware (600) does; ends loops.
    "spidersite.middlewares.redirectloop.RedirectLoopMiddleware": 610,
    # Scrapy's meta refresh (580) with its loops ended (a page refreshing to itself parsed).
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "spidersite.middlewares.redirectloop.MetaRefreshLoopMiddleware": 580,
    # 570: re-visits send If-None-Match / If-Modified-Since; any place before the
    # downloader works, after the retry middleware keeps retries conditional too.
    "spidersite.middlewares.conditional.ConditionalGetMiddleware": 570,
    # 585: process_response runs from high numbers to low, so this sees the body after
    # DecompressionMiddleware (590) decompressed it, and fixes the encoding before
    # MetaRefreshMiddleware (580) and the spider read response.text.
    "spidersite.middlewares.charset.CharsetMiddleware": 585,
    # Scrapy's decompression (590) in its place, each body decompressed once, and a
    # compressed stream cut before its end refused (a check before Scrapy's decompressed
    # every compressed page twice).
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "spidersite.middlewares.compression.DecompressionMiddleware": 590,
}

SPIDER_MIDDLEWARES = {
    # 900: where Scrapy's DepthMiddleware sits; filters outgoing requests by hops.
    "spidersite.middlewares.hops.MaxHopsMiddleware": 900,
    # 950: output runs from high numbers to low, so the topic gate sees the spider's output
    # first; the requests of an off-topic page never reach the hops filter or the scheduler.
    "spidersite.middlewares.topic.TopicMiddleware": 950,
}

ITEM_PIPELINES = {
    # The one pipeline: hands every item, in order, to the worker process that analyzes,
    # stores and indexes (search/worker.py); waits while the worker is behind.
    "spidersite.pipelines.StorePipeline": 200,
}

ADDONS = {
    # A crawl that runs alone: waiting requests on disk under FRONTIER_DIR, seen requests
    # as 8-byte fingerprints (spidersite.frontier); off with SCALEOUT_REDIS_URL.
    "spidersite.frontier.FrontierAddon": 0,
    # Scale-out: the shared frontier in Redis (scrapy-redis); off unless SCALEOUT_REDIS_URL.
    "spidersite.scaleout.ScaleOutAddon": 0,
    # Browser rendering: scrapy-playwright's handler for http(s), only when some server of
    # the crawl has render_js (no browser, no Playwright driver otherwise).
    "spidersite.render.RenderAddon": 0,
    # Scrapy's cookies middleware, only with COOKIES_ENABLED (left out of
    # DOWNLOADER_MIDDLEWARES_BASE above).
    "spidersite.librarysettings.CookiesAddon": 0,
}

# --- scrapy-playwright (read only when some server has render_js; spidersite.render) --
# Debian's chromium (`playwright install` cannot download browsers here), headless.
PLAYWRIGHT_LAUNCH_OPTIONS = {"executable_path": "/usr/bin/chromium", "headless": True}
# Memory is what rendering costs (each page of a context is a renderer process): one shared
# context (plus one per proxy and one per server with basic_auth), 8 pages open in each;
# scrapy-playwright's defaults are no cap on contexts and CONCURRENT_REQUESTS (32) pages.
PLAYWRIGHT_MAX_CONTEXTS = 8
PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 8
# Images, media and fonts are not fetched by the browser (the text is what is indexed).
PLAYWRIGHT_ABORT_REQUEST = "spidersite.render.abort_request"

# Scrapy's extensions less the telnet console and the remote control: off above, and not
# even loaded.  Scrapy imports every extension it lists (even one set to None in EXTENSIONS)
# to ask it whether it is on, and these two bring in Twisted's conch and aiohttp, a third of
# a second of every crawl's start-up.
EXTENSIONS_BASE = {
    path: order
    for path, order in _SCRAPY_EXTENSIONS.items()
    if path
    not in (
        "scrapy.extensions.telnet.TelnetConsole",
        "scrapy.extensions.remote_control.RemoteControl",
    )
}

EXTENSIONS = {
    # Writes the crawl's stats and finish reason into the `crawls` table, then stops the
    # store's worker (after Scrapy's own spider_closed stats, so they are recorded too).
    "spidersite.extensions.CrawlRecorder": 0,
    # The Whoosh index of the crawl: its settings, the check it opens, its failures.
    "spidersite.extensions.IndexExtension": 0,
    # The page store (WARC files); off unless PAGESTORE_ENABLED.
    "spidersite.pagestore.PageStore": 0,
}

# --- spidersite's own settings ------------------------------------------------------
# SITE_*, STORE_*, INDEX_*, ANALYZE_*, SCALEOUT_*, TOPIC_*, CHARSET_*, CRAWLDELAY_*,
# PAGESTORE_*, SITEMAP_*, WATCHDOG_*, FRONTIER_*, FTP_MAX_ENTRIES, NNTP_*, the components'
# *_ENABLED switches, SPIDERSITE_DATA_DIR, SITES_FILE and SERVER_DEFAULTS have their defaults in one
# place, the fields of spidersite.crawlsettings.CrawlSettings, which reads and checks them
# once per crawl (a bad value is refused before the crawl starts). Set them here or with
# -s NAME=VALUE; the README ("Settings") gives each one's type, default and meaning.
