"""The reader of a segment's array file (:mod:`search.arrayfile`: the layout and the
writer): :meth:`SegmentArrays.read` maps the file (``numpy.memmap``: pages are loaded on
demand and shared between processes) and views its arrays, without copying them and
without decoding its terms (:class:`search.termspace.SegmentTerms` looks them up).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from search.arrayfile import DOCID_FIELD, EXT, MAGIC, N_SECTIONS
from search.termspace import SegmentTerms

#: Bytes before an array file's JSON header: the magic, then the header's size.
HEAD = len(MAGIC) + 4


def header_size(head: bytes) -> int:
    """The size of an array file's JSON header, from the file's first :data:`HEAD` bytes."""
    if head[: len(MAGIC)] != MAGIC:
        raise ValueError("not a spidersite array file")
    return int.from_bytes(head[len(MAGIC) : HEAD], "little")


def locate(folder: Path, segment: Any) -> tuple[Path, int, int] | None:
    """Where the array file of *segment* of the index in *folder* is: the file that holds
    it (the segment's compound file, or its own), its offset and length there; None if
    the segment has none."""
    name = segment.make_filename(EXT)
    if segment.is_compound():
        from whoosh.filedb.filestore import FileStorage

        path = folder / segment.make_filename(segment.COMPOUND_EXT)
        # Only the compound file's directory is read: nothing mapped.
        compound = segment.open_compound_file(FileStorage(str(folder), supports_mmap=False))
        try:
            if not compound.file_exists(name):
                return None
            offset, length = compound.range(name)
        finally:
            compound.close()
        return path, offset, length
    path = folder / name
    if not path.exists():
        return None
    return path, 0, path.stat().st_size


def decode_arrays(buf: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays of an array file held in *buf* (a ``uint8`` array, e.g. a memmap)."""
    size = header_size(bytes(buf[:HEAD]))
    start = HEAD
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

    #: Its terms, sorted and not decoded (:class:`search.termspace.SegmentTerms`).
    words: SegmentTerms
    starts: np.ndarray
    docs: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray
    fwd_starts: np.ndarray
    fwd_terms: np.ndarray
    fwd_tfs: np.ndarray
    #: Each posting's weighted count in the body (the first of SECTIONS).
    body: np.ndarray
    #: Each term's first posting with a count in another section, among those postings
    #: (their ``extra_at`` and ``extra`` rows), as ``starts`` gives its postings.
    extra_starts: np.ndarray
    #: Each of those postings' offset among its term's postings.
    extra_at: np.ndarray
    #: Their weighted counts in the other sections (one row a posting, SECTIONS order).
    extra: np.ndarray
    #: Each document's weighted length per section (one row a document).
    section_lengths: np.ndarray
    #: Database id of each document number (-1: none); None in files written before it.
    docids: np.ndarray | None = None
    _section_totals: np.ndarray | None = None

    def section_totals(self) -> np.ndarray:
        """The sum of every document's weighted length per section (``float64``; deleted
        documents included), computed once: an index generation's averages take it, less
        its deleted documents', for each segment it did not write."""
        if self._section_totals is None:
            self._section_totals = self.section_lengths.astype(np.float64).sum(axis=0)
        return self._section_totals

    def posting_sections(self, term: int, offset: int) -> np.ndarray:
        """The weighted counts per section of the *offset*-th posting of term *term*."""
        out = np.zeros(N_SECTIONS, dtype=self.body.dtype)
        out[0] = self.body[int(self.starts[term]) + offset]
        first, last = int(self.extra_starts[term]), int(self.extra_starts[term + 1])
        at = first + int(np.searchsorted(self.extra_at[first:last], offset))
        if at < last and self.extra_at[at] == offset:
            out[1:] = self.extra[at]
        return out

    @property
    def terms(self) -> list[str]:
        """Every term, decoded (a look-up needs none of this: :attr:`words`)."""
        return self.words.all()

    @classmethod
    def read(cls, folder: Path, segment: Any) -> SegmentArrays | None:
        """The arrays of *segment* of the index in *folder*; None if it has none."""
        where = locate(folder, segment)
        if where is None:
            return None
        path, offset, length = where
        buf = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(length,))
        a = decode_arrays(buf)
        return cls(
            SegmentTerms(a["text"], a["text_starts"]),
            a["starts"],
            a["docs"],
            a["tfs"],
            a["lengths"],
            a["fwd_starts"],
            a["fwd_terms"],
            a["fwd_tfs"],
            a["body"],
            a["extra_starts"],
            a["extra_at"],
            a["extra"].reshape(-1, N_SECTIONS - 1),
            a["section_lengths"].reshape(-1, N_SECTIONS),
            a.get("docids"),
        )


def segment_docids(
    arrays: SegmentArrays | None, count: int, stored: Callable[[int], Mapping[str, Any] | None]
) -> np.ndarray:
    """The database id of each of a segment's *count* document numbers (``int64``; -1:
    none), deleted documents included: from its array file (*arrays*, None when it has
    none), and for the documents the file does not give one (a file written before files
    held ids, or one short of a document) from Whoosh's stored fields, *stored* (the
    segment's document number to its stored fields; each call unpickles a document's).

    What :meth:`search.arrays.ArrayIndex.docids` (a searcher's document numbers) and
    :meth:`search.index.Index.docid_array` (``check``) read ids with."""
    out = np.full(count, -1, dtype=np.int64)
    ids = arrays.docids if arrays is not None else None
    if ids is not None:
        size = min(len(ids), count)
        out[:size] = ids[:size]
    for docnum in np.flatnonzero(out < 0).tolist():
        fields = stored(docnum)
        if fields and DOCID_FIELD in fields:
            out[docnum] = int(fields[DOCID_FIELD])
    return out
