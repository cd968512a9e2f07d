"""The full rebuild's reader process (:class:`BatchFeed`): a rebuild on two cores.

A full rebuild (:func:`search.reindex.rebuild`) spends about half its time reading the
database (SQLite or PostgreSQL joining each document's postings into one row,
:meth:`search.crawldb.CrawlDB.indexable_postings`) and the other half adding the documents
to the writer and writing the segment.  With a reader process, the reading runs in a child
process while the parent adds what it has read: the pages of postings come through a queue
bounded in bytes (:data:`FEED_BYTES`: the reader waits while that much of its pages is not
taken), their counts in one byte each (:func:`compact`); the parent weighs them into
batches (:class:`search.reindex.SectionWeights`) while it waits for the next page.  After
its last page the reader recomputes the linkranks when asked
(:func:`search.linkrank.update_linkrank`), while the parent writes the segment: the two
do not depend on each other.

The reader is a *spawned* process (no engine, thread or lock inherited from the parent)
that opens its own engine on the same database URL.  It stops when the parent goes away,
and the parent stops it when the rebuild fails; an error in the reader is raised in the
parent as :class:`ReaderFailed`, with the reader's traceback.

This module does not import Scrapy.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import traceback
from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import Engine

from search.rows import PostingsPage

#: Bytes of read pages held for the rebuild at most (in the queue or being sent): ~8 pages
#: of 500 documents of ~400 postings (10 bytes a posting: word id, six counts).
FEED_BYTES = 16 * 2**20
#: The unit of the queue's byte budget (a page takes at least one).
_UNIT = 2**20
#: Seconds between the reader's checks that its parent is still there (and the parent's
#: that its reader is).
_POLL = 1.0


class ReaderFailed(RuntimeError):
    """The rebuild's reader process failed (its traceback is the message) or died."""


def page_bytes(page: PostingsPage) -> int:
    """Roughly what *page* takes in memory and on the queue."""
    size = page.sizes.nbytes + page.word_ids.nbytes + page.counts.nbytes
    return size + sum(len(u) + 60 for u in page.urls) + 60 * len(page.ids)


def compact(page: PostingsPage) -> PostingsPage:
    """*page* with its word ids and counts in the smallest integer types that hold them
    (counts of one byte, nearly always: a posting takes 10 bytes on the queue, not 56)."""
    counts = page.counts
    if counts.size:
        top = int(counts.max())
        for kind in (np.uint8, np.uint16, np.uint32):
            if top <= np.iinfo(kind).max and int(counts.min()) >= 0:
                counts = counts.astype(kind)
                break
    word_ids = page.word_ids
    if word_ids.size and int(word_ids.min()) >= 0 and int(word_ids.max()) <= 2**32 - 1:
        word_ids = word_ids.astype(np.uint32)
    return PostingsPage(page.ids, page.urls, page.server_ids, page.sizes, word_ids, counts)


def _read(
    url: str,
    chunk: int,
    out: Any,
    credit: Any,
    units: int,
    linkrank: bool,
    parent: int,
) -> None:
    """The reader process: every page of the rebuild onto *out* (each taking its size in
    *credit*'s units, given back by the parent when it takes the page), then
    ``("read", None, 0)``, then ``("linkrank", result, 0)``; or ``("error", traceback,
    0)``.  It ends once what it put is sent (by the queue's thread)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the rebuild
    from search import db
    from search.crawldb import CrawlDB

    engine: Engine | None = None
    try:
        engine = db.create(url)
        for page in CrawlDB(engine).indexable_postings(chunk):
            page = compact(page)
            need = min(units, max(1, math.ceil(page_bytes(page) / _UNIT)))
            for _ in range(need):
                while not credit.acquire(timeout=_POLL):
                    if os.getppid() != parent:  # the rebuild is gone
                        out.cancel_join_thread()  # leave without sending the rest
                        return
            out.put(("page", page, need))
        out.put(("read", None, 0))
        result = None
        if linkrank:
            from search.linkrank import update_linkrank

            result = update_linkrank(engine)
        out.put(("linkrank", result, 0))
    except BaseException:
        out.put(("error", traceback.format_exc(), 0))
    finally:
        if engine is not None:
            engine.dispose()


class BatchFeed:
    """The pages of postings of a full rebuild read by a child process (:func:`_read`), at
    most *budget* bytes of them (:data:`FEED_BYTES`) sent and not taken: :meth:`pages`,
    then :meth:`linkrank`; :meth:`close` (or the ``with`` block's end) stops the child if
    it still runs."""

    def __init__(
        self, engine: Engine, chunk: int, linkrank: bool = False, budget: int | None = None
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        units = max(1, (budget or FEED_BYTES) // _UNIT)
        self._queue: Any = ctx.Queue()
        self._credit: Any = ctx.Semaphore(units)
        url = engine.url.render_as_string(hide_password=False)
        self._proc = ctx.Process(
            target=_read,
            args=(url, chunk, self._queue, self._credit, units, linkrank, os.getpid()),
            name="spidersite-reindex-reader",
            daemon=True,
        )
        self._proc.start()
        self._read_all = False

    def __enter__(self) -> BatchFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self) -> tuple[str, Any, int]:
        while True:
            try:
                item = self._queue.get(timeout=_POLL)
            except queue.Empty:
                if self._proc.is_alive():
                    continue
                try:  # what it sent just before it ended
                    item = self._queue.get(timeout=_POLL)
                except queue.Empty:
                    raise ReaderFailed(
                        f"the rebuild's reader process ended (exit code {self._proc.exitcode})"
                    ) from None
            if item[0] == "error":
                raise ReaderFailed(f"the rebuild's reader process failed:\n{item[1]}")
            return item

    def pages(self) -> Iterator[PostingsPage]:
        """The pages of :meth:`search.crawldb.CrawlDB.indexable_postings`, in its order
        (:func:`compact`)."""
        while not self._read_all:
            kind, value, units = self._get()
            if kind == "read":
                self._read_all = True
                return
            for _ in range(units):
                self._credit.release()
            yield value

    def linkrank(self) -> Any:
        """The reader's :class:`search.linkrank.LinkRankResult` once it has written the
        linkranks (None when it was not asked to); after :meth:`pages`."""
        kind, value, _ = self._get()
        if kind != "linkrank":
            raise ReaderFailed(f"the rebuild's reader process sent {kind!r}, not its linkranks")
        return value

    def close(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._queue.close()
        self._queue.join_thread()
