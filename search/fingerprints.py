"""A compact set of URLs: 8-byte fingerprints in a sorted numpy array.

A crawl must remember every URL it has scheduled.  A Python ``set`` of URL strings costs
about 150 bytes a URL (the string, its hash slot and the table's slack), so a crawl of
millions of URLs spends hundreds of megabytes on it.  :class:`FingerprintSet` keeps, for
each URL, the first 8 bytes of its BLAKE2b digest: a sorted ``uint64`` array holds most of
them (8 bytes each, searched by bisection), and a small Python set holds the latest ones
until there are :data:`PENDING` of them, when they are merged into the array.  Removals
(rare: a middleware that drops a request lets its URL be scheduled again) are kept in a
second small set until the next merge.

Two different URLs share a fingerprint with probability about n² / 2⁶⁵: for 10 million
URLs, one chance in 370,000 that any one URL of the crawl is taken for another and not
fetched.  Scrapy's own request fingerprints make the same trade with 20 bytes.

:class:`Fingerprints` is the same structure for fingerprints computed elsewhere (the crawl's
request filter keeps Scrapy's request fingerprints in one, cut to 8 bytes).  No Scrapy here:
the spider's link follower (:mod:`spidersite.links`) and :mod:`spidersite.frontier` use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

#: Fingerprints kept in the Python sets before they are merged into the sorted array
#: (about 70 bytes each there: a merge every PENDING additions bounds them to ~4.5 MB).
PENDING = 65_536


def fingerprint(url: str) -> int:
    """The 64-bit fingerprint of *url* (its canonical form, as the crawl keeps it)."""
    digest = hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class Fingerprints:
    """64-bit integers (fingerprints): ``add``, ``in``, ``discard``, ``len``; about 8 bytes
    each.  :class:`FingerprintSet` keeps URLs in one; the crawl's request filter
    (:class:`spidersite.frontier.FingerprintDupeFilter`) keeps Scrapy's request
    fingerprints, cut to 8 bytes."""

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._added: set[int] = set()
        self._removed: set[int] = set()
        for fp in values:
            self.add_fingerprint(fp)

    def __len__(self) -> int:
        return len(self._sorted) - len(self._removed) + len(self._added)

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, int) and self.has_fingerprint(fp)

    def has_fingerprint(self, fp: int) -> bool:
        if fp in self._added:
            return True
        if fp in self._removed:
            return False
        arr = self._sorted
        i = int(np.searchsorted(arr, np.uint64(fp)))
        return i < len(arr) and int(arr[i]) == fp

    def add_fingerprint(self, fp: int) -> bool:
        """Add *fp* (0 ≤ fp < 2⁶⁴); whether it was new."""
        if fp in self._removed:
            self._removed.discard(fp)
            return True
        if self.has_fingerprint(fp):
            return False
        self._added.add(fp)
        if len(self._added) >= PENDING:
            self._merge()
        return True

    def discard_fingerprint(self, fp: int) -> None:
        if fp in self._added:
            self._added.discard(fp)
        elif self.has_fingerprint(fp):
            self._removed.add(fp)
            if len(self._removed) >= PENDING:
                self._merge()

    def _merge(self) -> None:
        arr = self._sorted
        if self._removed:
            gone = np.fromiter(self._removed, dtype=np.uint64, count=len(self._removed))
            arr = arr[~np.isin(arr, gone)]
        if self._added:
            new = np.fromiter(self._added, dtype=np.uint64, count=len(self._added))
            arr = np.concatenate([arr, new])
            arr.sort(kind="stable")  # a radix sort of two sorted runs: linear
        self._sorted = arr
        self._added = set()
        self._removed = set()

    @property
    def nbytes(self) -> int:
        """Bytes of the sorted array (the sets of pending changes stay under PENDING)."""
        return int(self._sorted.nbytes)


class FingerprintSet(Fingerprints):
    """URLs by fingerprint: ``add``, ``in``, ``discard``, ``len``; about 8 bytes a URL."""

    def __init__(self, urls: Iterable[str] = ()) -> None:
        super().__init__()
        self.update(urls)

    def __contains__(self, url: object) -> bool:
        if not isinstance(url, str):
            return False
        return self.has_fingerprint(fingerprint(url))

    def add(self, url: str) -> None:
        self.add_fingerprint(fingerprint(url))

    def update(self, urls: Iterable[str]) -> None:
        for url in urls:
            self.add(url)

    def discard(self, url: str) -> None:
        self.discard_fingerprint(fingerprint(url))
