"""The relational record of everything the crawler learned (SQLAlchemy 2 declarative models).

In the design documents' terms: :class:`Document` is a stored CNetDocument (one URL),
:class:`Posting` with :class:`Word` the WORD records, :class:`Link` an HREF, and
:class:`Server` the state of a CServer (its configuration is :mod:`search.servers`).

The Whoosh index is derived from these tables and can be rebuilt from them at any time.
Schema changes go through Alembic migrations under ``search/migrations/``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    DDL,
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    event,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, deferred, mapped_column

# Deterministic constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON}


class Server(Base):
    """One configured server (scheme, host and port), its effective settings and health."""

    __tablename__ = "servers"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(String(512), unique=True)
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    net_errors: Mapped[int] = mapped_column(Integer, default=0)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: The fields entered in the web admin (the crawler never writes them); None for a
    #: server the admin does not manage.  The admin writes its sites file from these.
    admin_config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Document(Base):
    """One URL: a page (word-indexed) or a file (recorded with its type and size only)."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(Text, unique=True)
    server_id: Mapped[int | None] = mapped_column(
        ForeignKey("servers.id", ondelete="SET NULL"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16), default="page")
    status: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(255))
    charset: Mapped[str | None] = mapped_column(String(64))
    size: Mapped[int | None] = mapped_column(BigInteger)
    hops: Mapped[int] = mapped_column(Integer, default=0)
    language: Mapped[str | None] = mapped_column(String(32))
    title: Mapped[str | None] = mapped_column(Text)
    keywords: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str | None] = deferred(mapped_column(Text))
    word_count: Mapped[int] = mapped_column(Integer, default=0)
    link_count: Mapped[int] = mapped_column(Integer, default=0)
    noindex: Mapped[bool] = mapped_column(Boolean, default=False)
    nofollow: Mapped[bool] = mapped_column(Boolean, default=False)
    last_modified: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    etag: Mapped[str | None] = mapped_column(String(255))
    #: Indexed: the store looks each stored page's checksum up for exact duplicates
    #: (:meth:`search.duplicates.DuplicateMarker.mark_clones`; migration 0009).
    checksum: Mapped[str | None] = mapped_column(String(64), index=True)
    crawled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_index_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    next_index_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    indexed: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    #: Seconds until the next visit, adapted to how often the page changes (re-crawl).
    change_interval: Mapped[int | None] = mapped_column(Integer)
    #: When the page answered 404 or 410 (it is then out of the index).
    gone_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    #: The first document with the same content (exact duplicate), if any.
    clone_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), index=True
    )
    #: 64-bit similarity hash of the text, for near-duplicates.
    simhash: Mapped[int | None] = mapped_column(BigInteger)
    #: Score against the crawl's topic (A = 4·B + C), when the crawl had one.
    topic_score: Mapped[float | None] = mapped_column(Float)
    #: An earlier page whose simhash differs in at most NEAR_DUPLICATE_BITS bits.
    near_duplicate_of_id: Mapped[int | None] = mapped_column(Integer, index=True)
    #: Where the page store keeps the fetched response (WARC file and record offset).
    warc_file: Mapped[str | None] = mapped_column(Text)
    warc_offset: Mapped[int | None] = mapped_column(BigInteger)
    #: PageRank over the stored links, scaled to a mean of 1 over the documents
    #: (:mod:`search.linkrank`); None until it is first computed.
    linkrank: Mapped[float | None] = mapped_column(Float, index=True)


class Word(Base):
    """The dictionary of stems."""

    __tablename__ = "words"

    id: Mapped[int] = mapped_column(primary_key=True)
    stem: Mapped[str] = mapped_column(String(128), unique=True)


class Posting(Base):
    """A document's postings, one row a document: for each of its stems, the word id,
    surface form, count per section and weight (the WORD records), packed into four
    binary columns (:mod:`search.postingcodec`, migration 0014).

    The postings are read by document only (a rebuild, the page-info view, a query's
    section counts and surface forms).  A row a document and stem, as before 0014, made
    ~385 rows and as many entries of its primary key a page: at 10,000 pages on
    PostgreSQL, 72 % of the write-ahead log a crawl wrote and 416 of the database's
    563 MB (benchmarks/README.md)."""

    __tablename__ = "postings"

    #: A ``documents.id``, with no foreign key (migration 0012): the store writes a page's
    #: postings in the transaction of its document row, after deleting the ones they
    #: replace, and no document is ever deleted.  A page without words has no row.
    document_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    #: The stems' ``words.id``, 4 bytes each, ascending (no foreign key either).
    word_ids: Mapped[bytes] = mapped_column(LargeBinary)
    #: Their surface forms, UTF-8, separated by a zero byte.
    surfaces: Mapped[bytes] = mapped_column(LargeBinary)
    #: A byte giving a count's width, then each stem's counts in
    #: :data:`search.analysis.SECTIONS` order (body, title, url, desc, keywords and
    #: boilerplate: occurrences outside the page's main content).
    counts: Mapped[bytes] = mapped_column(LargeBinary)
    #: Their weights (Σ count × section weight), 8-byte floats.
    weights: Mapped[bytes] = mapped_column(LargeBinary)


class Link(Base):
    """A link from a stored document to a URL, with its anchor text."""

    __tablename__ = "links"
    __table_args__ = (Index("ix_links_from_to", "from_id", "to_url", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    #: A ``documents.id``, with no foreign key (migration 0012), as ``postings.document_id``.
    from_id: Mapped[int] = mapped_column(Integer)
    #: Not indexed: the links of each stored page went into an index by target at random
    #: places (~0.8 ms a page at 60,000 pages); the links by target are :class:`InLink`.
    to_url: Mapped[str] = mapped_column(Text)
    anchor: Mapped[str | None] = mapped_column(Text)
    nofollow: Mapped[bool] = mapped_column(Boolean, default=False)


class InLink(Base):
    """The links to a stored document, by its id (the inverted links, Nutch's link
    database): each link whose ``to_url`` is the URL of a stored document.  Rebuilt whole,
    in one sorted pass, by the link analysis that ends a crawl and a reindex
    (:meth:`search.crawldb.CrawlDB.rebuild_inlinks`), not kept up as pages are stored:
    between two analyses it lags the ``links`` table.  A row whose link is gone (its page
    stored again since) is skipped by a join on ``links``.

    On PostgreSQL the table is ``UNLOGGED`` (migration 0013): its rows, millions at a
    large crawl's end, write no write-ahead log, and a crash of the server empties it
    until the next analysis."""

    __tablename__ = "inlinks"
    __table_args__ = {"sqlite_with_rowid": False}

    to_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    link_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)


# A new PostgreSQL database gets what migration 0013 gives an upgraded one.
event.listen(
    InLink.__table__,
    "after_create",
    DDL("ALTER TABLE inlinks SET UNLOGGED").execute_if(dialect="postgresql"),
)


class Crawl(Base):
    """One run of the crawler: its arguments, times, finish reason and Scrapy stats."""

    __tablename__ = "crawls"

    id: Mapped[int] = mapped_column(primary_key=True)
    spider: Mapped[str] = mapped_column(String(64))
    args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finish_reason: Mapped[str | None] = mapped_column(String(64))
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)
    #: Scrapyd job id or local process id of a crawl started from the admin.
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    log_file: Mapped[str | None] = mapped_column(Text)


class Seed(Base):
    """A seed URL configured in the admin (the sites file has its own)."""

    __tablename__ = "seeds"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(Text, unique=True)
    server_id: Mapped[int | None] = mapped_column(
        ForeignKey("servers.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class CrawlError(Base):
    """A fetch or parse failure: the crawl log as data."""

    __tablename__ = "crawl_errors"

    #: Every value of ``kind`` (``spidersite.errors`` classifies the crawler's failures into
    #: them; the README's "The crawl log" says what each means).
    KINDS: ClassVar[tuple[str, ...]] = (
        "dns",
        "refused",
        "timeout",
        "reset",
        "tls",
        "too_large",
        "http",
        "robots",
        "robots_txt",
        "redirect",
        "cut_off",
        "page_cap",
        "ignored",
        "parse",
        "render",
        "store",
        "other",
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    crawl_id: Mapped[int | None] = mapped_column(
        ForeignKey("crawls.id", ondelete="SET NULL"), index=True
    )
    server_id: Mapped[int | None] = mapped_column(
        ForeignKey("servers.id", ondelete="SET NULL"), index=True
    )
    url: Mapped[str] = mapped_column(Text)
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    message: Mapped[str] = mapped_column(Text, default="")
