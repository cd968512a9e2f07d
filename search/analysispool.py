"""The analysis of the crawl's batches, in analysis processes ahead of the worker.

A page's analysis is its main-content split (:func:`search.content.split_content`, the
extractor's ~60 ms a large page) and the word analysis of its sections
(:func:`search.analysis.analyze_packed`, the records made as the columns they travel and
are stored in): about half of what a page costs after its download.  With ``processes``
≥ 1 (``ANALYZE_PROCESSES``) it runs in that many analysis processes, a stage of the
pipeline of its own::

    crawler --batch N--> analysis process --spool file N--> worker --> indexer
        \\------------------- write N (the batch's other rows) ---^

The crawler hands each batch's documents to an analysis process
(:class:`search.worker.AnalysisProcesses`, a ``concurrent.futures`` pool the crawler
spawns; the crawler never imports this module) and the call that stores the batch to the
worker; the analysis process leaves the analyzed rows for the worker in a spool folder of
the crawl's, one file a batch named by its sequence number (written whole, then renamed),
and the worker takes them from there in crawl order (:class:`AnalyzedBatches`), never
through the crawler.  A file, not a queue between processes: a process killed while it
writes to a queue leaves half a message in it and the queue's lock held, and the worker
would wait for ever; a file it was writing is never renamed, never read.  So the analysis
of batch N+1 runs while the worker stores batch N, each process on a core of its own, and
the rows are pickled once per hop (their word records packed:
:func:`search.analysis.pack_records`).  Nothing is stored before its batch is analyzed,
and the store's transaction stays one per batch: a kill loses no more than the batches in
flight, as before.  The number of batches in flight is bounded by the crawler
(``STORE_QUEUE_BATCHES``), so the spool holds at most that many files.

``processes`` = 0: no analysis process; the worker analyzes each batch before it stores
it (:func:`analyze_rows`).

An analysis process imports only what analysis needs (the extractor and the analyzer: no
database, no index, no Scrapy); it exits when the crawler dies.  A page whose analysis
raises fails its batch; an analysis process that dies fails the batches after it (the
crawler sets an event the worker reads while it waits): the worker's ``write`` raises
:class:`AnalysisError` and the crawl stops (``store_failed``).
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search.analysis import SECTIONS, PackedWords, analyze_packed, page_sections
from search.content import release_caches, split_content
from search.process import freeze_startup, release_memory, watch_parent
from search.rows import DocumentRow

logger = logging.getLogger(__name__)

#: Seconds the worker waits before it looks again for an analyzed batch: from the first,
#: doubling up to the last.
_FIRST_POLL = 0.002
_LAST_POLL = 0.05


@dataclass(slots=True)
class Analyzed:
    """A batch's pages on their way from an analysis process to the worker (in the spool
    file of the batch's number): its rows, what the analysis counted, and why it failed
    (None: it did not)."""

    rows: list[DocumentRow]
    inc: Counter[str]
    error: str | None = None


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
    body: list[str] | None = None
    boilerplate: list[str] | None = None
    if row.html is not None and analyze:
        # Main content and boilerplate (search.content); a topic crawl's analysis of
        # the whole page, made on the reactor for its gate, is made again on the split.
        content = split_content(
            row.html, values.get("text") or "", values.get("charset"), values.get("language")
        )
        if content is not None:
            values["text"] = content.main
            body, boilerplate = content.main_words, content.boilerplate_words
            row.words = None
            inc["analyze/main_content"] += 1
    row.html = None
    if row.words is None:
        if not analyze:
            return
        sections = page_sections(
            row.url,
            values.get("title"),
            values.get("text") if body is None else body,
            values.get("description"),
            values.get("keywords"),
            boilerplate,
        )
        row.words = analyze_packed(sections, row.weights, values.get("language"), max_words)
    words = row.words
    assert words is not None
    values["word_count"] = (
        sum(words.counts[0 :: len(SECTIONS)])
        if isinstance(words, PackedWords)
        else sum(r.counts[0] for r in words.values())
    )
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


# -- in an analysis process ----------------------------------------------------------------

#: The folder where this analysis process leaves the batches it analyzed (its initializer's).
_spool: Path | None = None


def batch_path(spool: Path, seq: int) -> Path:
    """Where analyzed batch *seq* is left for the worker."""
    return spool / f"{seq}.batch"


def start_analysis_process(spool: str) -> None:
    """In a new analysis process (:class:`search.worker.AnalysisProcesses`' initializer):
    keep the spool folder, watch the crawler, and leave what importing made out of later
    full garbage collections."""
    global _spool
    _spool = Path(spool)
    watch_parent()
    freeze_startup()


def _leave(seq: int, analyzed: Analyzed) -> None:
    """Leave batch *seq*, *analyzed*, for the worker: written whole under another name,
    then renamed, so that the worker never reads a batch cut short by a kill."""
    assert _spool is not None, "not an analysis process"
    final = batch_path(_spool, seq)
    part = final.with_suffix(".part")
    with part.open("wb") as f:
        pickle.dump(analyzed, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(part, final)


def analyze_batch(seq: int, rows: list[DocumentRow], analyze: bool, max_words: int | None) -> int:
    """In an analysis process: analyze batch *seq*'s rows and leave them for the worker;
    returns the number of rows.  A page whose analysis raises fails the batch (the worker
    gets the error, not the rows)."""
    # What the previous batch left (written out by now): lxml's trees are C memory, which glibc
    # keeps unless trimmed.
    release_memory()
    inc: Counter[str] = Counter()
    try:
        analyze_rows(rows, analyze, max_words, inc)
    except Exception as exc:
        logger.exception("A batch could not be analyzed")
        _leave(seq, Analyzed([], inc, f"{type(exc).__name__}: {exc}"))
        return 0
    inc["analyze/pool_pages"] += inc["analyze/pages"]
    _leave(seq, Analyzed(rows, inc))
    return len(rows)


# -- in the worker -------------------------------------------------------------------------


class AnalyzedBatches:
    """The worker's end of the analysis processes: the batches they left in the spool
    folder, taken in crawl order."""

    def __init__(self, spool: str | Path, broken: Any = None) -> None:
        self.spool = Path(spool)
        self.broken = broken

    def take(self, seq: int) -> tuple[list[DocumentRow], Counter[str]]:
        """Batch *seq*'s analyzed rows and counters, once its analysis process has left
        them (read once, then removed); :class:`AnalysisError` when its analysis failed,
        or when an analysis process died before."""
        path = batch_path(self.spool, seq)
        delay = _FIRST_POLL
        while True:
            try:
                with path.open("rb") as f:
                    analyzed: Analyzed = pickle.load(f)
                break
            except FileNotFoundError:
                pass
            if self.broken is not None and self.broken.is_set():
                raise AnalysisError("an analysis process died; the crawl stops")
            time.sleep(delay)  # the worker exits when the crawler dies (watch_parent)
            delay = min(delay * 2, _LAST_POLL)
        path.unlink()
        if analyzed.error is not None:
            raise AnalysisError(analyzed.error)
        return analyzed.rows, analyzed.inc
