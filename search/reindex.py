"""The index rebuilt or repaired from the database, which is the record (with
:mod:`search.indexer`, the design documents' CIndexer).

:func:`reindex` rebuilds the whole index, or adds the documents not indexed yet: a full
rebuild (:func:`rebuild`) reads the stored postings as arrays (:func:`iter_doc_batches`),
in a process of its own at size (:mod:`search.rebuildfeed`), and writes them whole
(:meth:`search.index.Index.rebuild`); the rest reads the documents to add the same
way, a page at a time, and adds them as columns (:func:`iter_doc_columns`) through an
incremental commit.  :func:`check` compares the index with the database
and, with *repair*, makes it agree.  Each posting's weight is the sum of its counts per
section times its server's section weights, as the analyzer sums them.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import Engine, not_, update

from search.analysis import DEFAULT_WEIGHTS, SECTIONS
from search.crawldb import INDEXABLE, CrawlDB
from search.db import chunks
from search.doccolumns import DocColumns
from search.duplicates import DuplicateMarker
from search.index import LIMITMB, MAX_MERGE_DOCS, DocBatch, Index
from search.linkrank import LinkRankResult, update_linkrank
from search.models import Document
from search.rebuildfeed import BatchFeed
from search.rows import PostingsPage
from search.servers import WEIGHT_FIELDS
from search.store import DocumentStore
from search.urls import netloc


def server_weights(crawldb: CrawlDB) -> dict[int, dict[str, float]]:
    """Section weights of every stored server (defaults where a weight is not stored)."""
    return {
        sid: {s: float(settings.get(k, DEFAULT_WEIGHTS[s])) for s, k in WEIGHT_FIELDS.items()}
        for sid, settings in crawldb.server_settings().items()
    }


#: Documents a rebuild or an incremental commit reads from the database at a time:
#: ~200,000 postings of the synthetic site, ~25 MB while their page is parsed.
READ_PAGE = 500


def iter_doc_batches(engine: Engine, chunk: int = 2000) -> Iterator[DocBatch]:
    """Every document that belongs in the index, as :class:`search.index.DocBatch` of
    *chunk* documents (term ids are word ids), each posting's weight summed in section
    order, as the analyzer sums."""
    weigh = SectionWeights(engine)
    for page in CrawlDB(engine).indexable_postings(chunk):
        yield weigh.batch(page)


class SectionWeights:
    """The section weights of every stored server (:func:`server_weights`), applied to
    the stored postings of a :class:`search.rows.PostingsPage` (:meth:`batch`,
    :meth:`columns`)."""

    def __init__(self, engine: Engine) -> None:
        self.default = [DEFAULT_WEIGHTS[s] for s in SECTIONS]
        weights = server_weights(CrawlDB(engine))
        self.by_server = {sid: [w[s] for s in SECTIONS] for sid, w in weights.items()}

    def _weigh(self, page: PostingsPage) -> tuple[np.ndarray, np.ndarray]:
        """Each posting's weighted counts per section and their sum (the counts may come
        in any integer type)."""
        per_doc = np.array(
            [
                self.by_server.get(sid, self.default) if sid is not None else self.default
                for sid in page.server_ids
            ],
            dtype=np.float64,
        ).reshape(len(page.ids), len(SECTIONS))
        per_posting = np.repeat(per_doc, page.sizes, axis=0)
        # w_f · count_f per section; their sum in section order, as the analyzer sums
        # (adding a section's 0 changes nothing).
        sections = page.counts * per_posting
        total = np.zeros(len(page.word_ids), dtype=np.float64)
        for i in range(len(SECTIONS)):
            total = total + sections[:, i]
        return sections, total

    def batch(self, page: PostingsPage) -> DocBatch:
        """The :class:`DocBatch` of *page* (term ids are word ids), for a full rebuild."""
        sections, total = self._weigh(page)
        hosts = [netloc(url) for url in page.urls]
        return DocBatch(page.ids, page.urls, hosts, page.sizes, page.word_ids, total, sections)

    def columns(self, page: PostingsPage, stems: list[str]) -> DocColumns:
        """The :class:`DocColumns` of *page*, each posting's stem given (*stems*), for an
        incremental commit."""
        sections, total = self._weigh(page)
        hosts = [netloc(url) for url in page.urls]
        return DocColumns(page.ids, page.urls, hosts, page.sizes, stems, total, sections)


class Stems:
    """The stem of each word id, read from the database as ids past those read come
    (:meth:`__call__`), and kept: no word is ever changed or deleted.  An incremental
    commit needs the stems of the postings it adds; ``reindex --follow`` keeps one of these
    between its rounds, so that each round reads only the words stored since the last.

    Memory: the vocabulary (~165,000 stems at 100,000 pages of the synthetic site: ~11 MB
    at ~65 bytes a short string in a list), as a full rebuild holds it
    (:meth:`search.crawldb.CrawlDB.vocabulary`).  Reading a round's stems by their ids
    instead cost the follower a third of its time (an ``IN`` list of ~10,000 ids a
    round)."""

    def __init__(self, crawldb: CrawlDB) -> None:
        self.crawldb = crawldb
        self.by_id: list[str | None] = []

    def __call__(self, word_ids: list[int]) -> list[str]:
        """The stems of *word_ids* (distinct ids of stored words), in their order."""
        if not word_ids:
            return []
        top = max(word_ids)
        if top >= len(self.by_id):
            rows = self.crawldb.words_after(len(self.by_id) - 1)
            end = max(top, rows[-1][0] if rows else top) + 1
            self.by_id.extend([None] * (end - len(self.by_id)))
            for wid, stem in rows:
                self.by_id[wid] = stem
        # An id below the last read whose word was committed after it (another crawl
        # process's transaction), read by its id.
        late = [w for w in word_ids if self.by_id[w] is None]
        if late:
            for wid, stem in self.crawldb.stems(late).items():
                self.by_id[wid] = stem
        out = [self.by_id[w] for w in word_ids]
        if None in out:
            lost = [w for w, s in zip(word_ids, out, strict=True) if s is None]
            raise RuntimeError(f"postings refer to words the database does not have: {lost[:10]}")
        return out  # type: ignore[return-value]


def iter_doc_columns(
    engine: Engine,
    only_unindexed: bool = False,
    before: datetime | None = None,
    ids: Sequence[int] | np.ndarray | None = None,
    chunk: int = READ_PAGE,
    stems: Stems | None = None,
) -> Iterator[DocColumns]:
    """The documents that belong in the index (only those not indexed yet, stored *before*
    a time, or among *ids*) as :class:`DocColumns` of up to *chunk* documents, read as
    arrays (:meth:`search.crawldb.CrawlDB.indexable_postings`) with the stems of each
    page's words (from *stems*, or read here): what an incremental commit adds
    (``reindex --new``, ``--follow``, ``check``).  Memory: one page's postings, and the
    stems read."""
    crawldb = CrawlDB(engine)
    weigh = SectionWeights(engine)
    stems = stems or Stems(crawldb)
    parts: Iterable[Sequence[int] | None] = [None] if ids is None else chunks(ids, chunk)
    for part in parts:
        for page in crawldb.indexable_postings(chunk, only_unindexed, before, part):
            distinct, which = np.unique(page.word_ids, return_inverse=True)
            names = stems(distinct.tolist())
            yield weigh.columns(page, [names[i] for i in which.tolist()])


def count_indexable(
    engine: Engine, only_unindexed: bool = False, before: datetime | None = None
) -> int:
    return CrawlDB(engine).count_indexable(only_unindexed, before)


#: Documents from which a full rebuild reads the database in a process of its own
#: (:mod:`search.rebuildfeed`) when none is said: below it, starting the process (~0.5 s of
#: imports) costs more than it gains.
READER_AT = 2000


@dataclass(slots=True)
class RebuildResult:
    """What a full rebuild did: the documents indexed, and the linkranks recomputed (None
    when not asked)."""

    documents: int
    linkrank: LinkRankResult | None = None


def use_reader(engine: Engine, documents: int) -> bool:
    """Whether a full rebuild of *documents* reads in a process of its own by default: on a
    machine of two cores or more, from a database another process can open (not SQLite in
    memory), from :data:`READER_AT` documents."""
    in_memory = engine.dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:")
    return (os.cpu_count() or 1) > 1 and not in_memory and documents >= READER_AT


def rebuild(
    engine: Engine,
    index: Index,
    *,
    batch_size: int = READ_PAGE,
    limitmb: int = LIMITMB,
    progress: Callable[[int], None] | None = None,
    wait: float = 0.0,
    linkrank: bool = False,
    reader: bool | None = None,
) -> RebuildResult:
    """Rebuild the whole index from the database in one segment, and with *linkrank*
    recompute the linkranks (:func:`search.linkrank.update_linkrank`).

    With *reader* (by default: :func:`use_reader` of the documents to index), the database
    is read, and the linkranks computed once it is read, in a child process
    (:class:`search.rebuildfeed.BatchFeed`) while this one writes the index: the same index,
    on two cores.  The old index answers until the new one is committed."""
    if reader is None:
        reader = use_reader(engine, count_indexable(engine))
    crawldb = CrawlDB(engine)
    vocabulary = crawldb.vocabulary()
    chunk = min(batch_size, READ_PAGE)
    done: list[int] = []
    feed = BatchFeed(engine, chunk, linkrank=linkrank) if reader else None
    try:
        if feed:
            weigh = SectionWeights(engine)
            batches: Iterator[DocBatch] = (weigh.batch(page) for page in feed.pages())
        else:
            batches = iter_doc_batches(engine, chunk)
        with index.rebuild(vocabulary, limitmb=limitmb, wait=wait) as writer:
            for batch in batches:
                if len(batch.terms) and int(batch.terms.max()) >= len(vocabulary):
                    # A crawl stored new words since the vocabulary was read.
                    vocabulary = crawldb.vocabulary()
                    writer.grow_vocabulary(vocabulary)
                writer.add(batch)
                done.extend(batch.docids)
                if progress:
                    progress(len(batch))
        # Marked after the commit: a document is "indexed" only once it is searchable.
        DocumentStore(engine).mark_indexed(done)
        result = RebuildResult(len(done))
        if feed:
            result.linkrank = feed.linkrank()
        elif linkrank:
            result.linkrank = update_linkrank(engine)
    finally:
        if feed:
            feed.close()
    return result


def reindex(
    engine: Engine,
    index: Index,
    *,
    full: bool = True,
    batch_size: int = READ_PAGE,
    limitmb: int = LIMITMB,
    progress: Callable[[int], None] | None = None,
    before: datetime | None = None,
    ids: Sequence[int] | np.ndarray | None = None,
    wait: float = 0.0,
    reader: bool | None = None,
    max_merge_docs: int | None = MAX_MERGE_DOCS,
    stems: Stems | None = None,
) -> int:
    """Rebuild the index from the database (``full``: :func:`rebuild`) or add the
    documents not indexed yet (stored *before* a time, or among *ids*; the commit merges
    no segment of more than *max_merge_docs* documents, :mod:`search.mergepolicy`; the
    stems of their postings from *stems* when given, :class:`Stems`).

    A full rebuild goes through one writer and replaces the old index in its single
    commit, so searches keep answering from the old index until the new one is complete.
    Returns the number of documents indexed.
    """
    if ids is not None and len(ids) == 0:
        return 0
    if full and ids is None and before is None:
        return rebuild(
            engine,
            index,
            batch_size=batch_size,
            limitmb=limitmb,
            progress=progress,
            wait=wait,
            reader=reader,
        ).documents
    if not full and count_indexable(engine, only_unindexed=True, before=before) == 0:
        return 0
    store = DocumentStore(engine)
    done = array("q")  # 8 bytes an id: a catch-up may be every page of a crawl
    with index.writer(
        limitmb=limitmb, clear=full, wait=wait, max_merge_docs=max_merge_docs
    ) as writer:
        page = min(batch_size, READ_PAGE)
        for columns in iter_doc_columns(engine, not full, before, ids, page, stems):
            writer.add_columns(columns, update=not full)
            done.extend(columns.docids)
            if progress:
                progress(len(columns))
    # Mark after the commit: a document is "indexed" only once it is searchable.
    store.mark_indexed(done)
    return len(done)


def remove_unindexable(
    engine: Engine,
    index: Index,
    limitmb: int = LIMITMB,
    wait: float = 0.0,
    max_merge_docs: int | None = MAX_MERGE_DOCS,
) -> int:
    """Remove from *index* the documents it holds that no longer belong in it (gone,
    moved, noindex, a clone), and say how many.

    A crawl's indexer removes such a page in the batch that stored it; a crawl killed
    after that batch's database commit and before the index commit loses the removal, as
    it loses the additions that :meth:`search.indexer.IndexerProcess.left_unindexed`
    catches up.  Read: the index's ids (arrays) and the database's unmarked documents that
    are not indexable (by the ``indexed`` index), compared sorted by numpy."""
    if not index.exists():
        return 0
    stale = np.intersect1d(
        searchable_ids(index), np.unique(CrawlDB(engine).unindexable_id_array()), assume_unique=True
    )
    if not stale.size:
        return 0
    with index.writer(limitmb=limitmb, wait=wait, max_merge_docs=max_merge_docs) as writer:
        for docid in stale.tolist():
            writer.delete(docid)
    return int(stale.size)


def searchable_ids(index: Index) -> np.ndarray:
    """Every document id in *index*, ascending (none when there is no index)."""
    return index.docid_array() if index.exists() else np.empty(0, dtype=np.int64)


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
    #: Marked indexed in the database, and not (or no longer) belonging in the index (a
    #: page gone, noindex or a clone since it was indexed; whether the index still holds
    #: it or not): a repair clears the marks.
    stale_marks: list[int] = field(default_factory=list)
    #: Exact duplicates whose original is gone, changed or a duplicate itself (left so by
    #: an earlier version, which did not promote them): a repair makes the first of each
    #: content the original and indexes it.
    orphaned: list[int] = field(default_factory=list)
    repaired: bool = False

    @property
    def consistent(self) -> bool:
        return not (
            self.missing or self.extra or self.unmarked or self.stale_marks or self.orphaned
        )


def check(
    engine: Engine,
    index: Index,
    repair: bool = True,
    limitmb: int = LIMITMB,
    stems: Stems | None = None,
) -> CheckResult:
    """Compare the index with the database; with *repair*, make the index agree (the
    stems of the postings it adds from *stems* when given, :class:`Stems`).

    Missing documents are (re)indexed from their stored postings, extra ones deleted,
    unmarked ones indexed again (the database's version) and marked, the ``indexed``
    flags of documents that no longer belong in the index cleared, and exact duplicates
    left without their original given a new one
    (:meth:`search.duplicates.DuplicateMarker.promote_orphans`).
    """
    crawldb = CrawlDB(engine)
    orphans = crawldb.orphaned_duplicates()
    if repair and orphans:
        # Promoted first, so that the duplicates that become originals are "missing" below
        # and indexed with the rest.
        with engine.begin() as conn:
            DuplicateMarker().promote_orphans(conn, sorted({o for _, o in orphans}))
    # Sorted id arrays, compared by numpy: 8 bytes a document (sets of Python ints took
    # ~70, and the index's ids were read from every document's stored fields).
    unmarked = np.unique(crawldb.indexable_id_array(only_unindexed=True))
    wanted = np.unique(crawldb.indexable_id_array())
    present = searchable_ids(index)
    result = CheckResult(
        len(wanted),
        len(present),
        np.setdiff1d(wanted, present, assume_unique=True).tolist(),
        np.setdiff1d(present, wanted, assume_unique=True).tolist(),
        np.intersect1d(unmarked, present, assume_unique=True).tolist(),
        np.unique(crawldb.stale_mark_id_array()).tolist(),
        sorted(d for d, _ in orphans),
    )
    if not repair:
        return result
    store = DocumentStore(engine)
    again = np.union1d(result.missing, result.unmarked).astype(np.int64).tolist()
    if result.missing or result.extra or result.unmarked:
        with index.writer(limitmb=limitmb) as writer:
            for docid in result.extra:
                writer.delete(docid)
            for columns in iter_doc_columns(engine, ids=again, stems=stems):
                writer.add_columns(columns)
    if not result.consistent:
        result.repaired = True
    store.mark_indexed(again)
    if result.stale_marks:
        with engine.begin() as conn:
            for part in chunks(result.stale_marks):
                conn.execute(
                    update(Document)
                    .where(Document.id.in_(part), Document.indexed.is_(True), not_(INDEXABLE))
                    .values(indexed=False)
                )
    return result
