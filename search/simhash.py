"""Near-duplicate detection with simhash (Charikar) over word shingles (Broder).

A page's fingerprint is the 64-bit simhash of the set of its body's **3-word shingles**
(every run of :data:`SHINGLE_WORDS` consecutive words, stop words included, as the
analyzer's tokenizer reads them): each distinct shingle's 64-bit hash votes +1 on the bits it
has set and −1 on the others, and the fingerprint keeps the bits with a positive total.  Two
pages that share most of their shingles get fingerprints that differ in few bits; two pages
that merely share a vocabulary (the common words of a site or a language) share few
shingles, so their fingerprints are about 32 bits apart.  A shingle set needs no statistics
of the collection (an idf would, and there are none at the start of a crawl), and the
fingerprint of a page depends on that page alone, so it is deterministic.

Two pages are **near-duplicates when their fingerprints differ in at most**
:data:`NEAR_DUPLICATE_BITS` **= 3 bits** (of 64), the threshold Manku, Jain and Das Sarma
found right for web pages ("Detecting near-duplicates for web crawling", WWW 2007).  The
angle between two shingle sets decides the expected distance (64 θ / π bits), so a page
must share about 99 % of its shingles with another to be found reliably: a few words
changed in a page of a thousand, another footer line.

:class:`SimhashIndex` finds candidates without comparing with every page (Manku et al.'s
banded tables): a fingerprint is cut into 4 bands of 16 bits, and two fingerprints within
3 bits of each other share at least one band exactly (pigeonhole).  The index is numpy
arrays, about 50 bytes a page (and 4 bytes a document id), one fingerprint a page; a lookup
examines at most :data:`MAX_CANDIDATES` earlier fingerprints per band plus the few added
since the last sorted run was made, and adding N pages costs O(N log N).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from search.analysis import get_analyzer

NEAR_DUPLICATE_BITS = 3
#: Words per shingle.
SHINGLE_WORDS = 3
#: Words of a body read for its fingerprint (the rest of a longer page does not count).
MAX_WORDS = 50_000
#: Earlier fingerprints examined per band and lookup (the earliest stored of the band's
#: bucket); a page whose only near-duplicates lie beyond is not marked.
MAX_CANDIDATES = 256
#: Fingerprints added since the last sorted run was made, compared one by one.
PENDING = 1024

_BANDS = 4
_BAND_BITS = 64 // _BANDS
_MASK64 = (1 << 64) - 1

# The polynomial hash of a byte span: Σ b_i P^i over the span, divided by P^start (P odd,
# so invertible modulo 2^64), then scrambled by SplitMix64's finaliser.
_P = 0x100000001B3  # FNV-1's 64-bit prime
_P_INV = pow(_P, -1, 1 << 64)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _powers(base: int, n: int) -> np.ndarray:
    out = np.full(n, base, dtype=np.uint64)
    out[0] = 1
    return np.cumprod(out, dtype=np.uint64)  # wraps modulo 2^64


def shingles(words: Sequence[str], size: int = SHINGLE_WORDS) -> np.ndarray:
    """The 64-bit hashes (uint64) of the *size*-word shingles of *words*, one per position
    (a text shorter than *size* words is one shingle; no words, none).

    Vectorised: the words are joined with NUL bytes and every shingle's hash is read off
    one prefix sum of the polynomial hash of the bytes."""
    if not words:
        return np.zeros(0, dtype=np.uint64)
    data = np.frombuffer("\0".join(words).encode("utf-8"), dtype=np.uint8)
    n = len(data)
    seps = np.flatnonzero(data == 0)
    starts = np.concatenate(([0], seps + 1))
    ends = np.concatenate((seps, [n]))
    count = max(1, len(starts) - size + 1)
    first, last = starts[:count], ends[-count:]
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum((data.astype(np.uint64) + np.uint64(1)) * _powers(_P, n), out=prefix[1:])
    spans = (prefix[last] - prefix[first]) * _powers(_P_INV, n)[first]
    return _mix(spans ^ (last - first).astype(np.uint64))


def simhash(hashes: np.ndarray) -> int:
    """The unsigned 64-bit simhash of a set of 64-bit feature hashes (duplicates count
    once; 0 for none): bit *i* is set when more than half the features have it set."""
    unique = np.sort(np.asarray(hashes, dtype=np.uint64))
    if not len(unique):
        return 0
    unique = unique[np.concatenate(([True], unique[1:] != unique[:-1]))]  # np.unique is slower
    octets = unique.astype("<u8").view(np.uint8).reshape(-1, 8)
    votes = np.unpackbits(octets, axis=1, bitorder="little").sum(axis=0, dtype=np.int64)
    bits = (votes * 2 > len(unique)).astype(np.uint8)
    return int(np.packbits(bits, bitorder="little").view("<u8")[0])


def fingerprint(text: str | None, max_words: int = MAX_WORDS) -> int | None:
    """The fingerprint of a page's body text, or ``None`` when it has no words."""
    if not text:
        return None
    words = get_analyzer().words(text, max_words)
    if not words:
        return None
    return simhash(shingles(words))


def distance(a: int, b: int) -> int:
    """Hamming distance of two 64-bit fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def to_signed(value: int) -> int:
    """An unsigned 64-bit fingerprint as a signed BIGINT (the database's type)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value & _MASK64


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _popcount(x: np.ndarray) -> np.ndarray:
    count = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if count is not None:
        return np.asarray(count(x))
    return _POPCOUNT8[x.view(np.uint8)].reshape(-1, 8).sum(axis=1)


_ROW_BITS = 32
_ROW_MASK = np.uint64((1 << _ROW_BITS) - 1)
_NO_ROW = np.uint32(0xFFFFFFFF)


def _grown(size: int) -> int:
    return size + max(1024, size // 4)


class _Run:
    """The band tables of the rows ``first`` to ``end`` (the live ones when it was built),
    at a *level* (about ``PENDING · 2**level`` rows): one sorted uint64 array whose entries
    are ``band << 48 | band value << 32 | row``, so each band's bucket is one range of it,
    its rows in order."""

    __slots__ = ("end", "first", "level", "table")

    def __init__(self, first: int, end: int, level: int, table: np.ndarray) -> None:
        self.first, self.end, self.level, self.table = first, end, level, table


class SimhashIndex:
    """Fingerprints by band, to find near-duplicates of a new page in bounded time.

    Documents are rows of two growing arrays (id, fingerprint); a document has one live row
    at most: adding it again (a page stored again, its text changed) or discarding it ends
    its row (its id becomes -1).  The band tables are kept in sorted runs of consecutive
    rows (a logarithmic method, Bentley and Saxe): every :data:`PENDING` rows added make a
    run of level 0, and two runs of one level are rebuilt as one of the next, dropping the
    ended rows, so adding N documents costs O(N log N) and there are at most
    log2(N / PENDING) + 1 runs.  When the ended rows pass a quarter of the live ones, the
    arrays are compacted and the tables rebuilt as one run.

    A lookup reads the bucket of each of its 4 band values in each run, the earliest first,
    up to *max_candidates* rows of each band (ended rows included), and compares the rows
    added since the last run was made one by one.
    """

    def __init__(
        self, items: Iterable[tuple[int, int]] = (), max_candidates: int = MAX_CANDIDATES
    ) -> None:
        self.max_candidates = max_candidates
        self._ids = np.zeros(1024, dtype=np.int64)
        self._values = np.zeros(1024, dtype=np.uint64)
        #: Document id -> its live row (``_NO_ROW``: none): document ids are the documents
        #: table's keys, dense from 1, so 4 bytes an id.
        self._row_of = np.full(1024, _NO_ROW, dtype=np.uint32)
        self._size = 0
        self._live = 0
        self._runs: list[_Run] = []
        self._merged = 0
        for doc_id, value in items:
            self._append(doc_id, value)
        self._compact()

    def __len__(self) -> int:
        """The documents held (one fingerprint each)."""
        return self._live

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (capacity included)."""
        tables = sum(run.table.nbytes for run in self._runs)
        return self._ids.nbytes + self._values.nbytes + self._row_of.nbytes + tables

    def _end_row(self, doc_id: int) -> None:
        if doc_id < len(self._row_of):
            row = self._row_of[doc_id]
            if row != _NO_ROW:
                self._ids[row] = -1
                self._row_of[doc_id] = _NO_ROW
                self._live -= 1

    def _append(self, doc_id: int, value: int) -> None:
        if doc_id < 0:
            raise ValueError(f"a document id is not negative: {doc_id}")
        self._end_row(doc_id)
        if self._size == len(self._ids):  # grown by a quarter: copied O(1) times a row
            self._ids = np.resize(self._ids, _grown(self._size))
            self._values = np.resize(self._values, _grown(self._size))
        if doc_id >= len(self._row_of):
            grown = np.full(max(doc_id + 1, _grown(len(self._row_of))), _NO_ROW, dtype=np.uint32)
            grown[: len(self._row_of)] = self._row_of
            self._row_of = grown
        self._ids[self._size] = doc_id
        self._values[self._size] = value
        self._row_of[doc_id] = self._size
        self._size += 1
        self._live += 1

    def _build(self, first: int, end: int, level: int) -> _Run:
        """The run of the live rows from *first* to *end*."""
        rows = (np.flatnonzero(self._ids[first:end] >= 0) + first).astype(np.uint64)
        values = self._values[rows]
        tables = []
        for band in range(_BANDS):
            keys = ((values >> np.uint64(band * _BAND_BITS)) & np.uint64(0xFFFF)).astype(np.uint16)
            order = np.argsort(keys, kind="stable")  # a radix sort: rows stay in order
            prefix = np.uint64(band << (_BAND_BITS + _ROW_BITS))
            tables.append(
                prefix | keys[order].astype(np.uint64) << np.uint64(_ROW_BITS) | rows[order]
            )
        return _Run(first, end, level, np.concatenate(tables))

    def _flush(self) -> None:
        """Make a run of the pending rows, then merge the runs of equal level."""
        if self._merged == self._size:
            return
        runs = self._runs
        runs.append(self._build(self._merged, self._size, 0))
        self._merged = self._size
        while len(runs) > 1 and runs[-2].level == runs[-1].level:
            newer = runs.pop()
            older = runs.pop()
            runs.append(self._build(older.first, newer.end, older.level + 1))

    def _compact(self) -> None:
        """Drop the ended rows from the arrays and build the tables as one run."""
        keep = np.flatnonzero(self._ids[: self._size] >= 0)
        self._ids = np.resize(self._ids[keep], max(1024, len(keep)))
        self._values = np.resize(self._values[keep], max(1024, len(keep)))
        self._size = self._live = len(keep)
        self._row_of[:] = _NO_ROW
        self._row_of[self._ids[: self._size]] = np.arange(self._size, dtype=np.uint32)
        level = max(0, (self._size // PENDING).bit_length() - 1)
        self._runs = [self._build(0, self._size, level)] if self._size else []
        self._merged = self._size

    def add(self, doc_id: int, value: int) -> None:
        """Hold *value* as the fingerprint of *doc_id* (in place of one held already)."""
        self._append(doc_id, value)
        if self._size - self._merged >= PENDING:
            if self._size - self._live > max(PENDING, self._live // 4):
                self._compact()
            else:
                self._flush()

    def discard(self, doc_id: int) -> None:
        """Hold no fingerprint of *doc_id* (a page gone, or now an exact duplicate)."""
        self._end_row(doc_id)

    def candidates(self, value: int) -> np.ndarray:
        """The live rows examined for *value*: each band's bucket in each run (at most
        *max_candidates* rows of each band, the earliest) and the pending rows."""
        rows = self._candidate_rows(value)
        return rows[self._ids[rows] >= 0]

    def _candidate_rows(self, value: int) -> np.ndarray:
        parts = [np.arange(self._merged, self._size, dtype=np.uint64)]
        if self._runs:
            starts = [
                band << (_BAND_BITS + _ROW_BITS)
                | (value >> (band * _BAND_BITS) & 0xFFFF) << _ROW_BITS
                for band in range(_BANDS)
            ]
            probe = np.array(starts + [s + (1 << _ROW_BITS) for s in starts], dtype=np.uint64)
            need = [self.max_candidates] * _BANDS
            for run in self._runs:  # the earliest rows first
                bounds = np.searchsorted(run.table, probe).tolist()
                for band in range(_BANDS):
                    lo, hi = bounds[band], bounds[band + _BANDS]
                    if lo < hi and need[band] > 0:
                        hi = min(hi, lo + need[band])
                        need[band] -= hi - lo
                        parts.append(run.table[lo:hi] & _ROW_MASK)
        return np.concatenate(parts)

    def nearest(self, value: int, exclude: int | None = None) -> int | None:
        """The earliest document (lowest id) among the candidates within the threshold of
        *value*, if any."""
        rows = self._candidate_rows(value)
        if not len(rows):
            return None
        ids = self._ids[rows]
        near = _popcount(self._values[rows] ^ np.uint64(value)) <= NEAR_DUPLICATE_BITS
        near &= ids >= 0
        if exclude is not None:
            near &= ids != exclude
        if not near.any():
            return None
        return int(ids[near].min())
