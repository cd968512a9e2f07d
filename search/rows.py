"""The rows a crawl hands to the store (:mod:`search.store`): plain data, not Scrapy items,
built by the crawler's pipeline, carried to the worker process and written in one
transaction per batch; what the store answers; and the rows the read side
(:mod:`search.crawldb`) answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from search.analysis import PackedRecords, PackedWords, WordRecord, pack_records, unpack_records
from search.servers import DEFAULTS

if TYPE_CHECKING:
    import numpy as np


@dataclass(slots=True)
class DocumentRow:
    """A document to store, with its word records and links."""

    url: str
    server: str | None
    values: dict[str, Any]
    words: dict[str, WordRecord] | PackedWords | None = None
    links: list[tuple[str, str, bool]] = field(default_factory=list)
    period: int = DEFAULTS["period"]
    weights: dict[str, float] = field(default_factory=dict)
    #: The page's HTML, for the worker to split its main content from its boilerplate
    #: (:mod:`search.content`); dropped once it has.  Never stored.
    html: bytes | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Between processes the word records go packed (search.analysis.pack_records).
        return (
            _document_row,
            (
                self.url,
                self.server,
                self.values,
                pack_records(self.words),
                self.links,
                self.period,
                self.weights,
                self.html,
            ),
        )


def _document_row(
    url: str,
    server: str | None,
    values: dict[str, Any],
    words: PackedRecords | None,
    links: list[tuple[str, str, bool]],
    period: int,
    weights: dict[str, float],
    html: bytes | None,
) -> DocumentRow:
    """A :class:`DocumentRow` unpickled."""
    return DocumentRow(url, server, values, unpack_records(words), links, period, weights, html)


@dataclass(slots=True)
class ErrorRow:
    url: str
    server: str | None
    kind: str
    message: str
    time: datetime


@dataclass(slots=True)
class StoredDocument:
    id: int
    row: DocumentRow
    #: The document this one is an exact duplicate of (then it is not indexed).
    clone_of: int | None = None
    #: An earlier document this one nearly duplicates (recorded; still indexed).
    near_duplicate_of: int | None = None


@dataclass(slots=True)
class RevisitRow:
    """A stored page found unchanged: only its schedule moves."""

    doc_id: int
    time: datetime
    interval: int


@dataclass(slots=True)
class GoneRow:
    """A stored page that answered 404/410, moved, or that robots.txt now forbids:
    marked, and out of the index. *status*: the new HTTP status, None to keep the
    stored one."""

    doc_id: int
    status: int | None
    time: datetime


@dataclass(slots=True)
class BatchResult:
    documents: list[StoredDocument] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    #: Exact duplicates that took the place of their original (gone, changed or now a
    #: duplicate itself): stored before, now to be indexed from the database.
    promoted: list[int] = field(default_factory=list)


# -- what the read side answers -------------------------------------------------------


@dataclass(slots=True)
class PostingsPage:
    """Indexable documents (consecutive in id order) with their stored postings as arrays:
    each document's number of postings, then each posting's word id and counts per
    section (columns in :data:`search.analysis.SECTIONS` order), document after document."""

    ids: list[int]
    urls: list[str]
    server_ids: list[int | None]
    sizes: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray


@dataclass(slots=True)
class PageWord:
    """A stem of a stored document as the page-info view shows it
    (:meth:`search.crawldb.CrawlDB.top_words`)."""

    stem: str
    surface: str
    body_count: int
    title_count: int
    url_count: int
    desc_count: int
    keywords_count: int
    boilerplate_count: int
    weight: float


@dataclass(slots=True)
class NotDue:
    """A stored document not due yet (:meth:`CrawlDB.not_due`): a re-visit row."""

    id: int
    url: str
    hops: int
    kind: str
    etag: str | None
    last_modified: datetime | None
    checksum: str | None
    change_interval: int | None
    last_index_time: datetime | None
