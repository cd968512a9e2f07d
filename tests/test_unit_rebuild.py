"""A full rebuild from arrays (search.index.Index.rebuild, search.reindex.reindex): the
same index, byte for byte, as documents added one by one through the writer; read from
the database as the document path reads it (SQLite and PostgreSQL); bounded memory;
cancelled on error."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text, update
from whoosh.filedb.filestore import FileStorage

from search import arrayfile, db, rebuildfeed, termruns
from search.analysis import DEFAULT_WEIGHTS, SECTIONS, analyze_document
from search.crawldb import INDEXABLE, CrawlDB
from search.index import INDEX_NAME, DocBatch, Index, IndexDoc
from search.models import Document, Server
from search.rebuildfeed import BatchFeed, ReaderFailed
from search.reindex import (
    SectionWeights,
    Stems,
    iter_doc_batches,
    iter_doc_columns,
    rebuild,
    reindex,
    server_weights,
)
from search.rows import DocumentRow
from search.store import DocumentStore
from search.urls import netloc
from tests.conftest import ROOT, posting_rows
from tests.test_unit_linkrank import NOW
from tests.whooshwriter import whoosh_writer


def random_docs(n: int, vocabulary: list[str], seed: int = 1) -> list[IndexDoc]:
    """Documents with every case a segment meets: no words at all, postings of weight 0
    (left out), weights that round either way, terms in one document and in most."""
    rng = random.Random(seed)
    docs = []
    for d in range(n):
        k = 0 if d % 17 == 0 else rng.randint(1, min(300, len(vocabulary)))
        # Counts per section weighed as the default weights do (body, title, url, desc,
        # keywords, boilerplate); all 0 for some.
        sections = {
            s: tuple(rng.choice([0, 0, 0, 1, 2, 7]) * w for w in (1.0, 4.0, 2.0, 2.0, 2.0, 0.2))
            for s in rng.sample(vocabulary, k)
        }
        weights = {s: sum(c) for s, c in sections.items()}
        docs.append(
            IndexDoc(1000 + 3 * d, f"http://h{d % 5}.example/p{d}", f"h{d % 5}", weights, sections)
        )
    return docs


def batches(docs: list[IndexDoc], vocabulary: list[str], size: int) -> Iterator[DocBatch]:
    term_id = {s: i for i, s in enumerate(vocabulary)}
    for lo in range(0, len(docs), size):
        part = docs[lo : lo + size]
        yield DocBatch(
            [d.docid for d in part],
            [d.url for d in part],
            [d.host for d in part],
            np.array([len(d.weights) for d in part], dtype=np.int64),
            np.array([term_id[s] for d in part for s in d.weights], dtype=np.int64),
            np.array([w for d in part for w in d.weights.values()], dtype=np.float64),
            np.array(
                [d.sections.get(s, (w, 0, 0, 0, 0, 0)) for d in part for s, w in d.weights.items()],
                dtype=np.float64,
            ).reshape(-1, 6),
        )


def segment_files(path: Path) -> dict[str, bytes]:
    """The files of the one segment of the index at *path* (the segment's id, which is
    random, taken out of their names)."""
    storage = FileStorage(str(path))
    segments = storage.open_index(INDEX_NAME)._segments()
    assert len(segments) == 1
    segment = segments[0]
    compound = segment.open_compound_file(storage)
    try:
        return {
            name.replace(segment.segment_id(), "SEG"): compound.open_file(name).read()
            for name in compound.list()
        }
    finally:
        compound.close()


def added_one_by_one(path: Path, docs: list[IndexDoc]) -> Index:
    """The index of *docs* added one by one by Whoosh's own writer."""
    index = Index(path)
    with whoosh_writer(index, clear=True) as w:
        for doc in docs:
            w.add(doc, update=False)
    return index


@pytest.mark.parametrize(
    ("words", "buffer"),
    [
        (3000, None),  # short posting lists: one block a term
        (3000, 5000),  # several runs on disk, several ranges of terms
        (400, 20000),  # long posting lists: several blocks a term
    ],
)
def test_a_rebuild_writes_what_the_writer_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, words: int, buffer: int | None
) -> None:
    if buffer:
        monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", buffer)
    # Word ids with gaps, stems out of order and beyond ASCII (sorted as UTF-8 bytes).
    vocabulary = ["" if i % 7 == 3 else f"w{(i * 7919) % words}x{i}" for i in range(words)]
    vocabulary += ["été", "zoo", "a", "ähnlich", "日本"]
    stems = [s for s in vocabulary if s]
    docs = random_docs(600 if words > 1000 else 1200, stems)
    expected = segment_files(added_one_by_one(tmp_path / "one-by-one", docs).path)

    index = Index(tmp_path / "rebuilt")
    with index.rebuild(vocabulary) as rebuild:
        for batch in batches(docs, vocabulary, 37):
            rebuild.add(batch)
    assert rebuild.added == len(docs)
    got = segment_files(index.path)
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert got[name] == expected[name], name
    assert not [n for n in os.listdir(index.path) if n.endswith(".tmp")]


def test_a_rebuild_takes_words_stored_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crawl stores new words while a rebuild reads: the vocabulary grows (new ids
    after the old ones, stems anywhere in the sort order), runs already on disk stay."""
    monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", 3000)
    vocabulary = [f"m{(i * 7919) % 500:03d}" for i in range(500)]
    old, new = vocabulary[:300], vocabulary[300:]
    docs = random_docs(200, old, seed=2) + random_docs(200, vocabulary, seed=3)
    for n, doc in enumerate(docs):
        doc.docid = n
    expected = segment_files(added_one_by_one(tmp_path / "one-by-one", docs).path)

    index = Index(tmp_path / "rebuilt")
    with index.rebuild(old) as rebuild:
        for n, batch in enumerate(batches(docs, vocabulary, 50)):
            if n == 4:
                rebuild.grow_vocabulary(old + new)
            rebuild.add(batch)
    assert segment_files(index.path) == expected


def test_a_rebuild_replaces_the_index_in_one_commit(tmp_path: Path) -> None:
    vocabulary = ["kestrel", "falcon"]
    index = added_one_by_one(tmp_path / "index", [IndexDoc(1, "http://h/1", "h", {"owl": 1.0})])
    with index.rebuild(vocabulary) as rebuild:
        rebuild.add(
            next(batches([IndexDoc(2, "http://h/2", "h", {"kestrel": 2.0})], vocabulary, 9))
        )
        assert index.docids() == {1}  # the old index answers until the commit
    assert index.docids() == {2}


def test_a_failed_rebuild_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    vocabulary = ["kestrel"]
    index = added_one_by_one(tmp_path / "index", [IndexDoc(1, "http://h/1", "h", {"owl": 1.0})])
    with pytest.raises(RuntimeError), index.rebuild(vocabulary) as rebuild:
        rebuild.add(
            next(batches([IndexDoc(2, "http://h/2", "h", {"kestrel": 2.0})], vocabulary, 9))
        )
        raise RuntimeError("the database went away")
    assert index.docids() == {1}
    # Its segment's files are not listed (the next commit removes them, as after any
    # cancelled writer); its temporary files are gone.
    assert not [n for n in os.listdir(index.path) if n.endswith(".tmp")]


#: A child process that rebuilds the index of documents 100..104 and is killed (its
#: process group, as SPIDERSITE_KILL_AT does) at the named moment of its commit.
REBUILD = """
import sys
import numpy as np
from search.index import DocBatch, Index
with Index(sys.argv[1]).rebuild(["kestrel", "owl"]) as r:
    r.add(DocBatch(list(range(100, 105)), [f"http://h/{n}" for n in range(100, 105)],
                   ["h"] * 5, np.ones(5, dtype=np.int64), np.zeros(5, dtype=np.int64),
                   np.ones(5)))
"""


def test_a_rebuild_killed_in_its_commit_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    index = added_one_by_one(
        tmp_path / "index", [IndexDoc(n, f"http://h/{n}", "h", {"owl": 1.0}) for n in range(3)]
    )
    child = subprocess.run(
        [sys.executable, "-c", REBUILD, str(index.path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPIDERSITE_KILL_AT": "index_commit"},
        start_new_session=True,
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert index.docids() == {0, 1, 2}
    with index.rebuild(["kestrel"]) as rebuild:  # the lock is free, the leftovers go
        rebuild.add(
            next(batches([IndexDoc(7, "http://h/7", "h", {"kestrel": 1.0})], ["kestrel"], 1))
        )
    assert index.docids() == {7}
    assert not [n for n in os.listdir(index.path) if n.endswith(".tmp")]


def test_term_runs_hold_at_most_their_buffer(tmp_path: Path) -> None:
    runs = termruns.TermRuns(str(tmp_path), np.arange(50)[::-1].copy(), buffer=100)
    rng = np.random.default_rng(3)
    held = 0
    for doc in range(200):
        ranks = rng.choice(50, size=int(rng.integers(1, 30)), replace=False)
        runs.add(ranks, np.full(len(ranks), doc), rng.random(len(ranks)))
        held = max(held, runs._held)
    assert held < 100 + 30
    seen: list[tuple[int, int]] = []
    for terms, cuts, docs, _, sections, freqs, more in runs.terms():
        assert not more  # no term of more than a piece
        assert len(freqs) == len(docs)
        assert sections.shape == (len(docs), 6)
        assert cuts[-1] <= runs.window or len(terms) == 1  # a range of terms: bounded
        for i, rank in enumerate(terms):
            part = docs[cuts[i] : cuts[i + 1]]
            assert (np.diff(part.astype(np.int64)) > 0).all()
            seen += [(rank, int(d)) for d in part]  # ranks: term ids in reverse
    assert seen == sorted(seen) and len(seen) == len(runs)
    runs.close()


def test_a_long_term_comes_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A term of more postings than the window comes alone, in pieces of a multiple of
    PIECE_ALIGN postings (the last fewer), in document order across the runs."""
    monkeypatch.setattr(termruns, "PIECE_ALIGN", 8)
    runs = termruns.TermRuns(str(tmp_path), np.arange(3), buffer=40)  # window 10, piece 8
    for doc in range(53):
        terms = np.array([0, 1, 2] if doc % 10 == 0 else [1], dtype=np.int64)
        runs.add(terms, np.full(len(terms), doc), np.ones(len(terms)))
    got = [
        (terms, len(docs), more, docs.tolist()) for terms, _, docs, _, _, _, more in runs.terms()
    ]
    assert [(t, n, m) for t, n, m, _ in got] == [
        ([0], 6, False),
        ([1], 8, True),
        *[([1], 8, True)] * 5,
        ([1], 5, False),
        ([2], 6, False),
    ]
    assert [d for t, _, _, docs in got if t == [1] for d in docs] == list(range(53))
    runs.close()


# -- from the database --------------------------------------------------------------


def page(url: str, text: str, **values: Any) -> DocumentRow:
    sections = {"body": text, "title": "T " + text[:20], "url": url, "desc": "", "keywords": ""}
    return DocumentRow(
        url=url,
        server=url.split("/p")[0] + "/",
        values={
            "kind": "page",
            "status": 200,
            "crawled_at": NOW,
            "text": text,
            "title": "T",
            "noindex": False,
            "nofollow": False,
            **values,
        },
        words=analyze_document(sections),
        links=[],
    )


@pytest.fixture
def stored(db_url: str) -> Iterator[Any]:
    """Pages of two servers with different section weights, and pages that do not belong
    in the index between them (noindex, gone, a clone, an error)."""
    engine = db.connect(db_url)
    rng = random.Random(5)
    words = [f"word{i}" for i in range(300)] + ["Über", "naïve", "café"]
    rows = []
    for n in range(90):
        host = "http://a.example" if n % 3 else "http://b.example:8080"
        text = " ".join(rng.choices(words, k=rng.randint(0, 60)))
        extra: dict[str, Any] = {}
        if n % 11 == 5:
            extra["noindex"] = True
        if n % 13 == 7:
            extra["status"] = 404
        rows.append(page(f"{host}/p{n}", text, **extra))
    DocumentStore(engine).write_batch(rows)
    with engine.begin() as conn:
        conn.execute(
            update(Server)
            .where(Server.url == "http://b.example:8080/")
            .values(settings={"bodyweight": 3, "titleweight": 0.5, "urlweight": 0})
        )
        ids = sorted(conn.execute(select(Document.id)).scalars())
        conn.execute(update(Document).where(Document.id == ids[10]).values(gone_at=NOW))
        conn.execute(update(Document).where(Document.id == ids[20]).values(clone_of_id=ids[21]))
    yield engine
    engine.dispose()


def reference_docs(
    engine: Any,
    ids: list[int] | None = None,
    only_unindexed: bool = False,
    postings: list[tuple[int, str, tuple[int, ...]]] | None = None,
) -> list[IndexDoc]:
    """The documents that belong in the index as a reader of the database one posting
    row at a time sees them (the product's path until 2026-12-06): each posting's
    weight summed in Python, section by section, from 0.  The postings are the stored
    ones, or *postings* (document, stem, counts per section)."""
    weights = server_weights(CrawlDB(engine))
    stmt = select(Document.id, Document.url, Document.server_id).where(INDEXABLE)
    if only_unindexed:
        stmt = stmt.where(Document.indexed.is_(False))
    if ids is not None:
        stmt = stmt.where(Document.id.in_(ids))
    by_doc: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    with engine.connect() as conn:
        docs = conn.execute(stmt.order_by(Document.id)).all()
    if postings is None:
        postings = [(p.document_id, p.stem, p.counts) for p in posting_rows(engine)]
    for docid, stem, counts in postings:
        by_doc.setdefault(docid, []).append((stem, counts))
    out = []
    for docid, url, server_id in docs:
        w = (weights.get(server_id) if server_id is not None else None) or DEFAULT_WEIGHTS
        terms: dict[str, float] = {}
        sections: dict[str, tuple[float, ...]] = {}
        for stem, c in by_doc.get(docid, []):
            weight = 0.0
            for i, section in enumerate(SECTIONS):
                if c[i]:
                    weight += c[i] * w[section]
            terms[stem] = weight
            sections[stem] = tuple(c[i] * float(w[s]) for i, s in enumerate(SECTIONS))
        out.append(IndexDoc(docid, url, netloc(url), terms, sections))
    return out


def test_the_database_is_read_as_the_document_path_reads_it(stored: Any) -> None:
    expected = reference_docs(stored)
    vocabulary = CrawlDB(stored).vocabulary()
    got: list[IndexDoc] = []
    for batch in iter_doc_batches(stored, chunk=7):
        at = 0
        for docid, url, host, size in zip(
            batch.docids, batch.urls, batch.hosts, batch.sizes.tolist(), strict=True
        ):
            terms = batch.terms[at : at + size].tolist()
            weights = batch.weights[at : at + size].tolist()
            assert batch.sections is not None
            sections = [tuple(row) for row in batch.sections[at : at + size].tolist()]
            got.append(
                IndexDoc(
                    docid,
                    url,
                    host,
                    {vocabulary[t]: w for t, w in zip(terms, weights, strict=True)},
                    {vocabulary[t]: c for t, c in zip(terms, sections, strict=True)},
                )
            )
            at += size
        assert at == len(batch.terms)
    assert [d.docid for d in got] == [d.docid for d in expected]
    indexable = CrawlDB(stored).indexable_ids()
    assert (
        len(got) == len(indexable) == 90 - 8 - 7 - 1
    )  # noindex, errors, gone (the clone: an error)
    for g, e in zip(got, expected, strict=True):
        assert (g.url, g.host) == (e.url, e.host)
        assert g.weights == e.weights  # the same floats, summed in the same order
        assert g.sections == e.sections  # w_f · count_f per section
    assert any(d.host == "b.example:8080" for d in got)
    # The URL's words on b.example weigh 0: read, then left out of the index.
    assert any(w == 0.0 for d in got for w in d.weights.values())


def _as_docs(columns: list[Any]) -> list[IndexDoc]:
    return [doc for page in columns for doc in page.docs()]


def test_an_incremental_commit_reads_the_database_as_arrays(stored: Any) -> None:
    """What ``reindex --new``, ``--follow`` and ``check`` add: the documents to index read
    a page of arrays at a time, every posting's stem looked up, the same floats as one
    posting row at a time gives; among some ids (consecutive ones read as a range of the
    postings' key, scattered ones by their ids), and only those not indexed yet."""
    expected = reference_docs(stored)
    got = _as_docs(list(iter_doc_columns(stored, chunk=7)))
    assert [d.docid for d in got] == [d.docid for d in expected] and len(got) > 50
    for g, e in zip(got, expected, strict=True):
        assert (g.url, g.host, g.weights, g.sections) == (e.url, e.host, e.weights, e.sections)
    ids = [d.docid for d in expected]
    for some in (ids[3:20], ids[::5], [ids[0], ids[-1]]):
        assert _as_docs(list(iter_doc_columns(stored, ids=some, chunk=4))) == reference_docs(
            stored, ids=some
        )
    DocumentStore(stored).mark_indexed(ids[::2])
    assert _as_docs(list(iter_doc_columns(stored, only_unindexed=True, chunk=6))) == (
        reference_docs(stored, only_unindexed=True)
    )


def test_stems_are_read_once_then_only_the_new_words(stored: Any) -> None:
    """``reindex --follow`` keeps its stems between rounds: the first call reads the
    vocabulary, later ones only the words past it; an id below that was not there when
    it was read (another process's word committed late) is read by its id; an id of no
    word is an error, not a wrong stem."""
    crawldb = CrawlDB(stored)
    vocabulary = crawldb.vocabulary()
    calls: list[int] = []
    real = crawldb.words_after

    def counted(last: int) -> list[tuple[int, str]]:
        calls.append(last)
        return real(last)

    crawldb.words_after = counted  # type: ignore[method-assign]
    stems = Stems(crawldb)
    ids = [i for i, stem in enumerate(vocabulary) if stem]
    assert stems(ids[:5]) == [vocabulary[i] for i in ids[:5]]
    assert stems(ids[-3:]) == [vocabulary[i] for i in ids[-3:]] and calls == [-1]
    DocumentStore(stored).write_batch([page("http://a.example/new", "zymurgy quixotic")])
    new = [wid for wid, _ in real(len(vocabulary) - 1)]
    assert len(new) >= 2
    assert stems(new) == [s for _, s in real(len(vocabulary) - 1)]
    assert calls == [-1, len(vocabulary) - 1]
    stems.by_id[ids[7]] = None  # as if its transaction had committed after the read
    assert stems([ids[7]]) == [vocabulary[ids[7]]] and len(calls) == 2
    with pytest.raises(RuntimeError, match="words the database does not have"):
        stems([new[-1] + 1000])


def test_a_full_reindex_writes_the_index_of_the_document_path(stored: Any, tmp_path: Path) -> None:
    ids = CrawlDB(stored).indexable_ids()
    one_by_one = Index(tmp_path / "one-by-one")
    assert reindex(stored, one_by_one, ids=ids) == len(ids)  # documents added one by one
    rebuilt = Index(tmp_path / "rebuilt")
    assert reindex(stored, rebuilt, batch_size=10) == len(ids)
    assert segment_files(rebuilt.path) == segment_files(one_by_one.path)
    assert CrawlDB(stored).indexable_ids(only_unindexed=True) == []


def test_a_rebuild_read_by_a_second_process_writes_the_same_index(
    stored: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader process (search.rebuildfeed) gives the pages of iter_doc_batches, in
    their order, through a queue of one megabyte: the same index, the same linkranks."""
    one = Index(tmp_path / "one")
    alone = rebuild(stored, one, batch_size=7, linkrank=True, reader=False)
    ranks = dict(zip(*(a.tolist() for a in CrawlDB(stored).linkranks()), strict=True))
    with stored.begin() as conn:
        conn.execute(update(Document).values(linkrank=None, indexed=False))
    two = Index(tmp_path / "two")
    monkeypatch.setattr(rebuildfeed, "FEED_BYTES", 2**20)
    got = rebuild(stored, two, batch_size=7, linkrank=True, reader=True)
    assert got.documents == alone.documents == len(CrawlDB(stored).indexable_ids())
    assert segment_files(two.path) == segment_files(one.path)
    assert CrawlDB(stored).indexable_ids(only_unindexed=True) == []
    assert got.linkrank is not None and alone.linkrank is not None
    assert (got.linkrank.documents, got.linkrank.links) == (
        alone.linkrank.documents,
        alone.linkrank.links,
    )
    again = dict(zip(*(a.tolist() for a in CrawlDB(stored).linkranks()), strict=True))
    assert again == ranks and len(ranks) > 50


def test_the_reader_process_holds_at_most_its_budget(stored: Any) -> None:
    """The reader waits while its pages not yet taken fill the budget: with a budget of
    one unit, it has sent one page, and sends the next once that one is taken."""
    expected = [b.docids for b in iter_doc_batches(stored, chunk=5)]
    feed = BatchFeed(stored, 5, budget=2**20)
    try:
        waited = time.monotonic() + 60
        while feed._queue.empty() and time.monotonic() < waited:
            time.sleep(0.05)
        time.sleep(1.0)  # time to send more, were it allowed to
        assert feed._queue.qsize() == 1
        got = [page.ids for page in feed.pages()]
        assert feed.linkrank() is None
    finally:
        feed.close()
    assert got == expected and len(got) > 10


def test_a_failed_reader_fails_the_rebuild_and_leaves_the_index(
    stored: Any, tmp_path: Path
) -> None:
    index = Index(tmp_path / "index")
    reindex(stored, index, reader=False)
    before = segment_files(index.path)
    with stored.begin() as conn:
        conn.execute(text("DROP TABLE postings"))
    with pytest.raises(ReaderFailed, match="postings"):
        rebuild(stored, index, reader=True)
    assert segment_files(index.path) == before
    assert not [n for n in os.listdir(index.path) if n.endswith(".tmp")]


def test_pages_sent_compact_weigh_the_same(stored: Any) -> None:
    """The reader sends counts in the smallest integer type that holds them: the batches
    weighed from them are those of the stored int64 counts, bit for bit."""
    weigh = SectionWeights(stored)
    pages = list(CrawlDB(stored).indexable_postings(40))
    big = pages[0]
    big.counts[:3, 0] = [255, 256, 70_000]  # counts past one byte, and past two
    for page in pages:
        small = rebuildfeed.compact(page)
        assert small.counts.dtype.itemsize < 8 and small.word_ids.dtype == np.uint32
        a, b = weigh.batch(page), weigh.batch(small)
        assert np.array_equal(a.terms, b.terms) and list(a.docids) == list(b.docids)
        assert a.weights.tobytes() == b.weights.tobytes()
        assert a.sections is not None and b.sections is not None
        assert a.sections.tobytes() == b.sections.tobytes()
    assert rebuildfeed.compact(pages[1]).counts.dtype == np.uint8
    assert rebuildfeed.compact(big).counts.dtype == np.uint32


@pytest.mark.parametrize(
    ("commit_docs", "indexed"), [(1000, [3, 3, 3, 3, 6]), (2, [3, 3, 5, 5, 6])]
)
def test_follow_gathers_what_crawlers_store_into_fewer_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit_docs: int, indexed: list[int]
) -> None:
    """``reindex --follow`` commits on its first round, then once ``--commit-docs``
    documents wait or once nothing was stored since the last round: a crawler storing a
    page between rounds does not cost a commit a round."""
    import io

    from search.cli import main

    url = f"sqlite:///{tmp_path / 'follow.db'}"
    engine = db.connect(url)
    store = DocumentStore(engine)
    store.write_batch([page(f"http://a.example/{n}", f"narwhal tusk{n}") for n in range(3)])
    seen: list[int] = []

    def between_rounds(_: float) -> None:
        with engine.connect() as conn:
            seen.append(conn.execute(text("SELECT count(*) FROM documents WHERE indexed")).scalar())
        if len(seen) <= 3:  # a crawler stores a page after each of the first three rounds
            store.write_batch([page(f"http://a.example/late{len(seen)}", "narwhal")])

    monkeypatch.setattr(time, "sleep", between_rounds)
    out = io.StringIO()
    code = main(
        ["reindex", "--follow", "--rounds", "6", "--interval", "1", "--no-linkrank",
         "--commit-docs", str(commit_docs), "--max-delay", "3600",
         "--database-url", url, "--index-dir", str(tmp_path / "index")],
        out,
    )  # fmt: skip
    engine.dispose()
    assert code == 0, out.getvalue()
    assert seen == indexed  # after each round but the last
    assert len(Index(tmp_path / "index").docids()) == 6


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_follow_stops_on_sigterm_as_on_ctrl_c(tmp_path: Path, sig: int) -> None:
    """``reindex --follow`` started as a shell starts a background job (SIGINT ignored)
    stops on SIGTERM, and on SIGINT when it is not ignored: "stopped", status 0."""
    url = f"sqlite:///{tmp_path / 'follow.db'}"
    engine = db.connect(url)
    DocumentStore(engine).write_batch([page("http://a.example/1", "narwhal tusk")])
    engine.dispose()
    ignore = signal.SIG_IGN if sig == signal.SIGTERM else signal.SIG_DFL
    proc = subprocess.Popen(
        [sys.executable, "-m", "search", "reindex", "--follow", "--interval", "0.2",
         "--no-linkrank", "--database-url", url, "--index-dir", str(tmp_path / "index")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, ignore),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first round's line
        assert "1 searchable" in first, first + proc.stderr.read()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped" in out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--commit-docs", "0"], "--commit-docs must be at least 1"),
        (["--max-delay", "0"], "--max-delay must be greater than 0"),
        (["--interval", "-1"], "--interval must be greater than 0"),
    ],
)
def test_follow_refuses_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    from search.cli import main

    url = f"sqlite:///{tmp_path / 'follow.db'}"
    code = main(
        ["reindex", "--follow", *option, "--database-url", url, "--index-dir", str(tmp_path / "ix")]
    )
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "follow.db").exists()  # refused before opening anything
