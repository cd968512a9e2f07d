"""Where a crawl's database and index are, from its Scrapy settings, and the crawl's one
database engine (one place for all components: spider, pipelines, extensions).

:func:`crawl_db` gives every component of a crawl the same :class:`search.crawldb.CrawlDB`
(the read side; its ``engine`` feeds the store's writes too), opened on first use and
disposed by :func:`close_crawl_db`.  The indexer runs in a process of its own and opens its
own engine.

:func:`lock_writers` takes, for the life of the crawl process, the locks of what only one
process may write: the Whoosh index the crawl feeds, and the SQLite file it stores into (a
PostgreSQL database is shared by design: the processes of a scaled-out crawl write to it
together, with ``INDEX_ENABLED=False``).
"""

from __future__ import annotations

import weakref
from typing import Any

from search import db
from search.crawldb import CrawlDB
from search.locks import Locked, WriterLock, database_lock, index_lock
from search.servers import ConfigError
from spidersite.crawlsettings import CrawlSettings, crawl_settings

#: crawler -> (its CrawlDB, whether the schema was brought up to date)
_databases: weakref.WeakKeyDictionary[Any, tuple[CrawlDB, bool]] = weakref.WeakKeyDictionary()


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


#: The writer locks this process holds (released by the OS when it ends).
_held: dict[str, WriterLock] = {}


def lock_writers(config: CrawlSettings) -> None:
    """Lock the index this crawl writes and its SQLite file; ConfigError (one line) when
    another process holds one, or its lock file cannot be created."""
    locks = []
    if config.writes_index:
        locks.append(index_lock(config.index_dir))
    sqlite = db.sqlite_path(config.store_database_url) if config.store_enabled else None
    if sqlite is not None:
        locks.append(database_lock(sqlite))
    for lock in locks:
        if str(lock.path) in _held:
            continue
        try:
            _held[str(lock.path)] = lock.acquire()
        except Locked as exc:
            raise ConfigError(
                f"another crawl is running: {exc}; wait for it to end, or give this crawl "
                f"its own SPIDERSITE_DATA_DIR (or INDEX_DIR, STORE_DATABASE_URL)"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot lock {lock.what}: {lock.path}: {exc.strerror}") from None
