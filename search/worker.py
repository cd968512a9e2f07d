"""The crawl's worker process: analysis, storage and the hand-off to the indexer.

The crawler's reactor thread only downloads, extracts links and hands pages on.  Each batch
of crawled rows (a page's sections as text, its links and metadata, not analyzed; failures;
re-visits; gone pages) goes to one worker process, which

1. takes the batch's pages analyzed (their main-content split and their words) from the
   analysis processes, which the crawler feeds each batch's pages while the worker stores
   the batch before (:mod:`search.analysispool`; with ``analyze_processes`` 0 the worker
   analyzes them itself);
2. stores the batch in one transaction through :class:`search.store.DocumentStore`
   (idempotent upserts; the store retries with back-off while the database is unreachable);
3. sends the stored pages, as :class:`search.doccolumns.IndexDoc`, to the indexer, its own child
   process (:class:`search.indexer.IndexerProcess`), the one writer of the Whoosh index.

Every hand-off is bounded and pushes back: the crawler keeps at most ``queue_batches``
batches in flight (:meth:`CrawlWorker.wait_for_room` waits, and with it Scrapy's scraper
slot fills and the downloader stops); the indexer's inbox holds at most
``IndexConfig.queue_batches`` batches (the worker waits, and its batches stay in flight).
One worker, in order: batches are applied as they were crawled, and SQLite takes one
writer at a time anyway.

What a call did comes back as a :class:`Report` (counters and values for the crawler's
stats).  The worker exits when the crawler dies (it watches its parent), and the indexer
follows it.  No Scrapy here: the crawler's side is :mod:`spidersite.pipelines`.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from search.budgets import LIMITMB, WORD_CACHE_BYTES
from search.mergepolicy import MAX_MERGE_DOCS
from search.process import spawning, spool_folder, watch_parent
from search.rows import DocumentRow, ErrorRow, GoneRow, RevisitRow

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """The indexer of a crawl."""

    index_dir: str
    batch_size: int = 1000  # documents per Whoosh commit
    max_terms: int | None = 20_000  # distinct stems indexed per page
    limitmb: int = LIMITMB  # megabytes of postings the Whoosh writer buffers
    #: Segments of more documents are not merged again (search.mergepolicy.MAX_MERGE_DOCS).
    max_merge_docs: int | None = MAX_MERGE_DOCS
    queue_batches: int = 8  # batches waiting in the indexer's inbox


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    database_url: str
    analyze: bool = True
    max_words: int | None = 50_000
    retry_times: int = 10
    #: Bytes of the store's cache of stem ids (``STORE_WORD_CACHE``).
    word_cache_bytes: int = WORD_CACHE_BYTES
    index: IndexConfig | None = None
    #: Recompute the link-graph prior (:mod:`search.linkrank`) when the crawl ends.
    linkrank: bool = True
    #: Analysis processes ahead of the worker (:mod:`search.analysispool`); 0: the worker
    #: analyzes each batch itself.
    analyze_processes: int = 1


@dataclass(slots=True)
class WorkBatch:
    """Rows to store in one transaction, in the order they were crawled."""

    docs: list[DocumentRow] = field(default_factory=list)
    errors: list[ErrorRow] = field(default_factory=list)
    revisits: list[RevisitRow] = field(default_factory=list)
    gone: list[GoneRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.docs) + len(self.errors) + len(self.revisits) + len(self.gone)


@dataclass(slots=True)
class Report:
    """What the worker did: stats to add (``inc``) and to set (``values``), and the
    failure of a batch it could not store (``error``), for the crawler to log."""

    inc: Counter[str] = field(default_factory=Counter)
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def one_line(exc: BaseException) -> str:
    """*exc* in one line, for a log, a report or a failure's row: its type and the first
    line of its message (a database driver's runs over several), at most 300 characters.
    The driver's message alone, all of it on one line, is :func:`search.db.driver_message`."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


#: In the worker process: the analysis processes' spool folder of the analyzed batches and
#: the event set when one of them died (None: the worker analyzes).
analysis_channel: tuple[Any, Any] | None = None


def _start_worker(channel: tuple[Any, Any] | None) -> None:
    """The initializer of the worker process: keep the analysis processes' channel, and
    watch the crawler."""
    global analysis_channel
    analysis_channel = channel
    watch_parent()


def _start_analysis(spool: str) -> None:
    """In a new analysis process: :func:`search.analysispool.start_analysis_process` (the
    analysis's modules are imported there, never in the crawler)."""
    from search.analysispool import start_analysis_process

    start_analysis_process(spool)


def _analyze(seq: int, rows: list[DocumentRow], analyze: bool, max_words: int | None) -> int:
    """In an analysis process: :func:`search.analysispool.analyze_batch`."""
    from search.analysispool import analyze_batch

    return analyze_batch(seq, rows, analyze, max_words)


def _ready() -> int:
    return os.getpid()


def _open(config: WorkerConfig, *args: Any) -> tuple[int, str, str, list[int]]:
    """In the worker process: open the worker (:func:`search.workerprocess.open_worker`).
    The worker's modules (the store, the index, the extractor) are imported there, never
    in the crawler, which needs only this module."""
    from search.workerprocess import open_worker

    return open_worker(config, *args)


def _prepare() -> None:
    """In the worker process: import the worker's modules before it is opened."""
    import search.workerprocess  # noqa: F401


def _call(method: str, *args: Any) -> Any:
    """In the worker process: run a method of its :class:`search.workerprocess.Worker`."""
    from search.workerprocess import call

    return call(method, *args)


# -- in the crawler --------------------------------------------------------------------


class AnalysisProcesses:
    """The crawler's analysis processes (*processes* of them, spawned now) and the spool
    folder where they leave the batches they analyzed for the worker (:attr:`spool`,
    handed to the worker when it is spawned, removed by :meth:`close`).  See
    :mod:`search.analysispool`."""

    def __init__(self, processes: int, analyze: bool = True, max_words: int | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        processes = max(1, processes)
        self.analyze = analyze
        self.max_words = max_words
        #: The folder where the analysis processes leave the batches they analyzed.
        self.spool = spool_folder("analysis")
        #: Set when an analysis process died (or a batch could not be handed to one): the
        #: worker then fails the batches it waits for.
        self.broken: Any = context.Event()
        self.executor = ProcessPoolExecutor(
            max_workers=processes,
            mp_context=context,
            initializer=_start_analysis,
            initargs=(self.spool,),
        )
        # Start them now, so that their start-up overlaps the crawl's, not a batch.
        with spawning():
            for _ in range(processes):
                self.executor.submit(_ready)

    def pids(self) -> list[int]:
        """The analysis processes' ids (for tests and measurements)."""
        return [p.pid for p in self.executor._processes.values() if p.pid is not None]

    def submit(self, seq: int, rows: list[DocumentRow]) -> None:
        """Have batch *seq*'s rows analyzed and left for the worker.  If the analysis
        process dies (or the rows cannot be handed to one), :attr:`broken` tells the
        worker, which then fails the batches not left yet."""
        try:
            future = self.executor.submit(_analyze, seq, rows, self.analyze, self.max_words)
        except Exception as exc:  # the pool is broken already
            self._failed(seq, exc)
            return

        def done(f: Future[int]) -> None:
            exc = f.exception()
            if exc is not None:
                self._failed(seq, exc)

        future.add_done_callback(done)

    def _failed(self, seq: int, exc: BaseException) -> None:
        logger.error("Batch %d could not be analyzed: %s: %s", seq, type(exc).__name__, exc)
        self.broken.set()

    def close(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=True)
        shutil.rmtree(self.spool, ignore_errors=True)


class CrawlWorker:
    """The crawler's handle on its worker process (one, spawned, calls run in order).

    ``write`` hands a batch on and returns at once; ``wait_for_room`` is what a caller
    awaits before it, so that at most *queue_batches* batches are in flight.
    """

    def __init__(self, config: WorkerConfig, queue_batches: int = 4) -> None:
        self.config = config
        self.queue_batches = max(1, queue_batches)
        self.pending: deque[asyncio.Future[Any]] = deque()
        #: The analysis processes that analyze each batch's pages ahead of the worker.
        self.analysis: AnalysisProcesses | None = None
        if config.analyze and config.analyze_processes > 0:
            self.analysis = AnalysisProcesses(
                config.analyze_processes, config.analyze, config.max_words
            )
        self.batches = 0  # batches handed on, each's sequence number
        self.executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(
                None if self.analysis is None else (self.analysis.spool, self.analysis.broken),
            ),
        )

    def start(self) -> None:
        """Start the process and have it import the worker's modules, now: its start-up
        then overlaps the crawler's own, and :meth:`open` finds it ready."""
        with spawning():  # the first call starts the process
            self.executor.submit(_prepare)

    async def open(
        self,
        spider: str,
        args: dict[str, Any],
        servers: Iterable[tuple[str, dict[str, Any]]],
        logs_dir: str,
        resumes: int | None = None,
    ) -> tuple[int, str, str, list[int]]:
        """Start the worker (its database, its indexer) and the ``crawls`` row (closing
        the rows of dead crawls, the one it *resumes* among them:
        :meth:`search.workerprocess.Worker.open_crawl`)."""
        with spawning():  # the first call starts the process, without start()
            future = self.executor.submit(
                _open, self.config, spider, args, list(servers), logs_dir, resumes
            )
        return await asyncio.wrap_future(future)

    def has_room(self) -> bool:
        return len(self.pending) < self.queue_batches

    async def wait_for_room(self) -> None:
        while not self.has_room():
            await asyncio.wait([self.pending[0]])

    def write(self, batch: WorkBatch, done: Callable[[asyncio.Future[Any]], None]) -> None:
        """Have *batch* analyzed and stored (the worker's ``write``), after every call
        submitted before; *done* gets the future of its :class:`Report`, on the event
        loop.  With analysis processes its pages go to one of them, the rest to the
        worker, which takes the analyzed pages from them."""
        self.batches += 1
        if self.analysis is None:
            self.submit("write", batch, done=done)
            return
        docs, batch.docs = batch.docs, []
        self.analysis.submit(self.batches, docs)
        self.submit("write", batch, self.batches, done=done)

    def submit(self, method: str, *args: Any, done: Callable[[asyncio.Future[Any]], None]) -> None:
        """Run a :class:`Worker` method after every call submitted before; *done* gets its
        future, on the event loop."""
        future = asyncio.wrap_future(self.executor.submit(_call, method, *args))
        self.pending.append(future)

        def finished(f: asyncio.Future[Any]) -> None:
            self.pending.remove(f)
            done(f)

        future.add_done_callback(finished)

    async def call(self, method: str, *args: Any) -> Any:
        """Run a :class:`Worker` method after every call submitted before; its result."""
        return await asyncio.wrap_future(self.executor.submit(_call, method, *args))

    async def drain(self) -> None:
        """Wait for every batch in flight."""
        while self.pending:
            await asyncio.wait(list(self.pending))

    def shutdown(self, wait: bool = True) -> None:
        """Stop the worker after the calls submitted; with *wait* False, return at once
        (the process exits by itself, and Python joins it at exit)."""
        self.executor.shutdown(wait=wait)
        if self.analysis is not None:
            self.analysis.close(wait=wait)
            self.analysis = None
