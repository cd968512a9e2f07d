"""Where a crawl's database and index are, from its Scrapy settings, and the crawl's one
database engine (one place for all components: spider, pipelines, extensions).

:func:`crawl_db` gives every component of a crawl the same :class:`search.crawldb.CrawlDB`
(the read side; its ``engine`` feeds the store's writes too), opened on first use and
disposed by :func:`close_crawl_db`.  The indexer runs in a process of its own and opens its
own engine.
"""

from __future__ import annotations

import weakref
from typing import Any

from search import db
from search.crawldb import CrawlDB
from spidersite.crawlsettings import CrawlSettings, crawl_settings

#: crawler -> (its CrawlDB, whether the schema was brought up to date)
_databases: weakref.WeakKeyDictionary[Any, tuple[CrawlDB, bool]] = weakref.WeakKeyDictionary()


# The three below read Scrapy settings for components not yet given their CrawlSettings.


def data_dir(settings: Any) -> str:
    return str(CrawlSettings.from_settings(settings).data_dir)


def database_url(settings: Any) -> str:
    return CrawlSettings.from_settings(settings).store_database_url


def index_dir(settings: Any) -> str:
    return str(CrawlSettings.from_settings(settings).index_dir)


def crawl_db(crawler: Any, migrate: bool = True) -> CrawlDB:
    """The crawl's database: one engine per crawler, its schema migrated once when
    *migrate* (a check made before the store opens passes False: the database may not
    exist yet).  Raises :class:`search.db.DatabaseError` when it cannot be opened."""
    entry = _databases.get(crawler)
    if entry is None:
        entry = (CrawlDB(db.create(crawl_settings(crawler).store_database_url)), False)
        _databases[crawler] = entry
    crawldb, migrated = entry
    if migrate and not migrated:
        db.migrate(crawldb.engine)
        _databases[crawler] = (crawldb, True)
    return crawldb


def close_crawl_db(crawler: Any) -> None:
    """Dispose of the crawl's engine (at the end of the crawl)."""
    entry = _databases.pop(crawler, None)
    if entry is not None:
        entry[0].engine.dispose()
