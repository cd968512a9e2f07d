"""The postings as the store wrote them before migration 0014 (a row a document and stem),
for the tests of a database at an earlier revision: :class:`RowPostingsStore` stores pages
into such a database."""

from __future__ import annotations

from typing import Any

from search.analysis import SECTIONS, PackedWords
from search.rows import DocumentRow
from search.store import DocumentStore

#: The columns of a postings row before migration 0014.
ROW_COLUMNS = ("document_id", "word_id", "surface", *(f"{s}_count" for s in SECTIONS), "weight")


class RowPostingsStore(DocumentStore):
    """The store, its postings written a row a document and stem (schema 0013 and before;
    from 0006 on, with the boilerplate count)."""

    def _write_postings(self, conn: Any, rows: list[DocumentRow], ids: dict[str, int]) -> None:
        out = []
        for row in rows:
            words = row.words
            if isinstance(words, PackedWords):
                words = words.records()
            for stem, rec in (words or {}).items():
                out.append(
                    (ids[row.url], self.word_ids[stem], rec.surface[:128], *rec.counts, rec.weight)
                )
        if out:
            self._bulk_insert(conn, "postings", ROW_COLUMNS, out)
