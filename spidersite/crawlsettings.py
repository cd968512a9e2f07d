"""The settings of the project's own components, read and checked once per crawl.

:class:`CrawlSettings` holds every ``SITE_``, ``STORE_``, ``INDEX_``, ``ANALYZE_``,
``SCALEOUT_``, ``TOPIC_``, ``CHARSET_``, ``CRAWLDELAY_``, ``PAGESTORE_``, ``SITEMAP_``,
``WATCHDOG_``, ``RENDER_``, ``FRONTIER_``, ``FTP_MAX_ENTRIES`` and ``NNTP_`` setting (and
the components' ``*_ENABLED`` switches), typed.  Its field defaults *are* the settings' defaults:
``spidersite/settings.py`` does not repeat them, and no component passes a default of its
own to ``getint``.  The attribute of a setting is its name in lower case
(``STORE_BATCH_SIZE`` → ``store_batch_size``).

:meth:`CrawlSettings.from_settings` reads Scrapy settings and raises
:class:`~search.servers.ConfigError` with one line per bad value, naming the setting; our
``crawl`` command calls it (through :func:`spidersite.arguments.check_arguments`) before
Scrapy starts, so a bad value is refused with exit status 2 and nothing written.  Components
read :func:`crawl_settings` (built once per crawler, after Scrapy froze its settings).

The storage locations (``SPIDERSITE_DATA_DIR``, ``STORE_DATABASE_URL``, ``INDEX_DIR``) and
``SCALEOUT_REDIS_URL`` are resolved here too, with their environment variables, by the
functions the command line uses (:mod:`search.config`).

How one setting is read and checked is :mod:`spidersite.settingparsers`; Scrapy's own
settings are checked by :mod:`spidersite.librarysettings`.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from search import config, db
from search.budgets import LIMITMB, WORD_CACHE_BYTES
from search.mergepolicy import MAX_MERGE_DOCS
from search.servers import ConfigError
from search.sitesfile import ServerRegistry
from search.urls import MAX_URL_LENGTH
from spidersite.settingparsers import Parser, choice, flag, number, parse_each, size, text, whole


def _server_defaults(settings: Any, name: str) -> dict[str, Any]:
    try:
        values = settings.getdict(name)
    except (TypeError, ValueError):
        raise ValueError('must be a JSON object of server fields, such as {"maxhops": 3}') from None
    try:
        ServerRegistry(values, source=name)
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix(f"{name}: ")) from None
    return values


def analysis_processes_default() -> int:
    """``ANALYZE_PROCESSES`` by default: two fewer than the cores this process may run on
    (the crawler's and the worker's), at least 1 and at most 4; 0 on one core.  Measured
    on 2 cores at 100,000 pages (benchmarks/README.md, "One analysis process on two
    cores"): with the analysis process the crawl kept pace with a plain CrawlSpider
    (0.93-1.07 of its pages a second in four runs, against 0.78-0.87 with the worker
    analyzing) and the tree peaked at 486-492 MB, under the 500 MB such a crawl must stay
    under.  Not measured on more cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 0 if cores < 2 else max(1, min(4, cores - 2))


def _setting(default: Any, parse: Parser) -> Any:
    """A field of :class:`CrawlSettings`: its default and how the setting is read."""
    return field(default=default, metadata={"parse": parse})


def _resolved(parse: Parser) -> dict[str, Any]:
    """The metadata of a field whose default depends on other settings or the
    environment (its parser resolves it; the class has no default of its own)."""
    return {"parse": parse, "resolved": True}


@dataclass(frozen=True, slots=True)
class CrawlSettings:
    """Every setting of the project's crawl components, typed (see the README, "Settings").

    ``None`` in a limit means "no limit" (the setting was 0).
    """

    # -- where the data goes (defaults: environment, else under the data folder) ---------
    #: Folder of the embedded database, the index, the logs and the WARC files.
    spidersite_data_dir: Path = field(
        metadata=_resolved(lambda s, n: Path(config.data_dir(text(s, n))))
    )
    #: SQLAlchemy URL of the database (``$DATABASE_URL``, else SQLite in the data folder).
    store_database_url: str = field(metadata=_resolved(lambda s, n: _database_url(s)))
    #: The Whoosh index folder (``$SPIDERSITE_INDEX_DIR``, else ``<data dir>/index``).
    index_dir: Path = field(
        metadata=_resolved(
            lambda s, n: config.index_dir(text(s, n), text(s, "SPIDERSITE_DATA_DIR"))
        )
    )
    #: Redis of a shared frontier (``$SPIDERSITE_REDIS_URL``), None: the crawl runs alone.
    scaleout_redis_url: str | None = field(metadata=_resolved(lambda s, n: _redis_url(s)))

    # -- servers and the spider -----------------------------------------------------------
    #: Sites file used when the spider has no ``sites`` argument.
    sites_file: str | None = _setting(None, text)
    #: Field -> value for every server, below the sites file's ``[defaults]``.
    server_defaults: Mapping[str, Any] = field(
        default_factory=dict, metadata={"parse": _server_defaults}
    )
    #: Bytes of the spider's cache of canonical URLs (canonicalisation is costly).
    site_canonical_cache: int = _setting(4 * 1024 * 1024, size)
    #: Distinct links kept (stored and followed) per page; None: all.
    site_max_links: int | None = _setting(5000, whole(0, zero_means_none=True))
    #: Resume the last crawl with the same arguments when it never finished.
    site_resume: bool = _setting(True, flag)
    #: Requests waiting to be downloaded are kept on disk (spidersite.frontier).
    frontier_disk: bool = _setting(True, flag)
    #: Folder of the crawls' disk frontiers; None: ``<data dir>/frontier``.
    frontier_dir: str | None = _setting(None, text)
    #: Requests the disk frontier holds in memory while none waits on disk (see
    #: spidersite.frontier.DiskFrontierScheduler); 0: every request on disk.
    frontier_memory_requests: int = _setting(1000, whole(0))
    #: Longest URL fetched (Scrapy's own setting, read by the spider); None: any.
    urllength_limit: int | None = _setting(MAX_URL_LENGTH, whole(0, zero_means_none=True))

    # -- sitemaps (spidersite.sitemaps) ---------------------------------------------------
    #: Read the servers' sitemaps (per server: the ``sitemaps`` field).
    sitemap_enabled: bool = _setting(True, flag)
    #: Bytes of one sitemap, as downloaded and once decompressed (the protocol's 50 MB).
    sitemap_max_bytes: int = _setting(50 * 1024 * 1024, size)
    #: Entries read from one sitemap or sitemap index (the protocol's 50,000).
    sitemap_max_urls: int = _setting(50_000, whole(1))
    #: Sitemaps (indexes included) read per server and crawl.
    sitemap_max_sitemaps: int = _setting(1000, whole(1))

    # -- downloader middlewares -----------------------------------------------------------
    servers_enabled: bool = _setting(True, flag)
    crawldelay_enabled: bool = _setting(True, flag)
    #: Longest robots.txt Crawl-delay honoured, in seconds.
    crawldelay_max: float = _setting(60.0, number(0))
    neterrors_enabled: bool = _setting(True, flag)
    conditional_enabled: bool = _setting(True, flag)
    redirectloop_enabled: bool = _setting(True, flag)
    concurrency_enabled: bool = _setting(True, flag)
    charset_enabled: bool = _setting(True, flag)
    #: Bytes of a body the charset detector reads.
    charset_detect_max_bytes: int = _setting(262_144, size)
    #: Bound http(s) downloads at their timeout + the grace (see spidersite.handlers).
    watchdog_enabled: bool = _setting(True, flag)
    #: Seconds past a request's download_timeout before the watchdog fails it.
    watchdog_grace: float = _setting(10.0, number(0))
    #: Entries of an FTP directory listing followed (spidersite.ftp); None: all.
    ftp_max_entries: int | None = _setting(5000, whole(0, zero_means_none=True))
    #: Newest articles of a news group listed per crawl (spidersite.nntp); None: all.
    nntp_max_articles: int | None = _setting(1000, whole(0, zero_means_none=True))

    #: Browser rendering of the pages of ``render_js`` servers (spidersite.render).
    render_enabled: bool = _setting(True, flag)
    #: When a rendered page counts as loaded (Playwright's ``wait_until`` of ``page.goto``).
    render_wait_until: str = _setting(
        "load", choice("load", "domcontentloaded", "networkidle", "commit")
    )

    # -- spider middlewares ---------------------------------------------------------------
    maxhops_enabled: bool = _setting(True, flag)
    #: The topic gate; it acts only when the spider has a topic (``-a topic``).
    topic_enabled: bool = _setting(True, flag)
    #: Links of pages this close to a seed are followed even off topic.
    topic_follow_hops: int = _setting(0, whole(0))

    # -- pipelines and extensions ---------------------------------------------------------
    analyze_enabled: bool = _setting(True, flag)
    #: Words read from a page's body (the design documents' per-page cap); None: all.
    analyze_max_words: int | None = _setting(50_000, whole(0, zero_means_none=True))
    #: Analysis processes that analyze each batch's pages ahead of the worker, which
    #: stores the batch before meanwhile (search.analysispool); 0: the worker analyzes.
    analyze_processes: int = _setting(analysis_processes_default(), whole(0))
    store_enabled: bool = _setting(True, flag)
    #: Documents, errors, re-visits and gone pages per batch (one transaction).
    store_batch_size: int = _setting(100, whole(1))
    #: Page text per batch, in characters (a batch of big pages goes before it is full).
    store_batch_bytes: int = _setting(4_000_000, whole(1))
    #: Batches in flight to the store's worker process; then the downloader waits.
    store_queue_batches: int = _setting(4, whole(1))
    #: Seconds after which a batch that has not filled up is handed on (0: when full).
    store_flush_seconds: float = _setting(2.0, number(0))
    #: Retries of a batch while the database is unreachable (back-off up to 30 s).
    store_retry_times: int = _setting(10, whole(0))
    #: Bytes of the worker's cache of stem ids (the words table); then it starts again.
    store_word_cache: int = _setting(WORD_CACHE_BYTES, size)
    #: Recompute the link-graph prior (PageRank over the stored links) when the crawl ends.
    linkrank_enabled: bool = _setting(True, flag)
    #: Feed the Whoosh index (needs store_enabled: the index is fed from stored documents).
    index_enabled: bool = _setting(True, flag)
    #: Documents per Whoosh commit.
    index_batch_size: int = _setting(1000, whole(1))
    #: Distinct stems indexed per page, highest weights first; None: all.
    index_max_terms: int | None = _setting(20_000, whole(0, zero_means_none=True))
    #: Megabytes of postings the Whoosh writer buffers (commits and merges alike).
    index_limitmb: int = _setting(LIMITMB, whole(1))
    #: Segments of more documents than this are never merged again; None: no cap.
    index_max_merge_docs: int | None = _setting(MAX_MERGE_DOCS, whole(0, zero_means_none=True))
    #: Stored batches waiting for the indexer process; then the worker waits.
    index_queue_batches: int = _setting(8, whole(1))
    #: Write every fetched HTML/text page to WARC files.
    pagestore_enabled: bool = _setting(False, flag)
    #: Folder of the WARC files; None: ``<data dir>/warc``.
    pagestore_dir: str | None = _setting(None, text)
    #: A new WARC file past this size, in bytes.
    pagestore_max_bytes: int = _setting(1024**3, size)

    # -- scale-out ------------------------------------------------------------------------
    #: Redis keys of a crawl are ``<prefix>:<crawl key>:…``.
    scaleout_key_prefix: str = _setting("spidersite", lambda s, n: _key(s.get(n)))
    #: Seconds the shared frontier stays empty, no process busy, before the processes stop.
    scaleout_idle_timeout: float = _setting(30.0, number(0))

    @classmethod
    def from_settings(cls, settings: Any) -> CrawlSettings:
        """Read and check every setting; ConfigError lists the bad ones, one a line."""
        values: dict[str, Any] = {}
        parsers: dict[str, Parser] = {}
        for f in fields(cls):
            name = f.name.upper()
            if not f.metadata.get("resolved") and settings.get(name) in (None, ""):
                values[f.name] = _default(f)
            else:
                parsers[name] = f.metadata["parse"]
        parsed = parse_each(settings, parsers)
        return cls(**values, **{name.lower(): value for name, value in parsed.items()})

    @property
    def data_dir(self) -> Path:
        return self.spidersite_data_dir

    @property
    def writes_index(self) -> bool:
        """Whether this crawl feeds the Whoosh index (one writer at a time)."""
        return self.index_enabled and self.store_enabled

    @property
    def frontier_folder(self) -> Path:
        return Path(self.frontier_dir) if self.frontier_dir else self.data_dir / "frontier"

    @property
    def pagestore_folder(self) -> Path:
        return Path(self.pagestore_dir) if self.pagestore_dir else self.data_dir / "warc"


def _default(f: Any) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


#: Schemes of a Redis URL (redis-py's ``from_url``).
REDIS_SCHEMES = ("redis", "rediss", "unix")


def _database_url(settings: Any) -> str:
    url = config.database_url(text(settings, "STORE_DATABASE_URL"), _data_dir_text(settings))
    try:
        db.check_url(url)
    except db.DatabaseError as exc:
        raise ValueError(str(exc)) from None
    return url


def _data_dir_text(settings: Any) -> str | None:
    return text(settings, "SPIDERSITE_DATA_DIR")


def _redis_url(settings: Any) -> str | None:
    url = text(settings, "SCALEOUT_REDIS_URL") or os.environ.get("SPIDERSITE_REDIS_URL") or None
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        scheme = ""
    if scheme not in REDIS_SCHEMES:
        # The URL may hold a password: only its scheme is repeated.
        raise ValueError(
            f"{(scheme or 'this') + '://…'!r} is not a Redis URL "
            f"(redis://[:password@]host:6379/db, rediss:// or unix://)"
        )
    return url


#: Crawl keys and key prefixes: letters, digits and ``._-:`` (no ``%``: scrapy-redis
#: formats its keys with ``%``).
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_key(name: str, value: str) -> str:
    """*value* if it can be a scale-out crawl key or key prefix, else ConfigError naming
    the setting or argument *name*."""
    if not _KEY_RE.match(value):
        raise ConfigError(
            f"{name}: {value!r} must be 1-128 letters, digits or ._-: "
            f"(starting with a letter or digit)"
        )
    return value


def _key(value: Any) -> str:
    try:
        return check_key("SCALEOUT_KEY_PREFIX", str(value))
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix("SCALEOUT_KEY_PREFIX: ")) from None


#: crawler -> its settings, parsed once.
_cache: weakref.WeakKeyDictionary[Any, CrawlSettings] = weakref.WeakKeyDictionary()


def crawl_settings(crawler: Any) -> CrawlSettings:
    """The crawl's :class:`CrawlSettings`, parsed once per crawler (once Scrapy has
    frozen its settings; before that, e.g. in an add-on, they are parsed each time)."""
    parsed = _cache.get(crawler)
    if parsed is None:
        parsed = CrawlSettings.from_settings(crawler.settings)
        if getattr(crawler.settings, "frozen", False):
            _cache[crawler] = parsed
    return parsed
