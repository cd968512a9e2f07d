"""Near-duplicate detection with simhash (Charikar), as pure functions.

A page's simhash is a 64-bit fingerprint of its weighted stems: each stem's 64-bit hash
votes +weight on the bits it has set and −weight on the others; the fingerprint keeps the
bits with a positive total.  Pages that share most of their weighted words get
fingerprints that differ in few bits.  Two pages are **near-duplicates when their
fingerprints differ in at most** :data:`NEAR_DUPLICATE_BITS` **= 3 bits** (of 64), the
threshold Manku et al. found right for web pages ("Detecting near-duplicates for web
crawling", WWW 2007).

:class:`SimhashIndex` finds candidates without comparing with every page: a fingerprint is
cut into 4 bands of 16 bits, and two fingerprints within 3 bits of each other share at
least one band exactly (pigeonhole).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

NEAR_DUPLICATE_BITS = 3
_BANDS = 4
_BAND_BITS = 64 // _BANDS
_MASK64 = (1 << 64) - 1


def _hash64(stem: str) -> int:
    return int.from_bytes(hashlib.blake2b(stem.encode("utf-8"), digest_size=8).digest(), "big")


#: Only the heaviest stems of a page vote (they carry its content; and it keeps the cost low).
FEATURES = 64


def simhash(weights: Mapping[str, float]) -> int:
    """The unsigned 64-bit simhash of ``{stem: weight}`` (0 for an empty page), from its
    :data:`FEATURES` heaviest stems."""
    totals = [0.0] * 64
    top = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:FEATURES]
    for stem, weight in top:
        h = _hash64(stem)
        for bit in range(64):
            if h >> bit & 1:
                totals[bit] += weight
            else:
                totals[bit] -= weight
    value = 0
    for bit, total in enumerate(totals):
        if total > 0:
            value |= 1 << bit
    return value


def distance(a: int, b: int) -> int:
    """Hamming distance of two 64-bit fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def to_signed(value: int) -> int:
    """An unsigned 64-bit fingerprint as a signed BIGINT (the database's type)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value & _MASK64


class SimhashIndex:
    """Fingerprints by band, to find near-duplicates of a new page quickly."""

    def __init__(self, items: Iterable[tuple[int, int]] = ()) -> None:
        self._bands: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for doc_id, value in items:
            self.add(doc_id, value)

    def _keys(self, value: int) -> list[tuple[int, int]]:
        mask = (1 << _BAND_BITS) - 1
        return [(i, value >> (i * _BAND_BITS) & mask) for i in range(_BANDS)]

    def add(self, doc_id: int, value: int) -> None:
        for key in self._keys(value):
            self._bands.setdefault(key, []).append((doc_id, value))

    def nearest(self, value: int, exclude: int | None = None) -> int | None:
        """The earliest document within the threshold of *value*, if any."""
        best: int | None = None
        for key in self._keys(value):
            for doc_id, other in self._bands.get(key, ()):
                if (
                    doc_id != exclude
                    and distance(value, other) <= NEAR_DUPLICATE_BITS
                    and (best is None or doc_id < best)
                ):
                    best = doc_id
        return best
