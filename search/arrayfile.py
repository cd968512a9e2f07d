"""The array file of a Whoosh segment: the ``words`` field's postings as flat numpy
arrays, written by :class:`ArrayCodec` for every segment Whoosh writes (new documents and
merges alike) and read back by :meth:`SegmentArrays.read`.  What is done with them
(ranking, filters, query expansion) is :mod:`search.arrays`'s.

One more file of each segment, ``<segment>.wpa``:

- the segment's ``words`` terms, in Whoosh's (sorted) order;
- their postings: document numbers (``uint32``) and weighted term frequencies
  (``float32``, the weight Whoosh stores), term after term (``starts`` gives each term's
  slice);
- each document's field length, as the byte Whoosh keeps (:func:`length_to_byte`);
- the same postings by document (a forward index: each document's terms and weights), for
  query expansion;
- each document's database id (the ``docid`` field's term), for what the ranking reads
  by document from the database (the link-graph prior, :mod:`search.linkrank`).  A file
  written before it was added lacks it; the ids are then read from Whoosh's stored fields.

The file is named like the segment's other files, so Whoosh packs it into the segment's
compound file and deletes it with the segment.  It is read through ``numpy.memmap``
(pages are loaded on demand and shared between processes).  The writer holds at most
:data:`BUFFER_POSTINGS` postings in memory, whatever the segment's size.
"""

from __future__ import annotations

import io
import json
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import W3Codec, W3FieldWriter, W3PostingsWriter
from whoosh.util.numeric import byte_to_length, length_to_byte

from search import faults

#: The scored field (search.index.WORDS_FIELD; not imported to keep this module a leaf).
FIELD = "words"
#: The field of each document's database id (search.index's ``docid``).
DOCID_FIELD = "docid"
EXT = ".wpa"
MAGIC = b"SPXWPA01"
_ALIGN = 8

#: Whoosh's field length of each length byte (a byte of 0 reads as 1, as Whoosh's
#: length scorer asks for a default length of 1).
LENGTHS = np.array([byte_to_length(b) if b else 1 for b in range(256)], dtype=np.float64)


class ArrayCodec(W3Codec):
    """Whoosh's W3 codec, plus the array file of the ``words`` field of each segment."""

    def field_writer(self, storage: Any, segment: Any) -> W3FieldWriter:
        return _FieldWriter(self, storage, segment)

    def postings_writer(self, dbfile: Any, byteids: bool = False) -> W3PostingsWriter:
        return _PostingsWriter(
            dbfile,
            blocklimit=self._blocklimit,
            byteids=byteids,
            compression=self._compression,
            inlinelimit=self._inlinelimit,
        )


class _PostingsWriter(W3PostingsWriter):
    """Whoosh's writer of posting blocks, which can also be given a whole block at once
    (:meth:`set_block`) instead of one posting at a time."""

    _deltas: list[int] | None = None

    def set_block(
        self,
        ids: bytes,
        deltas: list[int],
        weights: bytes,
        maxweight: float,
        values: bytes,
        minlength: int | None,
        maxlength: int,
    ) -> None:
        """Make the buffered block what ``add_posting`` leaves after one call per posting:
        the documents *ids* (``uint32``, ascending) and their differences *deltas* (the
        first one's from 0), the *weights* (``float32``) and the largest one as given
        (*maxweight*), the values joined, and the shortest non-zero and the longest field
        length of the postings' documents."""
        block = array("I")
        block.frombytes(ids)
        self._ids = block
        stored = array("f")
        stored.frombytes(weights)
        self._weights = stored
        self._values = [values] if values else []
        self._maxweight = max(0.0, maxweight)
        self._minlength = minlength
        self._maxlength = max(0, maxlength)
        self._deltas = deltas

    def _mini_ids(self) -> Any:
        deltas, self._deltas = self._deltas, None
        return tuple(deltas) if deltas is not None else super()._mini_ids()


#: Postings (a document number and a weight: 8 bytes) the array writer of a segment holds
#: in memory before it appends them to a temporary file, and at most how many it sorts at
#: once into the forward index: what bounds its memory whatever the segment's size (a
#: merge of the whole index included).  The sort's temporaries take ~70 bytes a posting
#: at their peak: ~36 MB (measured: 71 MB at 1 << 20, for segments of 2 and of 8 million
#: postings alike; the whole file in memory took 54 bytes a posting, 401 MB at 8 million).
BUFFER_POSTINGS = 1 << 19


class _Column:
    """An append-only column of numbers: in memory up to *limit* of them, the rest in an
    anonymous temporary file in *folder*; read back in chunks."""

    def __init__(self, typecode: str, dtype: Any, folder: str | None, limit: int) -> None:
        self.buf: array[Any] = array(typecode)
        self.dtype = np.dtype(dtype)
        self.folder = folder
        self.limit = limit
        self.file: Any = None
        self.spilled = 0

    def __len__(self) -> int:
        return self.spilled + len(self.buf)

    def full(self) -> bool:
        return len(self.buf) >= self.limit

    def spill(self) -> None:
        if not self.buf:
            return
        if self.file is None:
            # Open across calls, closed by close().
            self.file = tempfile.TemporaryFile(  # noqa: SIM115
                dir=self.folder, prefix="spidersite-", suffix=".tmp"
            )
        self.buf.tofile(self.file)
        self.spilled += len(self.buf)
        self.buf = array(self.buf.typecode)

    def extend(self, values: np.ndarray) -> None:
        self.buf.frombytes(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        if self.full():
            self.spill()

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """The column from its start, *size* numbers at a time."""
        if self.file is not None:
            self.file.flush()
            self.file.seek(0)
            left = self.spilled
            while left:
                chunk = np.fromfile(self.file, dtype=self.dtype, count=min(size, left))
                left -= len(chunk)
                yield chunk
        for i in range(0, len(self.buf), size):
            yield np.frombuffer(self.buf, dtype=self.dtype)[i : i + size]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        # A new array rather than emptying this one: chunks read from it may still be in use.
        self.buf = array(self.buf.typecode)


class _FieldWriter(W3FieldWriter):
    def __init__(self, codec: Any, storage: Any, segment: Any) -> None:
        super().__init__(codec, storage, segment)
        self._in_words = False
        self._terms: list[bytes] = []
        self._starts = array("q", [0])
        folder = getattr(storage, "folder", None)
        self._docs = _Column("I", np.uint32, folder, BUFFER_POSTINGS)
        self._tfs = _Column("f", np.float32, folder, BUFFER_POSTINGS)
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
            if docs.full():
                docs.spill()
                self._tfs.spill()
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
    ) -> None:
        """Whole posting lists of consecutive terms of the current field: term
        ``texts[i]`` has the postings ``cuts[i]:cuts[i + 1]`` of the documents *docs*
        (ascending within a term), their *weights* (``float64``) and the field length of
        each one's document.  What :meth:`start_term`, one :meth:`add` per posting and
        :meth:`finish_term` write, byte for byte, a block at a time.  The value of each
        posting is its frequency (:class:`whoosh.formats.Frequency`), the rounded weight
        (:func:`search.index.postings`)."""
        if not texts:
            return
        writer = self._postwriter
        size = writer._blocklimit
        first = np.asarray(cuts[:-1], dtype=np.int64)
        docs64 = docs.astype(np.int64)
        deltas = np.diff(docs64, prepend=0)
        deltas[first] = docs64[first]
        deltas_l = deltas.tolist()
        weights_l = weights.tolist()
        lengths_l = lengths.tolist()
        ids_b = docs.astype(np.uint32).tobytes()
        weights_b = weights.astype(np.float32).tobytes()
        values_b = np.maximum(np.rint(weights), 1).astype(">u4").tobytes()
        in_words = self._in_words
        if in_words:
            base = len(self._docs)
            self._docs.extend(docs)
            self._tfs.extend(weights)
            self._terms.extend(texts)
            self._starts.extend([base + c for c in cuts[1:]])
        start_term = W3FieldWriter.start_term
        finish_term = W3FieldWriter.finish_term
        for i, btext in enumerate(texts):
            start_term(self, btext)
            lo, end = cuts[i], cuts[i + 1]
            while True:
                hi = min(lo + size, end)
                chunk = lengths_l[lo:hi]
                writer.set_block(
                    ids_b[4 * lo : 4 * hi],
                    deltas_l[lo:hi],
                    weights_b[4 * lo : 4 * hi],
                    max(weights_l[lo:hi]),
                    values_b[4 * lo : 4 * hi],
                    min(chunk),
                    max(chunk),
                )
                if hi == end:
                    break
                writer._write_block()
                deltas_l[hi] = docs64[hi].item()  # a block's first id is not a difference
                lo = hi
            finish_term(self)

    def close(self) -> None:
        super().close()
        f = self._segment.create_file(self._storage, EXT)
        try:
            write_arrays(
                f, self._terms, self._starts, self._docs, self._tfs, self._lengths, self._docids
            )
        finally:
            f.close()
            self._docs.close()
            self._tfs.close()
        # The segment's files are written; the commit's table of contents is not yet.
        faults.point("index_commit")


class TermRuns:
    """Postings added document after document, given back term after term, in bounded
    memory: an external sort by (term, document) for a segment written whole.

    Postings are (term id, document number, weight); :attr:`ranks` gives each term id's
    place in the terms' sort order, and may be replaced by a longer one as new terms come
    (the order of the terms already seen must stay the same).  At most
    :data:`BUFFER_POSTINGS` postings are held before they are sorted by term into a *run*
    on disk (anonymous temporary files in *folder*); the runs cover ascending ranges of
    documents.  :meth:`terms` then reads the runs back by ranges of terms of at most
    :attr:`window` postings, so that each term's postings come in document order whatever
    the segment's size.
    """

    def __init__(self, folder: str | None, ranks: np.ndarray, buffer: int | None = None) -> None:
        self.buffer = buffer or BUFFER_POSTINGS
        #: Postings read back at a time: a quarter of the buffer, as their encoding into
        #: Whoosh's blocks takes ~150 bytes a posting of Python lists (~20 MB).
        self.window = max(1, self.buffer // 4)
        self.folder = folder
        self.ranks = ranks
        #: Postings per term id.
        self.df = np.zeros(len(ranks), dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._held = 0
        self._files: list[Any] = []
        #: Each run's first posting and size.
        self._runs: list[tuple[int, int]] = []
        self._written = 0

    def __len__(self) -> int:
        return self._written + self._held

    def add(self, terms: np.ndarray, docs: np.ndarray, weights: np.ndarray) -> None:
        """Postings of documents after every one added so far."""
        self._pending.append((terms, docs, weights))
        self._held += len(terms)
        if self._held >= self.buffer:
            self._spill()

    def _spill(self) -> None:
        if not self._held:
            return
        terms = np.concatenate([p[0] for p in self._pending]).astype(np.uint32)
        docs = np.concatenate([p[1] for p in self._pending]).astype(np.uint32)
        weights = np.concatenate([p[2] for p in self._pending]).astype(np.float64)
        self._pending, self._held = [], 0
        # Documents stay ascending within a term.
        order = np.argsort(self.ranks[terms], kind="stable")
        if not self._files:
            self._files = [
                tempfile.TemporaryFile(dir=self.folder, prefix="spidersite-", suffix=".tmp")  # noqa: SIM115
                for _ in range(3)
            ]
        columns: tuple[np.ndarray, ...] = (terms, docs, weights)
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

    def _read(self, column: int, dtype: Any, start: int, count: int) -> np.ndarray:
        f = self._files[column]
        f.seek(start * np.dtype(dtype).itemsize)
        return np.fromfile(f, dtype=dtype, count=count)

    def terms(self) -> Iterator[tuple[list[int], list[int], np.ndarray, np.ndarray]]:
        """The terms that have postings, in rank order, a range of them at a time: their
        ranks, where each one's postings start (and where the last one's end), then the
        postings' documents (ascending within a term) and weights."""
        self._spill()
        if not self._runs:
            return
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
            got = ranks[np.concatenate([self._read(0, np.uint32, a, n) for a, n in parts])]
            docs = np.concatenate([self._read(1, np.uint32, a, n) for a, n in parts])
            weights = np.concatenate([self._read(2, np.float64, a, n) for a, n in parts])
            # The runs come in document order: a stable sort by term keeps it per term.
            order = np.argsort(got, kind="stable")
            got, docs, weights = got[order], docs[order], weights[order]
            cuts = [0, *(np.flatnonzero(np.diff(got)) + 1).tolist(), len(got)]
            yield got[cuts[:-1]].tolist(), cuts, docs, weights

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []
        self._pending, self._held = [], 0


def _header(terms: int, docs: int, parts: list[tuple[str, np.dtype[Any], int]]) -> bytes:
    """The magic, the header's size and the header of an array file whose arrays are
    *parts* (name, type, size), each padded to :data:`_ALIGN` bytes."""
    layout: dict[str, list[Any]] = {}
    offset = 0
    for name, dtype, size in parts:
        layout[name] = [offset, dtype.str, int(size)]
        offset += -(-size * dtype.itemsize // _ALIGN) * _ALIGN
    header = json.dumps({"terms": terms, "docs": docs, "arrays": layout}).encode()
    header += b" " * (-(len(MAGIC) + 4 + len(header)) % _ALIGN)
    return MAGIC + len(header).to_bytes(4, "little") + header


def _pad(nbytes: int) -> bytes:
    return bytes(-nbytes % _ALIGN)


def write_arrays(
    f: Any,
    terms: list[bytes],
    starts: Any,
    docs: _Column,
    tfs: _Column,
    lengths: bytes | bytearray,
    docids: Any = None,
    buffer: int | None = None,
) -> None:
    """Write an array file (layout: :func:`decode_arrays`) into the open file *f*, holding
    at most *buffer* (:data:`BUFFER_POSTINGS`) postings in memory at a time.

    The postings come in term order (*starts* gives each term's slice of *docs* and
    *tfs*).  The forward index is their stable sort by document, done in ranges of
    documents of at most *buffer* postings: a first pass appends each posting to the
    temporary column of its range, then each range is sorted alone.
    """
    buffer = buffer or BUFFER_POSTINGS
    starts_a = np.frombuffer(starts, dtype=np.int64) if len(starts) else np.zeros(1, np.int64)
    lengths_a = np.frombuffer(bytes(lengths), dtype=np.uint8)
    n_docs, n_post = len(lengths_a), len(docs)
    text = b"".join(terms)
    text_starts = np.zeros(len(terms) + 1, dtype=np.int64)
    if terms:
        np.cumsum([len(t) for t in terms], out=text_starts[1:])
    counts = np.zeros(n_docs, dtype=np.int64)
    for chunk in docs.chunks(buffer):
        counts += np.bincount(chunk, minlength=n_docs)[:n_docs]
    fwd_starts = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=fwd_starts[1:])
    docids_a = None
    if docids is not None:
        docids_a = (
            np.frombuffer(docids, dtype=np.int32) if len(docids) else np.empty(0, dtype=np.int32)
        )
    u8, i64, u32, f32 = (np.dtype(t) for t in (np.uint8, np.int64, np.uint32, np.float32))
    parts = [
        ("text", u8, len(text)),
        ("text_starts", i64, len(text_starts)),
        ("starts", i64, len(starts_a)),
        ("docs", u32, n_post),
        ("tfs", f32, n_post),
        ("lengths", u8, n_docs),
        ("fwd_starts", i64, n_docs + 1),
        ("fwd_terms", u32, n_post),
        ("fwd_tfs", f32, n_post),
    ]
    if docids_a is not None:
        parts.append(("docids", np.dtype(np.int32), len(docids_a)))
    f.write(_header(len(terms), n_docs, parts))

    def whole(a: np.ndarray) -> None:
        f.write(a.tobytes())
        f.write(_pad(a.nbytes))

    def column(col: _Column) -> None:
        for chunk in col.chunks(buffer):
            f.write(chunk.tobytes())
        f.write(_pad(len(col) * col.dtype.itemsize))

    whole(np.frombuffer(text, dtype=np.uint8))
    whole(text_starts)
    whole(starts_a)
    column(docs)
    column(tfs)
    whole(lengths_a)
    whole(fwd_starts)
    # The ranges of documents: each holds at most *buffer* postings (or one document).
    bounds = [0]
    while bounds[-1] < n_docs:
        lo = bounds[-1]
        hi = int(np.searchsorted(fwd_starts, fwd_starts[lo] + buffer, side="right")) - 1
        bounds.append(min(max(hi, lo + 1), n_docs))
    # Each range's postings as (document, term, weight bits) triples of uint32, in a
    # temporary column of its own (the columns together hold ~3 × *buffer* numbers in
    # memory at most).
    limit = max(4096, 3 * buffer // (len(bounds) - 1 or 1))
    ranges = [_Column("I", np.uint32, docs.folder, limit) for _ in bounds[1:]]
    fwd_tfs = _Column("f", np.float32, docs.folder, buffer)
    edges = np.array(bounds[1:-1], dtype=np.int64)
    try:
        for d_chunk, t_chunk, term_of in _with_terms(docs, tfs, starts_a, buffer):
            triples = np.empty((len(d_chunk), 3), dtype=np.uint32)
            triples[:, 0] = d_chunk
            triples[:, 1] = term_of
            triples[:, 2] = t_chunk.view(np.uint32)
            if len(ranges) == 1:
                ranges[0].extend(triples.ravel())
                continue
            which = np.searchsorted(edges, d_chunk, side="right")
            order = np.argsort(which, kind="stable")
            cuts = np.searchsorted(which[order], np.arange(len(ranges) + 1))
            for r, (lo, hi) in enumerate(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)):
                if hi > lo:
                    ranges[r].extend(triples[order[lo:hi]].ravel())
        for column_r in ranges:
            chunks = list(column_r.chunks(3 * buffer))
            column_r.close()
            flat = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint32)
            rows = flat.reshape(-1, 3)
            order = np.argsort(rows[:, 0], kind="stable")
            f.write(rows[order, 1].tobytes())
            fwd_tfs.extend(rows[order, 2].view(np.float32))
        f.write(_pad(n_post * 4))
        column(fwd_tfs)
    finally:
        for column_r in ranges:
            column_r.close()
        fwd_tfs.close()
    if docids_a is not None:
        whole(docids_a)


def _with_terms(
    docs: _Column, tfs: _Column, starts: np.ndarray, size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The postings *size* at a time: documents, weights and each posting's term."""
    base = 0
    for d_chunk, t_chunk in zip(docs.chunks(size), tfs.chunks(size), strict=True):
        positions = np.arange(base, base + len(d_chunk), dtype=np.int64)
        term_of = np.searchsorted(starts, positions, side="right") - 1
        base += len(d_chunk)
        yield d_chunk, t_chunk, term_of


def encode_arrays(
    terms: list[bytes],
    starts: Any,
    docs: Any,
    tfs: Any,
    lengths: bytes | bytearray,
    docids: Any = None,
    buffer: int | None = None,
) -> bytes:
    """The bytes of an array file (layout: :func:`decode_arrays`) of postings held in
    memory (:func:`write_arrays` writes one of a segment's postings)."""
    docs_c = _Column("I", np.uint32, None, 1 << 62)
    docs_c.buf.frombytes(bytes(docs))
    tfs_c = _Column("f", np.float32, None, 1 << 62)
    tfs_c.buf.frombytes(bytes(tfs))
    out = io.BytesIO()
    write_arrays(out, terms, starts, docs_c, tfs_c, lengths, docids, buffer)
    return out.getvalue()


def decode_arrays(buf: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of an array file held in *buf* (a ``uint8`` array, e.g. a memmap)."""
    if bytes(buf[: len(MAGIC)]) != MAGIC:
        raise ValueError("not a spidersite array file")
    size = int.from_bytes(bytes(buf[len(MAGIC) : len(MAGIC) + 4]), "little")
    start = len(MAGIC) + 4
    header = json.loads(bytes(buf[start : start + size]))
    base = start + size
    buf = buf.view(np.ndarray)  # slices of a plain array are cheaper than of a memmap
    out = {}
    for name, (offset, dtype, count) in header["arrays"].items():
        dt = np.dtype(dtype)
        a = base + offset
        out[name] = buf[a : a + count * dt.itemsize].view(dt)
    return out


@dataclass(slots=True)
class SegmentArrays:
    """The arrays of one segment (immutable, as Whoosh segments are)."""

    terms: list[str]
    starts: np.ndarray
    docs: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray
    fwd_starts: np.ndarray
    fwd_terms: np.ndarray
    fwd_tfs: np.ndarray
    #: Database id of each document number (-1: none); None in files written before it.
    docids: np.ndarray | None = None

    @classmethod
    def read(cls, folder: Path, segment: Any) -> SegmentArrays | None:
        """The arrays of *segment* of the index in *folder*; None if it has none."""
        name = segment.make_filename(EXT)
        if segment.is_compound():
            from whoosh.filedb.filestore import FileStorage

            path = folder / segment.make_filename(segment.COMPOUND_EXT)
            compound = segment.open_compound_file(FileStorage(str(folder)))
            try:
                if not compound.file_exists(name):
                    return None
                offset, length = compound.range(name)
            finally:
                compound.close()
        else:
            path = folder / name
            if not path.exists():
                return None
            offset, length = 0, path.stat().st_size
        buf = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(length,))
        a = decode_arrays(buf)
        text = bytes(a["text"])
        ts = a["text_starts"].tolist()
        terms = [text[ts[i] : ts[i + 1]].decode("utf-8") for i in range(len(ts) - 1)]
        return cls(
            terms,
            a["starts"],
            a["docs"],
            a["tfs"],
            a["lengths"],
            a["fwd_starts"],
            a["fwd_terms"],
            a["fwd_tfs"],
            a.get("docids"),
        )
