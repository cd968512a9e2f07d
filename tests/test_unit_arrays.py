"""search.arrays: the array postings rank exactly as Whoosh's matchers do.

Every test compares the two paths of :class:`search.searcher.SearchSession` on the same
index: the array postings (the default) and Whoosh's own matchers (``use_arrays=False``),
which stay the reference implementation of the formula.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from whoosh import index as whoosh_index
from whoosh.writing import CLEAR

from search import arrays, ranking
from search.analysis import analyze_document
from search.index import INDEX_NAME, WORDS_FIELD, Index, IndexDoc, PreAnalyzed, make_schema
from search.query import parse_query
from search.searcher import BM25, SearchSession, build_query

WORDS = [f"w{i}" for i in range(400)]


def _doc(rng: random.Random, docid: int) -> IndexDoc:
    # Zipf-like: low word numbers are frequent, so posting lists of all lengths exist.
    body = " ".join(
        WORDS[min(int(rng.paretovariate(0.8)) - 1, 399)] for _ in range(rng.randint(5, 120))
    )
    title = " ".join(rng.choice(WORDS[:60]) for _ in range(rng.randint(1, 5)))
    host = "a.example" if docid % 3 else "b.example:8080"
    records = analyze_document({"title": title, "body": body})
    return IndexDoc.from_records(docid, f"http://{host}/{docid}", host, records.values())


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """1,500 documents in several commits (several segments, one merge at least), some
    replaced and some deleted."""
    rng = random.Random(7)
    ix = Index(tmp_path_factory.mktemp("arrays") / "index")
    docid = 0
    for batch in (400, 300, 200, 150, 100, 350):
        with ix.writer() as w:
            for _ in range(batch):
                w.add(_doc(rng, docid), update=False)
                docid += 1
    with ix.writer() as w:
        for victim in rng.sample(range(docid), 40):
            w.delete(victim)
        for replaced in rng.sample(range(docid), 30):
            w.add(_doc(rng, replaced))
    return ix


def _sessions(ix: Index) -> tuple[SearchSession, SearchSession]:
    s = ix.open().searcher(weighting=BM25())
    fast, slow = SearchSession(s), SearchSession(s, use_arrays=False)
    assert fast.arrays is not None and slow.arrays is None
    return fast, slow


def _ranking(hits: list) -> list[tuple[float, int]]:
    return [(round(h.score, 9), h.docid) for h in hits]


def _queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [WORDS[min(int(rng.paretovariate(0.6)) - 1, 399)] for _ in range(rng.randint(1, 6))]
        out.append(" ".join(words))
    return out


def test_index_has_several_segments_and_deletions(index: Index) -> None:
    ix = index.open()
    with ix.searcher() as s:
        leaves = s.reader().leaf_readers()
        assert len(leaves) > 1
        assert any(r.has_deletions() for r, _ in leaves)


@pytest.mark.parametrize("expand", [False, True])
def test_top_ten_and_counts_equal_whoosh(index: Index, expand: bool) -> None:
    fast, slow = _sessions(index)
    for text in _queries(80, seed=1 if expand else 2):
        q = parse_query(text)
        assert _ranking(fast.rank(q, 10, expand=expand)) == _ranking(
            slow.rank(q, 10, expand=expand)
        ), text
        # A small index counts exactly on both paths.
        assert fast.count(q, build_query(q)) == slow.count(q, build_query(q)), text


def _legacy_schema() -> Any:
    """The schema of indexes written before the array postings: Whoosh term vectors."""
    schema = make_schema()
    schema.remove(WORDS_FIELD)
    schema.add(WORDS_FIELD, PreAnalyzed(vector=True))
    return schema


@pytest.fixture(scope="module")
def vectors_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """Array postings and Whoosh term vectors both (the legacy schema, current codec)."""
    folder = tmp_path_factory.mktemp("vectors") / "index"
    folder.mkdir()
    whoosh_index.create_in(str(folder), _legacy_schema(), indexname=INDEX_NAME)
    ix = Index(folder)
    rng = random.Random(11)
    for start in (0, 300):
        with ix.writer() as w:
            for docid in range(start, start + 300):
                w.add(_doc(rng, docid), update=False)
    return ix


def test_new_indexes_keep_no_whoosh_term_vectors(index: Index) -> None:
    with index.open().searcher() as s:
        assert s.schema[WORDS_FIELD].vector is None
        assert not s.has_vector(0, WORDS_FIELD)


def test_expansion_equals_whoosh_vectors(vectors_index: Index) -> None:
    """The arrays' feedback (forward index, numpy) against the pure-Python feedback over
    Whoosh's own term vectors."""
    fast, slow = _sessions(vectors_index)
    assert slow._whoosh_vectors
    grown = 0
    for text in _queries(60, seed=3):
        weights = build_query(parse_query(text)).weights
        feedback = slow.top(weights, ranking.FEEDBACK_DOCS, build_query(parse_query(text)))
        expanded = slow.expand(weights, feedback)
        assert fast.expand(weights, feedback) == pytest.approx(expanded)
        grown += len(expanded) > len(weights)
    assert grown >= 10  # the vectors were read: new stems came from them


def test_full_rebuild_drops_whoosh_term_vectors(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    folder.mkdir()
    whoosh_index.create_in(str(folder), _legacy_schema(), indexname=INDEX_NAME)
    ix = Index(folder)
    rng = random.Random(5)
    with ix.writer() as w:  # adding keeps the schema
        w.add(_doc(rng, 0), update=False)
    assert ix.open().schema[WORDS_FIELD].vector is not None
    with ix.writer(clear=True) as w:
        for docid in range(20):
            w.add(_doc(rng, docid), update=False)
    with ix.open().searcher(weighting=BM25()) as s:
        assert s.schema[WORDS_FIELD].vector is None
        assert s.doc_count() == 20
        session = SearchSession(s)
        assert session.arrays is not None
        assert session.rank(parse_query("w1"), 5)


def test_expansion_without_whoosh_vectors_reads_the_arrays(index: Index) -> None:
    """Whoosh's matchers rank a current index (no term vectors) with the expansion read
    from the arrays' forward index: the same as the pure-Python feedback."""
    fast, slow = _sessions(index)
    assert not slow._whoosh_vectors and slow._forward is not None
    for text in _queries(40, seed=4):
        weights = build_query(parse_query(text)).weights
        feedback = slow.top(weights, ranking.FEEDBACK_DOCS, build_query(parse_query(text)))
        assert fast.expand(weights, feedback) == pytest.approx(slow.expand(weights, feedback))


@pytest.mark.parametrize(
    "text",
    ["w3 w10 site:b.example", "w1 w2 -w5", "w4 site:a.example -w7", "+w1 +w2 +w30", "w0 w0 w9"],
)
def test_filters_masks_and_all_words(index: Index, text: str) -> None:
    fast, slow = _sessions(index)
    q = parse_query(text)
    if text.startswith("+"):
        q = parse_query(text.replace("+", ""), require_all=True)
    fast_hits, slow_hits = fast.rank(q, 20), slow.rank(q, 20)
    assert fast_hits, text
    assert _ranking(fast_hits) == _ranking(slow_hits)
    assert fast.count(q, build_query(q)) == slow.count(q, build_query(q))


def test_unknown_words_match_nothing(index: Index) -> None:
    fast, _ = _sessions(index)
    q = parse_query("nosuchword")
    assert fast.rank(q, 10) == []
    assert fast.count(q, build_query(q)) == (0, True)
    q = parse_query("w1 nosuchword", require_all=True)
    assert fast.rank(q, 10) == []


def test_ties_keep_whoosh_order() -> None:
    scores = np.array([0.0, 2.0, 1.0, 2.0, 2.0, 0.5])
    ix = arrays.ArrayIndex([], 0, 1.0, ranking.K1, ranking.B)
    # Among equal scores the lower document number first, also at the cut.
    assert ix.best(scores, 2) == [(2.0, 1), (2.0, 3)]
    assert ix.best(scores, 10) == [(2.0, 1), (2.0, 3), (2.0, 4), (1.0, 2), (0.5, 5)]


def test_every_segment_has_its_array_file(index: Index) -> None:
    ix = index.open()
    with ix.searcher() as s:
        for r, _ in s.reader().leaf_readers():
            a = arrays.SegmentArrays.read(Path(index.path), r.segment())
            assert a is not None
            assert len(a.lengths) <= r.doc_count_all()
            assert int(a.starts[-1]) == len(a.docs) == len(a.fwd_terms)


def test_merged_away_segments_leave_no_array_files(tmp_path: Path) -> None:
    rng = random.Random(1)
    ix = Index(tmp_path / "index")
    for start in (0, 50, 100):
        with ix.writer() as w:
            for docid in range(start, start + 50):
                w.add(_doc(rng, docid), update=False)
    with ix.writer(clear=True) as w:  # a full rebuild: one new segment
        for docid in range(20):
            w.add(_doc(rng, docid), update=False)
    wix = whoosh_index.open_dir(str(tmp_path / "index"), indexname=INDEX_NAME)
    segments = wix._segments()
    assert len(segments) == 1
    files = [p.name for p in (tmp_path / "index").iterdir()]
    assert not [f for f in files if f.endswith(arrays.EXT)]  # packed in the compound file
    assert len([f for f in files if f.endswith(".seg")]) == 1
    assert CLEAR  # the writer's clear=True merge type


def test_index_without_arrays_falls_back_to_whoosh(tmp_path: Path) -> None:
    """An index written before the arrays existed (plain W3 codec, Whoosh term vectors) is
    still searched, and expanded from its term vectors."""
    from whoosh.codec.whoosh3 import W3Codec

    from search.index import IndexWriter

    folder = tmp_path / "old"
    folder.mkdir()
    wix = whoosh_index.create_in(str(folder), _legacy_schema(), indexname=INDEX_NAME)
    w = wix.writer(codec=W3Codec())
    writer = IndexWriter(w)
    rng = random.Random(2)
    for docid in range(ranking.FEEDBACK_MIN_DOCS + 30):
        writer.add(_doc(rng, docid), update=False)
    w.commit()
    s = Index(folder).open().searcher(weighting=BM25())
    session = SearchSession(s)
    assert session.arrays is None and session._forward is None and session._whoosh_vectors
    assert session.rank(parse_query("w1 w2"), 5)
    q = parse_query("w3 w5 w8 w13")
    assert len(session.expanded_weights(q)) > 4
    hit = session.rank(q, 1)[0]
    assert session.explain(hit.docnum, build_query(q).weights).score > 0


def test_array_file_round_trip() -> None:
    data = arrays.encode_arrays(
        [b"alpha", "\u4e2d\u6587".encode(), b"zeta"],
        np.array([0, 2, 3, 5], dtype=np.int64).tobytes(),
        np.array([0, 3, 1, 0, 2], dtype=np.uint32).tobytes(),
        np.array([1.0, 2.5, 4.0, 1.0, 3.0], dtype=np.float32).tobytes(),
        bytes([5, 6, 7, 8]),
    )
    a = arrays.decode_arrays(np.frombuffer(data, dtype=np.uint8))
    assert a["docs"].tolist() == [0, 3, 1, 0, 2]
    assert a["lengths"].tolist() == [5, 6, 7, 8]
    # Document 0 holds alpha (1.0) and zeta (1.0); document 3 alpha (2.5).
    assert a["fwd_starts"].tolist() == [0, 2, 3, 4, 5]
    assert a["fwd_terms"].tolist() == [0, 2, 1, 2, 0]
    assert a["fwd_tfs"].tolist() == [1.0, 1.0, 4.0, 3.0, 2.5]
    with pytest.raises(ValueError):
        arrays.decode_arrays(np.frombuffer(b"garbage-garbage-", dtype=np.uint8))


def test_explanation_adds_up_to_the_hit_score(index: Index) -> None:
    """--explain reads each term's posting; its sum is the score the arrays ranked by."""
    fast, _ = _sessions(index)
    for text in _queries(20, seed=6):
        q = parse_query(text)
        weights = build_query(q).weights
        for hit in fast.rank(q, 3, expand=False):
            assert fast.explain(hit.docnum, weights).score == pytest.approx(hit.score), text
