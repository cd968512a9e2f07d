"""The Whoosh segment readers of one long-lived searcher, shared by its index generations.

A commit (a crawl's indexer commits every few seconds) adds a segment or two, merges a few
small ones and records deletions in old segments; the other segments' files do not change.
:class:`SegmentReaders` opens each segment's files once (its compound file, terms, stored
fields) and gives every generation a reader of its own on them that takes the segment as
the generation's table of contents describes it now: its current deletions.  Not Whoosh's
``refresh()``, which hands on an unchanged segment's reader as it was opened, deletions
included, so the pages a re-crawl replaced in it stayed found (each twice).

A segment's files are closed when the last reader on them is closed, with the last
searcher of a generation that reads it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from whoosh.reading import EmptyReader, MultiReader, ReaderClosed, SegmentReader
from whoosh.searching import Searcher as WhooshSearcher


class _Files:
    """One segment's reader, opened once: the files its views read."""

    __slots__ = ("reader", "users")

    def __init__(self, reader: SegmentReader) -> None:
        self.reader = reader
        self.users = 0

    def release(self) -> None:
        self.users -= 1
        if not self.users:
            self.reader.close()


class SharedSegmentReader(SegmentReader):
    """A reader of one segment in one generation: the files of :class:`_Files` (opened
    once), the segment as this generation's table of contents gives it (its deletions)."""

    def __init__(self, files: _Files, segment: Any, generation: int) -> None:
        # Not SegmentReader.__init__, which opens the files anew.
        self.__dict__.update(files.reader.__dict__)
        self._segment = segment
        self._segid = segment.segment_id()
        self._gen = generation
        # The per-document reader answers the deletions from its segment: a copy of its
        # own (its open column files are the shared reader's, closed with it).
        self._perdoc = copy.copy(files.reader._perdoc)
        self._perdoc._segment = segment
        self.is_closed = False
        self._files = files
        files.users += 1

    def close(self) -> None:
        if self.is_closed:
            raise ReaderClosed("Reader already closed")
        self.is_closed = True
        self._files.release()


class SegmentReaders:
    """Each segment's files, opened once for the generations of one searcher."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], _Files] = {}

    def searcher(self, ix: Any, **kwargs: Any) -> Any:
        """A Whoosh searcher of the latest generation of *ix* (a ``FileIndex``), on the
        segments' files opened for earlier generations where they are the same."""
        info = ix._read_toc()
        folder = str(Path(getattr(ix.storage, "folder", "")))
        current: dict[tuple[str, str], _Files] = {}
        readers = []
        try:
            for segment in info.segments:
                key = (folder, segment.segment_id())
                files = self._files.get(key)
                if files is None or files.reader.is_closed:  # new, or its readers all closed
                    files = _Files(SegmentReader(ix.storage, info.schema, segment))
                readers.append(SharedSegmentReader(files, segment, info.generation))
                current[key] = files
        except BaseException:
            for opened in readers:
                opened.close()
            raise
        self._files = current
        if not readers:
            reader: Any = EmptyReader(info.schema)
        elif len(readers) == 1:
            reader = readers[0]
        else:
            reader = MultiReader(readers, generation=info.generation)
        return WhooshSearcher(reader, fromindex=ix, **kwargs)
