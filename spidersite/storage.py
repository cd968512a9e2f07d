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

from search import config, db
from search.crawldb import CrawlDB

#: crawler -> (its CrawlDB, whether the schema was brought up to date)
_databases: weakref.WeakKeyDictionary[Any, tuple[CrawlDB, bool]] = weakref.WeakKeyDictionary()


def data_dir(settings: Any) -> str:
    return str(config.data_dir(settings.get("SPIDERSITE_DATA_DIR")))


def database_url(settings: Any) -> str:
    return config.database_url(settings.get("STORE_DATABASE_URL"), data_dir(settings))


def index_dir(settings: Any) -> str:
    return str(config.index_dir(settings.get("INDEX_DIR"), data_dir(settings)))


def crawl_db(crawler: Any, migrate: bool = True) -> CrawlDB:
    """The crawl's database: one engine per crawler, its schema migrated once when
    *migrate* (a check made before the store opens passes False: the database may not
    exist yet).  Raises :class:`search.db.DatabaseError` when it cannot be opened."""
    entry = _databases.get(crawler)
    if entry is None:
        entry = (CrawlDB(db.create(database_url(crawler.settings))), False)
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
