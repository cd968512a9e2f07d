"""The segment writer of the index (:class:`ArraySegmentWriter`): documents come as arrays
(:class:`DocBatch`), the ``words`` postings, nearly all of a segment's, are sorted by term
in bounded memory (:class:`search.termruns.TermRuns`) and encoded a block at a time by the
codec's field writer (:meth:`search.arraycodec._FieldWriter.add_terms`), instead of going
one by one through Whoosh's posting pool, its sorted runs on disk and their merge.  Every
other field (two postings a document) goes through Whoosh as usual.

Its files are those of Whoosh's own segment writer fed the same documents one by one, byte
for byte.  The full rebuild's writer (:mod:`search.indexrebuild`) and the incremental
writer of every commit (:mod:`search.indexwriter`, which also writes merges from the
merged segments' array files) are this writer with a vocabulary of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import PostingPool, SegmentWriter

from search.arrayfile import FIELD as WORDS_FIELD
from search.arrayfile import N_SECTIONS
from search.termruns import TermRuns


@dataclass(slots=True)
class DocBatch:
    """Consecutive documents as arrays: each document's id, URL, host and number of
    postings, then every posting, document after document: its term id (an index into the
    writer's vocabulary) and its weighted count ``Σ_f w_f · count_f`` (what
    :attr:`search.doccolumns.IndexDoc.weights` holds).  Postings of weight 0 are left out, as
    :func:`search.index.postings` leaves them out."""

    docids: Sequence[int]
    urls: Sequence[str]
    hosts: Sequence[str]
    sizes: np.ndarray
    terms: np.ndarray
    weights: np.ndarray
    #: Each posting's weighted count per section ``w_f · count_f`` (one row a posting,
    #: :data:`search.analysis.SECTIONS` order; :attr:`search.doccolumns.IndexDoc.sections`);
    #: None: each weight counts as body.
    sections: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.docids)


#: Whoosh's field length of each length byte.
BYTE_LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


class _PoolWithoutWords(PostingPool):
    """Whoosh's posting pool, without the ``words`` field (written from arrays)."""

    def add(self, item: Any) -> None:
        if item[0] != WORDS_FIELD:
            super().add(item)


class ArraySegmentWriter(SegmentWriter):
    """Whoosh's segment writer whose ``words`` postings come as arrays (:meth:`add_batch`)
    and are written when the segment is flushed.  :meth:`_ranks` gives each term id's
    place in the sorted order of the stems (and keeps the stems in that order in
    ``_stems``): it is asked before each sort of the postings."""

    def __init__(self, ix: Any, **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self.pool = _PoolWithoutWords(self._tempstorage, self.newsegment, limitmb=kwargs["limitmb"])
        #: The stems in sorted order (a term's rank is its place here).
        self._stems: list[str] = []
        folder = getattr(self.storage, "folder", None)
        self._runs = TermRuns(
            folder, np.zeros(0, dtype=np.int64), self._buffer(), ranking=self._ranks
        )
        #: The ``words`` length byte of each document of the segment (0: none).
        self._length_bytes = bytearray()

    def _ranks(self) -> np.ndarray:
        raise NotImplementedError

    def _forget_stems(self) -> None:
        self._stems = []

    def _texts(self, ranks: list[int]) -> list[bytes]:
        """The bytes of the terms of *ranks*."""
        stems = self._stems
        return [stems[r].encode("utf-8") for r in ranks]

    def _buffer(self) -> int | None:
        """Postings held before they are sorted into a run on disk (None:
        :data:`search.arrayfile.BUFFER_POSTINGS`)."""
        return None

    def add_batch(self, batch: DocBatch, update: bool = False) -> None:
        """Add the documents of *batch* (with *update*, each replaces the documents of
        the same id in the index's segments, as ``update_document`` does)."""
        n = len(batch)
        if not n:
            return
        sizes = np.asarray(batch.sizes, dtype=np.int64)
        terms = np.asarray(batch.terms, dtype=np.int64)
        weights = np.asarray(batch.weights, dtype=np.float64)
        if batch.sections is not None:
            sections = np.asarray(batch.sections, dtype=np.float64)
        else:
            sections = np.zeros((len(weights), N_SECTIONS))
            sections[:, 0] = weights
        of_doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
        keep = weights > 0
        if not keep.all():
            terms, weights, of_doc = terms[keep], weights[keep], of_doc[keep]
            sections = sections[keep]
        # The field length of a document is the sum of its postings' frequencies.
        freqs = np.maximum(np.rint(weights), 1)
        lengths = np.bincount(of_doc, weights=freqs, minlength=n).astype(np.int64).tolist()
        base = self.docnum
        add = self.update_document if update else self.add_document
        for docid, url, host, length in zip(
            batch.docids, batch.urls, batch.hosts, lengths, strict=True
        ):
            fields: dict[str, Any] = {"docid": str(docid), "url": url, "host": host}
            if length:
                # One posting whose frequency is the document's length: what Whoosh
                # records of the field here (its postings are written at the flush).
                fields[WORDS_FIELD] = {"": (length, 0.0)}
            add(**fields)
            self._length_bytes.append(length_to_byte(length) if length else 0)
        self._runs.add(terms, of_doc + base, weights, sections, freqs)

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        pdr = self.per_document_reader()
        try:
            self.fieldwriter.add_postings(self.schema, pdr, self.pool.iter_postings())
            self._write_words()
            self._runs.close()
            # Written: the stems go before the array file is (its sort's peak).
            self._forget_stems()
            self.fieldwriter.close()
        finally:
            pdr.close()
            self._runs.close()

    def _write_words(self) -> None:
        writer = self.fieldwriter
        lengths = BYTE_LENGTHS[np.frombuffer(bytes(self._length_bytes), dtype=np.uint8)]
        started = False
        for ranks, cuts, docs, weights, sections, freqs, more in self._runs.terms():
            if not started:
                writer.start_field(WORDS_FIELD, self.schema[WORDS_FIELD])
                writer.set_field_lengths(bytes(self._length_bytes))
                started = True
            texts = self._texts(ranks)
            writer.add_terms(texts, cuts, docs, weights, lengths[docs], sections, freqs, more)
        if started:
            writer.finish_field()

    def _close_segment(self) -> None:
        self._runs.close()
        super()._close_segment()

    def cancel(self) -> None:
        self._runs.close()
        super().cancel()
