"""The link-graph prior: a PageRank over the stored links, kept per document.

The design documents' lineage ranks a page by the pages that link to it as well as by its
words (mnoGoSearch's PopRank, Nutch's LinkRank).  :func:`update_linkrank` reads the link
graph of the stored crawl (:meth:`search.crawldb.CrawlDB.link_graph`: a link counts when
its target URL is a stored document; nofollow links and pages do not give rank; a link to
an exact duplicate counts for its original), computes PageRank on it with a sparse power
iteration (:func:`pagerank_of_file`: the formulation networkx uses, each step one pass
over the edge list with ``numpy.bincount``, so that a crawl's worker does not load scipy,
~0.5 s of start-up for a product it can make itself; the edges are kept in a temporary
file and read a chunk at a time, so that its memory does not grow with the links) and
writes it to ``documents.linkrank``, scaled so that the mean over the documents is 1: an
ordinary page has a linkrank near 1, a page every page links to one in the tens or hundreds.

``python -m search reindex`` recomputes it; the searcher reads it
(:meth:`search.crawldb.CrawlDB.linkranks`, as a query needs it: :class:`LinkRanks`) and
adds :func:`search.ranking.link_prior` to each hit's score when the ranking's
``linkrank`` weight is above 0 (README "Ranking").

This module does not import Scrapy.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, Table, bindparam, update
from sqlalchemy.exc import DBAPIError

from search.crawldb import CrawlDB
from search.db import DEADLOCK_ATTEMPTS, deadlocked
from search.models import Document

logger = logging.getLogger(__name__)

#: PageRank's damping factor (Brin and Page's, networkx's default).
DAMPING = 0.85
#: Convergence: stop when the L1 change of the ranks is below ``TOLERANCE · n`` (networkx's
#: criterion) ...
TOLERANCE = 1e-6
#: ... or after this many iterations.
MAX_ITERATIONS = 100
#: The memory PageRank gives one chunk of the links it reads back from disk
#: (:meth:`EdgeFile.chunks`): the chunk as read, and what a step makes of it, ...
EDGE_CHUNK_BYTES = 8 * 2**20
#: ... which is, beside the chunk, this many bytes a link: its source and target as
#: ``intp`` (what ``numpy.bincount`` and indexing convert them to) and its share of rank.
BYTES_PER_EDGE = 24
#: Rows written per statement.
WRITE_CHUNK = 5000


@dataclass(slots=True)
class LinkRankResult:
    documents: int
    links: int
    iterations: int
    seconds: float
    #: Rows of the links by target rebuilt with the ranks (:class:`search.models.InLink`).
    inlinks: int = 0
    #: Documents whose stored linkrank changed (the others were not written again).
    written: int = 0


def pagerank(
    sources: np.ndarray,
    targets: np.ndarray,
    n: int,
    damping: float = DAMPING,
    tol: float = TOLERANCE,
    max_iter: int = MAX_ITERATIONS,
) -> tuple[np.ndarray, int]:
    """PageRank of the *n* nodes of the graph of edges ``sources[i] -> targets[i]`` (node
    numbers), summing to 1, and the iterations it took.

    A node's rank is split evenly over its out-links (parallel edges count once each);
    the rank of nodes without out-links (dangling) and the teleport ``1 − damping`` are
    spread evenly over every node.  The edges are held in memory: :class:`EdgeFile` and
    :func:`pagerank_of_file` compute the same ranks over edges kept on disk.
    """
    out_degree = np.bincount(sources, minlength=n) if n else np.zeros(0, np.int64)
    return _power_iteration(lambda: [(sources, targets)], out_degree, n, damping, tol, max_iter)


class EdgeFile:
    """Edges ``source -> target`` (node numbers, ``int32`` pairs while the nodes are fewer
    than 2**31) in a temporary file of the system's temporary directory, deleted when
    closed; written a chunk at a time, read back in chunks of a bounded number of bytes."""

    def __init__(self, nodes: int) -> None:
        self.dtype = np.dtype(np.int32 if nodes < 2**31 else np.int64)
        self.edges = 0
        self._file = tempfile.TemporaryFile(prefix="linkrank-")  # noqa: SIM115 (close())

    def __enter__(self) -> EdgeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def write(self, sources: np.ndarray, targets: np.ndarray) -> None:
        if not len(sources):
            return
        pairs = np.empty((len(sources), 2), dtype=self.dtype)
        pairs[:, 0] = sources
        pairs[:, 1] = targets
        self._file.seek(0, os.SEEK_END)
        self._file.write(pairs.data.cast("B"))
        self.edges += len(pairs)

    def chunks(self, chunk_bytes: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The edges as ``(sources, targets)`` arrays, at most as many at once as
        *chunk_bytes* (:data:`EDGE_CHUNK_BYTES`) allows while PageRank works on them: views of
        one buffer, each valid until the next is read."""
        budget = EDGE_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        per_chunk = max(1, budget // (2 * self.dtype.itemsize + BYTES_PER_EDGE))
        buffer = np.empty((min(per_chunk, max(self.edges, 1)), 2), dtype=self.dtype)
        self._file.flush()
        self._file.seek(0)
        while True:
            read = self._file.readinto(buffer.data.cast("B"))
            edges = (read or 0) // buffer.itemsize // 2
            if not edges:
                return
            yield buffer[:edges, 0], buffer[:edges, 1]


def pagerank_of_file(
    edges: EdgeFile,
    n: int,
    chunk_bytes: int | None = None,
    damping: float = DAMPING,
    tol: float = TOLERANCE,
    max_iter: int = MAX_ITERATIONS,
) -> tuple[np.ndarray, int]:
    """:func:`pagerank` over the edges of *edges*, read a chunk at a time (one pass for the
    out-degrees, then one per iteration): the memory it takes is a few vectors of 8 bytes
    per node (the out-degrees, the shares, the ranks and their next step) and one chunk's,
    whatever the number of edges."""
    out_degree = np.zeros(n, dtype=np.int64)
    for sources, _ in edges.chunks(chunk_bytes):
        out_degree += np.bincount(sources, minlength=n)
    return _power_iteration(
        lambda: edges.chunks(chunk_bytes), out_degree, n, damping, tol, max_iter
    )


def _power_iteration(
    chunks: Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]],
    out_degree: np.ndarray,
    n: int,
    damping: float,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, int]:
    """The power iteration of :func:`pagerank`, each step one pass over the edges that
    *chunks* yields (a new pass each call)."""
    if n == 0:
        return np.empty(0, dtype=np.float64), 0
    # The transition matrix M[t, s] = 1 / outdeg(s) for each edge s -> t, applied edge by
    # edge: (M @ x)[t] = Σ over the edges s -> t of x[s] / outdeg(s).
    dangling = out_degree == 0
    share = np.divide(1.0, out_degree, out=np.zeros(n), where=~dangling)

    def step(x: np.ndarray) -> np.ndarray:
        shares = x * share
        total = np.zeros(n)
        for sources, targets in chunks():
            if len(sources):
                total += np.bincount(targets, weights=shares[sources], minlength=n)
        return total

    x = np.full(n, 1.0 / n)
    for iteration in range(1, max_iter + 1):
        previous = x
        x = damping * (step(x) + x[dangling].sum() / n) + (1.0 - damping) / n
        if np.abs(x - previous).sum() < n * tol:
            return x, iteration
    logger.warning("linkrank: PageRank did not converge in %d iterations", max_iter)
    return x, max_iter


def update_linkrank(engine: Engine, chunk: int = 20_000) -> LinkRankResult:
    """Compute the PageRank of every stored document over the stored links and write it
    to ``documents.linkrank`` (mean 1), then rebuild the links by target
    (:meth:`search.crawldb.CrawlDB.rebuild_inlinks`): the link analysis the crawl runs
    when it finishes and ``python -m search reindex`` after a rebuild.

    Memory: independent of the number of links.  The links are read *chunk* rows at a
    time, numbered and written to a temporary file (:class:`EdgeFile`, 8 bytes a link on
    disk), which PageRank reads back :data:`EDGE_CHUNK_BYTES` at a time; beside that, a
    few vectors of 8 bytes per document (the ids, the out-degrees, the ranks).
    """
    started = time.perf_counter()
    crawldb = CrawlDB(engine)
    ids = crawldb.graph_documents()
    ids.sort()
    with EdgeFile(len(ids)) as edges:
        for pairs in crawldb.link_graph(chunk):
            if not len(pairs):
                continue
            src, dst = pairs[:, 0], pairs[:, 1]
            # Document ids to node numbers; links between documents outside the graph
            # are dropped.
            src_node = np.searchsorted(ids, src)
            dst_node = np.searchsorted(ids, dst)
            known = (src_node < len(ids)) & (dst_node < len(ids))
            known[known] &= (ids[src_node[known]] == src[known]) & (
                ids[dst_node[known]] == dst[known]
            )
            known &= src != dst  # a page does not vote for itself
            edges.write(src_node[known], dst_node[known])
        links = edges.edges
        read = time.perf_counter()
        ranks, iterations = pagerank_of_file(edges, len(ids))
    ranked = time.perf_counter()
    scaled = ranks * len(ids)
    written = _write_linkranks(engine, crawldb, ids, scaled)
    stored = time.perf_counter()
    inlinks = crawldb.rebuild_inlinks()
    done = time.perf_counter()
    result = LinkRankResult(len(ids), links, iterations, done - started, inlinks, written)
    logger.info(
        "linkrank: %d documents (%d changed), %d links, %d iterations, %d links by target, "
        "%.1f s (links read %.1f, ranked %.1f, written %.1f, links by target %.1f)",
        result.documents,
        result.written,
        result.links,
        result.iterations,
        result.inlinks,
        result.seconds,
        read - started,
        ranked - read,
        stored - ranked,
        done - stored,
    )
    return result


def _write_linkranks(engine: Engine, crawldb: CrawlDB, ids: np.ndarray, ranks: np.ndarray) -> int:
    """Store *ranks* as the linkranks of documents *ids* (ascending), in one transaction,
    :data:`WRITE_CHUNK` at a time; the number of rows written.

    A document whose stored linkrank is the same as a 32-bit float (the precision a
    search reads them in, :class:`LinkRanks`) is not written: a rebuild or a crawl that
    changed no link rewrites no row (on PostgreSQL each row written is a new version of
    it, in the table and in each of its indexes, until a ``VACUUM``)."""
    for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
        try:
            with engine.begin() as conn:
                return sum(
                    _write_changed(
                        conn, crawldb, ids[lo : lo + WRITE_CHUNK], ranks[lo : lo + WRITE_CHUNK]
                    )
                    for lo in range(0, len(ids), WRITE_CHUNK)
                )
        except DBAPIError as exc:
            # Another writer updated the same rows in another order (a rebuild marking
            # its documents indexed while its reader writes the linkranks): PostgreSQL
            # rolled this transaction back to break the deadlock; the other goes on.
            if attempt == DEADLOCK_ATTEMPTS or not deadlocked(exc):
                raise
            logger.info("linkrank: deadlocked with another writer; writing again")
            time.sleep(0.05 * attempt)
    return 0  # (not reached: the last attempt returns or raises)


def _write_changed(conn: Any, crawldb: CrawlDB, ids: np.ndarray, ranks: np.ndarray) -> int:
    """Of documents *ids* (ascending), write the *ranks* that differ from those stored,
    in the transaction of *conn*; how many."""
    stored_ids, stored = crawldb.linkranks(ids, conn)
    changed = np.ones(len(ids), dtype=bool)
    at = np.searchsorted(ids, stored_ids)
    changed[at] = stored != ranks[at].astype(np.float32)
    if not changed.any():
        return 0
    table = Document.__table__
    assert isinstance(table, Table)
    conn.execute(
        update(table).where(table.c.id == bindparam("doc_id")).values(linkrank=bindparam("rank")),
        [
            {"doc_id": doc_id, "rank": rank}
            for doc_id, rank in zip(ids[changed].tolist(), ranks[changed].tolist(), strict=True)
        ],
    )
    return int(changed.sum())


class LinkRanks:
    """Each document number's linkrank in one index generation (0 without one), indexed
    like an array (``linkranks[docnums]``), read from the database as it is asked for.

    A query needs the linkranks of the hits that can reach its best page with their prior
    (:meth:`search.searchsession.SearchSession._best_with_prior`), a few hundred at most
    usually: a new process reads those by id, not the 100,000 of every document (~50 ms of
    its first query).  :meth:`read_all` reads every document's (what a long-lived process
    does before it answers); so does a look-up of more than :data:`READ_ALL_AT` unread
    documents.
    """

    #: Unread documents asked for at once beyond which every linkrank is read.
    READ_ALL_AT = 5000

    def __init__(self, engine: Engine, docids: np.ndarray) -> None:
        self.engine = engine
        #: Each document number's database id (-1: none).
        self.docids = docids
        self._values = np.zeros(len(docids), dtype=np.float32)
        # Whether each document number's value is read (nothing to read without an id).
        self._known = docids < 0
        self._complete = False
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """The bytes of its own arrays (the ids are the index generation's)."""
        return int(self._values.nbytes + self._known.nbytes)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def complete(self) -> bool:
        """Whether every document's linkrank is read."""
        return self._complete

    def __getitem__(self, docnums: Any) -> Any:
        if not self._complete:
            wanted = np.asarray(docnums, dtype=np.int64).ravel()
            missing = wanted[~self._known[wanted]]
            if len(missing):
                self._read(missing)
        return self._values[docnums]

    def read_all(self) -> None:
        """Read every document's linkrank now."""
        with self._lock:
            if self._complete:
                return
            ids, ranks = CrawlDB(self.engine).linkranks()
            values = np.zeros(len(self._values), dtype=np.float32)
            if len(ids):
                by_id = np.zeros(int(ids.max()) + 1, dtype=np.float32)
                by_id[ids] = ranks
                known = (self.docids >= 0) & (self.docids < len(by_id))
                values[known] = by_id[self.docids[known]]
            self._values = values
            self._complete = True

    def take(self, other: LinkRanks) -> None:
        """Take the linkranks *other* (of an earlier index generation) read, by database
        id: a commit's new generation reads from the database only those of the pages it
        added (as queries need them), not again those of every page."""
        with other._lock:  # read_all() marks none known: all are
            known = np.ones(len(other), dtype=bool) if other._complete else other._known.copy()
            values = other._values
        have = known & (other.docids >= 0)
        ids = other.docids[have]
        if not len(ids):
            return
        mine = np.flatnonzero(self.docids >= 0)
        size = int(max(ids.max(), self.docids.max(initial=0))) + 1
        by_id = np.zeros(size, dtype=np.float32)
        found = np.zeros(size, dtype=bool)
        by_id[ids] = values[have]
        found[ids] = True
        taken = mine[found[self.docids[mine]]]
        with self._lock:
            # The values first: readers without the lock trust what is marked known.
            self._values[taken] = by_id[self.docids[taken]]
            self._known[taken] = True
            self._complete = bool(self._known.all())

    def _read(self, docnums: np.ndarray) -> None:
        if len(docnums) > self.READ_ALL_AT:
            self.read_all()
            return
        with self._lock:
            docnums = docnums[~self._known[docnums]]
            if not len(docnums):
                return
            wanted = self.docids[docnums]
            ids, ranks = CrawlDB(self.engine).linkranks(wanted)
            by_id = dict(zip(ids.tolist(), ranks.tolist(), strict=True))
            # The values first: readers without the lock trust what is marked known.
            self._values[docnums] = [by_id.get(i, 0.0) for i in wanted.tolist()]
            self._known[docnums] = True
