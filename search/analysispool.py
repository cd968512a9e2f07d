"""The analysis of the crawl's batches, in analysis processes ahead of the worker.

A page's analysis is its main-content split (:func:`search.content.split_content`, the
extractor's ~60 ms a large page) and the word analysis of its sections
(:func:`search.analysis.analyze_document`): about half of what a page costs after its
download.  With ``processes`` ≥ 1 (``ANALYZE_PROCESSES``) it runs in that many analysis
processes, a stage of the pipeline of its own::

    crawler --batch N--> analysis process --analyzed batch N--> worker --> indexer
        \\------------------- write N (the batch's other rows) ---^

The crawler hands each batch's documents to an analysis process
(:meth:`AnalysisProcesses.submit`, a ``concurrent.futures`` pool the crawler spawns) and
the call that stores the batch to the worker; the analysis process sends the analyzed rows
straight to the worker through a queue (:class:`AnalyzedBatches`), which takes them in
crawl order, by the batch's sequence number.  So the analysis of batch N+1 runs while the
worker stores batch N, each process on a core of its own, and the rows are pickled once
per hop, never back through the crawler.  Nothing is stored before its batch is analyzed,
and the store's transaction stays one per batch: a kill loses no more than the batches in
flight, as before.  The number of batches in flight is bounded by the crawler
(``STORE_QUEUE_BATCHES``), so the queue holds at most that many.

``processes`` = 0: no analysis process; the worker analyzes each batch before it stores
it (:func:`analyze_rows`).

An analysis process imports only what analysis needs (the extractor and the analyzer: no
database, no index, no Scrapy); it exits when the crawler dies.  A page whose analysis
raises, or an analysis process that dies, fails its batch: the worker's ``write`` raises
:class:`AnalysisError` and the crawl stops (``store_failed``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from search.analysis import analyze_document, page_sections
from search.content import release_caches, split_content
from search.process import freeze_startup, release_memory, spawning
from search.rows import DocumentRow
from search.worker import watch_parent

logger = logging.getLogger(__name__)

#: Seconds the worker waits for an analyzed batch between checks of the crawler.
_WAIT_SECONDS = 1.0


class AnalysisError(RuntimeError):
    """A batch could not be analyzed: a page's analysis raised, or an analysis process
    died (killed, out of memory) while it analyzed the batch."""


def analyze_row(row: DocumentRow, analyze: bool, max_words: int | None, inc: Counter[str]) -> None:
    """Analyze one row in place: split an HTML page's main content from its boilerplate
    (its ``text`` becomes the main content), analyze its sections into ``words`` and
    count its words; count what was done in *inc*.  Rows other than pages are left as
    they are; a noindex page is stored without words."""
    values = row.values
    if values["kind"] != "page":
        return
    if values.get("noindex"):
        row.words = None
        row.html = None
        inc["analyze/skipped_noindex"] += 1
        return
    boilerplate = None
    if row.html is not None and analyze:
        # Main content and boilerplate (search.content); a topic crawl's analysis of
        # the whole page, made on the reactor for its gate, is made again on the split.
        content = split_content(
            row.html, values.get("text") or "", values.get("charset"), values.get("language")
        )
        if content is not None:
            values["text"], boilerplate = content.main, content.boilerplate
            row.words = None
            inc["analyze/main_content"] += 1
    row.html = None
    if row.words is None:
        if not analyze:
            return
        sections = page_sections(
            row.url,
            values.get("title"),
            values.get("text"),
            values.get("description"),
            values.get("keywords"),
            boilerplate,
        )
        row.words = analyze_document(sections, row.weights, values.get("language"), max_words)
    values["word_count"] = sum(r.counts[0] for r in row.words.values())
    inc["analyze/pages"] += 1
    inc["analyze/words"] += values["word_count"]


def analyze_rows(
    rows: list[DocumentRow], analyze: bool, max_words: int | None, inc: Counter[str]
) -> None:
    """Analyze a batch's rows in place (:func:`analyze_row`), then empty the extractor's
    caches, which hold whole texts (:func:`search.content.release_caches`)."""
    try:
        for row in rows:
            analyze_row(row, analyze, max_words, inc)
    finally:
        release_caches()


@dataclass(slots=True)
class Analyzed:
    """An analyzed batch on its way to the worker: its rows, what the analysis counted,
    and why it failed (None: it did not)."""

    seq: int
    rows: list[DocumentRow]
    inc: Counter[str]
    error: str | None = None


# -- in an analysis process ----------------------------------------------------------------

#: Where this analysis process sends the batches it analyzed (set by its initializer).
_results: Any = None


def _start_analysis_process(results: Any) -> None:
    """The initializer of an analysis process: keep the worker's queue, watch the crawler,
    and leave what importing made out of later full garbage collections."""
    global _results
    _results = results
    watch_parent()
    freeze_startup()


def _ready() -> int:
    return os.getpid()


def analyze_batch(seq: int, rows: list[DocumentRow], analyze: bool, max_words: int | None) -> int:
    """In an analysis process: analyze batch *seq*'s rows and send them to the worker;
    returns the number of rows.  A page whose analysis raises fails the batch (the worker
    gets the error, not the rows)."""
    # What the previous batch left (sent by now): lxml's trees are C memory, which glibc
    # keeps unless trimmed.
    release_memory()
    inc: Counter[str] = Counter()
    try:
        analyze_rows(rows, analyze, max_words, inc)
    except Exception as exc:
        logger.exception("A batch could not be analyzed")
        _results.put(Analyzed(seq, [], inc, f"{type(exc).__name__}: {exc}"))
        return 0
    inc["analyze/pool_pages"] += inc["analyze/pages"]
    _results.put(Analyzed(seq, rows, inc))
    return len(rows)


# -- in the crawler --------------------------------------------------------------------------


class AnalysisProcesses:
    """The crawler's analysis processes (*processes* of them, spawned now) and the queue
    that takes their batches to the worker (:attr:`results`, handed to the worker when it
    is spawned)."""

    def __init__(self, processes: int, analyze: bool = True, max_words: int | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self.analyze = analyze
        self.max_words = max_words
        self.results: Any = context.Queue()
        self.executor = ProcessPoolExecutor(
            max_workers=max(1, processes),
            mp_context=context,
            initializer=_start_analysis_process,
            initargs=(self.results,),
        )
        # Start them now, so that their start-up overlaps the crawl's, not a batch.
        with spawning():
            for _ in range(max(1, processes)):
                self.executor.submit(_ready)

    def pids(self) -> list[int]:
        """The analysis processes' ids (for tests and measurements)."""
        return [p.pid for p in self.executor._processes.values() if p.pid is not None]

    def submit(self, seq: int, rows: list[DocumentRow]) -> None:
        """Have batch *seq*'s rows analyzed and sent to the worker.  If the analysis
        process dies (or the rows cannot be sent to it), the worker is told so in its
        place."""
        try:
            future = self.executor.submit(analyze_batch, seq, rows, self.analyze, self.max_words)
        except Exception as exc:  # the pool is broken already
            self._failed(seq, exc)
            return

        def done(f: Future[int]) -> None:
            exc = f.exception()
            if exc is not None:
                self._failed(seq, exc)

        future.add_done_callback(done)

    def _failed(self, seq: int, exc: BaseException) -> None:
        self.results.put(Analyzed(seq, [], Counter(), f"an analysis process died: {exc}"))

    def close(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=True)


# -- in the worker -------------------------------------------------------------------------


class AnalyzedBatches:
    """The worker's end of the analysis processes' queue: batches taken in crawl order."""

    def __init__(self, results: Any) -> None:
        self.results = results
        self.waiting: dict[int, Analyzed] = {}
        self.taken = 0  # the last sequence number taken

    def take(self, seq: int) -> tuple[list[DocumentRow], Counter[str]]:
        """Batch *seq*'s analyzed rows and counters, once it has come (batches analyzed
        by another process may come first, and wait); :class:`AnalysisError` when its
        analysis failed."""
        while seq not in self.waiting:
            try:
                got: Analyzed = self.results.get(timeout=_WAIT_SECONDS)
            except queue.Empty:
                continue  # the worker exits when the crawler dies (watch_parent)
            if got.seq > self.taken and got.seq not in self.waiting:
                self.waiting[got.seq] = got  # else: a second word on a batch taken
        analyzed = self.waiting.pop(seq)
        self.taken = max(self.taken, seq)
        if analyzed.error is not None:
            raise AnalysisError(analyzed.error)
        return analyzed.rows, analyzed.inc
