"""The indexer process: the one writer of the Whoosh index during a crawl (with
:mod:`search.reindex`, the design documents' CIndexer; its per-page word cap ``mwords`` is
``ANALYZE_MAX_WORDS``, applied when a page is analyzed, :func:`search.analysis.analyze_document`).

Whoosh is pure Python and allows one writer at a time.  During a crawl the documents are
sent, already analyzed, by the crawl's worker (:mod:`search.worker`) to one
:class:`IndexerProcess` (its child process, so that indexing overlaps analysis and
storage) through a bounded inbox; the indexer adds them through one writer, commits every
``batch_size`` documents and marks them ``indexed`` in the database.  It first indexes
what a killed crawl left unindexed, with :func:`search.reindex.reindex`.

A batch waiting for the indexer is a file in a spool folder of the handle's
(:func:`search.process.spool_folder`), and the inbox carries its path: while the indexer
merges segments (up to ~30 s at 100,000 pages) the worker goes on with
``max_pending`` batches queued on disk, not in its memory (~1.3 MB each, pickled).  A
batch lost with its file on a kill is in the database already, not marked indexed: the
next crawl's indexer indexes it first.

A mark is retried while the database is unreachable, but tried once while the database is
known to fail (the worker gave up a batch: :meth:`IndexerProcess.database_failing`): a
crawl that closes on a database that is down does not wait minutes for its marks.  A
database that goes down after the last batch was stored fails no batch: the crawl's close
then bounds the marks' retries (:data:`CLOSE_MARK_WAIT`), counted while the indexer is at
work on the database, which it tells the parent (a ``"database"`` message): not while it
commits, so that a long last commit does not leave a database that restarts meanwhile no
retry.  What the indexer committed and could not mark is searchable and not marked; it
is tried again with the next mark, and reported when the indexer stops (:class:`Marks`);
the next crawl's indexer indexes it again and marks it, as ``python -m search check``
does.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine

from search import db, faults
from search.crawldb import CrawlDB
from search.doccolumns import DocColumns
from search.index import LIMITMB, MAX_MERGE_DOCS, Index
from search.process import freeze_startup, release_memory, spawning, spool_folder
from search.reindex import iter_doc_columns, reindex, remove_unindexable
from search.store import DocumentStore, refused, unreachable
from search.worker import one_line

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Batch:
    """A message to the indexer: documents to add or replace (in columns), ids to
    delete."""

    docs: DocColumns
    deletes: list[int]
    #: Documents to add from the database (stored before; exact duplicates promoted to
    #: originals: :meth:`search.duplicates.DuplicateMarker.promote_orphans`).
    reads: list[int] = field(default_factory=list)


def _apply(
    writer: Any, message: str, read: Callable[[list[int]], list[DocColumns]] | None = None
) -> list[int]:
    """Apply the batch whose file *message* names (then removed) to *writer*, the
    documents it names to read from the database read by *read* (:meth:`Marks.read`);
    returns the ids of the documents it added."""
    with open(message, "rb") as f:
        batch: Batch = pickle.load(f)
    os.unlink(message)
    for docid in batch.deletes:
        writer.delete(docid)
    writer.add_columns(batch.docs)
    added = list(batch.docs.docids)
    if batch.reads:
        assert read is not None, "documents to read need the database"
        for columns in read(batch.reads):
            writer.add_columns(columns, update=True)
            added.extend(columns.docids)
    return added


#: Seconds the indexer process waits for the index lock (held by a reindex, or by the
#: indexer of a crawl that was killed and has not noticed yet).
LOCK_WAIT = 120.0

#: Times a mark (the documents of a commit marked ``indexed``) is retried while the
#: database is unreachable (0.5 s, doubling up to 30 s: ~2.5 minutes), unless the database
#: is known to fail (:meth:`IndexerProcess.database_failing`), or the mark before failed.
MARK_RETRY_TIMES = 10

#: Seconds a crawl that closes waits for its indexer's marks while the database is
#: unreachable (:meth:`IndexerProcess.close`), counted, once it has asked the indexer to
#: stop, only while the indexer is at work on the database: from the start of each mark
#: (and of each read of promoted duplicates), and for the reads of its start-up (which
#: index too) from their first retry; not while it commits, nor while it adds the batches
#: its inbox still holds, which on a large crawl can take longer than the wait.  Past it
#: the database is known to fail, as when the worker gives up a batch: a mark is tried
#: once, and a retry under way stops waiting.  A database that goes down after the last
#: batch was stored fails no batch, and the marks' own retries (:data:`MARK_RETRY_TIMES`)
#: would hold the crawl's end for ~2.5 minutes.  20 s waits out a PostgreSQL restart
#: (seconds; a mark's first five retries take 15.5 s), and what it does not wait for
#: costs little: the pages of a mark that failed are searchable, and the next crawl's
#: indexer indexes them again and marks them.
CLOSE_MARK_WAIT = 20.0


def _outage(exc: BaseException) -> str | None:
    """Why the database failed the indexer's work, in one line, when *exc* is an outage
    (the database unreachable past the retries, or taking no write: :func:`unreachable`,
    :func:`refused`); None for any other failure."""
    why = refused(exc)
    if not why and not unreachable(exc):
        return None
    reason = db.driver_message(exc, 300)
    return f"{why}: {reason}" if why else reason


@dataclass(slots=True)
class Marks:
    """The indexer's marks of what it committed; those the database did not take (it was
    unreachable past the retries, or known to fail, or took no write) are tried again with
    the next commit's, and counted when the indexer stops: their pages are searchable and
    not marked ``indexed``, so the next crawl's indexer indexes them again and marks them
    (as ``python -m search check`` and ``reindex --new`` do)."""

    store: DocumentStore
    #: Committed, not marked yet.
    unmarked: list[int] = field(default_factory=list)
    #: Why the last mark failed, in one line.
    error: str = ""
    #: Retries of the indexer's work on the database (its first reads, its marks, its
    #: reads of promoted duplicates) while it was unreachable.
    retries: int = 0
    #: Documents to read that the database could not give (:meth:`read`), and why (the
    #: last time), in one line.
    unread: int = 0
    unread_error: str = ""

    def mark(self, doc_ids: Sequence[int]) -> None:
        """Mark *doc_ids*, and those not marked before, ``indexed``: retried while the
        database is unreachable, tried once while marks fail or the database is known to
        fail; another failure is raised."""
        ids = [*self.unmarked, *doc_ids]
        try:
            self.store.mark_indexed(ids)
        except Exception as exc:
            outage = _outage(exc)
            if outage is None:
                raise
            self.unmarked = ids
            self.error = outage
            self.store.retry_times = 0  # the next ones are tried once, until one passes
            logger.debug("%d documents not marked indexed: %s", len(ids), self.error)
            return
        self.unmarked = []
        self.store.retry_times = MARK_RETRY_TIMES

    def read(self, doc_ids: list[int]) -> list[DocColumns]:
        """The documents *doc_ids* read from the database to be indexed (exact duplicates
        promoted to originals: :attr:`Batch.reads`), retried and tried once as the marks
        are.  Those the database could not give (unreachable past the retries, or known
        to fail) are left out and counted, not raised, as a mark that fails: they stay
        stored and not marked indexed, so the next crawl's indexer indexes them (its
        catch-up), as ``python -m search check`` does.  Another failure is raised."""
        engine = self.store.engine
        try:
            return self.store.retrying(lambda: list(iter_doc_columns(engine, ids=doc_ids)))
        except Exception as exc:
            outage = _outage(exc)
            if outage is None:
                raise
            self.unread += len(doc_ids)
            self.unread_error = outage
            self.store.retry_times = 0  # as after a mark that failed
            logger.debug("%d documents not read to be indexed: %s", len(doc_ids), outage)
            return []

    def count_retry(self, exc: Exception) -> None:
        self.retries += 1

    def report(self) -> dict[str, Any]:
        """What the parent reports of the marks (:meth:`IndexerProcess.close`)."""
        return {
            "unmarked": len(self.unmarked),
            "unmarked_error": self.error if self.unmarked else "",
            "retries": self.retries,
            "unread": self.unread,
            "unread_error": self.unread_error,
        }


def _worker(
    inbox: Any,
    outbox: Any,
    index_dir: str,
    database_url: str,
    batch_size: int,
    limitmb: int,
    max_merge_docs: int | None,
    catch_up: Sequence[int] | np.ndarray,
    failing: Any = None,
) -> None:
    """The indexer process: one writer, a commit every *batch_size* documents.

    It first indexes the documents *catch_up* (what a killed crawl left unindexed), and
    it stops, committing what it has, if its parent dies.  While the event *failing* is
    set, the database is known to fail: its marks are tried once (:class:`Marks`).
    """
    logging.basicConfig(level=logging.INFO)
    engine = db.create(database_url)
    marks = Marks(DocumentStore(engine, retry_times=MARK_RETRY_TIMES, give_up=failing))
    store = marks.store
    index = Index(index_dir)
    parent = multiprocessing.parent_process()
    total = 0
    commits = 0
    last_commit_at = 0.0
    finished = False

    # The parent is told while the indexer waits on the database (a message
    # ("database", total, True), then False), and counts a closing crawl's wait for it
    # then only (CLOSE_MARK_WAIT): not while the indexer commits.  A mark or a read waits
    # from its start; the start-up's reads, which index too, from their first retry.
    on_database = False

    def database_begins() -> None:
        nonlocal on_database
        if not on_database:
            on_database = True
            outbox.put(("database", total, True))

    @contextlib.contextmanager
    def at_database(from_start: bool = True) -> Iterator[None]:
        nonlocal on_database
        if from_start:
            database_begins()
        try:
            yield
        finally:
            if on_database:
                on_database = False
                outbox.put(("database", total, False))

    def retried(exc: Exception) -> None:
        marks.count_retry(exc)
        database_begins()

    def read(doc_ids: list[int]) -> list[DocColumns]:
        with at_database():
            return marks.read(doc_ids)

    store.on_retry = retried

    def first_message() -> Any:
        while True:
            try:
                return inbox.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return None

    try:
        # Retried as the marks are, while the database is unreachable (a PostgreSQL
        # restarted as the crawl starts): each may be done again whole.
        with at_database(from_start=False):
            caught_up = store.retrying(
                lambda: reindex(
                    engine,
                    index,
                    full=False,
                    limitmb=limitmb,
                    ids=catch_up,
                    wait=LOCK_WAIT,
                    max_merge_docs=max_merge_docs,
                )
            )
        if caught_up:
            logger.info("Indexed %d documents left unindexed by an earlier crawl", caught_up)
            release_memory()
        with at_database(from_start=False):
            removed = store.retrying(
                lambda: remove_unindexable(
                    engine, index, limitmb=limitmb, wait=LOCK_WAIT, max_merge_docs=max_merge_docs
                )
            )
        if removed:
            logger.info("Removed %d documents an earlier crawl left in the index", removed)
        freeze_startup()
        while not finished:
            msg = first_message()
            if msg is None:
                break
            with index.writer(
                limitmb=limitmb, wait=LOCK_WAIT, max_merge_docs=max_merge_docs
            ) as writer:
                pending = _apply(writer, msg, read)
                while len(pending) < batch_size:
                    try:
                        msg = inbox.get(timeout=2.0)
                    except queue.Empty:
                        break  # the crawl is slow: make what we have searchable
                    if msg is None:
                        finished = True
                        break
                    pending.extend(_apply(writer, msg, read))
            faults.point("index_committed")
            release_memory()
            with at_database():
                marks.mark(pending)
            total += len(pending)
            commits += 1
            last_commit_at = time.time()
            outbox.put(("progress", total, last_commit_at))
        outbox.put(
            (
                "done",
                total,
                {"commits": commits, "searchable_at": last_commit_at, **marks.report()},
            )
        )
    except BaseException as exc:  # report, in one line, then let the parent decide
        outbox.put(("error", total, one_line(exc)))
        if _outage(exc) is not None:
            # The database failed past the retries (its first reads: the catch-up, the
            # removal): an outage, said by the parent in one line, not a traceback.
            return
        raise
    finally:
        engine.dispose()


class _MarkWait:
    """A closing crawl's wait for its indexer's work on the database: :data:`CLOSE_MARK_WAIT`
    seconds in all, counted while the indexer is at it (:meth:`run`, :meth:`pause`), then
    the database is taken as known to fail (the event *failing* is set).

    A timer, not the loop of :meth:`IndexerProcess.close`: a retry under way is cut as the
    wait ends, whatever the loop waits for."""

    def __init__(self, failing: Any) -> None:
        self.failing = failing
        self.left = CLOSE_MARK_WAIT
        self._timer: threading.Timer | None = None
        self._since = 0.0

    def run(self) -> None:
        if self._timer is None:
            self._since = time.monotonic()
            self._timer = threading.Timer(max(0.0, self.left), self.failing.set)
            self._timer.daemon = True
            self._timer.start()

    def pause(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self.left -= time.monotonic() - self._since


class IndexerProcess:
    """The parent's handle on the indexer child process, which first indexes the
    documents *catch_up* (their current version in the database), then those it is sent.

    A crawl's worker passes the ids of every indexable document not marked indexed,
    read before the crawl stores anything (:meth:`left_unindexed`): what an earlier crawl
    stored and a kill kept out of the index.  Taken by id, not by crawl time, so that a
    page the crawl re-visits meanwhile (which moves its crawl time) is not passed over;
    read before the crawl stores, so that none of the crawl's own pages is indexed twice.
    """

    def __init__(
        self,
        index_dir: str,
        database_url: str,
        batch_size: int = 1000,
        limitmb: int = LIMITMB,
        max_pending: int = 64,
        catch_up: Sequence[int] | np.ndarray = (),
        max_merge_docs: int | None = MAX_MERGE_DOCS,
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        #: The folder of the batches waiting in the inbox, one file each.
        self.spool = spool_folder("index")
        self._sent = 0
        self.inbox: Any = ctx.Queue(maxsize=max_pending)
        self.outbox: Any = ctx.Queue()
        #: Set while the database is known to fail (:meth:`database_failing`).
        self.failing: Any = ctx.Event()
        self.process = ctx.Process(
            target=_worker,
            name="spidersite-indexer",
            args=(
                self.inbox,
                self.outbox,
                index_dir,
                database_url,
                batch_size,
                limitmb,
                max_merge_docs,
                np.asarray(catch_up, dtype=np.int64),
                self.failing,
            ),
            daemon=True,
        )
        self.indexed = 0
        self.searchable_at = 0.0
        self.error: str | None = None
        self.info: dict[str, Any] = {}
        #: The process sent its last message ("done"): it only exits now.
        self.finished = False
        #: The process is at work on the database (its "database" messages).
        self._on_database = False
        #: Once closing: the wait for the indexer's work on the database.
        self._mark_wait: _MarkWait | None = None

    @staticmethod
    def left_unindexed(engine: Engine) -> np.ndarray:
        """The documents that belong in the index and are not marked indexed (an ``int64``
        array: 8 bytes an id, held by the indexer child while it runs)."""
        return CrawlDB(engine).indexable_id_array(only_unindexed=True)

    def start(self) -> None:
        with spawning():
            self.process.start()

    def database_failing(self, failing: bool) -> None:
        """Tell the indexer whether the database is known to fail (the worker gave up a
        batch it could not store; it stores again): while it does, the indexer's marks are
        tried once, and a retry under way stops waiting, so that a crawl that closes on a
        database that is down does not wait minutes for them.  What it could not mark is
        in :attr:`info` (``unmarked``, ``unmarked_error``) when it stops."""
        if failing:
            self.failing.set()
        else:
            self.failing.clear()

    def send(self, batch: Batch) -> None:
        """Queue *batch*, waiting while the inbox is full (the indexer is behind: the
        wait is the back-pressure); raises if the indexer has failed.

        The batch is written pickled to a file of :attr:`spool`, its documents in columns
        (:class:`search.doccolumns.DocColumns`: a batch of 100 pages of ~385 stems is
        ~1.3 MB), and the inbox gets the file's path: the batches waiting hold no memory
        of the worker's.  (Through the inbox itself, each waited in the worker's memory
        until the indexer read it: ~13 MB of the worker's while the indexer merged.)"""
        self._sent += 1
        path = Path(self.spool) / f"{self._sent}.batch"
        with path.open("wb") as f:
            pickle.dump(batch, f, protocol=pickle.HIGHEST_PROTOCOL)
        message = str(path)
        while True:
            self._drain()
            if not self.error and not self.process.is_alive():
                self.error = f"exit code {self.process.exitcode}"
            if self.error:
                raise RuntimeError(f"the indexer process failed: {self.error}")
            try:
                self.inbox.put(message, timeout=1.0)
                return
            except queue.Full:
                continue

    def _drain(self) -> None:
        while True:
            try:
                msg = self.outbox.get_nowait()
            except queue.Empty:
                return
            self._handle(msg)

    def _handle(self, msg: tuple[Any, ...]) -> None:
        kind, total, extra = msg
        self.indexed = total
        if kind == "database":
            self._on_database = extra
        elif kind == "progress":
            self.searchable_at = extra
        elif kind == "done":
            self.info = extra
            self.finished = True
            self.searchable_at = extra.get("searchable_at") or self.searchable_at
        elif kind == "error":
            self.error = extra
        if kind in ("done", "error"):
            self._on_database = False
        if self._mark_wait is not None:
            if self._on_database:
                self._mark_wait.run()
            else:
                self._mark_wait.pause()

    def close(
        self, timeout: float | None = None, progress: Callable[[int], None] | None = None
    ) -> None:
        """Ask the process to commit and stop; wait for it (*timeout* seconds at most, then
        it is terminated; None: until it stops or dies).  The stop message waits for room
        in the inbox (full: the indexer is behind) only while the process lives.

        Once the process has been at work on the database (marking, reading) for
        :data:`CLOSE_MARK_WAIT` seconds in all since, the database is taken as known to
        fail (:meth:`database_failing`): a mark under way or to come is no longer
        retried.  Its commits, and its adding the batches the inbox still holds, do not
        count."""
        self._drain()
        self._mark_wait = _MarkWait(self.failing)
        if self._on_database:  # a mark (or a read) under way
            self._mark_wait.run()
        deadline = None if timeout is None else time.monotonic() + timeout
        # The stop message, put as room is made for it in the inbox (full: the indexer is
        # behind), while the process lives; then its messages until its last ("done" or
        # "error"): then it only exits.
        stopping = False
        while not self.finished and not self.error and self.process.is_alive():
            if not stopping:
                try:
                    self.inbox.put(None, timeout=0.1)
                    stopping = True
                except queue.Full:
                    pass
            try:
                self._handle(self.outbox.get(timeout=1.0 if stopping else 0.1))
                if progress:
                    progress(self.indexed)
            except queue.Empty:
                pass
            if deadline is not None and time.monotonic() > deadline:
                self.process.terminate()
                break
        self.process.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        wait, self._mark_wait = self._mark_wait, None
        wait.pause()
        self._drain()
        shutil.rmtree(self.spool, ignore_errors=True)
        if self.process.exitcode not in (0, None) and not self.error:
            self.error = f"exit code {self.process.exitcode}"
