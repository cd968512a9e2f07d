"""Feeding the Whoosh index: a writer process for crawls, and rebuilds from the database.

Whoosh is pure Python and allows one writer at a time.  During a crawl the documents are
sent, already analyzed, by the crawl's worker (:mod:`search.worker`) to one
:class:`IndexerProcess` (its child process, so that indexing overlaps analysis and
storage) through a bounded inbox; the indexer adds them through one writer, commits every
``batch_size`` documents and marks them ``indexed`` in the database.  :func:`reindex`
rebuilds the whole index from the database, which is the record: a full rebuild reads the
stored postings as arrays (:func:`iter_doc_batches`) and writes them whole
(:meth:`search.index.Index.rebuild`); the rest adds :class:`search.index.IndexDoc` one by
one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import multiprocessing
import pickle
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine, not_, update

from search import db, faults
from search.analysis import DEFAULT_WEIGHTS, SECTIONS
from search.crawldb import INDEXABLE, CrawlDB
from search.db import chunks
from search.index import LIMITMB, DocBatch, Index, IndexDoc
from search.models import Document
from search.servers import WEIGHT_FIELDS
from search.store import DocumentStore

logger = logging.getLogger(__name__)

_SECTION_WEIGHT_KEYS = WEIGHT_FIELDS


@dataclass(slots=True)
class Batch:
    """A message to the indexer: documents to add or replace, ids to delete."""

    docs: list[IndexDoc]
    deletes: list[int]


def _apply(writer: Any, message: bytes) -> list[int]:
    batch: Batch = pickle.loads(message)
    for docid in batch.deletes:
        writer.delete(docid)
    for doc in batch.docs:
        writer.add(doc)
    return [d.docid for d in batch.docs]


def _libc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_malloc_trim = _libc_trim()


def release_memory() -> None:
    """Give the memory of a finished commit back to the system: a full collection (the
    writer's pool, readers and segment objects form cycles), then glibc's ``malloc_trim``
    (freed blocks stay in the C heap otherwise; a no-op elsewhere)."""
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)


def freeze_startup() -> None:
    """Move what the process holds after its start-up (modules, classes, settings) out of
    the garbage collector's sight: a full collection then walks only what was made
    since.  (Measured on the loaded machine: a full collection of the worker's 82,000
    start-up objects took 154 ms, the crawler's 160,000 300 ms; the worker collects
    after every batch.)  Call it once, when start-up is over."""
    gc.collect()
    gc.freeze()


#: Seconds the indexer process waits for the index lock (held by a reindex, or by the
#: indexer of a crawl that was killed and has not noticed yet).
LOCK_WAIT = 120.0


def _worker(
    inbox: Any,
    outbox: Any,
    index_dir: str,
    database_url: str,
    batch_size: int,
    limitmb: int,
    catch_up: Sequence[int],
) -> None:
    """The indexer process: one writer, a commit every *batch_size* documents.

    It first indexes the documents *catch_up* (what a killed crawl left unindexed), and
    it stops, committing what it has, if its parent dies.
    """
    logging.basicConfig(level=logging.INFO)
    engine = db.create(database_url)
    store = DocumentStore(engine, retry_times=10)
    index = Index(index_dir)
    parent = multiprocessing.parent_process()
    total = 0
    commits = 0
    last_commit_at = 0.0
    finished = False

    def first_message() -> Any:
        while True:
            try:
                return inbox.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return None

    try:
        caught_up = reindex(
            engine, index, full=False, limitmb=limitmb, ids=catch_up, wait=LOCK_WAIT
        )
        if caught_up:
            logger.info("Indexed %d documents left unindexed by an earlier crawl", caught_up)
            release_memory()
        freeze_startup()
        while not finished:
            msg = first_message()
            if msg is None:
                break
            with index.writer(limitmb=limitmb, wait=LOCK_WAIT) as writer:
                pending = _apply(writer, msg)
                while len(pending) < batch_size:
                    try:
                        msg = inbox.get(timeout=2.0)
                    except queue.Empty:
                        break  # the crawl is slow: make what we have searchable
                    if msg is None:
                        finished = True
                        break
                    pending.extend(_apply(writer, msg))
            faults.point("index_committed")
            release_memory()
            store.mark_indexed(pending)
            total += len(pending)
            commits += 1
            last_commit_at = time.time()
            outbox.put(("progress", total, last_commit_at))
        outbox.put(("done", total, {"commits": commits, "searchable_at": last_commit_at}))
    except BaseException as exc:  # report, then let the parent decide
        outbox.put(("error", total, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        engine.dispose()


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
        catch_up: Sequence[int] = (),
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.inbox: Any = ctx.Queue(maxsize=max_pending)
        self.outbox: Any = ctx.Queue()
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
                list(catch_up),
            ),
            daemon=True,
        )
        self.indexed = 0
        self.searchable_at = 0.0
        self.error: str | None = None
        self.info: dict[str, Any] = {}

    @staticmethod
    def left_unindexed(engine: Engine) -> list[int]:
        """The documents that belong in the index and are not marked indexed."""
        return CrawlDB(engine).indexable_ids(only_unindexed=True)

    def start(self) -> None:
        self.process.start()

    def send(self, batch: Batch) -> None:
        """Queue *batch*, waiting while the inbox is full (the indexer is behind: the
        wait is the back-pressure); raises if the indexer has failed.

        The batch is queued pickled: a queued batch of 100 pages is ~0.6 MB of bytes
        instead of ~4 MB of Python objects (a dict of ~350 stems a page), which the
        worker held for every batch waiting in the inbox, and whose many small objects
        stayed in its heap after they were sent."""
        message = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
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
        if kind == "progress":
            self.searchable_at = extra
        elif kind == "done":
            self.info = extra
            self.searchable_at = extra.get("searchable_at") or self.searchable_at
        elif kind == "error":
            self.error = extra

    def close(
        self, timeout: float | None = None, progress: Callable[[int], None] | None = None
    ) -> None:
        """Ask the process to commit and stop; wait for it."""
        if self.process.is_alive():
            self.inbox.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.process.is_alive():
            try:
                self._handle(self.outbox.get(timeout=1.0))
                if progress:
                    progress(self.indexed)
            except queue.Empty:
                pass
            if deadline is not None and time.monotonic() > deadline:
                self.process.terminate()
                break
        self.process.join()
        self._drain()
        if self.process.exitcode not in (0, None) and not self.error:
            self.error = f"exit code {self.process.exitcode}"


def server_weights(crawldb: CrawlDB) -> dict[int, dict[str, float]]:
    """Section weights of every stored server (defaults where a weight is not stored)."""
    return {
        sid: {
            s: float(settings.get(k, DEFAULT_WEIGHTS[s])) for s, k in _SECTION_WEIGHT_KEYS.items()
        }
        for sid, settings in crawldb.server_settings().items()
    }


def iter_index_docs(
    engine: Engine,
    only_unindexed: bool = False,
    chunk: int = 200,
    before: datetime | None = None,
    ids: Sequence[int] | None = None,
) -> Iterator[IndexDoc]:
    """Rebuild IndexDocs from the stored postings, *chunk* documents per query."""
    crawldb = CrawlDB(engine)
    weights = server_weights(crawldb)
    for doc in crawldb.indexable_documents(only_unindexed, before, ids, chunk):
        w = weights.get(doc.server_id) if doc.server_id is not None else None
        w = w or DEFAULT_WEIGHTS
        terms: dict[str, float] = {}
        for stem, counts in doc.postings:
            weight = 0.0  # Σ count × section weight, in section order, as the analyzer sums
            for i, section in enumerate(SECTIONS):
                if counts[i]:
                    weight += counts[i] * w[section]
            terms[stem] = weight
        host = doc.url.split("/")[2] if "://" in doc.url else ""
        yield IndexDoc(doc.id, doc.url, host, terms)


#: Documents a full rebuild reads from the database at a time: ~200,000 postings of the
#: synthetic site, ~25 MB while their page is parsed.
READ_PAGE = 500


def iter_doc_batches(engine: Engine, chunk: int = 2000) -> Iterator[DocBatch]:
    """Every document that belongs in the index, as :class:`search.index.DocBatch` of
    *chunk* documents (term ids are word ids): what :func:`iter_index_docs` gives, as
    arrays, with the same weights, summed in the same order."""
    crawldb = CrawlDB(engine)
    weights = server_weights(crawldb)
    default = [DEFAULT_WEIGHTS[s] for s in SECTIONS]
    by_server = {sid: [w[s] for s in SECTIONS] for sid, w in weights.items()}
    for page in crawldb.indexable_postings(chunk):
        per_doc = np.array(
            [
                by_server.get(sid, default) if sid is not None else default
                for sid in page.server_ids
            ],
            dtype=np.float64,
        ).reshape(len(page.ids), len(SECTIONS))
        per_posting = np.repeat(per_doc, page.sizes, axis=0)
        # Σ count × section weight, in section order, as the analyzer sums (adding a
        # section's 0 changes nothing).
        total = np.zeros(len(page.word_ids), dtype=np.float64)
        for i in range(len(SECTIONS)):
            total = total + page.counts[:, i] * per_posting[:, i]
        hosts = [url.split("/")[2] if "://" in url else "" for url in page.urls]
        yield DocBatch(page.ids, page.urls, hosts, page.sizes, page.word_ids, total)


def count_indexable(
    engine: Engine, only_unindexed: bool = False, before: datetime | None = None
) -> int:
    return CrawlDB(engine).count_indexable(only_unindexed, before)


def reindex(
    engine: Engine,
    index: Index,
    *,
    full: bool = True,
    batch_size: int = 2000,
    limitmb: int = LIMITMB,
    progress: Callable[[int], None] | None = None,
    before: datetime | None = None,
    ids: Sequence[int] | None = None,
    wait: float = 0.0,
) -> int:
    """Rebuild the index from the database (``full``) or add the documents not indexed yet
    (stored *before* a time, or among *ids*).

    A full rebuild goes through one writer and replaces the old index in its single
    commit, so searches keep answering from the old index until the new one is complete.
    Returns the number of documents indexed.
    """
    if ids is not None and not ids:
        return 0
    if not full and count_indexable(engine, only_unindexed=True, before=before) == 0:
        return 0
    store = DocumentStore(engine)
    done: list[int] = []
    if full and ids is None and before is None:
        crawldb = CrawlDB(engine)
        vocabulary = crawldb.vocabulary()
        with index.rebuild(vocabulary, limitmb=limitmb, wait=wait) as rebuild:
            for batch in iter_doc_batches(engine, min(batch_size, READ_PAGE)):
                if len(batch.terms) and int(batch.terms.max()) >= len(vocabulary):
                    # A crawl stored new words since the vocabulary was read.
                    vocabulary = crawldb.vocabulary()
                    rebuild.grow_vocabulary(vocabulary)
                rebuild.add(batch)
                done.extend(batch.docids)
                if progress:
                    progress(len(batch))
        store.mark_indexed(done)
        return len(done)

    def docs() -> Iterator[IndexDoc]:
        if ids is None:
            yield from iter_index_docs(engine, only_unindexed=not full, before=before)
            return
        for part in chunks(ids, 500):
            yield from iter_index_docs(engine, only_unindexed=not full, before=before, ids=part)

    with index.writer(limitmb=limitmb, clear=full, wait=wait) as writer:
        for doc in docs():
            writer.add(doc, update=not full)
            done.append(doc.docid)
            if progress and len(done) % batch_size == 0:
                progress(batch_size)
        if progress and len(done) % batch_size:
            progress(len(done) % batch_size)
    # Mark after the commit: a document is "indexed" only once it is searchable.
    store.mark_indexed(done)
    return len(done)


def searchable_ids(index: Index) -> set[int]:
    return index.docids() if index.exists() else set()


@dataclass(slots=True)
class CheckResult:
    """How the index compares with the database."""

    in_database: int
    in_index: int
    missing: list[int]  # indexable in the database, not in the index
    extra: list[int]  # in the index, not (or no longer) indexable in the database
    #: In the index and indexable, not marked indexed in the database (a crawl killed
    #: between a commit and its marking; the index may hold an older version).
    unmarked: list[int] = field(default_factory=list)
    repaired: bool = False

    @property
    def consistent(self) -> bool:
        return not self.missing and not self.extra and not self.unmarked


def check(engine: Engine, index: Index, repair: bool = True, limitmb: int = LIMITMB) -> CheckResult:
    """Compare the index with the database; with *repair*, make the index agree.

    Missing documents are (re)indexed from their stored postings, extra ones deleted,
    unmarked ones indexed again (the database's version) and marked, and the ``indexed``
    flags of documents that no longer belong in the index cleared.
    """
    crawldb = CrawlDB(engine)
    unmarked = set(crawldb.indexable_ids(only_unindexed=True))
    wanted = set(crawldb.indexable_ids())
    present = searchable_ids(index)
    result = CheckResult(
        len(wanted),
        len(present),
        sorted(wanted - present),
        sorted(present - wanted),
        sorted(unmarked & present),
    )
    if not repair:
        return result
    store = DocumentStore(engine)
    again = sorted(set(result.missing) | set(result.unmarked))
    if not result.consistent:
        with index.writer(limitmb=limitmb) as writer:
            for docid in result.extra:
                writer.delete(docid)
            for part in chunks(again, 500):
                for doc in iter_index_docs(engine, ids=part):
                    writer.add(doc)
        result.repaired = True
    store.mark_indexed(again)
    with engine.begin() as conn:
        conn.execute(
            update(Document)
            .where(Document.indexed.is_(True), not_(INDEXABLE))
            .values(indexed=False)
        )
    return result
