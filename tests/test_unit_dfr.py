"""search.dfr (DPH, LGD), Bo1 on the array postings and reciprocal rank fusion: by hand, and on a
small index against the formulas computed from the analyzed pages."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from search import dfr, ranking
from search.analysis import analyze_document
from search.index import Index, IndexDoc
from search.indexquery import BM25
from search.query import parse_query
from search.searchsession import SearchSession

PAGES = {
    1: ("Tree search", "search trees and the search of trees in memory"),
    2: ("Sorting", "sorting arrays in memory, merge sort and quick sort of arrays"),
    3: ("Graphs", "graph search: depth first and breadth first search of a graph"),
    4: ("Hash tables", "hash tables in memory: open addressing and chaining"),
    5: ("Search engines", "an index of words, ranked search of documents"),
    6: ("Memory", "memory allocation of arrays and trees"),
}


def test_dph_by_hand() -> None:
    # tf 2, len 10, avglen 20, N 100, F 50: f 0.2, (1 − f)² / (tf + 1) = 0.64 / 3,
    # 2 · log2(2 · 20 / 10 · 100 / 50) = 6, ½ · log2(2π · 2 · 0.8) = 1.6647967
    expected = 0.64 / 3 * (6 + 0.5 * math.log2(2 * math.pi * 1.6))
    assert float(dfr.dph(2.0, 10.0, 20.0, 100, 50.0)) == pytest.approx(expected)
    # A page that is nothing but the term: (1 − f)² = 0, floored.
    assert float(dfr.dph(3.0, 3.0, 20.0, 100, 50.0)) == dfr.DPH_FLOOR


def test_lgd_by_hand() -> None:
    # tf 2, len 10, avglen 20, N 100, n_t 5, c 1: tfn = 2 · log2(1 + 20 / 10) = 3.1699,
    # λ = 0.05, log2((0.05 + 3.1699) / 0.05) = 6.0090.
    tfn = 2 * math.log2(3)
    assert float(dfr.lgd(2.0, 10.0, 20.0, 100, 5, 1.0)) == pytest.approx(
        math.log2((0.05 + tfn) / 0.05)
    )
    assert float(dfr.lgd(2.0, 10.0, 20.0, 100, 5, 1.0)) == pytest.approx(6.00896, abs=1e-5)
    # c 0.1: tfn = 2 · log2(1.2).
    tfn = 2 * math.log2(1.2)
    assert float(dfr.lgd(2.0, 10.0, 20.0, 100, 5, 0.1)) == pytest.approx(
        math.log2((0.05 + tfn) / 0.05)
    )
    # More of the term, a shorter page, a rarer term: more; never below the floor.
    base = float(dfr.lgd(2.0, 10.0, 20.0, 100, 5, 1.0))
    assert float(dfr.lgd(3.0, 10.0, 20.0, 100, 5, 1.0)) > base
    assert float(dfr.lgd(2.0, 40.0, 20.0, 100, 5, 1.0)) < base
    assert float(dfr.lgd(2.0, 10.0, 20.0, 100, 50, 1.0)) < base
    assert float(dfr.lgd(1.0, 1e12, 20.0, 100, 100, 1.0)) == dfr.DPH_FLOOR
    # Arrays, posting by posting.
    got = dfr.lgd(np.array([1.0, 2.0]), np.array([10.0, 30.0]), 20.0, 100, np.array([5, 9]), 1.0)
    assert got.tolist() == pytest.approx(
        [float(dfr.lgd(1.0, 10.0, 20.0, 100, 5, 1.0)), float(dfr.lgd(2.0, 30.0, 20.0, 100, 9, 1.0))]
    )


def test_fusion_factors_by_hand() -> None:
    """rm3+bo1's CombSUM: each ranking scaled to the mean of the best scores; a ranking
    without a hit adds nothing and leaves the mean."""
    assert ranking.fusion_factors([2.0, 6.0]) == pytest.approx([2.0, 2 / 3])
    assert ranking.fusion_factors([4.0, 0.0]) == [1.0, 0.0]
    assert ranking.fusion_factors([0.0, 0.0]) == [0.0, 0.0]
    fused = ranking.fused_weights([{"a": 1.0, "b": 0.5}, {"a": 0.5, "c": 2.0}], [2.0, 0.5])
    assert fused == pytest.approx({"a": 2.25, "b": 1.0, "c": 1.0})
    assert ranking.expansion_methods("rm3+bo1") == ("rm3", "bo1")
    assert ranking.expansion_methods("bo1") == ("bo1",)


def test_rrf_by_hand() -> None:
    scores = ranking.rrf([[3, 1, 2], [1, 4]], 5, k=60)
    assert scores.tolist() == pytest.approx([0.0, 1 / 62 + 1 / 61, 1 / 63, 1 / 61, 1 / 62])


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    ix = Index(Path(tmp_path_factory.mktemp("dfr")) / "index")
    with ix.writer() as w:
        for docid, (title, body) in PAGES.items():
            records = analyze_document({"title": title, "body": body})
            w.add(
                IndexDoc.from_records(
                    docid, f"http://a.example/{docid}", "a.example", records.values()
                )
            )
    return ix


def _session(ix: Index, params: ranking.Params) -> SearchSession:
    return SearchSession(ix.open().searcher(weighting=BM25(params.b, params.k1)), params)


def _analyzed(text: str) -> tuple[dict[int, Any], dict[int, float], float, dict[str, float]]:
    """The pages analyzed, their weighted lengths and its mean, and *text*'s query weights."""
    pages = {d: analyze_document({"title": t, "body": b}) for d, (t, b) in PAGES.items()}
    lengths = {d: sum(r.weight for r in recs.values()) for d, recs in pages.items()}
    avg = sum(lengths.values()) / len(lengths)
    return (
        pages,
        lengths,
        avg,
        ranking.query_weights(parse_query(text).all_stems, ranking.DEFAULT.decay),
    )


def _pure_dph(text: str) -> dict[int, float]:
    """DPH of every page for *text*, from the analyzed pages' weighted counts."""
    pages, lengths, avg, weights = _analyzed(text)
    scores: dict[int, float] = {}
    for stem, qw in weights.items():
        cf = sum(recs[stem].weight for recs in pages.values() if stem in recs)
        for d, recs in pages.items():
            if stem in recs:
                tf = recs[stem].weight
                part = qw * float(dfr.dph(tf, lengths[d], avg, len(PAGES), cf))
                scores[d] = scores.get(d, 0.0) + part
    return scores


def _pure_lgd(text: str, c: float) -> dict[int, float]:
    """LGD of every page for *text*, from the analyzed pages' weighted counts: the
    formula of search.dfr, one posting at a time in plain floats."""
    pages, lengths, avg, weights = _analyzed(text)
    scores: dict[int, float] = {}
    for stem, qw in weights.items():
        share = sum(1 for recs in pages.values() if stem in recs) / len(PAGES)
        for d, recs in pages.items():
            if stem in recs:
                tfn = recs[stem].weight * math.log2(1 + c * avg / lengths[d])
                scores[d] = scores.get(d, 0.0) + qw * math.log2((share + tfn) / share)
    return scores


@pytest.mark.parametrize("c", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("text", ["search", "memory arrays", "search trees memory"])
def test_lgd_ranks_by_the_formula(index: Index, text: str, c: float) -> None:
    session = _session(index, ranking.Params(model="lgd", lgd_c=c, linkrank=0))
    hits = session.rank(parse_query(text), 10, expand=False)
    expected = _pure_lgd(text, c)
    assert {h.docid: h.score for h in hits} == pytest.approx(expected)
    order = sorted(expected, key=lambda d: -expected[d])
    assert [expected[h.docid] for h in hits] == pytest.approx([expected[d] for d in order])


def test_lgd_expands_from_its_own_first_ranking(index: Index) -> None:
    # The expanded query's scores are LGD's of the expanded weights (Bo1: on six pages
    # RM3 keeps no stem, each is in more than a tenth of them).
    params = ranking.Params(
        model="lgd", expansion="bo1", linkrank=0, fb_min_docs=0, fb_docs=2, fb_skip_held=0
    )
    session = _session(index, params)
    # The best two pages (2 and 6) share "arrays", which the expansion adds.
    q = parse_query("memory allocation quick sort")
    expanded = session.expanded_weights(q)
    assert set(expanded) - set(session.query(q).weights) == {"array"}
    hits = session.rank(q, 10)
    plain = _session(index, params)
    scores = plain._scores(expanded, plain.query(q))
    assert {h.docnum: h.score for h in hits} == pytest.approx(
        {int(d): float(scores[d]) for d in np.flatnonzero(scores > 0)}
    )
    assert {h.docid for h in hits} == {1, 2, 4, 6}


@pytest.mark.parametrize("text", ["search", "memory arrays", "search trees memory"])
def test_dph_ranks_by_the_formula(index: Index, text: str) -> None:
    session = _session(index, ranking.Params(model="dph", linkrank=0))
    hits = session.rank(parse_query(text), 10, expand=False)
    expected = _pure_dph(text)
    assert {h.docid: h.score for h in hits} == pytest.approx(expected)
    # ... and not by BM25F's.
    bm25 = _session(index, ranking.Params(linkrank=0)).rank(parse_query(text), 10, expand=False)
    assert [round(h.score, 6) for h in hits] != [round(h.score, 6) for h in bm25]


@pytest.mark.parametrize("other", ["dph", "lgd"])
def test_fusion_is_rrf_of_the_two_rankings(index: Index, other: str) -> None:
    q = parse_query("search memory trees")
    bm25 = _session(index, ranking.Params(linkrank=0)).rank(q, 10, expand=False)
    dph = _session(index, ranking.Params(model=other, linkrank=0)).rank(q, 10, expand=False)
    fused = _session(index, ranking.Params(fuse=other, linkrank=0)).rank(q, 10, expand=False)
    expected: dict[int, float] = {}
    for hits in (bm25, dph):
        for rank, h in enumerate(hits, 1):
            expected[h.docid] = expected.get(h.docid, 0.0) + 1 / (ranking.RRF_K + rank)
    assert {h.docid: h.score for h in fused} == pytest.approx(expected)
    best = sorted(expected, key=lambda d: -expected[d])
    assert [h.docid for h in fused][:1] == best[:1]


def test_explain_under_dph_sums_to_the_score(index: Index) -> None:
    session = _session(index, ranking.Params(model="dph", linkrank=0))
    q = parse_query("search trees")
    hit = session.rank(q, 1, expand=False)[0]
    explanation = session.explain(hit.docnum, session.query(q).weights)
    assert explanation.score == pytest.approx(hit.score)
    assert explanation.model == "dph"
    assert "DPH" in explanation.lines()[0]
    assert explanation.avg_length == pytest.approx(dfr.page_lengths(session.arrays)[1])


def test_explain_under_lgd_sums_to_the_score(index: Index) -> None:
    session = _session(index, ranking.Params(model="lgd", lgd_c=0.5, linkrank=0))
    q = parse_query("search trees")
    hit = session.rank(q, 1, expand=False)[0]
    explanation = session.explain(hit.docnum, session.query(q).weights)
    assert explanation.score == pytest.approx(hit.score)
    assert (explanation.model, explanation.lgd_c) == ("lgd", 0.5)
    assert "LGD" in explanation.lines()[0] and "c 0.5" in explanation.lines()[0]
    assert explanation.length == pytest.approx(dfr.page_length(session.arrays, hit.docnum))


def test_collection_frequencies_are_summed_once_a_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two commits: two segments, each term's count summed over both.
    ix = Index(tmp_path / "index")
    analyzed = {d: analyze_document({"title": t, "body": b}) for d, (t, b) in PAGES.items()}
    for part in ((1, 2, 3), (4, 5, 6)):
        with ix.writer() as w:
            for docid in part:
                w.add(
                    IndexDoc.from_records(
                        docid, f"http://a.example/{docid}", "a.example", analyzed[docid].values()
                    )
                )
    arrays = _session(ix, ranking.Params(linkrank=0)).arrays
    assert len(arrays.leaves) == 2
    stems = ["search", "memori", "tree", "array"]
    gids = np.array([arrays.ids[s] for s in stems], dtype=np.int64)
    expected = [sum(r[s].weight for r in analyzed.values() if s in r) for s in stems]
    before = arrays.terms.nbytes()
    assert dfr.collection_freq(arrays, gids).tolist() == pytest.approx(expected)
    assert arrays.terms.nbytes() == before  # kept in the ids' array, counted in its bytes

    # Asked again, in another order and with repeats: no posting is read.
    def read(*_: object) -> None:
        raise AssertionError("postings summed again")

    monkeypatch.setattr(dfr, "leaf_postings", read)
    again = dfr.collection_freq(arrays, gids[[2, 0, 0, 3, 1]])
    assert again.tolist() == pytest.approx([expected[i] for i in (2, 0, 0, 3, 1)])
