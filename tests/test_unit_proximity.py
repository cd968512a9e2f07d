"""Term proximity (search.proximity): the BM25TP accumulators and bonus worked out by hand,
and the re-ranking of the best candidates by the searcher (search.searchsession)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from search import ranking
from search.commands.eval import parse_sweep
from search.commands.query import add_ranking_options, ranking_params
from search.index import Index
from search.proximity import accumulators, bonus, document_bonus, rerank
from search.query import parse_query
from search.results import Ranked
from search.searcher import Searcher
from search.searchsession import SearchSession
from tests.test_unit_linkrank import BASE, indexed, row

OFF = ranking.DEFAULT.with_values(linkrank=0, proximity=0)
ON = OFF.with_values(proximity=1)

# -- the formula, by hand ---------------------------------------------------------------


def test_accumulators_by_hand() -> None:
    matches = [(0, "a"), (1, "b"), (3, "a"), (4, "a"), (6, "c")]
    w = {"a": 2.0, "b": 3.0, "c": 1.0}
    # a→b, 1 apart: acc(b) += w(a) / 1 = 2, acc(a) += w(b) / 1 = 3
    # b→a, 2 apart: acc(a) += w(b) / 4 = 0.75, acc(b) += w(a) / 4 = 0.5
    # a→a: the same word, nothing
    # a→c, 2 apart: acc(c) += w(a) / 4 = 0.5, acc(a) += w(c) / 4 = 0.25
    assert accumulators(matches, w) == pytest.approx({"a": 4.0, "b": 2.5, "c": 0.5})
    # A window of 1: only the adjacent pair counts.
    assert accumulators(matches, w, window=1) == pytest.approx({"a": 3.0, "b": 2.0})
    # Only consecutive occurrences pair: a … b … c pairs a–b and b–c, never a–c.
    assert accumulators([(0, "a"), (1, "b"), (2, "c")], w) == pytest.approx(
        {"a": 3.0, "b": 3.0, "c": 3.0}
    )
    assert accumulators([(0, "a"), (5, "a")], w) == {}
    assert accumulators([], w) == {}


def test_bonus_by_hand() -> None:
    acc = {"a": 4.0, "b": 2.5, "c": 0.5}
    w = {"a": 2.0, "b": 3.0, "c": 0.5}
    # K 1.5, k1 1.2: min(1, w) · acc · 2.2 / (acc + 1.5)
    # a: 1 · 8.8 / 5.5 = 1.6;  b: 1 · 5.5 / 4 = 1.375;  c: 0.5 · 1.1 / 2 = 0.275
    assert bonus(acc, w, k=1.5, k1=1.2) == pytest.approx(3.25)
    assert bonus({}, w, k=1.5, k1=1.2) == 0.0
    # It saturates at Σ min(1, w) · (k1 + 1).
    assert bonus({"a": 1e12, "c": 1e12}, w, k=1.5, k1=1.2) == pytest.approx(1.5 * 2.2)


def test_positions_count_every_word_of_the_text() -> None:
    w = {"vacuum": 2.0, "storag": 1.0}
    # "the" is a stop word but a word: vacuum and storage stand 2 apart; "vacuuming" has
    # the stem of "vacuum" (the index's analyzer).
    near = document_bonus("Vacuum the storage.", None, w, k=1.0, k1=1.0)
    # acc(vacuum) = w(storag) / 4 = 0.25, acc(storag) = w(vacuum) / 4 = 0.5
    # bonus = 1 · 0.25 · 2 / 1.25 + 1 · 0.5 · 2 / 1.5
    assert near == pytest.approx(0.4 + 2 / 3)
    assert document_bonus("Vacuuming storage", None, w, 1.0, 1.0) == pytest.approx(
        2 / 2 + 4 / 3  # acc 1 and 2, 1 apart
    )
    assert document_bonus("vacuum only", None, w, 1.0, 1.0) == 0.0


def _ranked(n: int) -> list[Ranked]:
    return [Ranked(float(10 - i), 100 + i, f"u{i}", i) for i in range(n)]


def test_rerank_reads_the_candidates_once_and_keeps_them_above_the_rest() -> None:
    texts = {100: "alpha zzz zzz zzz beta", 101: "alpha beta", 102: "alpha beta", 103: "x"}
    reads: list[list[int]] = []

    def documents(ids: list[int]) -> dict[int, Any]:
        reads.append(ids)
        return {i: argparse.Namespace(text=texts[i], language=None) for i in ids if i in texts}

    def length_factor(docnums: np.ndarray) -> np.ndarray:
        return np.ones(len(docnums))

    w = {"alpha": 1.0, "beta": 1.0}
    out, added = rerank(_ranked(5), w, documents, length_factor, k1=1.0, weight=5.0, depth=3)
    assert reads == [[100, 101, 102]]  # one read, the first 3 only
    # 101 and 102: 1 apart: acc 1 each, bonus 2 · 1 · 2 / 2 = 2, × 5 = 10;
    # 100: 4 apart: acc 1/16 each, bonus 2 · (1/16) · 2 / (17/16) = 4/17, × 5
    assert added == pytest.approx({1: 10.0, 2: 10.0, 0: 20 / 17})
    assert [r.docnum for r in out] == [1, 2, 0, 3, 4]
    assert [r.score for r in out] == pytest.approx([19.0, 18.0, 10 + 20 / 17, 7.0, 6.0])
    # Off, or one query word: the ranking as it was, nothing read.
    assert rerank(_ranked(5), w, documents, length_factor, 1.0, 0.0, 3) == (_ranked(5), {})
    one = {"alpha": 1.0}
    assert rerank(_ranked(5), one, documents, length_factor, 1.0, 5.0, 3) == (_ranked(5), {})
    assert len(reads) == 1


def test_params_and_options() -> None:
    bad_values = [
        {"proximity": -1},
        {"proximity_depth": 0},
        {"proximity_depth": ranking.MAX_PROXIMITY_DEPTH + 1},
        {"proximity_window": -1},
    ]
    for bad in bad_values:
        with pytest.raises(ValueError, match="proximity"):
            ranking.Params(**bad)
    parser = argparse.ArgumentParser()
    add_ranking_options(parser)
    args = ["--proximity", "0.5", "--proximity-depth", "50", "--proximity-window", "5"]
    params = ranking_params(parser.parse_args(args))
    assert (params.proximity, params.proximity_depth, params.proximity_window) == (0.5, 50, 5)
    _, grid = parse_sweep("proximity=0/0.5/1,proximity_depth=20/100", ranking.DEFAULT)
    assert [(p.proximity, p.proximity_depth) for p in grid] == [
        (0.0, 20),
        (0.0, 100),
        (0.5, 20),
        (0.5, 100),
        (1.0, 20),
        (1.0, 100),
    ]


# -- the searcher -------------------------------------------------------------------------


@pytest.fixture
def searchable(tmp_path: Path) -> Iterator[tuple[Any, Index]]:
    """Two pages of the same words, "far" stored first: the query's two words adjacent in
    "near", seven words apart in "far"; and pages of one of them."""
    filler = "alpha bravo charlie delta echo foxtrot"
    pages = [
        row("far", f"vacuum {filler} storage", []),
        row("near", f"vacuum storage {filler}", []),
    ]
    pages += [row(f"v{i}", f"vacuum page number {i} golf hotel", []) for i in range(4)]
    pages += [row(f"s{i}", f"storage page number {i} india juliet", []) for i in range(4)]
    engine, index = indexed(tmp_path, pages)
    yield engine, index
    engine.dispose()


def urls(searcher: Searcher, text: str, explain: bool = False) -> list[str]:
    page = searcher.search(parse_query(text), explain=explain)
    return [hit.url[len(BASE) :] for hit in page.hits]


def test_adjacent_words_win_only_with_proximity(searchable: tuple[Any, Index]) -> None:
    engine, index = searchable
    off, on = Searcher(engine, index, OFF), Searcher(engine, index, ON)
    assert urls(off, "vacuum storage")[:2] == ["far", "near"]  # a tie, in document order
    assert urls(on, "vacuum storage")[:2] == ["near", "far"]
    page = on.search(parse_query("vacuum storage"), explain=True)
    near, far = page.hits[:2]
    assert near.explanation is not None and far.explanation is not None
    assert near.explanation.proximity > far.explanation.proximity > 0
    assert near.score == pytest.approx(near.explanation.score)
    assert "term proximity" in "\n".join(near.explanation.lines())
    words_only = off.search(parse_query("vacuum storage")).hits[0].score
    assert near.score == pytest.approx(words_only + near.explanation.proximity)
    # A window of 5 words: the far pair no longer counts.
    window = Searcher(engine, index, ON.with_values(proximity_window=5))
    hits = window.search(parse_query("vacuum storage"), explain=True).hits
    assert [h.url[len(BASE) :] for h in hits[:2]] == ["near", "far"]
    assert hits[1].explanation is not None and hits[1].explanation.proximity == 0
    # The same in the merged form of BM25F (K of the page's one length).
    merged = Searcher(engine, index, ON.with_values(bm25f="merged"))
    assert urls(merged, "vacuum storage")[:2] == ["near", "far"]


def _session_rankings(
    searcher: Searcher, queries: list[str], reads: list[list[int]]
) -> list[list[tuple[float, int]]]:
    out = []
    with searcher.session() as session:
        if session.documents is not None:
            read = session.documents

            def counted(ids: list[int]) -> Any:
                reads.append(ids)
                return read(ids)

            session.documents = counted
        for text in queries:
            out.append([(r.score, r.docnum) for r in session.rank(parse_query(text), 20)])
    return out


def test_off_and_one_word_rank_as_before(searchable: tuple[Any, Index]) -> None:
    engine, index = searchable
    queries = ["vacuum storage", "storage page vacuum", "vacuum", "golf", "page number"]
    # The ranking without any text reader: what the session ranked before proximity.
    with Searcher(engine, index, OFF).session() as session:
        assert session.documents is None
        plain = SearchSession(session.s, OFF)
        before = [[(r.score, r.docnum) for r in plain.rank(parse_query(t), 20)] for t in queries]
    reads: list[list[int]] = []
    assert _session_rankings(Searcher(engine, index, OFF), queries, reads) == before
    assert reads == []  # off: no text read
    on = _session_rankings(Searcher(engine, index, ON), queries, reads)
    # One-word queries: the same ranking, exactly, and no text read for them.
    assert on[2] == before[2] and on[3] == before[3]
    assert len(reads) == 3  # one read for each query of two words or more
    assert on[0] != before[0]


def test_the_bonus_uses_the_body_length_factor(searchable: tuple[Any, Index]) -> None:
    engine, index = searchable
    with Searcher(engine, index, ON).session() as session:
        arrays = session.arrays
        docnums = np.arange(arrays.n)
        k = arrays.length_factor(docnums)
        # The pages of 8 words against those of 6: a longer body, a larger K.
        lengths = np.array([len(d.text.split()) for d in _texts(engine, session, docnums)])
        assert k[lengths == 8].min() > k[lengths == 6].max()
        avg = arrays.section_avglen[0]
        expected = ON.k1 * (1 - ON.b + ON.b * lengths / avg)
        assert k == pytest.approx(expected)


def _texts(engine: Any, session: SearchSession, docnums: np.ndarray) -> list[Any]:
    from search.crawldb import CrawlDB
    from search.indexquery import stored

    ids = [stored(session.s, int(d))[0] for d in docnums]
    rows = CrawlDB(engine).documents(ids, with_text=True)
    return [rows[i] for i in ids]


def test_a_search_reads_each_text_once(
    searchable: tuple[Any, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ranking's re-ranking reads the candidates' texts; the hits' snippets (and a
    # phrase's check) use those rows instead of reading them again.
    engine, index = searchable
    searcher = Searcher(engine, index, ON)
    assert searcher.db is not None
    reads: list[list[int]] = []
    real = searcher.db.documents

    def counted(ids: Any, with_text: bool = False) -> Any:
        reads.append(list(ids))
        return real(ids, with_text)

    monkeypatch.setattr(searcher.db, "documents", counted)
    for text in ("vacuum storage", '"vacuum storage" page'):
        reads.clear()
        page = searcher.search(parse_query(text))
        assert page.hits and all(hit.snippet for hit in page.hits)
        read = [i for ids in reads for i in ids]
        assert len(read) == len(set(read)), text
