"""Array postings: the ``words`` field of each Whoosh segment, as flat numpy arrays.

Whoosh keeps a term's postings in pickled, compressed blocks of 128 and its matchers
walk them one posting at a time in Python; a query of a few words over 100,000 pages
spends its time there.  The product scores with one formula over one field
(:mod:`search.ranking`), so the work vectorises: score a whole posting list with a few
numpy operations, add it into one accumulator per query, take the best with
``argpartition``.  Every matching document is scored, so the result is exhaustive (no
pruning to get wrong) and the number of hits is exact.

How the arrays are kept in step with the index: :class:`ArrayCodec` is Whoosh's own codec
with a field writer that also writes, for every segment it writes (new documents and
merges alike), one more file of the segment, ``<segment>.wpa``:

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
(pages are loaded on demand and shared between processes).  A segment without it (an
index written before it existed) makes :meth:`ArrayIndex.load` return None, and the
searcher refuses the index; ``python -m search reindex`` rewrites it with the arrays.

Besides scoring, the arrays answer which documents hold a set of stems
(:meth:`ArrayIndex.containing_all`, :meth:`ArrayIndex.containing_any`): the phrase and
exclusion filters, evaluated flat, one posting list at a time.
"""

from __future__ import annotations

import io
import json
import logging
import tempfile
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import W3Codec, W3FieldWriter
from whoosh.util.numeric import byte_to_length, length_to_byte

from search import faults, ranking

logger = logging.getLogger(__name__)

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


class _Leaf:
    """One segment in one index generation: its arrays, where its documents start, its
    deleted documents, and its terms mapped to the generation's term ids."""

    __slots__ = ("arrays", "base", "deleted", "lennorm", "local", "to_global")

    def __init__(self, arrays: SegmentArrays, base: int, deleted: np.ndarray) -> None:
        self.arrays = arrays
        self.base = base
        self.deleted = deleted
        self.to_global = np.empty(0, dtype=np.int64)
        self.local = np.empty(0, dtype=np.int64)
        self.lennorm = np.empty(0, dtype=np.float64)


_SEGMENTS: OrderedDict[tuple[str, str], SegmentArrays | None] = OrderedDict()
_INDEXES: OrderedDict[tuple[Any, ...], ArrayIndex] = OrderedDict()
_CACHE_LOCK = threading.Lock()
#: How many segments' and index generations' arrays a process keeps open.
SEGMENT_CACHE = 256
INDEX_CACHE = 4


def _segment_arrays(folder: Path, segment: Any) -> SegmentArrays | None:
    key = (str(folder), segment.segment_id())
    with _CACHE_LOCK:
        if key in _SEGMENTS:
            _SEGMENTS.move_to_end(key)
            return _SEGMENTS[key]
    arrays = SegmentArrays.read(folder, segment)
    with _CACHE_LOCK:
        _SEGMENTS[key] = arrays
        while len(_SEGMENTS) > SEGMENT_CACHE:
            _SEGMENTS.popitem(last=False)
    return arrays


def index_folder(searcher: Any) -> Path | None:
    """The folder of the index a Whoosh searcher reads (None for other storages)."""
    ix = getattr(searcher, "_ix", None)
    folder = getattr(getattr(ix, "storage", None), "folder", None)
    return Path(folder) if folder else None


class ArrayIndex:
    """The array postings of every segment a Whoosh searcher reads, as one document space
    (Whoosh's document numbers) and one term space (ids valid for this generation)."""

    def __init__(
        self, leaves: list[_Leaf], doc_count: int, avg_length: float, k1: float, b: float
    ) -> None:
        self.leaves = leaves
        self.n = doc_count
        self.avglen = avg_length or 1.0
        self.k1, self.b = k1, b
        ids: dict[str, int] = {}
        for leaf in leaves:
            setdefault = ids.setdefault
            leaf.to_global = np.fromiter(
                (setdefault(t, len(ids)) for t in leaf.arrays.terms),
                dtype=np.int64,
                count=len(leaf.arrays.terms),
            )
        self.ids = ids
        self.texts = list(ids)
        self.df = np.zeros(len(ids), dtype=np.int64)
        for leaf in leaves:
            leaf.local = np.full(len(ids), -1, dtype=np.int64)
            leaf.local[leaf.to_global] = np.arange(len(leaf.to_global))
            np.add.at(self.df, leaf.to_global, np.diff(leaf.arrays.starts))
            # k1 · (1 − b + b · len / avglen): the document's half of BM25's denominator.
            leaf.lennorm = k1 * ((1 - b) + b * LENGTHS[leaf.arrays.lengths] / self.avglen)
        self.deleted = (
            np.concatenate([leaf.deleted + leaf.base for leaf in leaves])
            if leaves
            else np.empty(0, dtype=np.int64)
        )
        self._text_rank: np.ndarray | None = None
        #: Values per document number that readers of the database attach to this index
        #: generation (the searcher's linkranks), by name.
        self.per_doc: dict[str, Any] = {}

    @classmethod
    def load(cls, searcher: Any, k1: float, b: float) -> ArrayIndex | None:
        """The arrays of the index *searcher* reads; None when a segment has none."""
        folder = index_folder(searcher)
        if folder is None:
            return None
        reader = searcher.reader()
        leaves_in = reader.leaf_readers()
        key: list[Any] = [str(folder), k1, b]
        for r, base in leaves_in:
            segment = r.segment() if hasattr(r, "segment") else None
            if segment is None:
                return None
            key.append((segment.segment_id(), base, segment.deleted_count()))
        n = int(searcher.doc_count_all())
        avglen = float(searcher.avg_field_length(FIELD) or 1.0)
        key += [n, avglen]
        cache_key = tuple(key)
        with _CACHE_LOCK:
            if cache_key in _INDEXES:
                _INDEXES.move_to_end(cache_key)
                return _INDEXES[cache_key]
        leaves = []
        for r, base in leaves_in:
            segment = r.segment()
            arrays = _segment_arrays(folder, segment)
            if arrays is None:
                return None
            deleted = (
                np.fromiter(sorted(segment.deleted_docs()), dtype=np.int64)
                if segment.has_deletions()
                else np.empty(0, dtype=np.int64)
            )
            leaves.append(_Leaf(arrays, base, deleted))
        index = cls(leaves, n, avglen, k1, b)
        with _CACHE_LOCK:
            _INDEXES[cache_key] = index
            while len(_INDEXES) > INDEX_CACHE:
                _INDEXES.popitem(last=False)
        return index

    def docids(self, searcher: Any) -> np.ndarray:
        """The database id of every document number (-1: none), from the array files, or
        from Whoosh's stored fields of *searcher* for a segment whose file lacks them."""
        out = np.full(self.n, -1, dtype=np.int64)
        for i, leaf in enumerate(self.leaves):
            end = self.leaves[i + 1].base if i + 1 < len(self.leaves) else self.n
            ids = leaf.arrays.docids
            if ids is not None:
                size = min(len(ids), end - leaf.base)
                out[leaf.base : leaf.base + size] = ids[:size]
                continue
            for docnum in range(leaf.base, end):
                fields = searcher.stored_fields(docnum)
                if fields and DOCID_FIELD in fields:
                    out[docnum] = int(fields[DOCID_FIELD])
        return out

    # -- scoring -------------------------------------------------------------------------

    def idf(self, gids: np.ndarray) -> np.ndarray:
        df = self.df[gids].astype(np.float64)
        return np.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def accumulate(
        self, weights: dict[str, float], require_all: bool = False, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Each document's score for the weighted query (0: no match), added to a copy of
        *start* if given, and with *require_all* how many of the query's terms each
        document holds."""
        known = [(self.ids[s], qw) for s, qw in weights.items() if s in self.ids]
        gids = np.array([g for g, _ in known], dtype=np.int64)
        # qw · idf · (k1 + 1) of each term: the part of its score that is the same in
        # every document.
        factors = np.array(
            [qw * ranking.idf(self.n, int(self.df[g])) * (self.k1 + 1) for g, qw in known],
            dtype=np.float64,
        )
        # Every posting of every query term, scored in one pass per segment, then summed
        # per document by one bincount.
        all_docs, all_parts = [], []
        for leaf in self.leaves:
            local = leaf.local[gids]
            present = np.flatnonzero(local >= 0)
            if not len(present):
                continue
            a = leaf.arrays
            los = a.starts[local[present]].tolist()
            his = a.starts[local[present] + 1].tolist()
            docs = np.concatenate([a.docs[lo:hi] for lo, hi in zip(los, his, strict=True)])
            tf = np.concatenate([a.tfs[lo:hi] for lo, hi in zip(los, his, strict=True)])
            tf = tf.astype(np.float64)
            sizes = np.subtract(his, los)
            part = np.repeat(factors[present], sizes) * tf / (tf + leaf.lennorm[docs])
            all_docs.append(docs + leaf.base if leaf.base else docs)
            all_parts.append(part)
        docs = np.concatenate(all_docs) if all_docs else np.empty(0, dtype=np.int64)
        parts = np.concatenate(all_parts) if all_parts else np.empty(0, dtype=np.float64)
        scores = np.bincount(docs, parts, minlength=self.n)
        if start is not None:
            scores += start
        matched = np.bincount(docs, minlength=self.n).astype(np.int16) if require_all else None
        if len(self.deleted):
            scores[self.deleted] = 0.0
        return scores, matched

    def containing_any(self, stems: Iterable[str]) -> np.ndarray:
        """Which documents hold at least one of *stems* (a boolean per document)."""
        out = np.zeros(self.n, dtype=bool)
        for docs in self._posting_docs(stems):
            out[docs] = True
        return out

    def containing_all(self, stems: Iterable[str]) -> np.ndarray:
        """Which documents hold every one of *stems* (a boolean per document)."""
        wanted = set(stems)
        found = list(self._posting_docs(wanted))
        if len(found) < len(wanted):  # a stem in no document
            return np.zeros(self.n, dtype=bool)
        counts = np.zeros(self.n, dtype=np.int32)
        for docs in found:
            counts[docs] += 1  # a stem has one posting per document
        return counts == len(wanted)

    def _posting_docs(self, stems: Iterable[str]) -> Iterator[np.ndarray]:
        """Each of *stems*' documents (global numbers, one array per stem that has any)."""
        for stem in set(stems):
            gid = self.ids.get(stem)
            if gid is None:
                continue
            parts = []
            for leaf in self.leaves:
                local = leaf.local[gid]
                if local >= 0:
                    lo, hi = leaf.arrays.starts[local], leaf.arrays.starts[local + 1]
                    parts.append(leaf.arrays.docs[lo:hi].astype(np.int64) + leaf.base)
            if parts:
                yield np.concatenate(parts)

    def best(self, scores: np.ndarray, limit: int) -> list[tuple[float, int]]:
        """The *limit* best (score, docnum) pairs with a positive score: score descending,
        then document number ascending (the order Whoosh keeps among equal scores)."""
        candidates = np.flatnonzero(scores > 0)
        if limit <= 0 or not len(candidates):
            return []
        values = scores[candidates]
        if len(candidates) > limit:
            # The limit-th best score; every document scoring at least as much is kept
            # (ties included), then the sort below decides.
            kth = np.partition(values, len(values) - limit)[len(values) - limit]
            keep = values >= kth
            candidates, values = candidates[keep], values[keep]
        order = np.lexsort((candidates, -values))[:limit]
        return [(float(values[i]), int(candidates[i])) for i in order]

    def vector(self, docnum: int) -> tuple[np.ndarray, np.ndarray, float]:
        """A document's term ids, their weighted term frequencies, and its field length."""
        for leaf in reversed(self.leaves):
            if docnum >= leaf.base:
                local = docnum - leaf.base
                a = leaf.arrays
                if local >= len(a.lengths):
                    break
                lo, hi = a.fwd_starts[local], a.fwd_starts[local + 1]
                gids = leaf.to_global[a.fwd_terms[lo:hi]]
                return gids, a.fwd_tfs[lo:hi].astype(np.float64), float(LENGTHS[a.lengths[local]])
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 1.0

    def bm25(self, gids: np.ndarray, tf: np.ndarray, length: Any) -> np.ndarray:
        """BM25 weights (idf included) of terms *gids* with frequencies *tf* in documents
        of *length* (one or one per term): :func:`search.ranking.bm25`, vectorised."""
        norm = tf / ((1 - self.b) + self.b * length / self.avglen)
        return self.idf(gids) * ((self.k1 + 1) * norm) / (self.k1 + norm)

    def text_rank(self) -> np.ndarray:
        """Each term id's rank in the sorted order of the terms (for ties)."""
        if self._text_rank is None:
            rank = np.empty(len(self.texts), dtype=np.int64)
            rank[sorted(range(len(self.texts)), key=self.texts.__getitem__)] = np.arange(
                len(self.texts)
            )
            self._text_rank = rank
        return self._text_rank

    def _feedback_vectors(
        self, docnums: list[int], query: dict[str, float], frequent: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The feedback documents' postings, their stems found in more than *frequent*
        documents left out (but for the query's own): term ids, weighted tf, the length of
        their document and its position in *docnums*."""
        parts = [self.vector(d) for d in docnums]
        gids = np.concatenate([p[0] for p in parts])
        tf = np.concatenate([p[1] for p in parts])
        sizes = [len(p[0]) for p in parts]
        length = np.repeat([p[2] for p in parts], sizes)
        which = np.repeat(np.arange(len(parts)), sizes)
        asked = np.array([self.ids[s] for s in query if s in self.ids], dtype=np.int64)
        keep = (self.df[gids] <= frequent) | np.isin(gids, asked)
        return gids[keep], tf[keep], length[keep], which[keep]

    def _add_terms(
        self, query: dict[str, float], gids: np.ndarray, weights: np.ndarray, scale: float
    ) -> dict[str, float]:
        expanded = dict(query)
        for gid, w in zip(gids.tolist(), weights.tolist(), strict=True):
            stem = self.texts[gid]
            expanded[stem] = expanded.get(stem, 0.0) + scale * w
        return expanded

    def _heaviest(self, gids: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
        """Positions of the *n* heaviest of *weights*: weight descending, then stem
        ascending (:func:`search.ranking._heaviest`)."""
        return np.lexsort((self.text_rank()[gids], -weights))[:n]

    def rocchio(
        self, docnums: list[int], query: dict[str, float], frequent: float, terms: int
    ) -> dict[str, float]:
        """:func:`search.ranking.feedback_terms` over the feedback documents *docnums*,
        vectorised, their stems found in more than *frequent* documents left out (but for
        the query's own)."""
        if not docnums or not query:
            return dict(query)
        gids, tf, length, _ = self._feedback_vectors(docnums, query, frequent)
        if not len(gids):
            return dict(query)
        weights = self.bm25(gids, tf, length) / len(docnums)
        unique, inverse = np.unique(gids, return_inverse=True)
        mean = np.bincount(inverse, weights=weights)
        seen = np.bincount(inverse)
        chosen = np.flatnonzero(seen >= min(ranking.FEEDBACK_MIN_SHARED, len(docnums)))
        if not len(chosen):
            return dict(query)
        best = chosen[self._heaviest(unique[chosen], mean[chosen], terms)]
        heaviest = float(mean[best[0]])
        if heaviest <= 0:
            return dict(query)
        scale = ranking.FEEDBACK_BETA * max(query.values()) / heaviest
        return self._add_terms(query, unique[best], mean[best], scale)

    def rm3(
        self,
        docnums: list[int],
        scores: list[float],
        query: dict[str, float],
        frequent: float,
        terms: int,
        weight: float,
    ) -> dict[str, float]:
        """:func:`search.ranking.rm3_terms` over the feedback documents *docnums* (first
        scores *scores*), vectorised, their stems found in more than *frequent* documents
        left out (but for the query's own)."""
        if not docnums or not query or weight >= 1:
            return dict(query)
        gids, tf, _, which = self._feedback_vectors(docnums, query, frequent)
        model_gids, model = [], []
        for i, score in enumerate(scores):
            mine = np.flatnonzero(which == i)
            top = mine[self._heaviest(gids[mine], tf[mine], terms)]
            norm = tf[top].sum()
            if norm > 0:
                model_gids.append(gids[top])
                model.append(tf[top] / norm * score)
        if not model_gids:
            return dict(query)
        unique, inverse = np.unique(np.concatenate(model_gids), return_inverse=True)
        p = np.bincount(inverse, weights=np.concatenate(model))
        best = self._heaviest(unique, p, terms)
        total = float(p[best].sum())
        if total <= 0:
            return dict(query)
        scale = (1 - weight) / weight * sum(query.values()) / total
        return self._add_terms(query, unique[best], p[best], scale)
