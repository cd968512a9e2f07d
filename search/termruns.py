"""The full rebuild's sort of postings by term (:class:`TermRuns`): postings added
document after document, given back term after term, in bounded memory
(:data:`search.arrayfile.BUFFER_POSTINGS`), for :mod:`search.indexrebuild`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from search import arrayfile

#: A piece of a long term's postings (:meth:`TermRuns.terms`) is a multiple of this many
#: postings: a multiple of the postings of one of Whoosh's posting blocks (128), so that
#: a term written in pieces has the blocks it has written whole.
PIECE_ALIGN = 1024


class TermRuns:
    """Postings added document after document, given back term after term, in bounded
    memory: an external sort by (term, document) for a segment written whole.

    Postings are (term id, document number, weight, weighted counts per section,
    frequency); :attr:`ranks` gives each term id's place in the terms' sort order, and may
    be replaced by a longer one as new terms come (the order of the terms already seen
    must stay the same).  With *ranking*, it is asked for them before each sort (a writer
    whose vocabulary grows as documents come ranks its terms only when they are sorted).  At most
    :data:`BUFFER_POSTINGS` postings are held before they are sorted by term into a *run*
    on disk (anonymous temporary files in *folder*); the runs cover ascending ranges of
    documents.  :meth:`terms` then reads the runs back by ranges of terms of at most
    :attr:`window` postings, so that each term's postings come in document order whatever
    the segment's size.
    """

    def __init__(
        self,
        folder: str | None,
        ranks: np.ndarray,
        buffer: int | None = None,
        ranking: Callable[[], np.ndarray] | None = None,
    ) -> None:
        self.buffer = buffer or arrayfile.BUFFER_POSTINGS
        #: Postings read back at a time: a quarter of the buffer, as their encoding into
        #: Whoosh's blocks takes ~150 bytes a posting of Python lists (~20 MB).
        self.window = max(1, self.buffer // 4)
        self.folder = folder
        self.ranks = ranks
        self._ranking = ranking
        #: Postings per term id.
        self.df = np.zeros(len(ranks), dtype=np.int64)
        self._pending: list[tuple[np.ndarray, ...]] = []
        self._held = 0
        self._files: list[Any] = []
        #: Each run's first posting and size.
        self._runs: list[tuple[int, int]] = []
        self._written = 0

    def __len__(self) -> int:
        return self._written + self._held

    def add(
        self,
        terms: np.ndarray,
        docs: np.ndarray,
        weights: np.ndarray,
        sections: np.ndarray | None = None,
        freqs: np.ndarray | None = None,
    ) -> None:
        """Postings of documents after every one added so far (*sections*: one row of
        weighted counts a posting; without them, each weight is its body's; *freqs*: each
        posting's frequency, by default its rounded weight, at least 1).  Within one call,
        a term's postings must come in document order."""
        if sections is None:
            sections = np.zeros((len(terms), arrayfile.N_SECTIONS))
            sections[:, 0] = weights
        if freqs is None:
            freqs = np.maximum(np.rint(weights), 1)
        # Held as they are written: 32 bytes a posting.
        self._pending.append(
            (
                np.asarray(terms, dtype=np.uint32),
                np.asarray(docs, dtype=np.uint32),
                np.asarray(weights, dtype=np.float64),
                np.asarray(sections, dtype=arrayfile.SECTION_DTYPE),
                np.asarray(freqs, dtype=np.uint32),
            )
        )
        self._held += len(terms)
        if self._held >= self.buffer:
            self._spill()

    def _spill(self) -> None:
        if not self._held:
            return
        pending, self._pending, self._held = self._pending, [], 0
        terms, docs, weights, sections, freqs = (
            np.concatenate([p[i] for p in pending]) for i in range(5)
        )
        del pending
        if self._ranking is not None:
            self.ranks = self._ranking()
        # Documents stay ascending within a term.
        order = np.argsort(self.ranks[terms], kind="stable")
        if not self._files:
            self._files = [
                tempfile.TemporaryFile(dir=self.folder, prefix="spidersite-", suffix=".tmp")  # noqa: SIM115
                for _ in range(5)
            ]
        columns: tuple[np.ndarray, ...] = (terms, docs, weights, sections, freqs)
        for f, a in zip(self._files, columns, strict=True):
            a[order].tofile(f)
        counts = np.bincount(terms, minlength=len(self.df))
        if len(counts) > len(self.df):
            counts[: len(self.df)] += self.df
            self.df = counts.astype(np.int64)
        else:
            self.df += counts
        self._runs.append((self._written, len(terms)))
        self._written += len(terms)

    def _read(self, column: int, dtype: Any, start: int, count: int, width: int = 1) -> np.ndarray:
        f = self._files[column]
        f.seek(start * width * np.dtype(dtype).itemsize)
        return np.fromfile(f, dtype=dtype, count=count * width)

    def terms(
        self,
    ) -> Iterator[
        tuple[list[int], list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]
    ]:
        """The terms that have postings, in rank order, a range of them at a time: their
        ranks, where each one's postings start (and where the last one's end), then the
        postings' documents (ascending within a term), weights, weighted counts per
        section (one row a posting) and frequencies, and whether the range's last term
        goes on in the next one.  A term of more than :attr:`window` postings comes alone,
        in pieces of a multiple of :data:`PIECE_ALIGN` postings (the last one fewer), so
        that what is held does not grow with the term's documents."""
        self._spill()
        if not self._runs:
            return
        if self._ranking is not None:
            self.ranks = self._ranking()
        for f in self._files:
            f.flush()
        ranks = self.ranks
        df = np.zeros(len(ranks), dtype=np.int64)
        df[ranks[: len(self.df)]] = self.df
        # Ranges of terms of at most *window* postings (or one term).
        ends = np.cumsum(df)
        bounds = [0]
        while bounds[-1] < len(df):
            lo = bounds[-1]
            hi = int(np.searchsorted(ends, ends[lo] - df[lo] + self.window, side="right"))
            bounds.append(min(max(hi, lo + 1), len(df)))
        edges = np.array(bounds, dtype=np.int64)
        # Where each range starts in each run (sorted by term, in the same order).
        offsets = []
        for start, size in self._runs:
            of_run = ranks[self._read(0, np.uint32, start, size)]
            offsets.append(start + np.searchsorted(of_run, edges, side="left"))
        for k in range(len(bounds) - 1):
            parts = [
                (int(off[k]), int(off[k + 1] - off[k])) for off in offsets if off[k + 1] > off[k]
            ]
            if not parts:
                continue
            if bounds[k + 1] - bounds[k] == 1 and df[bounds[k]] > self.window:
                yield from self._pieces(bounds[k], parts)
                continue
            got = ranks[np.concatenate([self._read(0, np.uint32, a, n) for a, n in parts])]
            docs = np.concatenate([self._read(1, np.uint32, a, n) for a, n in parts])
            weights = np.concatenate([self._read(2, np.float64, a, n) for a, n in parts])
            width = arrayfile.N_SECTIONS
            sections = np.concatenate(
                [self._read(3, arrayfile.SECTION_DTYPE, a, n, width) for a, n in parts]
            ).reshape(-1, width)
            freqs = np.concatenate([self._read(4, np.uint32, a, n) for a, n in parts])
            # The runs come in document order: a stable sort by term keeps it per term.
            order = np.argsort(got, kind="stable")
            got, docs, weights = got[order], docs[order], weights[order]
            sections, freqs = sections[order], freqs[order]
            cuts = [0, *(np.flatnonzero(np.diff(got)) + 1).tolist(), len(got)]
            yield got[cuts[:-1]].tolist(), cuts, docs, weights, sections, freqs, False

    def _pieces(
        self, rank: int, parts: list[tuple[int, int]]
    ) -> Iterator[
        tuple[list[int], list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]
    ]:
        """The postings of the term of *rank* (its slice *parts* of each run, in the
        runs' order: document order) in pieces of :meth:`piece_size` postings, the last
        one fewer; at most two pieces' worth held at once."""
        piece = self.piece_size()
        total = sum(n for _, n in parts)
        emitted = 0
        held: list[tuple[np.ndarray, ...]] = []
        held_n = 0
        width = arrayfile.N_SECTIONS

        def take(count: int, more: bool) -> tuple[Any, ...]:
            nonlocal held, held_n
            columns = [np.concatenate([h[i] for h in held]) for i in range(4)]
            out = [c[:count] for c in columns]
            rest = [c[count:] for c in columns]
            held = [tuple(rest)] if len(rest[0]) else []
            held_n -= count
            docs, weights, sections, freqs = out
            return [rank], [0, count], docs, weights, sections.reshape(-1, width), freqs, more

        for start, size in parts:
            for at in range(start, start + size, piece):
                n = min(piece, start + size - at)
                held.append(
                    (
                        self._read(1, np.uint32, at, n),
                        self._read(2, np.float64, at, n),
                        self._read(3, arrayfile.SECTION_DTYPE, at, n, width).reshape(-1, width),
                        self._read(4, np.uint32, at, n),
                    )
                )
                held_n += n
                while held_n >= piece and emitted + piece < total:
                    yield take(piece, True)
                    emitted += piece
        if held_n:
            yield take(held_n, False)

    def piece_size(self) -> int:
        """Postings in each piece of a term of more than :attr:`window` postings: the
        window, rounded down to a multiple of :data:`PIECE_ALIGN`."""
        return max(PIECE_ALIGN, self.window // PIECE_ALIGN * PIECE_ALIGN)

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []
        self._pending, self._held = [], 0
