"""The index's merge policy (:func:`merge_policy`), given to every commit of an
incremental writer (:meth:`search.index.Index.writer`)."""

from __future__ import annotations

import math
from typing import Any

from whoosh.writing import SegmentWriter

from search import faults

#: Merge policy (Lucene's log merge policy, by live documents): a segment's level is
#: ⌊log_MERGE_FACTOR(documents)⌋; when MERGE_FACTOR segments share a level, they and every
#: smaller segment are merged into the segment being written.  An index of N documents then
#: keeps at most about MERGE_FACTOR · log_MERGE_FACTOR(N) segments (ranking costs a little
#: per segment), and each document is rewritten about log_MERGE_FACTOR(N) times.  Whoosh's
#: own default merges only tiny segments: one commit of 5,000 documents at a time left 20
#: segments for 100,000 documents.
MERGE_FACTOR = 4


def _level(docs: int) -> int:
    return int(math.log(max(docs, 1), MERGE_FACTOR))


def merge_policy(writer: SegmentWriter, segments: list[Any]) -> list[Any]:
    """Whoosh merge type of :data:`MERGE_FACTOR`: merges into *writer*, returns the
    segments kept as they are."""
    from whoosh.reading import SegmentReader

    levels: dict[int, list[Any]] = {}
    for segment in segments:
        levels.setdefault(_level(segment.doc_count()), []).append(segment)
    chosen: list[Any] = []
    for level in sorted(levels):
        chosen += levels[level]
        if len(levels[level]) >= MERGE_FACTOR:
            break
    else:
        return list(segments)
    for segment in chosen:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        writer.add_reader(reader)
        reader.close()
    faults.point("merge")
    merged = {id(s) for s in chosen}
    return [s for s in segments if id(s) not in merged]
