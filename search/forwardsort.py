"""The forward index of an array file (:mod:`search.arrayfile`) sorted in bounded memory:
a segment's postings come term after term and are written document after document (each
document's terms in term order), an external merge sort whose memory is set in bytes
(:data:`search.arrayfile.SORT_BYTES`), not by the segment's size.

1. *Runs*: the postings are read *size* at a time (in term order), each chunk sorted by
   document (a stable sort: a document's postings stay in term order) and appended to one
   anonymous temporary file in the segment's folder, with where each range of documents
   starts in it.
2. *Merge*: the documents are cut into ranges of at most *size* postings (or one document;
   each document's count of postings is known beforehand), and each range's postings are
   read from every run (each run's piece of a range is contiguous, and the runs come in
   term order), sorted by document (stable again) and written.  The weights come after
   every term in the file, so they go to a second temporary file meanwhile.

A sort of *size* postings holds about :data:`POSTING_BYTES` bytes a posting at its peak
(its three columns, the sort's permutation and NumPy's merge buffer, one sorted column).
Besides that, what it holds grows with the number of runs times the number of ranges (an
offset each: 8 bytes × (postings / *size*)², ~170 kB for 38 million postings, a segment of
100,000 pages of ``benchmarks/scale.py``'s site, at the default size).  A segment of at
most *size* postings is sorted in memory, with no temporary file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

#: Bytes a posting takes at the peak of the array file's writer: its document, term and
#: weight (12), the sort's permutation (8), NumPy's stable argsort buffer (up to 4) and
#: one sorted column (4); measured with ``tracemalloc``: 35 bytes a posting, 1.1 MB when
#: 1 MB's worth of postings are sorted at a time (``tests/test_unit_forwardsort.py``).
POSTING_BYTES = 36

#: Postings in the term order of a segment, a chunk at a time: documents (``uint32``) and
#: weights (``float32``), *size* at a time.
Postings = Callable[[int], Iterable[tuple[np.ndarray, np.ndarray]]]


def doc_ranges(fwd_starts: np.ndarray, size: int) -> np.ndarray:
    """The bounds of consecutive ranges of documents of at most *size* postings each (or
    one document), from each document's first posting *fwd_starts* (and the end)."""
    n_docs = len(fwd_starts) - 1
    bounds = [0]
    while bounds[-1] < n_docs:
        lo = bounds[-1]
        hi = int(np.searchsorted(fwd_starts, fwd_starts[lo] + size, side="right")) - 1
        bounds.append(min(max(hi, lo + 1), n_docs))
    return np.array(bounds, dtype=np.int64)


def with_terms(
    postings: Postings, starts: np.ndarray, size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The postings *size* at a time: documents, weights and each posting's term
    (``uint32``; *starts*: each term's first posting, and the end)."""
    base = 0
    for docs, tfs in postings(size):
        end = base + len(docs)
        first = int(np.searchsorted(starts, base, side="right")) - 1
        last = int(np.searchsorted(starts, end, side="left"))
        bounds = np.clip(starts[first : last + 1], base, end)
        terms = np.repeat(np.arange(first, last, dtype=np.uint32), np.diff(bounds))
        base = end
        yield docs, tfs, terms


def write_forward(
    write: Callable[[Any], Any],
    postings: Postings,
    starts: np.ndarray,
    fwd_starts: np.ndarray,
    size: int,
    folder: str | None,
    align: int = 8,
) -> None:
    """Write the forward index's terms (``uint32``) then its weights (``float32``), each
    padded to *align* bytes, of the postings *postings* gives (term order; *starts*: each
    term's first posting), through *write*, sorting at most *size* postings at a time
    (*fwd_starts*: each document's first posting in the forward index, and the end)."""
    n_post = int(fwd_starts[-1]) if len(fwd_starts) else 0
    pad = bytes(-4 * n_post % align)
    edges = doc_ranges(fwd_starts, size)
    if len(edges) <= 2 or not n_post:
        _write_in_memory(write, postings, starts, n_post, pad)
        return
    with (
        tempfile.TemporaryFile(dir=folder, prefix="spidersite-", suffix=".tmp") as runs,
        tempfile.TemporaryFile(dir=folder, prefix="spidersite-", suffix=".tmp") as weights,
    ):
        made = _write_runs(runs, postings, starts, edges, size)
        for k in range(len(edges) - 1):
            count = int(fwd_starts[edges[k + 1]] - fwd_starts[edges[k]])
            docs = np.empty(count, dtype=np.uint32)
            terms = np.empty(count, dtype=np.uint32)
            tfs = np.empty(count, dtype=np.uint32)
            at = 0
            for base, n, cuts in made:
                a, b = int(cuts[k]), int(cuts[k + 1])
                if b == a:
                    continue
                for column, out in enumerate((docs, terms, tfs)):
                    runs.seek(4 * (3 * base + column * n + a))
                    _read_into(runs, out[at : at + b - a])
                at += b - a
            order = np.argsort(docs, kind="stable")
            del docs
            write(terms[order])
            del terms
            tfs[order].tofile(weights)
            del order, tfs
        write(pad)
        weights.flush()
        weights.seek(0)
        left = n_post
        while left:
            chunk = np.fromfile(weights, dtype=np.uint32, count=min(size, left))
            left -= len(chunk)
            write(chunk)
        write(pad)


def _write_in_memory(
    write: Callable[[Any], Any], postings: Postings, starts: np.ndarray, n_post: int, pad: bytes
) -> None:
    """The forward index of at most one chunk of postings, sorted in memory."""
    parts = list(with_terms(postings, starts, max(1, n_post)))
    if parts:
        docs, tfs, terms = (np.concatenate([p[i] for p in parts]) for i in range(3))
        order = np.argsort(docs, kind="stable")
        write(terms[order])
        write(pad)
        write(np.ascontiguousarray(tfs, dtype=np.float32)[order])
    else:
        write(pad)
    write(pad)


def _write_runs(
    runs: Any, postings: Postings, starts: np.ndarray, edges: np.ndarray, size: int
) -> list[tuple[int, int, np.ndarray]]:
    """Sort the postings by document *size* at a time into runs appended to *runs*
    (each run: its documents, terms and weights' bits, ``uint32`` each); each run's first
    posting, size, and where each range of documents of *edges* starts in it."""
    made = []
    base = 0
    for docs, tfs, terms in with_terms(postings, starts, size):
        order = np.argsort(docs, kind="stable")
        sorted_docs = docs[order]
        cuts = np.searchsorted(sorted_docs, edges, side="left")
        sorted_docs.tofile(runs)
        del sorted_docs
        terms[order].tofile(runs)
        np.ascontiguousarray(tfs, dtype=np.float32).view(np.uint32)[order].tofile(runs)
        made.append((base, len(order), cuts))
        base += len(order)
    runs.flush()
    return made


def _read_into(f: Any, out: np.ndarray) -> None:
    """Fill *out* from the file *f*'s position."""
    view = out.data.cast("B")
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise EOFError("a run of the forward index's sort is short")
        got += n
