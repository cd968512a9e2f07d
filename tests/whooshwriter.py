"""Whoosh's own writer of the index, for tests: documents added one by one through its
posting pool, segments merged by its ``add_reader`` (every posting through its matchers),
the index's codec, schema and merge policy.  What :meth:`search.index.Index.writer` and
:meth:`search.index.Index.rebuild` write must be its files, byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from whoosh.writing import CLEAR, SegmentWriter

from search.arraycodec import ArrayCodec
from search.index import LIMITMB, WORDS_FIELD, Index, IndexDoc, merge_policy, postings


class WhooshWriter:
    def __init__(self, writer: SegmentWriter) -> None:
        self._w = writer

    def add(self, doc: IndexDoc, update: bool = True) -> None:
        values: dict[str, Any] = {"docid": str(doc.docid), "url": doc.url, "host": doc.host}
        words = postings(doc.weights, doc.sections)
        if words:
            values[WORDS_FIELD] = words
        if update:
            self._w.update_document(**values)
        else:
            self._w.add_document(**values)

    def delete(self, docid: int) -> None:
        self._w.delete_by_term("docid", str(docid))


@contextmanager
def whoosh_writer(
    index: Index, clear: bool = False, mergetype: Any = None
) -> Iterator[WhooshWriter]:
    ix = index._open_for_writing(clear)
    w = SegmentWriter(ix, codec=ArrayCodec(), limitmb=LIMITMB)
    try:
        yield WhooshWriter(w)
    except BaseException:
        w.cancel()
        raise
    w.commit(mergetype=mergetype or (CLEAR if clear else merge_policy))
