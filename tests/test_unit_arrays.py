"""search.arrays and search.arrayfile: the array postings rank exactly as Whoosh's matchers do.

Every test compares, on the same index, the product's :class:`search.searchsession.SearchSession`
(the array postings) with :class:`search.reference.ReferenceSession` (Whoosh's own
matchers), the reference implementation of the formula.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from whoosh import index as whoosh_index
from whoosh.writing import CLEAR

from search import arrayfile, arrayreader, arrays, ranking
from search.analysis import analyze_document
from search.arrays import ArrayIndex, TermModel, leaf_postings
from search.index import (
    FORMAT_FILE,
    INDEX_NAME,
    WORDS_FIELD,
    Index,
    IndexDoc,
    IndexOutdated,
    make_schema,
)
from search.indexquery import BM25, build_query
from search.query import parse_query
from search.reference import ReferenceSession
from search.searchsession import SearchSession
from search.termspace import TermSpace

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


def _sessions(
    ix: Index, params: ranking.Params = ranking.DEFAULT
) -> tuple[SearchSession, ReferenceSession]:
    s = ix.open().searcher(weighting=BM25(params.b, params.k1))
    return SearchSession(s, params), ReferenceSession(s, params)


#: The methods and parameters the array postings must rank as the reference does.
PARAMS = [
    ranking.DEFAULT,
    ranking.Params(expansion="rm3"),
    ranking.Params(expansion="rocchio", fb_terms=20),
    ranking.Params(expansion="bo1"),
    ranking.Params(expansion="bo1", fb_docs=5, fb_terms=20, decay=0.0),
    ranking.Params(expansion="rm3+bo1"),
    ranking.Params(expansion="rm3+bo1", fb_docs=5, fb_terms=20, fb_weight=0.3),
    ranking.Params(
        k1=2.0, b=0.75, decay=0.25, expansion="rm3", fb_docs=5, fb_terms=15, fb_weight=0.3
    ),
    ranking.Params(fb_skip_held=0),
    ranking.Params(bm25f="merged"),
    ranking.Params(bm25f="merged", expansion="rocchio", fb_terms=20),
    ranking.Params(b_title=0.3, b_body=0.9, b_url=0.0, expansion="rocchio"),
    ranking.Params(w_title=2.5, w_body=0.5, w_url=0.0),
]


def _id(p: ranking.Params) -> str:
    return f"{p.expansion}-{p.bm25f}-{p.section_b()}-{p.section_scale()}"


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


def test_section_averages_are_those_of_the_live_documents(index: Index) -> None:
    """Each generation's section averages take each segment's sum (computed once, kept
    with its arrays) less its deleted documents': the mean over the live documents."""
    params = ranking.DEFAULT
    with index.open().searcher() as s:
        got = ArrayIndex.load(s, params.k1, params.b, params.section_b(), None)
        assert got is not None and any(len(leaf.deleted) for leaf in got.leaves)
        live = []
        for leaf in got.leaves:
            alive = np.ones(len(leaf.arrays.section_lengths), dtype=bool)
            alive[leaf.deleted] = False
            live.append(leaf.arrays.section_lengths[alive].astype(np.float64))
        expected = np.concatenate(live).mean(axis=0)
        expected[expected <= 0] = 1.0
        assert np.allclose(got.section_avglen, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("params", PARAMS, ids=_id)
@pytest.mark.parametrize("expand", [False, True])
def test_top_ten_and_counts_equal_whoosh(
    index: Index, expand: bool, params: ranking.Params
) -> None:
    fast, slow = _sessions(index, params)
    for text in _queries(30, seed=1 if expand else 2):
        q = parse_query(text)
        assert _ranking(fast.rank(q, 10, expand=expand)) == _ranking(
            slow.rank(q, 10, expand=expand)
        ), text
        # A small index counts exactly on both paths (what was ranked: the expanded
        # query's hits when it is expanded).
        assert fast.count(q, build_query(q), expand) == slow.count(q, build_query(q), expand), text


def test_new_indexes_keep_no_whoosh_term_vectors(index: Index) -> None:
    with index.open().searcher() as s:
        assert s.schema[WORDS_FIELD].vector is None
        assert not s.has_vector(0, WORDS_FIELD)


@pytest.mark.parametrize("params", PARAMS, ids=_id)
def test_expansion_equals_the_pure_python_feedback(index: Index, params: ranking.Params) -> None:
    """The arrays' feedback (numpy) against the pure-Python feedback of search.ranking."""
    # Every query expanded, its best page holding all its words or not (that rule is
    # tested below).
    params = params.with_values(fb_skip_held=0)
    fast, slow = _sessions(index, params)
    added = 0
    for text in _queries(20, seed=4):
        wquery = build_query(parse_query(text), params.decay)
        feedback = slow.top(wquery.weights, params.fb_docs, wquery)
        expanded = fast.expand(wquery.weights, feedback, wquery)
        assert expanded == pytest.approx(slow.expand(wquery.weights, feedback, wquery)), text
        added += len(expanded) - len(wquery.weights)
    # The comparison above is not vacuous: the expansion added terms to some queries
    # (Rocchio keeps only stems found in two feedback pages, so it adds fewer than RM3).
    assert added >= 10


def test_rm3_and_bo1_fused_are_the_combsum_of_their_rankings(index: Index) -> None:
    """``--expansion rm3+bo1``: each page's score is its RM3-expanded score plus its
    Bo1-expanded score, each ranking first scaled so that its best score is the mean of
    the two best (CombSUM of rankings normalised by their maximum); the fused top ten is
    neither method's alone on some queries."""
    params = ranking.Params(expansion="rm3+bo1", fb_min_words=1, fb_skip_held=0)
    fused, _ = _sessions(index, params)
    alone = {m: _sessions(index, params.with_values(expansion=m))[0] for m in ("rm3", "bo1")}
    unlike = {"rm3": 0, "bo1": 0}
    for text in _queries(30, seed=6):
        q = parse_query(text)
        scores = fused._ranking_scores(q, build_query(q), True, 0)
        each = {m: s._ranking_scores(q, build_query(q), True, 0) for m, s in alone.items()}
        mean = (each["rm3"].max() + each["bo1"].max()) / 2
        expected = sum(x * (mean / x.max()) for x in each.values())
        assert np.allclose(scores, expected, rtol=1e-9, atol=1e-12), text
        top = [h.docid for h in fused.rank(q, 10)]
        for m, s in alone.items():
            unlike[m] += top != [h.docid for h in s.rank(q, 10)]
    assert unlike["rm3"] >= 3 and unlike["bo1"] >= 3, unlike


@pytest.mark.parametrize("n", [1, 3, 10, 1000])
def test_feedback_model_is_that_of_the_whole_vectors(index: Index, n: int) -> None:
    """The relevance model of documents of several segments, from their terms' numbers
    merged by bytes (or of one segment, in its numbers' order) and ids given to the
    heaviest only, is that of their whole vectors by id: Σ weight · tf / |d|, heaviest
    first, then term ascending; what *keep* drops (the frequent terms, or half of them) is
    replaced by the next heaviest."""
    fast, _ = _sessions(index)
    arrays = fast.arrays
    rng = random.Random(11)
    segments_seen, dropped, one_segment = set(), 0, 0
    bases = [leaf.base for leaf in arrays.leaves] + [arrays.n]
    for trial in range(12):
        docnums = rng.sample(range(arrays.n), 10)
        if trial % 3 == 0:  # all of one segment: nothing to merge by bytes
            i = trial // 3 % len(arrays.leaves)
            docnums = rng.sample(range(bases[i], bases[i + 1]), min(10, bases[i + 1] - bases[i]))
            one_segment += 1
        weights = [rng.uniform(0.5, 3.0) for _ in docnums]
        segments_seen.update(
            int(np.searchsorted([leaf.base for leaf in arrays.leaves], d, "right")) - 1
            for d in docnums
        )
        expected: dict[int, float] = {}
        for docnum, weight in zip(docnums, weights, strict=True):
            gids, tf, _ = arrays.vector(docnum)
            for gid, t in zip(gids.tolist(), tf.tolist(), strict=True):
                expected[gid] = expected.get(gid, 0.0) + weight * t / tf.sum()
        for keep_name in ("all", "rare", "odd"):

            def keep(g: np.ndarray, name: str = keep_name) -> np.ndarray:
                if name == "rare":
                    return arrays.df[g] <= 20
                if name == "odd":
                    return np.array([len(arrays.texts[x]) % 2 == 1 for x in g.tolist()], bool)
                return np.ones(len(g), dtype=bool)

            frequent = 20 if keep_name == "rare" else arrays.n
            model = arrays.feedback_model(docnums, weights, frequent, np.empty(0, np.int64))
            gids, got = arrays.heaviest(model, n, keep)
            all_gids = np.array(sorted(expected), dtype=np.int64)
            ok = keep(all_gids)
            dropped += int((~ok).sum())
            want = sorted((-expected[g], arrays.texts[g]) for g in all_gids[ok].tolist())[:n]
            assert [arrays.texts[g] for g in gids.tolist()] == [t for _, t in want], trial
            assert got == pytest.approx([-w for w, _ in want]), trial
    assert len(segments_seen) > 1 and dropped > 100 and one_segment == 4


def test_a_relevance_models_frequent_terms_with_ids_are_left_out_at_once(index: Index) -> None:
    """The frequent terms weigh most in a relevance model: those that have ids (a query
    looked them up, or an earlier model's heaviest) are left out of the model, so that its
    heaviest kept terms are found in one round of look-ups, not in rounds that give ids to
    ever more terms in place of the frequent ones.  What is chosen is the same."""
    fast, _ = _sessions(index)

    def fresh() -> ArrayIndex:
        arrays = copy.copy(fast.arrays)  # a term space of its own: no id given yet
        arrays.terms = arrays.ids = TermSpace(
            [leaf.arrays.words for leaf in arrays.leaves],
            [leaf.arrays.starts for leaf in arrays.leaves],
        )
        return arrays

    arrays, unfiltered_arrays = fresh(), fresh()
    docnums = list(range(0, arrays.n, arrays.n // 40))[:40]
    frequent = arrays.n / 50
    df = arrays.terms.frequencies(WORDS).tolist()
    common = [w for w, d in zip(WORDS, df, strict=True) if d > frequent]
    assert len(common) > 20
    unfiltered = unfiltered_arrays.feedback_model(
        docnums, [1.0] * len(docnums), frequent, np.empty(0, np.int64)
    )
    for space in (arrays, unfiltered_arrays):
        for word in common:
            space.ids[word]  # given its id, as a query's look-up does
    model = arrays.feedback_model(docnums, [1.0] * len(docnums), frequent, np.empty(0, np.int64))
    assert len(model.weight) < len(unfiltered.weight)
    rounds = []

    def keep(space: ArrayIndex) -> Callable[[np.ndarray], np.ndarray]:
        def kept(g: np.ndarray) -> np.ndarray:
            rounds.append(space)
            return space.df[g] <= frequent

        return kept

    gids, weights = arrays.heaviest(model, 10, keep(arrays))
    assert rounds == [arrays] and len(gids) == 10
    again, again_weights = unfiltered_arrays.heaviest(unfiltered, 10, keep(unfiltered_arrays))
    assert len(rounds) > 2  # the model that still held them took rounds
    assert [unfiltered_arrays.texts[g] for g in again.tolist()] == [
        arrays.texts[g] for g in gids.tolist()
    ]
    assert again_weights == pytest.approx(weights)


def test_feedback_model_keeps_the_query_words(index: Index) -> None:
    """A query's own words stay in the model however frequent (the others above
    *frequent* documents of a segment do not)."""
    fast, _ = _sessions(index)
    arrays = fast.arrays
    docnums = list(range(0, arrays.n, 150))
    common = max(
        range(len(WORDS)),
        key=lambda i: arrays.df[arrays.ids[WORDS[i]]] if WORDS[i] in arrays.ids else -1,
    )
    gid = arrays.ids[WORDS[common]]
    without = arrays.feedback_model(docnums, [1.0] * len(docnums), 5, np.empty(0, np.int64))
    with_own = arrays.feedback_model(docnums, [1.0] * len(docnums), 5, np.array([gid]))

    def terms(model: TermModel) -> set[str]:
        return {
            arrays.terms.segments[i].decode(n)
            for i, n in zip(model.segment.tolist(), model.number.tolist(), strict=True)
        }

    assert WORDS[common] not in terms(without)
    assert WORDS[common] in terms(with_own)
    assert terms(without) < terms(with_own)


def test_a_memo_reweighs_the_first_pass_without_reading_it_again(index: Index) -> None:
    """The second pass of an expanded query, given the first pass's memo, scores as one
    pass of the summed weights does; the terms in the memo are not read again."""
    fast, _ = _sessions(index)
    arrays = fast.arrays
    for text in _queries(15, 5):
        first = ranking.query_weights(parse_query(text).all_stems)
        memo: dict = {}
        scores, _ = arrays.accumulate(first, memo=memo)
        assert {arrays.terms.get(s) for s in first} - {None} == set(memo)
        extra = [w for w in WORDS[:60] if w not in first][:3]
        added = {s: -0.4 * w for s, w in list(first.items())[:2]} | dict.fromkeys(extra, 0.3)
        combined = {s: first.get(s, 0.0) + added.get(s, 0.0) for s in first | added}
        once, _ = arrays.accumulate(combined)
        read: list[int] = []

        def spy(a: object, gids: np.ndarray, read: list[int] = read) -> Iterator[tuple]:
            read.extend(gids.tolist())
            return leaf_postings(a, gids)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("search.arrays.leaf_postings", spy)
            twice, _ = arrays.accumulate(added, start=scores, memo=memo)
        assert twice == pytest.approx(once, rel=1e-12, abs=1e-12), text
        assert read and not set(read) & {arrays.terms.get(s) for s in first}, text


@pytest.mark.parametrize("limit", [1, 10, 100, 5000])
def test_the_best_with_the_prior_are_the_best_of_every_hit_with_its_prior(
    index: Index, limit: int
) -> None:
    """The link-graph prior is added only to the hits that can be among the best, and the
    best are read among those only: the same as the prior added to every hit."""
    s = index.open().searcher(weighting=BM25(ranking.B, ranking.K1))
    rng = np.random.default_rng(limit)
    arrays_ = ArrayIndex.load(s, ranking.K1, ranking.B, ranking.DEFAULT.section_b())
    assert arrays_ is not None
    linkranks = rng.exponential(1.0, arrays_.n).astype(np.float32)
    session = SearchSession(s, ranking.DEFAULT, linkranks)
    for text in _queries(20, 9):
        scores, _ = arrays_.accumulate(build_query(parse_query(text)).weights)
        prior = ranking.link_prior(linkranks, ranking.DEFAULT.linkrank) * (scores > 0)
        expected = arrays_.best(scores + prior, limit)
        assert session._best_with_prior(scores, limit) == expected, text


def test_no_expansion_method_adds_nothing(index: Index) -> None:
    fast, _ = _sessions(index, ranking.Params(expansion="none"))
    q = parse_query("w3 w10 w20 w40 w50")
    assert not fast.expands(build_query(q).weights)
    assert fast.rank(q, 10) == fast.rank(q, 10, expand=False)


def test_expansion_gates_on_query_words_and_index_size(index: Index) -> None:
    # README "Ranking": a query of fewer than fb_min_words distinct words, or on an index of
    # fewer than fb_min_docs documents, is ranked as typed; the array postings and the
    # reference expand the same queries.
    q = parse_query("w3 w10")
    weights = build_query(q).weights
    three, _ = _sessions(index, ranking.Params(fb_min_words=3))
    assert three.n >= ranking.DEFAULT.fb_min_docs
    assert not three.expands(weights)
    every = ranking.Params(fb_min_words=1, fb_skip_held=0)
    fast, slow = _sessions(index, every)
    assert fast.expands(weights) and slow.expands(weights)
    assert fast.rank(q, 10) != fast.rank(q, 10, expand=False)
    assert _ranking(fast.rank(q, 10)) == _ranking(slow.rank(q, 10))
    small, ref = _sessions(index, ranking.Params(fb_min_words=1, fb_min_docs=three.n + 1))
    assert not small.expands(weights) and not ref.expands(weights)
    assert small.rank(q, 10) == small.rank(q, 10, expand=False)


@pytest.mark.parametrize("expansion", ["bo1", "rm3", "rm3+bo1", "rocchio"])
def test_a_query_its_best_page_holds_is_not_expanded(index: Index, expansion: str) -> None:
    # README "Ranking": a query whose first ranking's best page holds every one of its
    # words is ranked as typed (fb_skip_held), by the array postings and the reference
    # alike; one whose best page misses a word is expanded.
    params = ranking.Params(fb_min_words=1, expansion=expansion)
    fast, slow = _sessions(index, params)
    held = missed = 0
    for text in _queries(40, seed=5):
        q = parse_query(text)
        weights = build_query(q).weights
        feedback = slow.top(weights, params.fb_docs, build_query(q))
        best = _stems_of(fast, feedback[0].docnum)
        plain = fast.rank(q, 10, expand=False)
        if all(stem in best for stem in weights):
            held += 1
            assert fast.expand(weights, feedback) == weights
            assert slow.expand(weights, feedback) == weights
            assert fast.rank(q, 10) == plain
        elif fast.expand(weights, feedback) != weights:
            missed += 1
        assert _ranking(fast.rank(q, 10)) == _ranking(slow.rank(q, 10)), text
    # Switched off, a held query is expanded as well.
    off = params.with_values(fb_skip_held=0)
    always, _ = _sessions(index, off)
    text = next(t for t in _queries(40, seed=5) if _held(always, t))
    q = parse_query(text)
    assert always.rank(q, 10) != always.rank(q, 10, expand=False)
    assert held >= 5 and missed >= 5


def _held(session: SearchSession, text: str) -> bool:
    """Whether the best page of *text*'s first ranking holds every one of its words."""
    q = parse_query(text)
    weights = build_query(q).weights
    hits = session.rank(q, 1, expand=False)
    return bool(hits) and all(s in _stems_of(session, hits[0].docnum) for s in weights)


def _stems_of(session: SearchSession, docnum: int) -> set[str]:
    """Every stem of document *docnum*, from its whole vector (each given an id)."""
    texts = session.arrays.terms.texts
    stems = {texts[gid] for gid in session.arrays.vector(docnum)[0].tolist()}
    # The product's look-up, one stem at a time, agrees.
    page = session.arrays.page_stems(docnum)
    assert all(stem in page for stem in stems) and "no-such-stem" not in page
    return stems


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
            a = arrayreader.SegmentArrays.read(Path(index.path), r.segment())
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
    assert not [f for f in files if f.endswith(arrayfile.EXT)]  # packed in the compound file
    assert len([f for f in files if f.endswith(".seg")]) == 1
    assert CLEAR  # the writer's clear=True merge type


def _older_index(folder: Path) -> Index:
    """An index as a version before the array postings wrote it: Whoosh's plain W3 codec,
    no recorded format."""
    from whoosh.codec.whoosh3 import W3Codec

    from search.index import IndexWriter

    folder.mkdir()
    wix = whoosh_index.create_in(str(folder), make_schema(), indexname=INDEX_NAME)
    w = wix.writer(codec=W3Codec())
    writer = IndexWriter(w)
    rng = random.Random(2)
    for docid in range(30):
        writer.add(_doc(rng, docid), update=False)
    w.commit()
    return Index(folder)


def test_index_without_arrays_is_refused(tmp_path: Path) -> None:
    """Segments without array postings (here with the format recorded) are not ranked by
    another path: the searcher says to rebuild."""
    ix = _older_index(tmp_path / "old")
    (ix.path / FORMAT_FILE).write_text('{"format": 2}')
    with pytest.raises(IndexOutdated, match="run `python -m search reindex`"):
        SearchSession(ix.open().searcher(weighting=BM25()))


def test_older_index_is_refused_then_rebuilt(tmp_path: Path) -> None:
    ix = _older_index(tmp_path / "old")
    with pytest.raises(IndexOutdated, match="run `python -m search reindex`"):
        ix.open()
    rng = random.Random(5)
    with ix.writer(clear=True) as w:
        for docid in range(20):
            w.add(_doc(rng, docid), update=False)
    with ix.open().searcher(weighting=BM25()) as s:
        assert s.doc_count() == 20
        assert SearchSession(s).rank(parse_query("w1"), 5)


def test_per_field_bm25f_normalises_each_section_by_its_own_length(tmp_path: Path) -> None:
    """Two pages with the same title, one with a long body: a word of the title only
    scores the same on both in the per-field form (the title's length is the same), and
    lower on the long page when the sections are merged (one length for the page)."""
    ix = Index(tmp_path / "ix")
    filler = " ".join(f"filler{i}" for i in range(300))
    with ix.writer() as w:
        for docid, body in ((1, "short page"), (2, filler), (3, "other words")):
            records = analyze_document({"title": "kestrel nest", "body": body})
            w.add(IndexDoc.from_records(docid, f"http://h/{docid}", "h", records.values()))
    q = parse_query("kestrel")
    # b 1: the sections a page lacks (description, keywords) have a length of 0.
    for params in (ranking.DEFAULT, ranking.Params(b=1.0), ranking.Params(bm25f="merged")):
        fast, slow = _sessions(ix, params)
        hits = {h.docid: h.score for h in fast.rank(q, 10, expand=False)}
        assert _ranking(fast.rank(q, 10, expand=False)) == _ranking(slow.rank(q, 10, expand=False))
        if params.bm25f == "per-field":
            assert hits[1] == pytest.approx(hits[2])
        else:
            assert hits[2] < hits[1] * 0.9


def _dense_sections(a: dict[str, np.ndarray]) -> np.ndarray:
    """The weighted counts per section of every posting of a decoded array file (one row
    a posting), from its body's and its other sections' arrays."""
    starts, extra_starts = a["starts"], a["extra_starts"]
    out = np.zeros((len(a["body"]), 6))
    out[:, 0] = a["body"]
    extra = a["extra"].reshape(-1, 5)
    for term in range(len(starts) - 1):
        first, last = extra_starts[term], extra_starts[term + 1]
        out[starts[term] + a["extra_at"][first:last], 1:] = extra[first:last]
    return out


def test_sections_by_section_whatever_the_writers_buffer() -> None:
    """Counts per section in other sections than the body, at any place among terms of
    any size, read back the same; the file the same byte for byte whatever the number of
    postings the writer reads at a time (its chunks cut terms anywhere)."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 9, size=40)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_post, n_docs = int(starts[-1]), 12
    docs = np.concatenate([np.sort(rng.choice(n_docs, size=n, replace=False)) for n in sizes])
    sections = np.zeros((n_post, 6))
    sections[:, 0] = rng.integers(0, 4, size=n_post)
    beyond = rng.random(n_post) < 0.3
    sections[beyond, 1:] = rng.integers(0, 3, size=(int(beyond.sum()), 5))
    sections[sections.sum(axis=1) == 0, 0] = 1.0
    tfs = sections.sum(axis=1).astype(np.float32)
    files = [
        arrayfile.encode_arrays(
            [b"t%03d" % i for i in range(len(sizes))],
            starts.tobytes(),
            docs.astype(np.uint32).tobytes(),
            tfs.tobytes(),
            bytes([5] * n_docs),
            buffer=buffer,
            sections=sections,
        )
        for buffer in (None, 1, 3, 7, 50)
    ]
    assert all(f == files[0] for f in files[1:])
    a = arrayreader.decode_arrays(np.frombuffer(files[0], dtype=np.uint8))
    assert _dense_sections(a).tolist() == sections.tolist()
    assert len(a["extra_at"]) == int((sections[:, 1:] != 0).any(axis=1).sum())


def test_array_file_round_trip() -> None:
    data = arrayfile.encode_arrays(
        [b"alpha", "\u4e2d\u6587".encode(), b"zeta"],
        np.array([0, 2, 3, 5], dtype=np.int64).tobytes(),
        np.array([0, 3, 1, 0, 2], dtype=np.uint32).tobytes(),
        np.array([1.0, 2.5, 4.0, 1.0, 3.0], dtype=np.float32).tobytes(),
        bytes([5, 6, 7, 8]),
    )
    a = arrayreader.decode_arrays(np.frombuffer(data, dtype=np.uint8))
    assert a["docs"].tolist() == [0, 3, 1, 0, 2]
    assert a["lengths"].tolist() == [5, 6, 7, 8]
    # Document 0 holds alpha (1.0) and zeta (1.0); document 3 alpha (2.5).
    assert a["fwd_starts"].tolist() == [0, 2, 3, 4, 5]
    assert a["fwd_terms"].tolist() == [0, 2, 1, 2, 0]
    assert a["fwd_tfs"].tolist() == [1.0, 1.0, 4.0, 3.0, 2.5]
    # Without counts per section, each weight is the body's; lengths are their sums.
    assert _dense_sections(a).tolist() == [[w, 0, 0, 0, 0, 0] for w in (1.0, 2.5, 4.0, 1.0, 3.0)]
    assert len(a["extra_at"]) == 0 and a["extra_starts"].tolist() == [0, 0, 0, 0]
    assert a["section_lengths"].reshape(-1, 6)[:, 0].tolist() == [2.0, 4.0, 3.0, 2.5]
    sections = np.zeros((5, 6))
    sections[:, 1] = [0.5, 1.0, 4.0, 1.0, 3.0]  # the title's
    sections[:, 0] = [0.5, 1.5, 0.0, 0.0, 0.0]
    data = arrayfile.encode_arrays(
        [b"alpha", b"zeta", b"zz"],
        np.array([0, 2, 3, 5], dtype=np.int64).tobytes(),
        np.array([0, 3, 1, 0, 2], dtype=np.uint32).tobytes(),
        np.array([1.0, 2.5, 4.0, 1.0, 3.0], dtype=np.float32).tobytes(),
        bytes([5, 6, 7, 8]),
        sections=sections,
    )
    a = arrayreader.decode_arrays(np.frombuffer(data, dtype=np.uint8))
    assert _dense_sections(a).tolist() == sections.tolist()
    # Stored by section: every posting's body, the other sections of those that have any.
    assert a["body"].tolist() == [0.5, 1.5, 0.0, 0.0, 0.0]
    assert a["extra_starts"].tolist() == [0, 2, 3, 5]
    assert a["extra_at"].tolist() == [0, 1, 0, 0, 1]  # offsets among each term's postings
    assert a["section_lengths"].reshape(-1, 6)[:, :2].tolist() == [
        [0.5, 1.5],  # postings 0 and 3
        [0.0, 4.0],
        [0.0, 3.0],
        [1.5, 1.0],
    ]
    with pytest.raises(ValueError):
        arrayreader.decode_arrays(np.frombuffer(b"garbage-garbage-", dtype=np.uint8))


def test_explanation_adds_up_to_the_hit_score(index: Index) -> None:
    """--explain reads each term's posting; its sum is the score the arrays ranked by."""
    fast, _ = _sessions(index)
    for text in _queries(20, seed=6):
        q = parse_query(text)
        weights = build_query(q).weights
        for hit in fast.rank(q, 3, expand=False):
            assert fast.explain(hit.docnum, weights).score == pytest.approx(hit.score), text


def test_the_explanation_of_fused_expansions_adds_up_to_the_hit_score(index: Index) -> None:
    """Under ``rm3+bo1`` the fused scores are those of one query (a score is linear in
    the query weights): its weights explain each hit's score term by term."""
    params = ranking.Params(expansion="rm3+bo1", fb_min_words=1, fb_skip_held=0)
    fast, _ = _sessions(index, params)
    for text in _queries(20, seed=6):
        q = parse_query(text)
        weights = fast.expanded_weights(q)
        assert len(weights) > len(build_query(q).weights), text
        for hit in fast.rank(q, 3):
            explained = fast.explain(hit.docnum, weights, expanded=True).score
            assert explained == pytest.approx(hit.score, rel=1e-9), text


def test_long_phrases_and_exclusions_evaluate_flat(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filters of a thousand words: Whoosh's matchers nest one level per word (a
    RecursionError); the array postings select the same documents one list at a time."""
    import search.query

    monkeypatch.setattr(search.query, "MAX_QUERY_WORDS", 10_000)
    monkeypatch.setattr(search.query, "MAX_PHRASE_WORDS", 10_000)
    monkeypatch.setattr(search.query, "MAX_QUERY_BYTES", 100_000)
    fast, slow = _sessions(index)
    holding: dict[str, set[int]] = {}
    for w in WORDS:
        docs = fast.arrays.containing_any([w])
        docs[fast.arrays.deleted] = False
        holding[w] = set(np.flatnonzero(docs).tolist())
    common = sorted(holding, key=lambda w: -len(holding[w]))
    # A phrase of the 2 most frequent words and 998 unknown ones matches nothing; of the 2
    # most frequent: the documents holding both.
    q = parse_query('w0 "' + " ".join(common[:2] + [f"x{i}" for i in range(998)]) + '"')
    with pytest.raises(RecursionError):
        slow.count(q, build_query(q))
    assert fast.rank(q, 10) == [] and fast.count(q, build_query(q)) == (0, True)
    q = parse_query(" ".join(common[:2]) + " " + " ".join(f"-{w}" for w in WORDS[100:]))
    excluded = set().union(*(holding[w] for w in WORDS[100:]))
    wanted = (holding[common[0]] | holding[common[1]]) - excluded
    assert {h.docnum for h in fast.rank(q, 2000)} == wanted
    q = parse_query(common[2] + ' "' + " ".join(common[:2]) + '"')
    both = holding[common[0]] & holding[common[1]]
    assert {h.docnum for h in fast.rank(q, 2000)} == both  # the phrase words score too


def _reference_forward(starts: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> tuple:
    """The forward index of postings held whole: their stable sort by document."""
    term_of = np.repeat(np.arange(len(starts) - 1, dtype=np.uint32), np.diff(starts))
    order = np.argsort(docs, kind="stable")
    return term_of[order], tfs[order]


@pytest.mark.parametrize("buffer", [1, 7, 64, None])
def test_array_file_is_the_same_in_any_buffer(buffer: int | None) -> None:
    """The forward index sorted in ranges of documents of a few postings (spilled to
    temporary files) is the sort of the whole."""
    rng = np.random.default_rng(3)
    n_docs, per_term = 40, [rng.integers(1, 30) for _ in range(60)]
    starts = np.concatenate([[0], np.cumsum(per_term)]).astype(np.int64)
    docs = np.concatenate([np.sort(rng.choice(n_docs, k, replace=False)) for k in per_term])
    docs = docs.astype(np.uint32)
    tfs = rng.random(len(docs), dtype=np.float32)
    terms = [f"t{i:03d}".encode() for i in range(len(per_term))]
    args = (terms, starts.tobytes(), docs.tobytes(), tfs.tobytes(), bytes(range(n_docs)))
    data = arrayfile.encode_arrays(*args, docids=np.arange(n_docs, dtype=np.int32), buffer=buffer)
    whole = arrayfile.encode_arrays(*args, docids=np.arange(n_docs, dtype=np.int32), buffer=10**9)
    assert data == whole
    a = arrayreader.decode_arrays(np.frombuffer(data, dtype=np.uint8))
    fwd_terms, fwd_tfs = _reference_forward(starts, docs, tfs)
    assert a["fwd_terms"].tolist() == fwd_terms.tolist()
    assert a["fwd_tfs"].tolist() == fwd_tfs.tolist()
    assert a["docs"].tolist() == docs.tolist()
    assert a["docids"].tolist() == list(range(n_docs))


def test_a_merge_holds_a_bounded_buffer_of_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The array writer of a segment (a merge of every segment here) keeps at most
    BUFFER_POSTINGS postings in memory, the rest in temporary files, and writes the same
    arrays as when it holds them all."""
    held: list[int] = []
    spill = arrayfile._Column.spill

    def spying(self: arrayfile._Column) -> None:
        # Postings held: the column of counts per section holds six numbers a posting.
        per_posting = arrayfile.N_SECTIONS if self.dtype == arrayfile.SECTION_DTYPE else 1
        held.append(len(self.buf) // per_posting)
        spill(self)

    def build(folder: Path) -> list[arrayreader.SegmentArrays]:
        rng = random.Random(4)
        ix = Index(folder)
        # The fifth commit merges the four before it (search.index.merge_policy).
        for start in range(0, 200, 40):
            with ix.writer() as w:
                for docid in range(start, start + 40):
                    w.add(_doc(rng, docid), update=False)
        out = []
        with ix.open().searcher() as s:
            for r, _ in s.reader().leaf_readers():
                out.append(arrayreader.SegmentArrays.read(folder, r.segment()))
        return out

    whole = build(tmp_path / "whole")
    monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", 50)
    monkeypatch.setattr(arrayfile._Column, "spill", spying)
    bounded = build(tmp_path / "bounded")
    assert held and max(held) < 2 * 50  # a full buffer, or one range's postings beyond it
    assert len(whole) == len(bounded) == 1
    names = ("starts", "docs", "tfs", "lengths", "fwd_starts", "fwd_terms", "fwd_tfs")
    for name in (*names, "body", "extra_starts", "extra_at", "extra", "section_lengths"):
        assert getattr(whole[0], name).tolist() == getattr(bounded[0], name).tolist(), name
    assert whole[0].terms == bounded[0].terms
    assert not [p for p in (tmp_path / "bounded").iterdir() if p.suffix == ".tmp"]


def test_hits_take_their_ids_from_the_arrays_and_their_urls_when_asked(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ranking's hits carry the database ids of the array files, without reading Whoosh's
    stored fields (each read unpickles a document's); a hit's URL is read from them when
    first asked, and is the document's.  A document the array file gives no id is read
    from its stored fields."""
    with index.open().searcher(weighting=BM25()) as s:
        session = SearchSession(s)
        reads: list[int] = []
        real = s.stored_fields

        def counting(docnum: int) -> dict:
            reads.append(docnum)
            return real(docnum)

        monkeypatch.setattr(s, "stored_fields", counting)
        hits = session.rank(parse_query("w1 w2"), 10, expand=False)
        assert len(hits) == 10 and not reads
        for hit in hits:
            fields = real(hit.docnum)
            assert hit.docid == int(fields["docid"])
            assert hit.url == fields["url"] == f"http://{hit.url.split('/')[2]}/{hit.docid}"
        assert reads == [hit.docnum for hit in hits]
        assert hits[0].url  # read once
        assert len(reads) == 10
        # The first hit's id unknown to the arrays: it is read with its URL.
        ids = session.arrays.docids(s).copy()
        ids[hits[0].docnum] = -1
        session.arrays.per_doc["docid"] = ids
        try:
            reads.clear()
            again = session.rank(parse_query("w1 w2"), 10, expand=False)
            assert [(h.docid, h.docnum) for h in again] == [(h.docid, h.docnum) for h in hits]
            assert reads == [hits[0].docnum]
        finally:
            del session.arrays.per_doc["docid"]  # the arrays are cached for the module


def test_a_sections_weight_scale_moves_its_matches(tmp_path: Path) -> None:
    """The per-field weight scales multiply the servers' section weights at query time:
    a title match's share of the score grows with ``w_title``, and none is left at 0."""
    ix = Index(tmp_path / "index")
    with ix.writer() as w:
        for docid, (title, body) in enumerate(
            [("okapi", "grass plains"), ("plains", "okapi okapi grass")]
            + [(f"w{i}", f"w{i} grass plains w{i + 1}") for i in range(20)]
        ):
            records = analyze_document({"title": title, "body": body})
            w.add(
                IndexDoc.from_records(
                    docid, f"http://a.example/{docid}", "a.example", records.values()
                )
            )

    def ranked(**scale: float) -> list[int]:
        params = ranking.Params(**scale)
        fast, slow = _sessions(ix, params)
        q = parse_query("okapi")
        hits = fast.rank(q, 10, expand=False)
        # (Whoosh's matchers also list a page whose match scored 0.)
        scored = [h for h in slow.rank(q, 10, expand=False) if h.score > 0]
        assert _ranking(hits) == _ranking(scored)
        return [h.docid for h in hits]

    assert ranked() == [0, 1]  # the title's weight 4 against two body words
    assert ranked(w_title=0.25) == [1, 0]  # a title word weighs as one body word
    assert ranked(w_title=0.0) == [1]  # a title match counts for nothing
    assert ranked(w_body=0.0) == [0]


def test_index_generations_kept_are_capped_in_bytes(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process keeps at most INDEX_CACHE index generations' arrays, and no more than
    INDEX_CACHE_BYTES of them, the latest always (a server whose index a crawl commits to
    would otherwise keep several generations of per-document arrays)."""
    s = index.open().searcher(weighting=BM25(ranking.B, ranking.K1))
    monkeypatch.setattr(arrays, "_INDEXES", type(arrays._INDEXES)())
    loaded = [ArrayIndex.load(s, k1, ranking.B, ranking.DEFAULT.section_b()) for k1 in (1, 2, 3)]
    assert all(a is not None for a in loaded)
    assert len(arrays._INDEXES) == 3
    first = loaded[0]
    assert first is not None
    before = first.nbytes()
    assert before >= first.n * 8  # its norms, at least a float a document
    first.docids_cached(s)
    assert first.nbytes() >= before + first.n * 8  # what is attached per document counts
    monkeypatch.setattr(arrays, "INDEX_CACHE_BYTES", before + 1)
    ArrayIndex.load(s, 4, ranking.B, ranking.DEFAULT.section_b())
    assert len(arrays._INDEXES) == 1  # the latest, whatever its size
    for k1 in (5, 6, 7, 8, 9):
        ArrayIndex.load(s, k1, ranking.B, None)
    monkeypatch.setattr(arrays, "INDEX_CACHE_BYTES", 1 << 40)
    for k1 in (10, 11, 12, 13, 14, 15):
        ArrayIndex.load(s, k1, ranking.B, None)
    assert len(arrays._INDEXES) == arrays.INDEX_CACHE


def test_a_generation_dropped_releases_what_its_segments_made_for_look_ups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terms' bytes and prefixes a segment makes for look-ups count in the bytes of
    the generations that read it, and go when the last of those is dropped."""
    rng = random.Random(11)
    ix = Index(tmp_path / "index")
    with ix.writer() as w:
        for docid in range(30):
            w.add(_doc(rng, docid), update=False)
    monkeypatch.setattr(arrays, "_INDEXES", type(arrays._INDEXES)())
    s = ix.open().searcher(weighting=BM25(ranking.B, ranking.K1))
    first = ArrayIndex.load(s, 1.0, ranking.B)
    other = ArrayIndex.load(s, 2.0, ranking.B)  # the same segments
    assert first is not None and other is not None
    words = first.terms.segments
    before = first.nbytes()
    for seg in words:
        seg.prefixes()
    assert first.nbytes() >= before + sum(len(seg) for seg in words) * 16
    monkeypatch.setattr(arrays, "INDEX_CACHE_BYTES", 1)
    ArrayIndex.load(s, 3.0, ranking.B)  # drops the other two: their segments are its own
    assert len(arrays._INDEXES) == 1 and all(seg.nbytes() for seg in words)
    with ix.writer(clear=True) as w:
        w.add(_doc(rng, 0), update=False)
    s = ix.open().searcher(weighting=BM25(ranking.B, ranking.K1))
    ArrayIndex.load(s, 1.0, ranking.B)  # other segments: the last reader of those dropped
    assert len(arrays._INDEXES) == 1 and not any(seg.nbytes() for seg in words)
    assert first.terms.get(first.terms.segments[0].decode(0)) is not None  # made again
