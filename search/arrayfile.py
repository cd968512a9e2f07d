"""The array file of a Whoosh segment: the ``words`` field's postings as flat numpy
arrays, written by :class:`search.arraycodec.ArrayCodec` for every segment Whoosh writes
(new documents and merges alike) and read back by :mod:`search.arrayreader`
(:meth:`search.arrayreader.SegmentArrays.read`).  This module holds the file's layout
and its writer (:func:`write_arrays`).  What is done with them (ranking, filters, query
expansion) is :mod:`search.arrays`'s.

One more file of each segment, ``<segment>.wpa``:

- the segment's ``words`` terms, in Whoosh's (sorted) order;
- their postings: document numbers (``uint32``) and weighted term frequencies
  (``float32``, the weight Whoosh stores), term after term (``starts`` gives each term's
  slice);
- each posting's weighted count per section (per-field BM25F), stored by section: the
  body's count of every posting (a half float), then only the postings that count in
  another section (the title, the URL, …: about a fifth of a site's), each as its offset
  among its term's postings and its five other counts (``extra_starts`` gives each
  term's slice of them).  A query reads 2 bytes a posting where six counts took 12;
- each document's field length, as the byte Whoosh keeps (:func:`length_to_byte`);
- the same postings by document (a forward index: each document's terms and weights), for
  query expansion;
- each document's database id (the ``docid`` field's term), for what the ranking reads
  by document from the database (the link-graph prior, :mod:`search.linkrank`).  A file
  written before it was added lacks it; the ids are then read from Whoosh's stored fields.

The file is named like the segment's other files, so Whoosh packs it into the segment's
compound file and deletes it with the segment.  It is read through ``numpy.memmap``
(pages are loaded on demand and shared between processes).  The writer holds at most
:data:`BUFFER_POSTINGS` postings in memory while the segment's postings come, and
:data:`SORT_BYTES` of temporaries while it writes the file, whatever the segment's size.
"""

from __future__ import annotations

import io
import json
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from whoosh.util.numeric import byte_to_length

from search.forwardsort import POSTING_BYTES, write_forward

#: The scored field (search.index.WORDS_FIELD; not imported to keep this module a leaf).
FIELD = "words"
#: The field of each document's database id (search.index's ``docid``).
DOCID_FIELD = "docid"
EXT = ".wpa"
MAGIC = b"SPXWPA03"
#: Sections of a page (search.analysis.SECTIONS: body, title, url, desc, keywords,
#: boilerplate), in that order, in each posting's weighted counts per section.
N_SECTIONS = 6
#: A weighted count per section: a little-endian half float (11 significant bits: a
#: count of 2,048 or a weight of 0.2 × 7 = 1.4004 is what is kept).
SECTION_DTYPE = np.dtype("<f2")
#: The Whoosh value of a ``words`` posting: its frequency (Whoosh's ``pack_uint``, 4
#: bytes), then its weighted count per section.
VALUE_SIZE = 4 + N_SECTIONS * SECTION_DTYPE.itemsize
_ALIGN = 8

#: Whoosh's field length of each length byte (a byte of 0 reads as 1, as Whoosh's
#: length scorer asks for a default length of 1).
LENGTHS = np.array([byte_to_length(b) if b else 1 for b in range(256)], dtype=np.float64)


def section_value(freq: int, weight: float, sections: Sequence[float] | None) -> bytes:
    """The Whoosh value of a ``words`` posting of frequency *freq*, weight *weight* and
    weighted counts per section *sections* (None: the weight is the body's)."""
    if sections is None:
        sections = [weight] + [0.0] * (N_SECTIONS - 1)
    return int(freq).to_bytes(4, "big") + np.asarray(sections, dtype=SECTION_DTYPE).tobytes()


def section_values(freqs: np.ndarray, sections: np.ndarray) -> bytes:
    """:func:`section_value` of many postings, joined (*sections*: one row a posting)."""
    out = np.empty((len(freqs), VALUE_SIZE), dtype=np.uint8)
    out[:, :4] = np.asarray(freqs, dtype=">u4").view(np.uint8).reshape(-1, 4)
    halves = np.ascontiguousarray(sections, dtype=SECTION_DTYPE)
    out[:, 4:] = halves.view(np.uint8).reshape(len(freqs), -1)
    return out.tobytes()


def value_sections(vbytes: bytes) -> np.ndarray:
    """The weighted counts per section of a ``words`` posting's Whoosh value."""
    return np.frombuffer(vbytes, dtype=SECTION_DTYPE, offset=4, count=N_SECTIONS)


#: Postings (a document number, a weight and six half-float counts: 20 bytes) the array
#: writer of a segment holds in memory before it appends them to a temporary file (and
#: at most :data:`COLUMN_BYTES` of each of its columns): what bounds its memory while a
#: segment's postings come, whatever the segment's size (a merge of the whole index
#: included; the whole file in memory took 54 bytes a posting, 401 MB at 8 million).
#: The sorts of a commit (a quarter of it, :mod:`search.indexwriter`) and of a rebuild
#: (:mod:`search.termruns`) go by it too.  Per document the array writer also holds its
#: weighted lengths per section (48 bytes) and its first posting in the forward index (8)
#: while it writes.
BUFFER_POSTINGS = 1 << 19

#: Bytes of the array file writer's temporaries: it reads the postings, sums each
#: document's weighted lengths and sorts the forward index (the postings by document,
#: :mod:`search.forwardsort`: sorted runs on disk, merged by ranges of documents) this
#: many bytes' worth of postings at a time (4 MB: 116,508 postings).  Before
#: 2026-12-04 (late) the sort went by ranges of :data:`BUFFER_POSTINGS` postings and took
#: ~70–85 bytes a posting at its peak: +22–33 MB in a merge into 5,000 pages, the
#: highest peak of a merge.  8 MB until 2026-12-05, when the array file's phase was
#: again the peak of the largest merge of a 100,000-page crawl: 4 MB took 8 MB off it
#: (``benchmarks/indexmem.py``, 85,000 pages), and a reindex of 100,000 pages is no
#: slower.
SORT_BYTES = 4 << 20

#: Bytes of a column of the array file's writer (a segment's documents, weights or
#: counts per section, :class:`_Column`) held in memory, whatever its *limit*: the rest
#: is in its temporary file (before 2026-12-04, late: :data:`BUFFER_POSTINGS` postings,
#: 10 MB for the three columns, held while a segment's posting lists were written).
COLUMN_BYTES = 1 << 20


class TermTexts:
    """Terms' bytes as the array file keeps them: one blob and each term's start in it
    (~10 bytes a term held, where a list of ``bytes`` takes ~50)."""

    __slots__ = ("starts", "text")

    def __init__(self, terms: Sequence[bytes] = ()) -> None:
        self.text = bytearray()
        self.starts = array("q", [0])
        self.extend(terms)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def append(self, term: bytes) -> None:
        self.text += term
        self.starts.append(len(self.text))

    def extend(self, terms: Sequence[bytes]) -> None:
        for term in terms:
            self.append(term)

    def __getitem__(self, i: int) -> bytes:
        return bytes(self.text[self.starts[i] : self.starts[i + 1]])


class _Column:
    """An append-only column of numbers: in memory up to *limit* of them (and at most
    :data:`COLUMN_BYTES`), the rest in an anonymous temporary file in *folder*; read back
    in chunks."""

    def __init__(self, typecode: str, dtype: Any, folder: str | None, limit: int) -> None:
        self.buf: array[Any] = array(typecode)
        self.dtype = np.dtype(dtype)
        self.folder = folder
        self.limit = max(1, min(limit, COLUMN_BYTES // self.dtype.itemsize))
        self.file: Any = None
        self.spilled = 0

    def __len__(self) -> int:
        return self.spilled + len(self.buf)

    def full(self) -> bool:
        return len(self.buf) >= self.limit

    def _open(self) -> Any:
        if self.file is None:
            # Open across calls, closed by close().
            self.file = tempfile.TemporaryFile(  # noqa: SIM115
                dir=self.folder, prefix="spidersite-", suffix=".tmp"
            )
        return self.file

    def spill(self) -> None:
        if not self.buf:
            return
        self.buf.tofile(self._open())
        self.spilled += len(self.buf)
        self.buf = array(self.buf.typecode)

    def extend(self, values: np.ndarray) -> None:
        """Append *values*; the column never holds more than its limit (what does not
        fit goes to its file, *values* of the limit or more straight there)."""
        data = np.ascontiguousarray(values, dtype=self.dtype)
        if len(self.buf) + len(data) > self.limit:
            self.spill()
            if len(data) >= self.limit:
                data.tofile(self._open())
                self.spilled += len(data)
                return
        self.buf.frombytes(data.tobytes())
        if self.full():
            self.spill()

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """The column from its start, *size* numbers at a time (the last chunk fewer):
        the same cuts whatever part of it is in its file, so that columns of different
        widths, spilled at different points, are read in step."""
        n, spilled = len(self), self.spilled
        if self.file is not None:
            self.file.flush()
            self.file.seek(0)
        held = np.frombuffer(self.buf, dtype=self.dtype) if len(self.buf) else None
        pos = 0
        while pos < n:
            end = min(pos + size, n)
            if end <= spilled:
                yield np.fromfile(self.file, dtype=self.dtype, count=end - pos)
            elif pos >= spilled:
                assert held is not None
                yield held[pos - spilled : end - spilled]
            else:
                assert held is not None
                head = np.fromfile(self.file, dtype=self.dtype, count=spilled - pos)
                yield np.concatenate([head, held[: end - spilled]])
            pos = end

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        # A new array rather than emptying this one: chunks read from it may still be in use.
        self.buf = array(self.buf.typecode)


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


def _write(f: Any, a: np.ndarray | bytes) -> None:
    """Write the array *a*'s bytes (or the bytes *a*) into *f* (no copy of a contiguous
    array)."""
    if isinstance(a, bytes):
        f.write(a)
    elif a.size:
        f.write(np.ascontiguousarray(a).data.cast("B"))


def sort_postings() -> int:
    """Postings the array file's writer reads and sorts at a time: :data:`SORT_BYTES`
    over the bytes a posting takes at the sort's peak."""
    return max(1, SORT_BYTES // POSTING_BYTES)


def write_arrays(
    f: Any,
    terms: Sequence[bytes] | TermTexts,
    starts: Any,
    docs: _Column,
    tfs: _Column,
    lengths: bytes | bytearray,
    docids: Any = None,
    buffer: int | None = None,
    sections: _Column | None = None,
) -> None:
    """Write an array file (layout: :func:`search.arrayreader.decode_arrays`) into the
    open file *f*, reading and sorting at most *buffer* postings at a time (by default
    :func:`sort_postings`, from :data:`SORT_BYTES`).

    The postings come in term order (*starts* gives each term's slice of *docs* and
    *tfs*, and of *sections*, :data:`N_SECTIONS` weighted counts a posting; without
    them, each posting's weight is its body's).  Each document's weighted length per
    section is the sum of its postings'.  The forward index is their stable sort by
    document, an external merge sort of runs of *buffer* postings
    (:func:`search.forwardsort.write_forward`; temporary files in *docs*'s folder); the
    file is the same, byte for byte, whatever *buffer*.
    """
    size = buffer or sort_postings()
    starts_a = np.frombuffer(starts, dtype=np.int64) if len(starts) else np.zeros(1, np.int64)
    lengths_a = np.frombuffer(bytes(lengths), dtype=np.uint8)
    n_docs, n_post = len(lengths_a), len(docs)
    if not isinstance(terms, TermTexts):
        terms = TermTexts(terms)
    text = terms.text
    text_starts = np.frombuffer(terms.starts, dtype=np.int64)
    counts = np.zeros(n_docs, dtype=np.int64)
    section_lengths = np.zeros((n_docs, N_SECTIONS), dtype=np.float64)
    # Each term's first posting with a count outside the body, among those postings.
    extra_starts = np.zeros(len(starts_a), dtype=np.int64)
    n_extra = at = 0
    for chunk, sec in _with_sections(docs, tfs, sections, size):
        counts += np.bincount(chunk, minlength=n_docs)[:n_docs]
        for i in range(N_SECTIONS):
            section_lengths[:, i] += np.bincount(chunk, sec[:, i], minlength=n_docs)[:n_docs]
        flagged = _beyond_body(sec) + at
        first, last = np.searchsorted(starts_a, [at, at + len(chunk)])
        extra_starts[first:last] = n_extra + np.searchsorted(flagged, starts_a[first:last])
        n_extra += len(flagged)
        at += len(chunk)
        del chunk, sec, flagged
    extra_starts[np.searchsorted(starts_a, n_post) :] = n_extra
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
        ("body", SECTION_DTYPE, n_post),
        ("extra_starts", i64, len(extra_starts)),
        ("extra_at", u32, n_extra),
        ("extra", SECTION_DTYPE, n_extra * (N_SECTIONS - 1)),
        ("section_lengths", f32, n_docs * N_SECTIONS),
        ("fwd_starts", i64, n_docs + 1),
        ("fwd_terms", u32, n_post),
        ("fwd_tfs", f32, n_post),
    ]
    if docids_a is not None:
        parts.append(("docids", np.dtype(np.int32), len(docids_a)))
    f.write(_header(len(terms), n_docs, parts))

    def whole(a: np.ndarray) -> None:
        _write(f, a)
        f.write(_pad(a.nbytes))

    def column(col: _Column) -> None:
        for chunk in col.chunks(size * (len(col) // max(1, n_post) or 1)):
            _write(f, chunk)
        f.write(_pad(len(col) * col.dtype.itemsize))

    whole(np.frombuffer(text, dtype=np.uint8))
    whole(text_starts)
    whole(starts_a)
    column(docs)
    column(tfs)
    whole(lengths_a)
    # The counts per section, by section: the body's of every posting, then those of the
    # postings with a count in another section (a fifth of them on a site's pages), each
    # as its offset among its term's postings and its other sections' counts.
    for _, sec in _with_sections(docs, tfs, sections, size):
        _write(f, np.ascontiguousarray(sec[:, 0]))
    f.write(_pad(n_post * SECTION_DTYPE.itemsize))
    whole(extra_starts)
    at = 0
    for chunk, sec in _with_sections(docs, tfs, sections, size):
        flagged = _beyond_body(sec) + at
        term = np.searchsorted(starts_a, flagged, side="right") - 1
        _write(f, (flagged - starts_a[term]).astype(np.uint32))
        at += len(chunk)
    f.write(_pad(n_extra * u32.itemsize))
    for _, sec in _with_sections(docs, tfs, sections, size):
        _write(f, np.ascontiguousarray(sec[_beyond_body(sec), 1:]))
    f.write(_pad(n_extra * (N_SECTIONS - 1) * SECTION_DTYPE.itemsize))
    whole(section_lengths.astype(np.float32))
    whole(fwd_starts)

    def postings(chunk: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return zip(docs.chunks(chunk), tfs.chunks(chunk), strict=True)

    write_forward(lambda a: _write(f, a), postings, starts_a, fwd_starts, size, docs.folder)
    if docids_a is not None:
        whole(docids_a)


def _beyond_body(sec: np.ndarray) -> np.ndarray:
    """The rows of postings *sec* (weighted counts per section, half floats) that count
    in a section other than the body."""
    # Read as integers: a half float's comparison is emulated, ~5 times as slow (a count
    # is never -0).
    bits = np.asarray(sec, dtype=SECTION_DTYPE).view(np.uint16)
    beyond = bits[:, 1] | bits[:, 2]
    for i in range(3, N_SECTIONS):
        beyond |= bits[:, i]
    return np.flatnonzero(beyond)


def _with_sections(
    docs: _Column, tfs: _Column, sections: _Column | None, size: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The postings *size* at a time: documents and weighted counts per section (one row
    a posting; without *sections*, the weight is the body's)."""
    if sections is None:
        for d_chunk, t_chunk in zip(docs.chunks(size), tfs.chunks(size), strict=True):
            sec = np.zeros((len(d_chunk), N_SECTIONS), dtype=SECTION_DTYPE)
            sec[:, 0] = t_chunk
            yield d_chunk, sec
        return
    for d_chunk, s_chunk in zip(docs.chunks(size), sections.chunks(size * N_SECTIONS), strict=True):
        yield d_chunk, s_chunk.reshape(-1, N_SECTIONS)


def encode_arrays(
    terms: list[bytes],
    starts: Any,
    docs: Any,
    tfs: Any,
    lengths: bytes | bytearray,
    docids: Any = None,
    buffer: int | None = None,
    sections: Any = None,
) -> bytes:
    """The bytes of an array file (layout: :func:`search.arrayreader.decode_arrays`) of
    postings held in memory (:func:`write_arrays` writes one of a segment's postings)."""
    docs_c = _Column("I", np.uint32, None, 1 << 62)
    docs_c.buf.frombytes(bytes(docs))
    tfs_c = _Column("f", np.float32, None, 1 << 62)
    tfs_c.buf.frombytes(bytes(tfs))
    sections_c = None
    if sections is not None:
        sections_c = _Column("H", SECTION_DTYPE, None, 1 << 62)
        sections_c.buf.frombytes(np.asarray(sections, dtype=SECTION_DTYPE).tobytes())
    out = io.BytesIO()
    write_arrays(out, terms, starts, docs_c, tfs_c, lengths, docids, buffer, sections_c)
    return out.getvalue()
