"""The ``words`` postings of a segment read back from its array file
(:mod:`search.arrayfile`) for a merge (:mod:`search.indexwriter`): its terms, each
document's length byte, and its postings term after term, a bounded chunk at a time, read
from the file (not mapped), so that a merge's memory does not grow with the segments it
reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from search.arrayfile import EXT, N_SECTIONS, SECTION_DTYPE
from search.arrayreader import HEAD, header_size, locate
from search.termspace import fixed_width_rows


@dataclass(slots=True)
class WordsChunk:
    """The postings of the terms ``first:first + len(starts) - 1`` of a segment: where
    each term's postings start (from 0; the last entry is where the last one's end),
    their document numbers, weights (``float32``, Whoosh's) and weighted counts per
    section (one row a posting)."""

    first: int
    starts: np.ndarray
    docs: np.ndarray
    tfs: np.ndarray
    sections: np.ndarray


class SegmentWords:
    """The array file of one segment of the index in *folder*, open for reading."""

    def __init__(self, folder: str | Path, segment: Any) -> None:
        where = locate(Path(folder), segment)
        if where is None:
            raise FileNotFoundError(f"segment {segment.segment_id()} has no {EXT} file")
        path, offset, _ = where
        self._file: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close())
        try:
            self._file.seek(offset)
            size = header_size(self._file.read(HEAD))
            header = json.loads(self._file.read(size))
        except BaseException:
            self._file.close()
            raise
        self._base = offset + HEAD + size
        self._layout: dict[str, tuple[int, np.dtype[Any], int]] = {
            k: (off, np.dtype(dt), count) for k, (off, dt, count) in header["arrays"].items()
        }
        #: The segment's terms, in Whoosh's (sorted) order, as one fixed-width array of
        #: bytes (``S<longest>``, at most :data:`WIDE`; ~135,000 terms as a list of
        #: ``bytes`` took ~7 MB); a longer term is ``b""`` there and in
        #: :attr:`long_terms`, by position (:meth:`term` reads either).
        self.terms, self.long_terms = fixed_width(self._array("text"), self._array("text_starts"))
        self._starts = self._array("starts")
        self._extra_starts = self._array("extra_starts")

    def term(self, i: int) -> bytes:
        """The bytes of term *i*."""
        long = self.long_terms.get(i)
        return bytes(self.terms[i]) if long is None else long

    def _array(self, name: str, start: int = 0, count: int | None = None) -> np.ndarray:
        """*count* items (all by default) of the array *name* from item *start*."""
        offset, dtype, size = self._layout[name]
        count = size - start if count is None else count
        self._file.seek(self._base + offset + start * dtype.itemsize)
        return np.fromfile(self._file, dtype=dtype, count=count)

    def lengths(self, docs: int) -> np.ndarray:
        """The ``words`` length byte of each of the segment's *docs* documents (0: the
        document has no posting of the field)."""
        out = np.zeros(docs, dtype=np.uint8)
        got = self._array("lengths")[:docs]
        out[: len(got)] = got
        return out

    def chunks(self, size: int) -> Iterator[WordsChunk]:
        """The postings, at most *size* at a time: whole terms, or the postings of a term
        with more than *size* of them in pieces of *size* (a term's pieces come in
        order, so its documents stay ascending)."""
        starts = self._starts
        n_terms = len(starts) - 1
        lo, a = 0, 0
        extra = 0  # the first posting counting beyond the body at or after a, among those
        while lo < n_terms:
            hi = int(np.searchsorted(starts, a + size, side="right")) - 1
            hi = min(max(hi, lo + 1), n_terms)
            b = min(int(starts[hi]), a + size)
            cuts = np.minimum(np.maximum(starts[lo : hi + 1], a), b) - a
            sections = np.zeros((b - a, N_SECTIONS), dtype=SECTION_DTYPE)
            sections[:, 0] = self._array("body", a, b - a)
            extra, rows, at = self._extras(extra, a, b)
            sections[at - a, 1:] = rows
            yield WordsChunk(
                lo,
                cuts,
                self._array("docs", a, b - a),
                self._array("tfs", a, b - a),
                sections,
            )
            a = b
            lo = hi if b == int(starts[hi]) else hi - 1

    def _extras(self, first: int, a: int, b: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The postings ``a … b - 1`` that count beyond the body, the first of them
        *first* among those: where the next ones start, their counts in the other sections
        and their positions.  No more than ``b - a`` of them are read."""
        n_extra = int(self._extra_starts[-1])
        window = self._array("extra_at", first, min(b - a, n_extra - first))
        term = np.searchsorted(self._extra_starts, np.arange(first, first + len(window)), "right")
        at = self._starts[term - 1] + window
        count = int(np.searchsorted(at, b))
        rows = self._array("extra", first * (N_SECTIONS - 1), count * (N_SECTIONS - 1))
        return first + count, rows.reshape(-1, N_SECTIONS - 1), at[:count]

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SegmentWords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Bytes of a term kept in a fixed-width array (:func:`fixed_width`): a longer one (a
#: stem of 33 bytes or more: rare, but up to 64 characters of 3 bytes each) is kept
#: apart, so that it does not widen every other term's place.
WIDE = 32


def fixed_width(text: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, dict[int, bytes]]:
    """The terms of *text* (bytes, ``uint8``), term *i* from ``starts[i]`` to
    ``starts[i + 1]``, as an array of ``S<longest>`` (a term's bytes padded with NULs,
    which no term holds: read back, each is its bytes), and the terms longer than
    :data:`WIDE` bytes by position (``b""`` in the array)."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.diff(starts)
    n = len(lengths)
    long = np.flatnonzero(lengths > WIDE)
    apart = {int(i): text[starts[i] : starts[i + 1]].tobytes() for i in long.tolist()}
    short = lengths <= WIDE
    width = max(1, int(lengths[short].max())) if short.any() else 1
    return fixed_width_rows(text, starts[:n], np.where(short, lengths, 0), width), apart


def fixed_width_of(terms: list[bytes]) -> tuple[np.ndarray, dict[int, bytes]]:
    """:func:`fixed_width` of a list of terms."""
    lengths = np.fromiter(map(len, terms), np.int64, len(terms))
    starts = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return fixed_width(np.frombuffer(b"".join(terms), dtype=np.uint8), starts)
