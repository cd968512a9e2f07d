"""The index's merge policy (:func:`merge_policy`), given to every commit of an
incremental writer (:meth:`search.index.Index.writer`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from search import faults

if TYPE_CHECKING:
    from whoosh.writing import SegmentWriter

#: Merge policy (Lucene's log merge policy, by live documents): a segment's level is
#: ⌊log_MERGE_FACTOR(documents)⌋; when MERGE_FACTOR segments share a level, they and every
#: smaller segment are merged into the segment being written.  An index of N documents then
#: keeps at most about MERGE_FACTOR · log_MERGE_FACTOR(N) segments (ranking costs a little
#: per segment), and each document is rewritten about log_MERGE_FACTOR(N) times.  Whoosh's
#: own default merges only tiny segments: one commit of 5,000 documents at a time left 20
#: segments for 100,000 documents.
MERGE_FACTOR = 4

#: Lucene's ``maxMergeDocs`` of its log merge policy: a segment of more live documents
#: than this is never merged again, so that no merge writes more than about MERGE_FACTOR
#: times as many (the indexer's memory in a merge grows with the merged segments'
#: documents and stems; without a cap the largest merge of a crawl grows with the crawl).
#: Beyond MERGE_FACTOR · MAX_MERGE_DOCS documents the index keeps one segment for every
#: MERGE_FACTOR · MAX_MERGE_DOCS or so.  A segment that deletions (pages replaced by a
#: re-crawl) bring down to this size is merged again.  None: no cap.
#: ``INDEX_MAX_MERGE_DOCS`` sets it for a crawl's indexer.
MAX_MERGE_DOCS: int | None = 16_384


def _level(docs: int) -> int:
    return int(math.log(max(docs, 1), MERGE_FACTOR))


def merge_policy(
    writer: SegmentWriter, segments: list[Any], max_docs: int | None = MAX_MERGE_DOCS
) -> list[Any]:
    """Whoosh merge type of :data:`MERGE_FACTOR` that leaves alone the segments of more
    than *max_docs* live documents (None: none): merges into *writer*, returns the
    segments kept as they are."""
    from whoosh.reading import SegmentReader

    levels: dict[int, list[Any]] = {}
    for segment in segments:
        docs = segment.doc_count()
        if max_docs is None or docs <= max_docs:
            levels.setdefault(_level(docs), []).append(segment)
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
