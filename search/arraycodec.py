"""The Whoosh codec that writes the array file of each segment (:mod:`search.arrayfile`):
Whoosh's W3 codec, whose field writer also collects the ``words`` field's postings, each
document's field length and database id, and writes them as the segment's ``.wpa`` file
when the segment's files are closed (new documents and merges alike).  The index's segment
writer (:mod:`search.arraywriter`) gives it the ``words`` field's postings as whole posting
lists (:meth:`_FieldWriter.add_terms`, written in Whoosh's format by
:mod:`search.w3terms`); the other fields' come one posting at a time, as Whoosh gives them.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import W3Codec, W3FieldWriter
from whoosh.util.numeric import length_to_byte

from search import arrayfile, faults
from search.arrayfile import DOCID_FIELD, FIELD
from search.w3terms import HashBucket, write_terms


class ArrayCodec(W3Codec):
    """Whoosh's W3 codec, plus the array file of the ``words`` field of each segment."""

    def field_writer(self, storage: Any, segment: Any) -> W3FieldWriter:
        return _FieldWriter(self, storage, segment)


class _FieldWriter(W3FieldWriter):
    def __init__(self, codec: Any, storage: Any, segment: Any) -> None:
        super().__init__(codec, storage, segment)
        # Whoosh's term index keeps a key's hash and position in a tuple of two ints
        # (~125 bytes) until the segment is closed: every stem, and each page's docid
        # and url (~300,000 keys at a merge of 85,000 pages); in arrays from the start.
        self._tindex.buckets = [HashBucket() for _ in range(256)]
        self._in_words = False
        self._terms = arrayfile.TermTexts()
        self._starts = array("q", [0])
        #: The term whose posting list goes on in the next call of :meth:`add_terms`
        #: (kept by :func:`search.w3terms.write_terms`; None: none).
        self._open_term: Any = None
        folder = getattr(storage, "folder", None)
        self._docs = arrayfile._Column("I", np.uint32, folder, arrayfile.BUFFER_POSTINGS)
        self._tfs = arrayfile._Column("f", np.float32, folder, arrayfile.BUFFER_POSTINGS)
        self._sections = arrayfile._Column(
            "H",
            arrayfile.SECTION_DTYPE,
            folder,
            arrayfile.BUFFER_POSTINGS * arrayfile.N_SECTIONS,
        )
        self._lengths = bytearray()
        self._in_docids = False
        self._docid = -1
        self._docids = array("i")

    def start_field(self, fieldname: str, fieldobj: Any) -> None:
        super().start_field(fieldname, fieldobj)
        self._in_words = fieldname == FIELD
        self._in_docids = fieldname == DOCID_FIELD

    def start_term(self, btext: bytes) -> None:
        super().start_term(btext)
        if self._in_words:
            self._terms.append(btext)
        elif self._in_docids:
            self._docid = int(btext)

    def add(self, docnum: int, weight: float, vbytes: bytes, length: int) -> None:
        super().add(docnum, weight, vbytes, length)
        if self._in_words:
            docs = self._docs
            docs.buf.append(docnum)
            self._tfs.buf.append(weight)
            self._sections.buf.frombytes(vbytes[4:])
            if docs.full():
                docs.spill()
                self._tfs.spill()
                self._sections.spill()
            lengths = self._lengths
            if docnum >= len(lengths):
                lengths.extend(bytes(docnum + 1 - len(lengths)))
            lengths[docnum] = length_to_byte(length)
        elif self._in_docids:
            docids = self._docids
            if docnum >= len(docids):
                docids.extend([-1] * (docnum + 1 - len(docids)))
            docids[docnum] = self._docid

    def finish_term(self) -> None:
        super().finish_term()
        if self._in_words:
            self._starts.append(len(self._docs))

    def set_field_lengths(self, lengths: bytes) -> None:
        """The ``words`` length byte of each document (0: the document has no posting of
        the field), for a field whose postings come whole (:meth:`add_terms`)."""
        self._lengths = bytearray(lengths.rstrip(b"\0"))

    def add_terms(
        self,
        texts: list[bytes],
        cuts: list[int],
        docs: np.ndarray,
        weights: np.ndarray,
        lengths: np.ndarray,
        sections: np.ndarray,
        freqs: np.ndarray | None = None,
        more: bool = False,
    ) -> None:
        """Whole posting lists of consecutive terms of the current field: term
        ``texts[i]`` has the postings ``cuts[i]:cuts[i + 1]`` of the documents *docs*
        (ascending within a term), their *weights* (``float64``), the field length of
        each one's document and their weighted counts per section (one row a posting).
        What :meth:`start_term`, one :meth:`add` per posting and :meth:`finish_term`
        write, byte for byte (:func:`search.w3terms.write_terms`).  The value of each
        posting is its frequency (*freqs*; by default the rounded weight, as
        :func:`search.index.postings` rounds it), and its weighted counts per section
        (:func:`search.arrayfile.section_value`).

        With *more*, the last term goes on in the next call (whose first term it is): a
        long posting list comes in pieces (:meth:`search.termruns.TermRuns.terms`)."""
        if not texts:
            return
        if freqs is None:
            freqs = np.maximum(np.rint(weights), 1)
        values = arrayfile.section_values(freqs, sections)
        if self._in_words:
            base = len(self._docs)
            self._docs.extend(docs)
            self._tfs.extend(weights)
            self._sections.extend(np.asarray(sections, dtype=arrayfile.SECTION_DTYPE).ravel())
            # A term that went on from the last call is there already; one that goes on
            # in the next has no end yet.
            self._terms.extend(texts[1:] if self._open_term is not None else texts)
            self._starts.extend([base + c for c in (cuts[1:-1] if more else cuts[1:])])
        write_terms(self, texts, cuts, docs, weights, lengths, values, arrayfile.VALUE_SIZE, more)

    def close(self) -> None:
        super().close()
        f = self._segment.create_file(self._storage, arrayfile.EXT)
        try:
            arrayfile.write_arrays(
                f,
                self._terms,
                self._starts,
                self._docs,
                self._tfs,
                self._lengths,
                self._docids,
                sections=self._sections,
            )
        finally:
            f.close()
            self._docs.close()
            self._tfs.close()
            self._sections.close()
        # The segment's files are written; the commit's table of contents is not yet.
        faults.point("index_commit")
