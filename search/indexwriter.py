"""The writer of every incremental commit (:meth:`search.index.Index.writer`): documents
(:class:`search.doccolumns.IndexDoc`) are gathered into arrays (:class:`DocBatch`, term ids of a
vocabulary the writer grows as stems come: a dict, then, from the first segment merged, a
sorted array, :class:`Vocabulary`) and written by the segment writer from arrays
(:class:`search.arraywriter.ArraySegmentWriter`), and the segments a commit merges
(:mod:`search.mergepolicy`) are written from their array files
(:class:`search.segmentwords.SegmentWords`): their documents in order, the deleted ones
dropped, their ``words`` postings never read through Whoosh's matchers.  The files are
those of Whoosh's own segment writer and merge, byte for byte.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any

import numpy as np

from search import arrayfile
from search.arrayfile import FIELD as WORDS_FIELD
from search.arraywriter import ArraySegmentWriter, DocBatch
from search.doccolumns import DocColumns
from search.segmentwords import SegmentWords, WordsChunk, fixed_width_of

if TYPE_CHECKING:
    from search.doccolumns import IndexDoc

#: Documents the writer gathers before it adds them as one batch.
PENDING_DOCS = 256
#: The share of :data:`search.arrayfile.BUFFER_POSTINGS` a commit holds before it sorts
#: its postings into a run on disk (and a merge reads of a segment at a time).
BUFFER_SHARE = 4


class IncrementalSegmentWriter(ArraySegmentWriter):
    """The segment writer of an incremental commit: documents one by one
    (:meth:`add_doc`, gathered :data:`PENDING_DOCS` at a time), deletions, and the
    merges of its merge policy (:meth:`add_reader`)."""

    def __init__(self, ix: Any, **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        #: Term id of each stem of the new documents, in the order they came; from the
        #: first segment merged, :attr:`_merged` instead.
        self._vocabulary: dict[str, int] = {}
        self._merged: Vocabulary | None = None
        self._rank_of = np.zeros(0, dtype=np.int64)
        self._pending: list[IndexDoc] = []
        self._pending_update = True

    def _forget_stems(self) -> None:
        super()._forget_stems()
        self._vocabulary = {}
        self._merged = None
        self._rank_of = np.zeros(0, dtype=np.int64)

    def _buffer(self) -> int:
        return max(1, arrayfile.BUFFER_POSTINGS // BUFFER_SHARE)

    def _ranks(self) -> np.ndarray:
        if self._merged is not None:
            if len(self._rank_of) != len(self._merged):
                self._rank_of = self._merged.ranks()
            return self._rank_of
        if len(self._rank_of) != len(self._vocabulary):
            stems = list(self._vocabulary)
            order = sorted(range(len(stems)), key=stems.__getitem__)
            ranks = np.empty(len(stems), dtype=np.int64)
            ranks[order] = np.arange(len(stems))
            self._stems = [stems[i] for i in order]
            self._rank_of = ranks
        return self._rank_of

    def _texts(self, ranks: list[int]) -> list[bytes]:
        if self._merged is not None:
            return self._merged.texts(ranks)
        return super()._texts(ranks)

    def _merging(self) -> Vocabulary:
        """The vocabulary in arrays, from the first segment merged (the new documents'
        stems before it): a merge's terms are the union of sorted lists, ~135,000 of them
        at 85,000 pages, which as a dict of strings took ~20 MB."""
        if self._merged is None:
            self._merged = Vocabulary.of(self._vocabulary)
            self._vocabulary = {}
            self._stems = []
        return self._merged

    # -- new documents ------------------------------------------------------------

    def add_doc(self, doc: IndexDoc, update: bool = True) -> None:
        """Add *doc* (with *update*, it replaces the documents of its id in the index's
        segments, as Whoosh's ``update_document`` does)."""
        if self._pending and update != self._pending_update:
            self.flush_docs()
        self._pending_update = update
        self._pending.append(doc)
        if len(self._pending) >= PENDING_DOCS:
            self.flush_docs()

    def flush_docs(self) -> None:
        """Add the documents gathered so far."""
        if self._pending:
            docs, self._pending = self._pending, []
            self._add_columns(DocColumns.of_docs(docs), self._pending_update)

    def add_columns(self, columns: DocColumns, update: bool = True) -> None:
        """Add the documents *columns* (with *update*, each replaces the documents of its
        id in the index's segments), after those added before."""
        self.flush_docs()
        self._add_columns(columns, update)

    def _add_columns(self, columns: DocColumns, update: bool) -> None:
        if self._merged is not None:  # documents after a merge (not the index's order)
            terms = self._merged.ids_of(*fixed_width_of([s.encode("utf-8") for s in columns.stems]))
        else:
            vocabulary = self._vocabulary
            term_id = vocabulary.setdefault
            # A new stem's id is the vocabulary's size before it is added.
            terms = np.fromiter(
                (term_id(s, len(vocabulary)) for s in columns.stems),
                np.int64,
                len(columns.stems),
            )
        batch = DocBatch(
            columns.docids,
            columns.urls,
            columns.hosts,
            columns.sizes,
            terms,
            columns.weights,
            columns.weighted_sections(),
        )
        self.add_batch(batch, update=update)

    def commit(self, *args: Any, **kwargs: Any) -> None:
        self.flush_docs()  # before the merge: new documents come first in the segment
        super().commit(*args, **kwargs)

    def cancel(self) -> None:
        self._pending = []
        super().cancel()

    # -- merges -------------------------------------------------------------------

    def add_reader(self, reader: Any) -> None:
        """Append the live documents of the segment of *reader* (Whoosh's
        ``add_reader``): stored fields, lengths and the postings of every field but
        ``words`` through Whoosh (a few a document), the ``words`` postings from the
        segment's array file."""
        self._check_state()
        self.flush_docs()
        basedoc = self.docnum
        indexed = {f for f in reader.indexed_field_names() if f in self.schema}
        docmap = self.write_per_doc(set(self.schema.names()) | indexed, reader)
        self.add_postings_to_pool(reader, basedoc, docmap)
        self._add_words_of(reader, basedoc)
        self._added = True

    def add_postings_to_pool(self, reader: Any, startdoc: int, docmap: Any) -> None:
        add = self.pool.add
        for fieldname in reader.indexed_field_names():
            if fieldname == WORDS_FIELD or fieldname not in self.schema:
                continue
            for btext in reader.lexicon(fieldname):
                m = reader.postings(fieldname, btext)
                while m.is_active():
                    docnum = m.id()
                    newdoc = docmap[docnum] if docmap is not None else startdoc + docnum
                    add((fieldname, btext, newdoc, m.weight(), m.value()))
                    m.next()

    def _add_words_of(self, reader: Any, basedoc: int) -> None:
        total = reader.doc_count_all()
        live = np.fromiter(reader.all_doc_ids(), dtype=np.int64)
        newdoc = np.full(total, -1, dtype=np.int64)
        newdoc[live] = basedoc + np.arange(len(live), dtype=np.int64)
        with SegmentWords(self.storage.folder, reader.segment()) as words:
            self._length_bytes += words.lengths(total)[live].tobytes()
            ids = self._merging().ids_of(words.terms, words.long_terms)
            # Read a quarter of the commit's buffer at a time (what the sort holds is
            # the buffer: a chunk's temporaries take ~100 bytes a posting).
            for chunk in words.chunks(self._runs.window):
                # A term's postings come in document order (a term of more postings than
                # a chunk in several, in order), after those of the documents added
                # before this segment.
                n_terms = len(chunk.starts) - 1
                local = np.repeat(np.arange(n_terms), np.diff(chunk.starts))
                new = newdoc[chunk.docs]
                keep = new >= 0
                weights = chunk.tfs.astype(np.float64)
                freqs = _freqs(reader, words, chunk, local, weights, keep)
                self._runs.add(
                    ids[chunk.first + local[keep]],
                    new[keep],
                    weights[keep],
                    chunk.sections[keep],
                    freqs[keep],
                )


class Vocabulary:
    """Term ids of terms (``bytes``), given in the order the terms first come, and the
    terms kept sorted in one fixed-width array (:attr:`terms`, ``S<longest>``, with the id
    of each in :attr:`ids`): a term costs its longest term's width and 8 bytes, where a
    dict of strings took ~110.  A term longer than :data:`search.segmentwords.WIDE`
    bytes is kept apart (:attr:`long`, term → id), so that it widens no other."""

    def __init__(self) -> None:
        self.terms: np.ndarray = np.zeros(0, dtype="S1")
        self.ids = np.zeros(0, dtype=np.int64)
        self.long: dict[bytes, int] = {}
        self._next = 0
        #: The long terms in order, and each one's rank (None: to be made again).
        self._apart: tuple[list[bytes], np.ndarray] | None = None

    @classmethod
    def of(cls, ids: dict[str, int]) -> Vocabulary:
        """The vocabulary of *ids* (stem → id, the ids 0 to n − 1)."""
        vocabulary = cls()
        terms, long = fixed_width_of([s.encode("utf-8") for s in ids])
        given = np.fromiter(ids.values(), np.int64, len(ids))
        short = np.ones(len(ids), dtype=bool)
        for i, term in long.items():
            vocabulary.long[term] = int(given[i])
            short[i] = False
        terms, given = terms[short], given[short]
        order = np.argsort(terms, kind="stable")
        vocabulary.terms, vocabulary.ids = terms[order], given[order]
        vocabulary._next = len(ids)
        return vocabulary

    def __len__(self) -> int:
        return self._next

    def ids_of(self, terms: np.ndarray, long: dict[int, bytes] | None = None) -> np.ndarray:
        """The id of each of *terms* (an array of ``S``; the terms of the positions of
        *long* are those, :func:`search.segmentwords.fixed_width`); a term not seen
        before gets the next id (the number of terms before it)."""
        out = np.empty(len(terms), dtype=np.int64)
        short = np.ones(len(terms), dtype=bool)
        for i, term in (long or {}).items():
            short[i] = False
            tid = self.long.get(term)
            if tid is None:
                tid = self.long[term] = self._next
                self._next += 1
                self._apart = None
            out[i] = tid
        if not short.any():
            return out
        unique, inverse = np.unique(terms[short] if long else terms, return_inverse=True)
        if self.terms.dtype.itemsize < unique.dtype.itemsize:
            self.terms = self.terms.astype(unique.dtype)
        unique = unique.astype(self.terms.dtype)
        at = np.searchsorted(self.terms, unique)
        found = at < len(self.terms)
        found[found] = self.terms[at[found]] == unique[found]
        ids = np.empty(len(unique), dtype=np.int64)
        ids[found] = self.ids[at[found]]
        new = np.flatnonzero(~found)
        if len(new):
            ids[new] = self._next + np.arange(len(new), dtype=np.int64)
            self._next += len(new)
            self.terms = np.insert(self.terms, at[new], unique[new])
            self.ids = np.insert(self.ids, at[new], ids[new])
            self._apart = None
        out[short] = ids[inverse.reshape(-1)]
        return out

    def _long_ranks(self) -> tuple[list[bytes], np.ndarray]:
        """The long terms in order and each one's rank: after the array's terms that
        sort before it (a term of the array sorts before a long one as its bytes do), and
        the long terms before it."""
        if self._apart is None:
            order = sorted(self.long)
            before = [bisect_right(self.terms, term) for term in order]
            ranks = np.asarray(before, dtype=np.int64) + np.arange(len(order), dtype=np.int64)
            self._apart = (order, ranks)
        return self._apart

    def ranks(self) -> np.ndarray:
        """Each term id's place in the sorted order of the terms."""
        ranks = np.empty(self._next, dtype=np.int64)
        order, long_ranks = self._long_ranks()
        places = np.arange(len(self.terms), dtype=np.int64)
        # A term of the array comes after the long terms whose rank is not above it.
        before = long_ranks - np.arange(len(order), dtype=np.int64)
        ranks[self.ids] = places + np.searchsorted(before, places, side="right")
        if order:
            ranks[[self.long[t] for t in order]] = long_ranks
        return ranks

    def texts(self, ranks: list[int]) -> list[bytes]:
        """The bytes of the terms of *ranks*."""
        r = np.asarray(ranks, dtype=np.int64)
        order, long_ranks = self._long_ranks()
        if not order:
            return self.terms[r].tolist()
        k = np.searchsorted(long_ranks, r)  # long terms ranked before each
        is_long = long_ranks[np.minimum(k, len(order) - 1)] == r
        out: list[bytes] = self.terms[np.where(is_long, 0, r - k)].tolist()
        for i in np.flatnonzero(is_long).tolist():
            out[i] = order[k[i]]
        return out


def _freqs(
    reader: Any,
    words: SegmentWords,
    chunk: WordsChunk,
    local: np.ndarray,
    weights: np.ndarray,
    keep: np.ndarray,
) -> np.ndarray:
    """The frequency of each posting of *chunk* (the first 4 bytes of its Whoosh value):
    its weight rounded (``max(1, round(w))`` of the exact weight, :func:`postings`), but
    the array file keeps the weight as ``float32``: one whose fraction is exactly .5 may
    have been rounded from either side, and its frequency is read from Whoosh."""
    freqs = np.maximum(np.rint(weights), 1)
    unsure = np.flatnonzero(keep & (weights >= 1.5) & (weights % 1 == 0.5))
    matcher: Any = None
    term = -1
    for i in unsure.tolist():
        if local[i] != term:
            term = int(local[i])
            matcher = reader.postings(WORDS_FIELD, words.term(chunk.first + term))
        doc = int(chunk.docs[i])
        matcher.skip_to(doc)
        if matcher.is_active() and matcher.id() == doc:
            freqs[i] = int.from_bytes(matcher.value()[:4], "big")
    return freqs
