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
from search.index import LIMITMB, Index, IndexWriter, merge_policy


@contextmanager
def whoosh_writer(
    index: Index, clear: bool = False, mergetype: Any = None
) -> Iterator[IndexWriter]:
    ix = index._open_for_writing(clear)
    w = SegmentWriter(ix, codec=ArrayCodec(), limitmb=LIMITMB)
    try:
        yield IndexWriter(w)  # a plain Whoosh writer: one document at a time
    except BaseException:
        w.cancel()
        raise
    w.commit(mergetype=mergetype or (CLEAR if clear else merge_policy))
