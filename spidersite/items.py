"""Items the spider yields: a fetched document, or a failure for the crawl log.

:class:`PageItem` is a fetched URL on its way to the store (the design documents'
CNetDocument; stored, it is a row of ``documents``, :class:`search.models.Document`), and
its :class:`LinkRecord` are the links it holds (their HREF records; stored, rows of
``links``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class LinkRecord:
    url: str
    anchor: str = ""
    nofollow: bool = False


@dataclass(slots=True)
class PageItem:
    """A fetched URL: a word-indexed page (``kind="page"``) or a file (``kind="file"``)."""

    url: str
    server: str
    status: int
    kind: str = "page"
    content_type: str | None = None
    charset: str | None = None
    size: int | None = None
    hops: int = 0
    language: str | None = None
    title: str | None = None
    keywords: str | None = None
    description: str | None = None
    text: str | None = None
    #: An HTML page's markup, for the store's worker to split its main content from its
    #: boilerplate (search.content), off the reactor thread; never stored.
    html: bytes | None = None
    links: list[LinkRecord] = field(default_factory=list)
    #: Links on the page, including those beyond SITE_MAX_LINKS (not kept).
    link_count: int = 0
    noindex: bool = False
    nofollow: bool = False
    last_modified: datetime | None = None
    etag: str | None = None
    checksum: str | None = None
    crawled_at: datetime = field(default_factory=utcnow)
    #: stem -> WordRecord, when the topic gate analyzed the page (else the store's worker
    #: analyzes it, off the reactor thread).
    words: dict[str, Any] | None = None
    #: Body words read; counted by the store's worker.
    word_count: int = 0
    #: Section weights of the page's server (filled by the spider).
    weights: dict[str, float] = field(default_factory=dict)
    #: Seconds until the next visit (adaptive re-crawl schedule); None = the server's period.
    interval: int | None = None
    #: Score against the crawl's topic (A = 4·B + C), set by the topic middleware.
    topic_score: float | None = None
    #: (WARC file, offset) of the stored response, when the page store is on.
    warc: tuple[str, int] | None = None


@dataclass(slots=True)
class RevisitItem:
    """A re-visit that found a stored page unchanged (304, or the same checksum)."""

    url: str
    doc_id: int
    status: int
    interval: int
    crawled_at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class GoneItem:
    """A stored page that answered 404 or 410, that now redirects elsewhere, or that
    robots.txt now forbids (*status* None: the stored status stays)."""

    url: str
    doc_id: int
    status: int | None
    moved_to: str | None = None
    crawled_at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class ErrorItem:
    """A fetch or parse failure, for the ``crawl_errors`` table and the crawl log."""

    url: str
    server: str | None
    kind: str
    message: str
    time: datetime = field(default_factory=utcnow)
