"""The full rebuild's writer (:meth:`search.index.Index.rebuild`): documents come as
arrays (:class:`DocBatch`), the ``words`` postings, nearly all of a segment's, are sorted by
term in bounded memory (:class:`search.termruns.TermRuns`) and encoded a block at a time.
Its files are those of :meth:`search.index.Index.writer` fed the same documents one by
one, byte for byte.
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
    """Consecutive documents of a full rebuild (:meth:`search.index.Index.rebuild`) as arrays: each
    document's id, URL, host and number of postings, then every posting, document after
    document: its term id (an index into the rebuild's vocabulary) and its weighted count
    ``Σ_f w_f · count_f`` (what :attr:`search.index.IndexDoc.weights` holds).  Postings of weight 0
    are left out, as :func:`search.index.postings` leaves them out."""

    docids: Sequence[int]
    urls: Sequence[str]
    hosts: Sequence[str]
    sizes: np.ndarray
    terms: np.ndarray
    weights: np.ndarray
    #: Each posting's weighted count per section ``w_f · count_f`` (one row a posting,
    #: :data:`search.analysis.SECTIONS` order; :attr:`search.index.IndexDoc.sections`);
    #: None: each weight counts as body.
    sections: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.docids)


#: Whoosh's field length of each length byte.
_BYTE_LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


class _PoolWithoutWords(PostingPool):
    """Whoosh's posting pool, without the ``words`` field (a rebuild writes it whole)."""

    def add(self, item: Any) -> None:
        if item[0] != WORDS_FIELD:
            super().add(item)


class _RebuildSegmentWriter(SegmentWriter):
    """Whoosh's segment writer for a full rebuild: every field but ``words`` goes through
    Whoosh as usual (two postings a document); the ``words`` postings, nearly all of them,
    are sorted by term in arrays (:class:`search.termruns.TermRuns`, bounded memory) and
    written when the segment is flushed, a block of 128 at a time, by the codec's field
    writer (:meth:`search.arraycodec._FieldWriter.add_terms`), instead of going one by one
    through Whoosh's pool, its sorted runs on disk and their merge."""

    def __init__(self, ix: Any, vocabulary: Sequence[str], **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self.pool = _PoolWithoutWords(self._tempstorage, self.newsegment, limitmb=kwargs["limitmb"])
        self._stems: list[str] = []
        folder = getattr(self.storage, "folder", None)
        self._runs = TermRuns(folder, self._ranks(vocabulary))
        self._length_bytes = bytearray()

    def _ranks(self, vocabulary: Sequence[str]) -> np.ndarray:
        """Each term id's rank in the sorted order of the stems (kept in ``_stems``)."""
        order = sorted(range(len(vocabulary)), key=vocabulary.__getitem__)
        ranks = np.empty(len(vocabulary), dtype=np.int64)
        ranks[order] = np.arange(len(vocabulary))
        self._stems = [vocabulary[i] for i in order]
        return ranks

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Use *vocabulary*, the one given to the writer with more term ids after it (the
        stems stored since it was read)."""
        self._runs.ranks = self._ranks(vocabulary)

    def add_batch(self, batch: DocBatch) -> None:
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
        for docid, url, host, length in zip(
            batch.docids, batch.urls, batch.hosts, lengths, strict=True
        ):
            fields: dict[str, Any] = {"docid": str(docid), "url": url, "host": host}
            if length:
                # One posting whose frequency is the document's length: what Whoosh
                # records of the field here (its postings are written at the flush).
                fields[WORDS_FIELD] = {"": (length, 0.0)}
            self.add_document(**fields)
            self._length_bytes.append(length_to_byte(length) if length else 0)
        self._runs.add(terms, of_doc + base, weights, sections)

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        pdr = self.per_document_reader()
        try:
            self.fieldwriter.add_postings(self.schema, pdr, self.pool.iter_postings())
            self._write_words()
            self.fieldwriter.close()
        finally:
            pdr.close()
            self._runs.close()

    def _write_words(self) -> None:
        writer = self.fieldwriter
        lengths = _BYTE_LENGTHS[np.frombuffer(bytes(self._length_bytes), dtype=np.uint8)]
        started = False
        for ranks, cuts, docs, weights, sections in self._runs.terms():
            if not started:
                writer.start_field(WORDS_FIELD, self.schema[WORDS_FIELD])
                writer.set_field_lengths(bytes(self._length_bytes))
                started = True
            texts = [self._stems[r].encode("utf-8") for r in ranks]
            writer.add_terms(texts, cuts, docs, weights, lengths[docs], sections)
        if started:
            writer.finish_field()

    def cancel(self) -> None:
        self._runs.close()
        super().cancel()


class RebuildWriter:
    """Adds documents to a full rebuild (:meth:`search.index.Index.rebuild`), batch after batch."""

    def __init__(self, writer: _RebuildSegmentWriter) -> None:
        self._w = writer
        self.added = 0

    def add(self, batch: DocBatch) -> None:
        self._w.add_batch(batch)
        self.added += len(batch)

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Batches from now on may use the term ids of *vocabulary*, which is the
        vocabulary given to :meth:`Index.rebuild` with more ids after it (words stored
        meanwhile: the stems of the ids already given must not change)."""
        self._w.grow_vocabulary(vocabulary)
