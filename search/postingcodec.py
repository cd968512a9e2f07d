"""A document's postings as one database row (the ``postings`` table, migration 0014): each
of its stems' word id, surface form, counts per section and weight, as four packed columns.

One row a document replaced one row a document and stem: at 10,000 pages on PostgreSQL the
row a stem (385 a page) and its primary key's entry were 72 % of the write-ahead log a
crawl wrote and 416 of the database's 563 MB (benchmarks/README.md).  Every reader reads
the postings by document (a rebuild, the page-info view, a query's section counts and
surface forms), so nothing needs a row a stem.

The encoding is the same on SQLite and PostgreSQL (binary columns; PostgreSQL compresses
a large value itself), little-endian, the stems in word id order:

- ``word_ids``: the stems' word ids (``words.id``), 4 bytes each, ascending;
- ``surfaces``: the surface forms (at most :data:`SURFACE_CHARS` characters each) in UTF-8,
  separated by a zero byte (a NUL in a surface form is dropped);
- ``counts``: one byte giving the width of a count (1, 2 or 4 bytes: the smallest that holds
  the document's largest), then each stem's counts in :data:`search.analysis.SECTIONS`
  order, unsigned;
- ``weights``: the stems' weights (Σ count × section weight), 8-byte floats.

This module does not import Scrapy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from search.analysis import SECTIONS

#: Characters of a surface form kept (what ``postings.surface`` held before 0014).
SURFACE_CHARS = 128

_WORD_IDS = np.dtype("<u4")
_WEIGHTS = np.dtype("<f8")
_COUNT_TYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
}
_SEPARATOR = "\x00"


@dataclass(slots=True)
class PackedPostings:
    """The four columns of one document's postings row, as stored."""

    word_ids: bytes
    surfaces: bytes
    counts: bytes
    weights: bytes


@dataclass(slots=True)
class DocumentPostings:
    """One document's postings decoded, in word id order: word ids (``int64``), surface
    forms (None when not read), counts (``int64``, one row a stem, :data:`SECTIONS`
    columns) and weights (``float64``; None when not read)."""

    word_ids: np.ndarray
    counts: np.ndarray
    surfaces: list[str] | None = None
    weights: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.word_ids)


def encode(
    word_ids: Sequence[int] | np.ndarray,
    surfaces: Sequence[str],
    counts: Sequence[int] | np.ndarray,
    weights: Sequence[float] | np.ndarray,
) -> PackedPostings:
    """The row of a document's postings: *word_ids* (distinct), their *surfaces*, their
    *counts* (``len(SECTIONS)`` a stem, stem after stem) and *weights*, in any order."""
    ids = np.asarray(word_ids, dtype=np.int64)
    n = len(ids)
    grid = np.asarray(counts, dtype=np.int64).reshape(n, len(SECTIONS))
    values = np.asarray(weights, dtype=np.float64)
    if len(surfaces) != n or len(values) != n:
        raise ValueError("the columns of a document's postings differ in length")
    if n and (int(ids.min()) < 0 or int(ids.max()) > np.iinfo(_WORD_IDS).max):
        raise ValueError("a word id out of range")
    if n > 1 and not (ids[1:] > ids[:-1]).all():
        order = np.argsort(ids, kind="stable")
        ids, grid, values = ids[order], grid[order], values[order]
        surfaces = [surfaces[i] for i in order.tolist()]
        if n > 1 and not (ids[1:] > ids[:-1]).all():
            raise ValueError("a word id twice in a document's postings")
    top = int(grid.max()) if grid.size else 0
    if grid.size and int(grid.min()) < 0:
        raise ValueError("a negative count")
    width = next((w for w, kind in _COUNT_TYPES.items() if top <= np.iinfo(kind).max), None)
    if width is None:
        raise ValueError(f"a count of {top} does not fit in 4 bytes")
    joined = _SEPARATOR.join(s[:SURFACE_CHARS] for s in surfaces)
    if joined.count(_SEPARATOR) != max(n - 1, 0):
        joined = _SEPARATOR.join(s.replace(_SEPARATOR, "")[:SURFACE_CHARS] for s in surfaces)
    return PackedPostings(
        ids.astype(_WORD_IDS).tobytes(),
        joined.encode("utf-8", "surrogatepass"),
        bytes((width,)) + grid.astype(_COUNT_TYPES[width]).tobytes(),
        values.astype(_WEIGHTS).tobytes(),
    )


def decode_word_ids(blob: bytes) -> np.ndarray:
    """The word ids of a ``word_ids`` column, as ``int64``."""
    return np.frombuffer(blob, dtype=_WORD_IDS).astype(np.int64)


def decode_counts(blob: bytes) -> np.ndarray:
    """The counts of a ``counts`` column: ``int64``, one row a stem."""
    if not blob:
        return np.empty((0, len(SECTIONS)), dtype=np.int64)
    kind = _COUNT_TYPES.get(blob[0])
    if kind is None:
        raise ValueError(f"postings' counts of an unknown width: {blob[0]}")
    return np.frombuffer(blob, dtype=kind, offset=1).astype(np.int64).reshape(-1, len(SECTIONS))


def decode_surfaces(blob: bytes, n: int) -> list[str]:
    """The *n* surface forms of a ``surfaces`` column."""
    if not n:
        return []
    out = bytes(blob).decode("utf-8", "surrogatepass").split(_SEPARATOR)
    if len(out) != n:
        raise ValueError(f"{len(out)} surface forms for {n} postings")
    return out


def decode_weights(blob: bytes) -> np.ndarray:
    """The weights of a ``weights`` column, as ``float64``."""
    return np.frombuffer(blob, dtype=_WEIGHTS).astype(np.float64)


def decode(
    word_ids: bytes,
    counts: bytes,
    surfaces: bytes | None = None,
    weights: bytes | None = None,
) -> DocumentPostings:
    """A document's postings from its row's columns (*surfaces* and *weights* when read)."""
    ids = decode_word_ids(word_ids)
    grid = decode_counts(counts)
    if len(grid) != len(ids):
        raise ValueError(f"{len(grid)} rows of counts for {len(ids)} postings")
    return DocumentPostings(
        ids,
        grid,
        None if surfaces is None else decode_surfaces(surfaces, len(ids)),
        None if weights is None else decode_weights(weights),
    )
