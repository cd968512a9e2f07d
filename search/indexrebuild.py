"""The full rebuild's writer (:meth:`search.index.Index.rebuild`): the segment writer from
arrays (:class:`search.arraywriter.ArraySegmentWriter`) whose term ids are the rebuild's
vocabulary (the database's word ids).  Its files are those of
:meth:`search.index.Index.writer` fed the same documents one by one, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from search.arraywriter import ArraySegmentWriter, DocBatch

__all__ = ["DocBatch", "RebuildWriter"]


class _RebuildSegmentWriter(ArraySegmentWriter):
    """The segment writer of a full rebuild: documents come as :class:`DocBatch` whose
    term ids index the vocabulary given (which may grow, :meth:`grow_vocabulary`)."""

    def __init__(self, ix: Any, vocabulary: Sequence[str], **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self._rank_of = self._rank(vocabulary)

    def _rank(self, vocabulary: Sequence[str]) -> np.ndarray:
        """Each term id's rank in the sorted order of the stems (kept in ``_stems``)."""
        order = sorted(range(len(vocabulary)), key=vocabulary.__getitem__)
        ranks = np.empty(len(vocabulary), dtype=np.int64)
        ranks[order] = np.arange(len(vocabulary))
        self._stems = [vocabulary[i] for i in order]
        return ranks

    def _ranks(self) -> np.ndarray:
        return self._rank_of

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Use *vocabulary*, the one given to the writer with more term ids after it (the
        stems stored since it was read)."""
        self._rank_of = self._rank(vocabulary)


class RebuildWriter:
    """Adds documents to a full rebuild (:meth:`search.index.Index.rebuild`), batch after batch."""

    def __init__(self, writer: _RebuildSegmentWriter) -> None:
        self._w = writer
        self.added = 0

    def add(self, batch: DocBatch) -> None:
        self._w.add_batch(batch)
        self.added += len(batch)

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Batches from now on may use the term ids of *vocabulary*, which is the
        vocabulary given to :meth:`Index.rebuild` with more ids after it (words stored
        meanwhile: the stems of the ids already given must not change)."""
        self._w.grow_vocabulary(vocabulary)
