"""Which crawls are running: each crawl holds a lock keyed by its id for as long as it runs.

A crawl's row in ``crawls`` is unfinished (``finished_at`` NULL) while it runs, and stays so
when its process is killed before it records its end.  Only the running crawl can tell
the two apart, so each crawl's worker (the process that writes its rows:
:mod:`search.workerprocess`) holds its crawl's lock from before its row can be seen (the
lock is taken inside the transaction that inserts the row) until its end is recorded;
the operating system or the database server releases it when that process dies,
however it dies.  Another crawl that can take the lock of an unfinished row knows that
row's crawl is dead: :func:`close_dead_crawls` closes such rows (finish reason
:data:`search.crawldb.ABANDONED`), called by each crawl as it starts
(:meth:`search.store.DocumentStore.start_crawl`) and by the admin's Crawls page for the
crawls run from the command line (:func:`search.web.jobs.reconcile`).

- **PostgreSQL**: a session-level advisory lock, ``pg_advisory_lock(CRAWL_LOCK_SPACE,
  id)``, on a connection of its own, out of the engine's pool.  The server releases it when
  that connection ends (the process died, or the connection was lost: then
  :meth:`CrawlLocks.keep` takes it again, and reopens the row if another crawl closed it
  meanwhile).  The processes of a scaled-out crawl each have their own row and their own
  lock: none closes a sibling's row while it runs.
- **SQLite**: an ``fcntl`` lock (:class:`search.locks.WriterLock`) on
  ``crawl-locks/<database file's name>.<id>.lock`` in the database file's folder (apart
  from the database's own files), removed when the crawl's end is recorded (or its
  row closed by another crawl).  The database file's own writer lock
  (:func:`search.locks.database_lock`) is not enough: it is taken by ``scrapy crawl``'s
  process, not by the worker that writes, and not by a crawl run in-process
  (``CrawlerProcess``).  A SQLite database in memory has no lock: no row of it is closed.

A row without a lock (written before crawls took one) is a dead crawl's.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, or_, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from search import db
from search.crawldb import ABANDONED, RESUMED
from search.locks import Locked, WriterLock
from search.models import Crawl
from search.worker import one_line

logger = logging.getLogger(__name__)

#: The first key of the crawls' PostgreSQL advisory locks (the second is the crawl's id):
#: two-key locks never collide with one-key ones (:data:`search.db.MIGRATION_LOCK`).
CRAWL_LOCK_SPACE = 0x5D1D_C4A1


class CrawlLocks:
    """The crawls' locks of one database: a crawl's own (:meth:`hold`), and the test of
    another's (:meth:`dead`).  This base class has none: every crawl looks alive."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: The crawl whose lock this holds.
        self.crawl_id: int | None = None

    @staticmethod
    def of(engine: Engine) -> CrawlLocks:
        """The locks of *engine*'s database."""
        if engine.dialect.name == "postgresql":
            return AdvisoryLocks(engine)
        path = db.sqlite_path(engine.url.render_as_string(hide_password=False))
        if path is not None:
            return FileLocks(engine, path)
        return CrawlLocks(engine)

    def hold(self, crawl_id: int) -> None:
        """Take the lock of crawl *crawl_id* (this process's), letting go of any other it
        held.  Never raises: a crawl runs without it (another crawl may then close its
        row), saying so once."""
        self.release()
        self.crawl_id = crawl_id

    def keep(self) -> bool:
        """Make sure the lock is still held (a lost connection lost it); True when it had
        to be taken again."""
        return False

    def release(self, finished: bool = False) -> None:
        """Let go of the lock (*finished*: the crawl's end is recorded)."""
        self.crawl_id = None

    @contextlib.contextmanager
    def dead(self, conn: Connection, crawl_id: int) -> Iterator[bool]:
        """Whether crawl *crawl_id* is dead (its lock could be taken, through *conn*); the
        lock is kept until the block ends, so that the row is closed while no one else
        decides about it."""
        yield False


class AdvisoryLocks(CrawlLocks):
    """PostgreSQL's session-level advisory locks."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._conn: Any = None  # a DBAPI connection, out of the pool
        self._fairy: Any = None  # its pool's wrapper, detached
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def hold(self, crawl_id: int) -> None:
        super().hold(crawl_id)
        self._take()

    def _take(self) -> bool:
        """Open the lock's connection and take the lock; False (said once) when it
        cannot be done now."""
        assert self.crawl_id is not None
        try:
            fairy = self.engine.raw_connection()
            conn = fairy.driver_connection
            fairy.detach()  # closed with the lock, never handed back to the pool
            assert conn is not None
            conn.rollback()  # the pool's ping may have begun a transaction
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_lock(%s, %s)", (CRAWL_LOCK_SPACE, self.crawl_id))
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as exc:
            logger.warning(
                "Crawl %d cannot take its lock in the database (%s): another crawl may take "
                "it for a dead one",
                self.crawl_id,
                one_line(exc),
            )
            return False
        self._conn, self._fairy = conn, fairy
        # Let go of it too when this object goes without a release (a store dropped).
        self._finalizer = weakref.finalize(self, _close_quietly, conn)
        return True

    def keep(self) -> bool:
        if self.crawl_id is None:
            return False
        if self._conn is not None:
            try:
                with self._conn.cursor() as cur:
                    cur.execute("SELECT 1")
                return False
            except self.engine.dialect.loaded_dbapi.Error:
                self._close()
        return self._take()

    def release(self, finished: bool = False) -> None:
        self._close()
        super().release(finished)

    def _close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # the server lets go of the lock
            self._finalizer = None
        self._conn = self._fairy = None

    @contextlib.contextmanager
    def dead(self, conn: Connection, crawl_id: int) -> Iterator[bool]:
        key = {"space": CRAWL_LOCK_SPACE, "id": crawl_id}
        taken = bool(conn.scalar(text("SELECT pg_try_advisory_lock(:space, :id)"), key))
        if not taken:
            yield False
            return
        try:
            yield True
        except BaseException:
            _unlock(conn, key, failing=True)
            raise
        _unlock(conn, key)


class FileLocks(CrawlLocks):
    """``fcntl`` locks on files beside a SQLite database."""

    def __init__(self, engine: Engine, path: Path) -> None:
        super().__init__(engine)
        #: The folder of the lock files.
        self.folder = path.parent / "crawl-locks"
        #: The database file's name, the start of each lock file's.
        self.name = path.name
        self._lock: WriterLock | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _lock_of(self, crawl_id: int) -> WriterLock:
        return WriterLock(self.folder / f"{self.name}.{crawl_id}.lock", f"crawl {crawl_id}")

    def hold(self, crawl_id: int) -> None:
        super().hold(crawl_id)
        lock = self._lock_of(crawl_id)
        try:
            self._lock = lock.acquire()
        except (Locked, OSError) as exc:
            logger.warning(
                "Crawl %d cannot take its lock %s (%s): another crawl may take it for a dead one",
                crawl_id,
                lock.path,
                exc,
            )
            return
        # Let go of it too when this object goes without a release (a store dropped).
        self._finalizer = weakref.finalize(self, lock.release)

    def release(self, finished: bool = False) -> None:
        if self._lock is not None:
            if finished:  # held: no one else decides about it now
                with contextlib.suppress(OSError):
                    self._lock.path.unlink()
            self._lock = None
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        super().release(finished)

    @contextlib.contextmanager
    def dead(self, conn: Connection, crawl_id: int) -> Iterator[bool]:
        lock = self._lock_of(crawl_id)
        try:
            lock.acquire()
        except (Locked, OSError):
            yield False
            return
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                lock.path.unlink()
            lock.release()


def _unlock(conn: Connection, key: dict[str, int], failing: bool = False) -> None:
    """Let go of the session-level lock *key* that :meth:`AdvisoryLocks.dead` took through
    *conn* (a pooled connection).  When that cannot be done (what was done under the lock
    failed and aborted the transaction, or the connection was lost), the connection is
    invalidated: closed, its session ends and the server lets go of the lock, which would
    otherwise stay held, the dead crawl taken for a running one, for as long as the
    connection stays in the pool.  The failure is raised, unless *failing* (the block
    failed: its own error is raised)."""
    try:
        conn.execute(text("SELECT pg_advisory_unlock(:space, :id)"), key)
    except SQLAlchemyError:  # a DBAPIError, or a connection SQLAlchemy already invalidated
        conn.invalidate()
        if not failing:
            raise


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()


def close_dead_crawls(
    locks: CrawlLocks,
    found_at: datetime,
    found_by: int | str,
    among: ColumnElement[bool],
    resumes: int | None = None,
) -> list[int]:
    """Close the row of every dead crawl *among* the rows it selects: unfinished, and its
    lock free (:meth:`CrawlLocks.dead` of *locks*: its process ended without recording its
    end).  The crawl *resumes* names (:meth:`search.crawldb.CrawlDB.crawl_to_resume`) gets
    finish reason :data:`search.crawldb.RESUMED` and ``resumed_by`` (*found_by*) as its
    stats, also when it was closed as abandoned before; every other one
    :data:`search.crawldb.ABANDONED` and ``abandoned_found_by`` (*found_by*: the id of the
    crawl that found it, or ``"admin"``); both finished at *found_at*.  A row whose lock is
    held (a crawl running, on this database from another machine, or a sibling process of
    a scaled-out crawl) is left alone, and so is the admin's placeholder of a crawl
    starting (:mod:`search.web.jobs`).  A dead crawl's own end, should it be recorded
    after all, replaces this (:func:`search.store.finish_crawl`).  Returns the ids of the
    rows closed as abandoned; a failure (the database's, or the pool's: no connection
    free in time) is logged in one line, and closes none."""
    try:
        return _close_dead_crawls(locks, found_at, found_by, among, resumes)
    except SQLAlchemyError as exc:  # the next one to look closes them
        logger.warning("The rows of dead crawls could not be closed: %s", one_line(exc))
        return []


def closed_message(ids: list[int]) -> str:
    """The line that says which dead crawls' rows :func:`close_dead_crawls` closed, as a
    crawl starting and the admin log it."""
    return (
        f"Closed the rows of {len(ids)} dead crawls (killed before they recorded their end; "
        f"finish reason {ABANDONED}): {', '.join(f'#{n}' for n in ids)}"
    )


def _close_dead_crawls(
    locks: CrawlLocks,
    found_at: datetime,
    found_by: int | str,
    among: ColumnElement[bool],
    resumes: int | None,
) -> list[int]:
    unfinished: ColumnElement[bool] = Crawl.finished_at.is_(None)
    if resumes is not None:
        unfinished = or_(unfinished, and_(Crawl.id == resumes, Crawl.finish_reason == ABANDONED))
    abandoned: list[int] = []
    with locks.engine.begin() as conn:
        rows = conn.execute(
            select(Crawl.id, Crawl.args).where(unfinished, among).order_by(Crawl.id)
        ).all()
        for crawl_id, args in rows:
            if (args or {}).get("placeholder"):
                continue
            with locks.dead(conn, crawl_id) as dead:
                if not dead:
                    continue
                if crawl_id == resumes:
                    reason, stats = RESUMED, {"resumed_by": found_by}
                    still = or_(Crawl.finished_at.is_(None), Crawl.finish_reason == ABANDONED)
                else:
                    reason, stats = ABANDONED, {"abandoned_found_by": found_by}
                    still = Crawl.finished_at.is_(None)
                closed = conn.execute(
                    update(Crawl)
                    .where(Crawl.id == crawl_id, still)
                    .values(finish_reason=reason, finished_at=found_at, stats=stats)
                ).rowcount
            if closed and reason == ABANDONED:
                abandoned.append(crawl_id)
    return abandoned
