"""The searcher (search.searcher): a long-lived searcher kept in step with the index,
excluded phrases, and the total of an expanded query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from search import db
from search.index import Index
from search.models import Document
from search.query import parse_query
from search.reindex import reindex
from search.searcher import Searcher, SearcherPool
from search.store import DocumentStore
from tests.test_unit_linkrank import BASE, row


def ids_of(engine: Any) -> dict[str, int]:
    with engine.connect() as conn:
        return {url[len(BASE) :]: i for i, url in conn.execute(select(Document.id, Document.url))}


# -- a long-lived searcher --------------------------------------------------------------------


@pytest.fixture
def searchable(tmp_path: Path) -> Iterator[tuple[Any, Index]]:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    pages = [row(f"p{i}", f"vacuum reclaims storage {i}", []) for i in range(3)]
    pages += [row(f"o{i}", f"other words {i}", []) for i in range(3)]
    DocumentStore(engine).write_batch(pages)
    index = Index(tmp_path / "index")
    reindex(engine, index)
    yield engine, index
    engine.dispose()


def urls(searcher: Searcher, text: str) -> tuple[int, list[str]]:
    page = searcher.search(parse_query(text))
    return page.total, [hit.url[len(BASE) :] for hit in page.hits]


def test_a_pooled_searcher_sees_pages_replaced_and_removed_after_it_opened(
    searchable: tuple[Any, Index],
) -> None:
    """``serve``'s searchers stay open between requests: a re-crawl that replaces pages
    (each a deletion in an old segment and an addition in a new one), then a page removed,
    are seen by the next query, each page once."""
    engine, index = searchable
    pool = SearcherPool(engine, index)
    pool.warm()
    with pool.searcher() as searcher:
        assert urls(searcher, "vacuum") == (3, ["p0", "p1", "p2"])
    # The re-crawl: the same pages stored again, indexed anew (replacing the old ones).
    DocumentStore(engine).write_batch(
        [row(f"p{i}", f"vacuum reclaims storage revised {i}", []) for i in range(3)]
    )
    ids = ids_of(engine)
    reindex(engine, index, full=False, ids=[ids[f"p{i}"] for i in range(3)])
    with pool.searcher() as searcher:
        total, found = urls(searcher, "vacuum")
        assert (total, sorted(found)) == (3, ["p0", "p1", "p2"])
        assert urls(searcher, "revised")[0] == 3
    with index.writer() as writer:
        writer.delete(ids["p1"])
    with pool.searcher() as searcher:
        total, found = urls(searcher, "vacuum")
        assert (total, sorted(found)) == (2, ["p0", "p2"])
    # A full rebuild (every segment replaced) is seen as well.
    reindex(engine, index)
    with pool.searcher() as searcher:
        total, found = urls(searcher, "vacuum")
        assert (total, sorted(found)) == (3, ["p0", "p1", "p2"])
    pool.close()


def test_a_session_keeps_its_searcher_open_while_a_nested_one_reopens_the_index(
    searchable: tuple[Any, Index],
) -> None:
    engine, index = searchable
    searcher = Searcher(engine, index)
    with searcher.session() as outer:
        assert len(outer.rank(parse_query("vacuum"), 10)) == 3
        with index.writer() as writer:
            writer.delete(ids_of(engine)["p1"])
        with searcher.session() as inner:
            assert inner.s is not outer.s
            assert len(inner.rank(parse_query("vacuum"), 10)) == 2
        # The outer session's searcher is still open: it reads its stored fields.
        ranked = outer.rank(parse_query("vacuum"), 10)
        assert sorted(r.url for r in ranked) == [BASE + f"p{i}" for i in range(3)]
        assert not outer.s.is_closed
    assert outer.s.is_closed and not inner.s.is_closed
    searcher.close()
    assert inner.s.is_closed
