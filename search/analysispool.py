"""The analysis of a batch's pages, in the worker process and in analysis processes beside it.

A page's analysis is its main-content split (:func:`search.content.split_content`, the
extractor's ~60 ms a large page) and the word analysis of its sections
(:func:`search.analysis.analyze_document`).  The crawl's worker (:mod:`search.worker`)
analyzes each batch before it stores it; with ``processes`` > 1 (``ANALYZE_PROCESSES``) an
:class:`AnalysisPool` splits the batch's pages into that many runs, in crawl order: the
worker analyzes the first itself while ``processes - 1`` analysis processes (a
``concurrent.futures`` pool, spawned by the worker) analyze the others, and their results
are applied to the batch's rows in the order they were crawled.  The store's transaction
stays one per batch, and nothing is stored before the whole batch is analyzed, so a kill
loses no more than before.  ``processes`` = 1 is one process, the worker, as before.

An analysis process imports only what analysis needs (the extractor and the analyzer: no
database, no index, no Scrapy); it exits when the worker dies.  A page whose analysis
raises, or an analysis process that dies, fails the batch: the worker's ``write`` raises
:class:`AnalysisError` and the crawl stops (``store_failed``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace

from search.analysis import WordRecord, analyze_document, page_sections
from search.content import release_caches, split_content
from search.process import freeze_startup, release_memory, spawning
from search.rows import DocumentRow
from search.worker import watch_parent

logger = logging.getLogger(__name__)


class AnalysisError(RuntimeError):
    """An analysis process died (killed, out of memory) while it analyzed a batch."""


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
        inc["analyze/skipped_noindex"] += 1
        return
    boilerplate = None
    if row.html is not None and analyze:
        # Main content and boilerplate (search.content); a topic crawl's analysis of
        # the whole page, made on the reactor for its gate, is made again on the split.
        content = split_content(
            row.html, values.get("text") or "", values.get("charset"), values.get("language")
        )
        row.html = None
        if content is not None:
            values["text"], boilerplate = content.main, content.boilerplate
            row.words = None
            inc["analyze/main_content"] += 1
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


@dataclass(slots=True)
class Analysis:
    """What an analysis process sends back for one row: the fields the analysis sets."""

    text: str | None
    words: dict[str, WordRecord] | None
    word_count: int | None

    def apply(self, row: DocumentRow) -> None:
        row.values["text"] = self.text
        row.values["word_count"] = self.word_count
        row.words = self.words
        row.html = None


def analyze_rows(
    rows: list[DocumentRow], analyze: bool, max_words: int | None
) -> tuple[list[Analysis], Counter[str]]:
    """In an analysis process: analyze *rows* (shipped without their links) and return
    what changed, in their order, with the counters."""
    # What the previous call's rows left (they are sent back by now): lxml's trees are C
    # memory, which glibc keeps unless trimmed (an analysis process grew 54 -> 70 MB).
    release_memory()
    inc: Counter[str] = Counter()
    results = []
    for row in rows:
        analyze_row(row, analyze, max_words, inc)
        results.append(Analysis(row.values.get("text"), row.words, row.values.get("word_count")))
    release_caches()
    inc["analyze/pool_pages"] += inc["analyze/pages"]
    return results, inc


def _start_analysis_process() -> None:
    """The initializer of an analysis process: watch the worker, and leave what importing
    made (the extractor's modules) out of later full garbage collections."""
    watch_parent()
    freeze_startup()


def _ready() -> int:
    return os.getpid()


def _shipped(row: DocumentRow) -> DocumentRow:
    """The row as sent to an analysis process: without its links, which analysis does
    not read (a page's 30 links would be pickled there and back for nothing)."""
    return replace(row, links=[])


def _runs(rows: list[DocumentRow], n: int) -> list[list[DocumentRow]]:
    """*rows* cut into at most *n* consecutive runs of about the same size (HTML and
    text), so that the processes finish at about the same time."""
    sizes = [len(r.html or b"") + len(r.values.get("text") or "") + 1 for r in rows]
    total = sum(sizes)
    runs: list[list[DocumentRow]] = [[]]
    done = 0
    for row, size in zip(rows, sizes, strict=True):
        if runs[-1] and len(runs) < n and done >= total * len(runs) / n:
            runs.append([])
        runs[-1].append(row)
        done += size
    return runs


class AnalysisPool:
    """The analysis of the worker's batches, in *processes* processes: the worker and
    ``processes - 1`` analysis processes (none with 1)."""

    def __init__(self, processes: int, analyze: bool = True, max_words: int | None = None) -> None:
        self.processes = max(1, processes)
        self.analyze = analyze
        self.max_words = max_words
        self.executor: ProcessPoolExecutor | None = None
        if self.processes > 1 and analyze:
            self.executor = ProcessPoolExecutor(
                max_workers=self.processes - 1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_analysis_process,
            )
            # Start them now, so that their start-up overlaps the crawl's, not a batch.
            with spawning():
                for _ in range(self.processes - 1):
                    self.executor.submit(_ready)

    def pids(self) -> list[int]:
        """The analysis processes' ids (for tests and measurements)."""
        if self.executor is None:
            return []
        return [p.pid for p in self.executor._processes.values() if p.pid is not None]

    def run(self, rows: list[DocumentRow], inc: Counter[str]) -> None:
        """Analyze *rows* (a batch's documents) in place, counting in *inc*; the rows keep
        their order, and each gets the analysis of its own page."""
        pages = [
            row for row in rows if row.values["kind"] == "page" and not row.values.get("noindex")
        ]
        try:
            self._run(rows, pages, inc)
        finally:
            # The extractor's caches hold whole texts (search.content): a batch's at most.
            release_caches()

    def _run(self, rows: list[DocumentRow], pages: list[DocumentRow], inc: Counter[str]) -> None:
        if self.executor is None or len(pages) < 2:
            for row in rows:
                analyze_row(row, self.analyze, self.max_words, inc)
            return
        runs = _runs(pages, self.processes)
        futures: list[Future[tuple[list[Analysis], Counter[str]]]] = []
        try:
            for run in runs[1:]:
                shipped = [_shipped(row) for row in run]
                futures.append(
                    self.executor.submit(analyze_rows, shipped, self.analyze, self.max_words)
                )
        except BrokenProcessPool as exc:
            raise AnalysisError(f"an analysis process died: {exc}") from None
        mine = set(map(id, runs[0]))
        for row in rows:
            if id(row) in mine or row.values["kind"] != "page" or row.values.get("noindex"):
                analyze_row(row, self.analyze, self.max_words, inc)
        for run, future in zip(runs[1:], futures, strict=True):
            try:
                results, counts = future.result()
            except BrokenProcessPool as exc:
                raise AnalysisError(f"an analysis process died: {exc}") from None
            for row, analysis in zip(run, results, strict=True):
                analysis.apply(row)
            inc.update(counts)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None
