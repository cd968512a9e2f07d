"""The link-graph prior (search.linkrank): PageRank against networkx's, the stored
linkranks on SQLite and PostgreSQL, and their effect on the ranking (search.searcher)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import aliased

from search import crawldb as crawldb_module
from search import db, ranking
from search import linkrank as linkrank_module
from search import searcher as searcher_module
from search.analysis import analyze_document
from search.crawldb import CrawlDB
from search.index import Index
from search.linkrank import EdgeFile, LinkRanks, pagerank, pagerank_of_file, update_linkrank
from search.models import Document, Link
from search.query import parse_query
from search.reindex import reindex
from search.rows import DocumentRow
from search.searcher import Searcher
from search.store import DocumentStore
from tests.conftest import run_search

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BASE = "http://a.example/"


def row(path: str, text: str, links: list[str], **values: Any) -> DocumentRow:
    """A page of path *path* and text *text* linking to *links*; a ``title`` or a
    ``language`` among *values* is analyzed as well (the title is the path otherwise, and
    not analyzed)."""
    url = BASE + path
    title = values.get("title", "")
    sections = {"body": text, "title": title, "url": url, "desc": "", "keywords": ""}
    return DocumentRow(
        url=url,
        server=BASE,
        values={
            "kind": "page",
            "status": 200,
            "crawled_at": NOW,
            "text": text,
            "title": path,
            "noindex": False,
            "nofollow": False,
            **values,
        },
        words=analyze_document(sections, language=values.get("language")),
        links=[(BASE + target, "", False) for target in links],
    )


def indexed(folder: Path, pages: list[DocumentRow], name: str = "db.sqlite") -> tuple[Any, Index]:
    """*pages* stored in a new SQLite database *name* of *folder* and indexed in its
    ``index``: (the engine, the index)."""
    engine = db.connect(f"sqlite:///{folder / name}")
    DocumentStore(engine).write_batch(pages)
    index = Index(folder / "index")
    reindex(engine, index)
    return engine, index


def linkranks(engine: Any) -> dict[str, float | None]:
    with engine.connect() as conn:
        rows = conn.execute(select(Document.url, Document.linkrank))
        return {url[len(BASE) :]: rank for url, rank in rows}


@pytest.fixture
def engine(db_url: str) -> Iterator[Any]:
    engine = db.connect(db_url)
    yield engine
    engine.dispose()


def test_pagerank_is_networkx_pagerank() -> None:
    graph = nx.gnp_random_graph(60, 0.08, seed=3, directed=True)
    graph.add_nodes_from(range(60, 65))  # dangling and unlinked nodes
    edges = np.array(list(graph.edges()), dtype=np.int64)
    ranks, iterations = pagerank(edges[:, 0], edges[:, 1], graph.number_of_nodes())
    expected = nx.pagerank(graph, alpha=0.85, tol=1e-10)
    assert ranks.sum() == pytest.approx(1.0)
    assert 1 < iterations < 100
    assert ranks == pytest.approx([expected[i] for i in range(65)], abs=1e-5)


def test_pagerank_of_no_nodes_and_no_links() -> None:
    assert len(pagerank(np.empty(0, np.int64), np.empty(0, np.int64), 0)[0]) == 0
    ranks, _ = pagerank(np.empty(0, np.int64), np.empty(0, np.int64), 4)
    assert ranks == pytest.approx([0.25] * 4)


def test_pagerank_over_a_file_read_a_few_edges_at_a_time_is_the_in_memory_one() -> None:
    rng = np.random.default_rng(7)
    n = 300
    # Nodes 250 and up have no out-links (dangling); parallel edges are kept, self-links
    # dropped as update_linkrank drops them.
    sources = rng.integers(0, 250, 4000)
    targets = rng.integers(0, n, 4000)
    sources = np.concatenate([sources, sources[:500]])  # 500 parallel edges
    targets = np.concatenate([targets, targets[:500]])
    sources, targets = sources[sources != targets], targets[sources != targets]
    expected, expected_iterations = pagerank(sources, targets, n)
    with EdgeFile(n) as edges:
        for lo in range(0, len(sources), 999):  # written in several chunks
            edges.write(sources[lo : lo + 999], targets[lo : lo + 999])
        assert edges.edges == len(sources) and edges.dtype == np.int32
        budget = 3 * (8 + linkrank_module.BYTES_PER_EDGE)  # 3 edges a chunk
        # Each chunk a view of one buffer, valid until the next.
        chunks = [(s.copy(), t.copy()) for s, t in edges.chunks(budget)]
        assert {len(s) for s, _ in chunks[:-1]} == {3}
        assert np.concatenate([s for s, _ in chunks]).tolist() == sources.tolist()
        assert np.concatenate([t for _, t in chunks]).tolist() == targets.tolist()
        ranks, iterations = pagerank_of_file(edges, n, budget)
    assert iterations == expected_iterations > 2
    assert ranks == pytest.approx(expected, rel=1e-12, abs=0)
    assert ranks[250:].min() > 0 and ranks.sum() == pytest.approx(1.0)


def test_pagerank_over_an_empty_file() -> None:
    with EdgeFile(4) as edges:
        assert list(edges.chunks()) == []
        ranks, _ = pagerank_of_file(edges, 4)
    assert ranks == pytest.approx([0.25] * 4)
    with EdgeFile(0) as edges:
        assert len(pagerank_of_file(edges, 0)[0]) == 0


def test_update_linkrank_stores_the_same_ranks_read_a_link_at_a_time(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    names = [f"p{i}" for i in range(40)]
    pages = []
    for i, name in enumerate(names):
        # Pages 30 and up link nowhere; some links are self-links or lead outside.
        links = [] if i >= 30 else [names[int(k)] for k in rng.integers(0, 40, 6)]
        pages.append(row(name, name, sorted(set(links + [name] * (i % 5 == 0) + ["out"]))))
    DocumentStore(engine).write_batch(pages)
    with engine.begin() as conn:  # links to p7 count for p8: parallel edges
        p8 = conn.scalar(select(Document.id).where(Document.url == BASE + "p8"))
        conn.execute(update(Document).where(Document.url == BASE + "p7").values(clone_of_id=p8))
    whole = update_linkrank(engine)
    expected = linkranks(engine)
    read: list[int] = []
    chunks = EdgeFile.chunks

    def counted(self: EdgeFile, chunk_bytes: int | None = None) -> Any:
        for sources, targets in chunks(self, chunk_bytes):
            read.append(len(sources))
            yield sources, targets

    monkeypatch.setattr(EdgeFile, "chunks", counted)
    monkeypatch.setattr(linkrank_module, "EDGE_CHUNK_BYTES", 1)  # one link a chunk
    with engine.begin() as conn:
        conn.execute(update(Document).values(linkrank=None))
    tiny = update_linkrank(engine, chunk=3)
    assert (tiny.documents, tiny.links, tiny.iterations) == (
        whole.documents,
        whole.links,
        whole.iterations,
    )
    assert whole.links > 100 and set(read) == {1} and len(read) > whole.links * 3
    assert linkranks(engine) == pytest.approx(expected, rel=1e-12, abs=0)


def test_update_linkrank_stores_a_mean_of_one_over_followable_links(engine: Any) -> None:
    store = DocumentStore(engine)
    store.write_batch(
        [
            row("hub", "hub", ["a", "b", "c", "hub", "outside"]),
            row("a", "a", ["hub"]),
            row("b", "b", ["hub"]),
            row("c", "c", ["hub", "b"]),
            row("nofollow", "n", ["a"]),
            row("gone", "g", ["a"]),
        ]
    )
    # A nofollow page gives no rank: its link to "a" does not count; nor does a gone one's.
    with engine.begin() as conn:
        conn.execute(update(Document).where(Document.url == BASE + "gone").values(gone_at=NOW))
        conn.execute(
            update(Document).where(Document.url == BASE + "nofollow").values(nofollow=True)
        )
    assert linkranks(engine)["hub"] is None  # not computed yet
    result = update_linkrank(engine)
    assert result.documents == 5  # the gone page is not in the graph
    assert result.links == 7  # hub -> a, b, c; a, b, c -> hub; c -> b (no self-link)
    ranks = linkranks(engine)
    assert ranks["gone"] is None
    stored = [r for r in ranks.values() if r is not None]
    assert sum(stored) / len(stored) == pytest.approx(1.0)
    assert ranks["hub"] > ranks["b"] > ranks["a"] == pytest.approx(ranks["c"])
    assert ranks["a"] > ranks["nofollow"]  # "nofollow" has no in-links: the teleport only
    assert result.written == 5
    # Over the same links, the same ranks: no row is written again.
    assert update_linkrank(engine).written == 0 and linkranks(engine) == ranks
    # Recomputed from the links as they are now: written where they changed.
    with engine.begin() as conn:
        conn.execute(update(Document).where(Document.url == BASE + "hub").values(nofollow=True))
    assert 0 < update_linkrank(engine).written <= 5
    assert linkranks(engine)["b"] > linkranks(engine)["a"] == pytest.approx(linkranks(engine)["c"])


def test_a_linkrank_write_the_database_rolls_back_for_a_deadlock_is_made_again(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PostgreSQL breaks a deadlock (a rebuild's reader writing the linkranks while its
    # writer marks the same documents indexed) by rolling one transaction back, 40P01.
    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import DBAPIError

    DocumentStore(engine).write_batch([row("hub", "hub", ["a"]), row("a", "a", ["hub"])])

    class Deadlock(Exception):
        sqlstate = "40P01"

    execute = Connection.execute
    failed: list[int] = []

    def once(self: Connection, statement: Any, parameters: Any = None, **kw: Any) -> Any:
        if isinstance(parameters, list) and not failed:
            failed.append(1)
            raise DBAPIError("UPDATE documents", {}, Deadlock("deadlock detected"))
        return execute(self, statement, parameters, **kw)

    monkeypatch.setattr(Connection, "execute", once)
    update_linkrank(engine)
    assert failed and None not in linkranks(engine).values()

    class Other(Exception):
        sqlstate = "23505"

    def refuse(self: Connection, statement: Any, parameters: Any = None, **kw: Any) -> Any:
        if isinstance(parameters, list):
            raise DBAPIError("UPDATE documents", {}, Other("another failure"))
        return execute(self, statement, parameters, **kw)

    with engine.begin() as conn:  # (ranks as stored are not written again)
        conn.execute(update(Document).values(linkrank=None))
    monkeypatch.setattr(Connection, "execute", refuse)
    with pytest.raises(DBAPIError):  # anything else is not tried again
        update_linkrank(engine)


def test_marking_documents_indexed_is_made_again_after_a_deadlock(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other side of the same deadlock: the rebuild's writer marking its documents
    # indexed is the transaction PostgreSQL may roll back; it is made again, even by a
    # store that does not retry an unreachable database.
    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import DBAPIError

    store = DocumentStore(engine, retry_times=0)
    ids = [d.id for d in store.write_batch([row("a", "a", []), row("b", "b", [])]).documents]

    class Deadlock(Exception):
        sqlstate = "40P01"

    execute = Connection.execute
    failed: list[int] = []

    def once(self: Connection, statement: Any, parameters: Any = None, **kw: Any) -> Any:
        if "indexed" in str(statement) and not failed:
            failed.append(1)
            raise DBAPIError("UPDATE documents", {}, Deadlock("deadlock detected"))
        return execute(self, statement, parameters, **kw)

    monkeypatch.setattr(Connection, "execute", once)
    store.mark_indexed(ids)
    assert failed
    assert CrawlDB(engine).indexable_ids(only_unindexed=True) == []


def test_the_link_graph_is_the_join_of_links_and_documents_in_link_order(engine: Any) -> None:
    """CrawlDB.link_graph reads the documents, then the links, a page at a time: the
    edges of the SQL join of links with their linking and linked documents, in the links'
    id order, whatever the page size."""
    names = [f"p{n}" for n in range(12)]
    DocumentStore(engine).write_batch(
        [
            row(name, name, [names[(n * 5 + k) % 12] for k in range(4)] + ["outside"])
            for n, name in enumerate(names)
        ]
    )
    with engine.begin() as conn:
        ids = sorted(conn.scalars(select(Document.id)))
        conn.execute(update(Document).where(Document.id == ids[3]).values(nofollow=True))
        conn.execute(update(Document).where(Document.id == ids[5]).values(gone_at=NOW))
        conn.execute(update(Document).where(Document.id == ids[7]).values(clone_of_id=ids[8]))
        conn.execute(update(Link).where(Link.from_id == ids[9]).values(nofollow=True))
        target = aliased(Document)
        expected = [
            (r[1], r[2])
            for r in conn.execute(
                select(Link.id, Link.from_id, func.coalesce(target.clone_of_id, target.id))
                .join(Document, Document.id == Link.from_id)
                .join(target, target.url == Link.to_url)
                .where(
                    Link.nofollow.is_(False),
                    Document.nofollow.is_(False),
                    target.gone_at.is_(None),
                )
                .order_by(Link.id)
            )
        ]
    assert len(expected) == 37  # 12 × 4, less p3's and p9's 4 and the 3 others to p5
    for chunk in (1, 5, 1000):
        got = [tuple(edge) for page in CrawlDB(engine).link_graph(chunk) for edge in page.tolist()]
        assert got == expected


def test_a_link_to_an_exact_duplicate_counts_for_its_original(engine: Any) -> None:
    store = DocumentStore(engine)
    store.write_batch(
        [
            row("original", "same text", []),
            row("other", "x", []),
            row("copy", "same text", []),
            row("linker", "y", ["copy"]),
        ]
    )
    with engine.begin() as conn:
        original = conn.scalar(select(Document.id).where(Document.url == BASE + "original"))
        conn.execute(
            update(Document).where(Document.url == BASE + "copy").values(clone_of_id=original)
        )
    update_linkrank(engine)
    ranks = linkranks(engine)
    assert ranks["original"] > ranks["other"]
    assert ranks["copy"] == pytest.approx(ranks["other"])


def test_link_prior_saturates() -> None:
    assert ranking.link_prior(0.0, 0.5) == 0.0
    assert ranking.link_prior(1.0, 0.5) == pytest.approx(0.25)
    assert ranking.link_prior(1e9, 0.5) == pytest.approx(0.5)
    assert list(ranking.link_prior(np.array([np.nan, -1.0, 3.0]), 2.0)) == [0.0, 0.0, 1.5]
    with pytest.raises(ValueError, match="linkrank"):
        ranking.Params(linkrank=-1)


@pytest.fixture
def searchable(tmp_path: Path) -> Iterator[tuple[Any, Index]]:
    """Two pages with the same words, "plain" stored first; every other page links to
    "popular"."""
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    text = "vacuum reclaims storage"
    pages = [row("plain", text, []), row("popular", text, [])]
    pages += [row(f"p{i}", f"other page {i}", ["popular"]) for i in range(6)]
    DocumentStore(engine).write_batch(pages)
    index = Index(tmp_path / "index")
    reindex(engine, index)
    yield engine, index
    engine.dispose()


def urls(searcher: Searcher, text: str) -> list[str]:
    page = searcher.search(parse_query(text))
    return [hit.url[len(BASE) :] for hit in page.hits]


def test_the_prior_orders_pages_of_equal_words_by_their_links(
    searchable: tuple[Any, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, index = searchable
    off = Searcher(engine, index, ranking.DEFAULT.with_values(linkrank=0))
    on = Searcher(engine, index)
    assert urls(off, "vacuum") == ["plain", "popular"]  # a tie, in document order
    # No linkrank computed yet: no prior.
    assert urls(on, "vacuum") == ["plain", "popular"]
    update_linkrank(engine)
    # A searcher sees new linkranks once those it read are LINKRANK_MAX_AGE old.
    assert urls(Searcher(engine, index), "vacuum") == ["plain", "popular"]
    monkeypatch.setattr(searcher_module, "LINKRANK_MAX_AGE", 0.0)
    page = on.search(parse_query("vacuum"), explain=True)
    assert [h.url[len(BASE) :] for h in page.hits] == ["popular", "plain"]
    popular, plain = page.hits
    assert popular.explanation is not None and plain.explanation is not None
    assert popular.explanation.prior > plain.explanation.prior > 0
    assert popular.score == pytest.approx(popular.explanation.score)
    assert "link-graph prior" in "\n".join(popular.explanation.lines())
    words_only = off.search(parse_query("vacuum")).hits[0].score
    assert popular.score == pytest.approx(words_only + popular.explanation.prior)
    assert urls(off, "vacuum") == ["plain", "popular"]  # off: the words alone


def test_a_commit_reads_the_linkranks_of_the_pages_it_added_only(
    searchable: tuple[Any, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived searcher read the linkranks of its hits from the database again after
    every commit (a new index generation): now it takes those it read by id, and reads
    the new pages' alone, until they are LINKRANK_MAX_AGE old."""
    engine, index = searchable
    update_linkrank(engine)
    searcher = Searcher(engine, index)
    searcher.warm()
    assert urls(searcher, "vacuum") == ["popular", "plain"]
    asked: list[list[int] | None] = []
    real = CrawlDB.linkranks

    def counting(self: CrawlDB, ids: Any = None) -> Any:
        asked.append(None if ids is None else sorted(np.asarray(ids).tolist()))
        return real(self, ids) if ids is not None else real(self)

    monkeypatch.setattr(CrawlDB, "linkranks", counting)
    DocumentStore(engine).write_batch([row("new", "vacuum again", ["popular"])])
    with engine.connect() as conn:
        new = conn.scalar(select(Document.id).where(Document.url == BASE + "new"))
    reindex(engine, index, full=False, ids=[new])
    found = urls(searcher, "vacuum")
    assert sorted(found) == ["new", "plain", "popular"]
    assert found.index("popular") < found.index("plain")  # the prior kept
    assert asked == [[new]]  # the new page's only
    monkeypatch.setattr(searcher_module, "LINKRANK_MAX_AGE", 0.0)
    with index.writer() as writer:
        writer.delete(new)
    assert urls(searcher, "vacuum") == ["popular", "plain"]
    assert len(asked) == 2  # read again: older than the age


def test_reindex_command_recomputes_the_linkranks(tmp_path: Path) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'spidersite.db'}")
    DocumentStore(engine).write_batch([row("a", "alpha", ["b"]), row("b", "beta", ["a"])])
    proc = run_search("reindex", "--quiet", "--no-linkrank", data_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Linkrank" not in proc.stdout and set(linkranks(engine).values()) == {None}
    proc = run_search("reindex", "--quiet", data_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Linkrank of 2 documents over 2 links, 2 changed" in proc.stdout
    assert linkranks(engine) == {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}
    proc = run_search("reindex", "--quiet", data_dir=tmp_path)
    assert "Linkrank of 2 documents over 2 links, 0 changed" in proc.stdout
    engine.dispose()


def test_read_linkranks_reads_the_stored_ones(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    DocumentStore(engine).write_batch(
        [row(f"p{i}", f"page {i}", [f"p{(i + 1) % 7}", "p0"]) for i in range(7)]
    )
    read = CrawlDB(engine).linkranks
    ids, ranks = read()
    assert ids.dtype == np.int64 and ranks.dtype == np.float32 and len(ids) == len(ranks) == 0
    update_linkrank(engine)
    with engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT id, linkrank FROM documents")).all())
    ids, ranks = read()
    assert dict(zip(ids.tolist(), ranks.tolist(), strict=True)) == pytest.approx(stored)
    assert len(stored) == 7
    # By id: those asked for, in chunks, an unknown id left out.
    monkeypatch.setattr(crawldb_module, "LINKRANK_CHUNK", 2)
    some = np.array([*sorted(stored)[::2], 10**9], dtype=np.int64)
    ids, ranks = read(some)
    assert dict(zip(ids.tolist(), ranks.tolist(), strict=True)) == pytest.approx(
        {i: stored[i] for i in sorted(stored)[::2]}
    )


def test_a_query_reads_the_linkranks_of_the_hits_that_can_reach_its_page(
    tmp_path: Path,
) -> None:
    # 80 pages: how often they say "vacuum" and "zebra" spreads their scores, their links
    # their linkranks, so that the prior reorders the best pages.
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    pages = []
    for i in range(80):
        rare = ["zebra"] * (1 + i // 10) if i % 10 == 0 else []  # 8 pages
        text = " ".join(["vacuum"] * (1 + i % 4) + ["storage"] * (i % 3) + [f"filler{i}"] * 5)
        text += " " + " ".join(rare)
        links = [f"p{(i * 7) % 80}", f"p{(i * 11 + 3) % 80}"] + ["p5"] * (i % 2)
        pages.append(row(f"p{i}", text, links))
    DocumentStore(engine).write_batch(pages)
    index = Index(tmp_path / "index")
    reindex(engine, index)
    update_linkrank(engine)
    queries = [
        (text, n)
        for text in ("vacuum", "zebra", "vacuum storage", "storage filler7 zebra")
        for n in (1, 3, 10, 100)
    ]
    lazy = Searcher(engine, index)
    found = [lazy.search(parse_query("zebra"), per_page=1).hits]
    with lazy.session() as session:
        ranks = session.linkranks
        assert isinstance(ranks, LinkRanks) and not ranks.complete
        # Those of the hits within the prior's weight of the best score, not all 8.
        assert 1 <= int((ranks._known & (ranks.docids >= 0)).sum()) < 8
    found += [lazy.search(parse_query(text), per_page=n).hits for text, n in queries]
    queries.insert(0, ("zebra", 1))
    # A long-lived process reads every linkrank before its first query (the same ones:
    # they are kept per index generation, for every searcher of the process).
    eager = Searcher(engine, index)
    eager.warm()
    assert ranks.complete
    for (text, n), hits in zip(queries, found, strict=True):
        expected = eager.search(parse_query(text), per_page=n).hits
        assert [h.url for h in hits] == [h.url for h in expected], (text, n)
        assert [h.score for h in hits] == pytest.approx([h.score for h in expected])
    # Not vacuous: the prior reorders most of these pages (the words alone rank otherwise).
    off = Searcher(engine, index, ranking.DEFAULT.with_values(linkrank=0))
    reordered = [
        [h.url for h in off.search(parse_query(text), per_page=n).hits] != [h.url for h in hits]
        for (text, n), hits in zip(queries, found, strict=True)
    ]
    assert sum(reordered) > len(queries) // 2
    for s in (lazy, eager, off):
        s.close()
    engine.dispose()
