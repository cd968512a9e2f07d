"""The searcher (search.searcher): a long-lived searcher kept in step with the index,
excluded phrases, and the total of an expanded query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from search import ranking
from search.index import Index
from search.models import Document
from search.query import parse_query
from search.reindex import reindex
from search.searcher import Searcher, SearcherPool
from search.store import DocumentStore
from tests.test_unit_linkrank import BASE, indexed, row


def ids_of(engine: Any) -> dict[str, int]:
    with engine.connect() as conn:
        return {url[len(BASE) :]: i for i, url in conn.execute(select(Document.id, Document.url))}


# -- a long-lived searcher --------------------------------------------------------------------


@pytest.fixture
def searchable(tmp_path: Path) -> Iterator[tuple[Any, Index]]:
    pages = [row(f"p{i}", f"vacuum reclaims storage {i}", []) for i in range(3)]
    pages += [row(f"o{i}", f"other words {i}", []) for i in range(3)]
    engine, index = indexed(tmp_path, pages)
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


def segment_ids(index: Index) -> set[str]:
    return {segment.segment_id() for segment in index.open()._read_toc().segments}


def test_a_commit_opens_only_the_segments_it_wrote(
    searchable: tuple[Any, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived searcher opened every segment anew after each commit (a crawl's indexer
    commits every few seconds): now the segments a commit did not write are read through
    the files already open, with their deletions as the commit left them."""
    from whoosh.reading import SegmentReader

    engine, index = searchable
    searcher = Searcher(engine, index)
    ids = ids_of(engine)
    for i in range(3):  # an index of several segments
        DocumentStore(engine).write_batch([row(f"n{i}", f"vacuum later {i}", [])])
        reindex(engine, index, full=False, ids=[ids_of(engine)[f"n{i}"]])
    assert urls(searcher, "vacuum")[0] == 6
    opened: list[str] = []
    real = SegmentReader.__init__

    def counting(self: Any, storage: Any, schema: Any, segment: Any, **kwargs: Any) -> None:
        opened.append(segment.segment_id())
        real(self, storage, schema, segment, **kwargs)

    monkeypatch.setattr(SegmentReader, "__init__", counting)
    before = segment_ids(index)
    assert len(before) > 1
    with index.writer() as writer:  # deletions only: no segment written
        writer.delete(ids["p1"])
    opened.clear()  # (the writer's own reads)
    assert urls(searcher, "vacuum")[0] == 5 and opened == []
    DocumentStore(engine).write_batch([row("p0", "vacuum reclaims storage revised 0", [])])
    reindex(engine, index, full=False, ids=[ids["p0"]])
    opened.clear()
    total, found = urls(searcher, "vacuum")
    assert total == 5 and found.count("p0") == 1 and urls(searcher, "revised")[0] == 1
    assert sorted(opened) == sorted(segment_ids(index) - before)
    # A segment's files are closed once no generation open reads it: a full rebuild
    # replaces every segment.
    kept = list(searcher._readers._files.values())
    reindex(engine, index)
    assert urls(searcher, "vacuum")[0] == 6
    assert all(files.reader.is_closed for files in kept)
    current = list(searcher._readers._files.values())
    assert current and not any(files.reader.is_closed for files in current)
    searcher.close()
    assert all(files.reader.is_closed for files in current)


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


# -- excluded phrases -------------------------------------------------------------------------

PHRASE_PAGES = {
    "phrase1": "Vacuum reclaims the storage of dead tuples.",
    "phrase2": "Autovacuum finds dead tuples and vacuum removes them.",
    "apart1": "Vacuum counts the tuples of each table; a dead server counts none.",
    "apart2": "Dead links were fixed; vacuum rewrote the tuples of the table.",
    "plain": "Vacuum full rewrites the whole table.",
    "other": "Dead tuples without the other word.",
}


@pytest.fixture(scope="module")
def phrases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    pages = [row(p, text, []) for p, text in PHRASE_PAGES.items()]
    engine, index = indexed(tmp_path_factory.mktemp("phrases"), pages)
    yield Searcher(engine, index)
    engine.dispose()


def found(searcher: Searcher, text: str, **kwargs: Any) -> tuple[int, bool, list[str]]:
    page = searcher.search(parse_query(text), **kwargs)
    return page.total, page.total_exact, sorted(hit.url[len(BASE) :] for hit in page.hits)


def test_an_excluded_phrase_excludes_the_pages_that_hold_the_phrase(phrases: Searcher) -> None:
    # Not the pages that hold its words apart.
    assert found(phrases, 'vacuum -"dead tuples"') == (3, True, ["apart1", "apart2", "plain"])
    assert found(phrases, 'vacuum -"tuples dead"') == (
        5,
        True,
        ["apart1", "apart2", "phrase1", "phrase2", "plain"],
    )
    # With an included phrase, and with an excluded word.
    assert found(phrases, '"vacuum reclaims" -"dead tuples"') == (0, True, [])
    assert found(phrases, 'vacuum -"dead tuples" -links') == (2, True, ["apart1", "plain"])
    assert found(phrases, 'table -"vacuum rewrote"') == (2, True, ["apart1", "plain"])


def test_an_excluded_phrase_checks_as_many_candidates_as_an_included_one(
    phrases: Searcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the pages checked, a page that holds the phrase's words is left out, and the
    count says it is not exact."""
    from search import searcher as searcher_module

    monkeypatch.setattr(searcher_module, "PHRASE_CANDIDATES", 1)
    monkeypatch.setattr(searcher_module, "PHRASE_DEPTH", 1)
    total, exact, hits = found(phrases, 'vacuum -"dead tuples"', per_page=1)
    assert exact is False and total < 3 and hits[0] in ("apart1", "apart2", "plain")
    total, exact, hits = found(phrases, 'vacuum -"dead tuples"', per_page=5)
    assert (total, exact, hits) == (3, True, ["apart1", "apart2", "plain"])


# -- the total of an expanded query -----------------------------------------------------------


@pytest.fixture(scope="module")
def expanded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Index]]:
    """130 pages: 10 of the query's four words and "epsilon", 2 of "epsilon" alone (found
    only through the expansion), the rest of other words."""
    data = tmp_path_factory.mktemp("expanded")
    pages = [row(f"q{i}", f"alpha beta gamma delta epsilon q{i}", []) for i in range(10)]
    pages += [row(f"e{i}", f"epsilon alone e{i}", []) for i in range(2)]
    pages += [row(f"f{i}", f"filler page f{i}", []) for i in range(118)]
    engine, index = indexed(data, pages)
    yield engine, index
    engine.dispose()


@pytest.mark.parametrize("expansion", ["bo1", "rm3"])
@pytest.mark.parametrize("fuse", ["none", "dph", "lgd"])
def test_the_total_of_an_expanded_query_counts_the_pages_it_ranks(
    expanded: tuple[Any, Index], fuse: str, expansion: str
) -> None:
    # The words of every page's URL (its host's) are not feedback terms: added, they
    # would make every page of the site a hit.  (The best page holds the query's four
    # words: expanded only with fb_skip_held 0.)
    engine, index = expanded
    params = ranking.DEFAULT.with_values(fuse=fuse, expansion=expansion, fb_skip_held=0)
    assert (
        Searcher(engine, index, params.with_values(fb_skip_held=1))
        .search(parse_query("alpha beta gamma delta"), per_page=100)
        .total
        == 10
    )
    searcher = Searcher(engine, index, params)
    q = parse_query("alpha beta gamma delta")
    first = searcher.search(q, per_page=10)
    second = searcher.search(q, page=2, per_page=10)
    every = searcher.search(q, per_page=100)
    assert len(every.hits) == 12
    assert {h.url[len(BASE) :] for h in every.hits[10:]} == {"e0", "e1"}
    assert first.total == second.total == every.total == 12
    assert len(second.hits) == 2 and first.total_exact
    # Not expanded: the pages of the query's words.
    assert searcher.search(q, expand=False).total == 10


def test_a_phrase_in_the_title_counts(tmp_path: Path) -> None:
    """A quoted phrase is looked for in a page's title as well as in its text: a page's
    title is often the one place it says what it is (its heading, a repeat of the title,
    is boilerplate, not stored text)."""
    engine, index = indexed(
        tmp_path,
        [
            row("titled", "A report on a research project.", [], title="A Library Management Game"),
            row("apart", "The management of a library is no game.", [], title="Other"),
        ],
    )
    searcher = Searcher(engine, index)
    try:
        assert found(searcher, '"library management game"') == (1, True, ["titled"])
        assert found(searcher, 'library -"library management game"') == (1, True, ["apart"])
    finally:
        searcher.close()
        engine.dispose()
